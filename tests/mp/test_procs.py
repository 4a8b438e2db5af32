"""`ProcessGroup.await_ready`: a group whose children do not all say ready (one
fails while starting, or never answers) raises, naming the child, and leaves no
child running."""

from __future__ import annotations

import multiprocessing as mp
import time
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from pararl.mp.errors import WorkerError, WorkerTimeoutError
from pararl.mp.procs import ProcessGroup
from tests.procs import alive_after


def _ready_then_wait(conn: Connection, fail: bool, answer: bool) -> None:
    if fail:
        raise RuntimeError("could not build its envs")
    if answer:
        conn.send((True, None))
    time.sleep(60)  # until taken down


def test_a_child_that_fails_to_start_takes_the_group_down() -> None:
    args = [(False, True), (True, True), (False, True)]
    group = ProcessGroup(_ready_then_wait, args, mp.get_context())
    pids = group.pids
    with pytest.raises(WorkerError, match="could not build its envs") as failed:
        group.await_ready(30.0)
    assert failed.value.worker == 1
    assert alive_after(pids, 2.0) == []


def test_a_child_that_never_answers_is_late_and_the_group_taken_down() -> None:
    group = ProcessGroup(_ready_then_wait, [(False, True), (False, False)], mp.get_context())
    pids = group.pids
    with pytest.raises(WorkerTimeoutError, match=r"not ready after 1\.0 s") as late:
        group.await_ready(1.0)
    assert late.value.worker == 1
    assert alive_after(pids, 2.0) == []


def _report_sigterm(conn: Connection) -> None:
    import signal

    conn.send((True, signal.getsignal(signal.SIGTERM) == signal.SIG_DFL))
    time.sleep(60)  # until taken down


def test_a_child_does_not_keep_the_runs_sigterm_handler() -> None:
    """A run raises on SIGTERM (`errors.sigterm_as_interrupt`), and a forked child
    inherits Python's handlers: there it would raise when close() terminates the
    child, at times inside its last clean-up, and print a traceback. A child ends on
    SIGTERM instead."""
    from pararl.errors import sigterm_as_interrupt

    with sigterm_as_interrupt():
        group = ProcessGroup(_report_sigterm, [()], mp.get_context("fork"))
        pids = group.pids
        try:
            assert group.conns[0].poll(30.0)
            assert group.conns[0].recv() == (True, True)
        finally:
            group.close()
    assert alive_after(pids, 2.0) == []


def _report_frozen(conn: Connection) -> None:
    import gc

    conn.send((True, gc.get_freeze_count()))
    time.sleep(60)  # until taken down


def test_a_forked_child_never_collects_what_it_inherited() -> None:
    """Everything the parent held at the fork is frozen out of the child's garbage
    collector (a finalizer of inherited garbage could wait forever on a lock another
    parent thread held then); the parent collects its own again after the fork."""
    import gc

    before = gc.get_freeze_count()
    group = ProcessGroup(_report_frozen, [()], mp.get_context("fork"))
    try:
        assert gc.get_freeze_count() == before
        assert group.conns[0].poll(30.0)
        ready, frozen = group.conns[0].recv()
        assert ready
        assert frozen > before + 1000  # this process's objects, all of them
    finally:
        group.close()


_INTERRUPT_AT_FORK: list[bool] = []  # armed: the next fork's parent is Ctrl-C'd


def _interrupt_after_fork() -> None:
    import os
    import signal

    if _INTERRUPT_AT_FORK:
        _INTERRUPT_AT_FORK.clear()
        os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_during_a_fork_is_not_lost() -> None:
    """A SIGINT handled inside CPython's at-fork handlers is dropped there; the group
    holds it until its child is on the list that is reaped, then raises it, and the
    child is taken down."""
    import gc
    import os

    import psutil

    os.register_at_fork(after_in_parent=_interrupt_after_fork)  # inert unless armed
    me = psutil.Process()
    before = {child.pid for child in me.children()}
    _INTERRUPT_AT_FORK.append(True)
    with pytest.raises(KeyboardInterrupt):
        ProcessGroup(_ready_then_wait, [(False, True)], mp.get_context("fork"))
    gc.collect()  # the half-built group's finalizer reaps the child it forked
    started = [child.pid for child in me.children() if child.pid not in before]
    assert alive_after(started, 5.0) == []


_ORPHAN_PARENT = """
import multiprocessing as mp, os, signal, sys, time
from pararl.mp.procs import ProcessGroup
from tests.mp.test_procs import _reply_more_than_a_pipe_holds
group = ProcessGroup(_reply_more_than_a_pipe_holds, [(), ()], mp.get_context("fork"))
print(*group.pids, flush=True)
time.sleep(1.0)  # the children are blocked writing replies nobody reads
os.kill(os.getpid(), signal.SIGKILL)
"""


def _reply_more_than_a_pipe_holds(conn: Connection) -> None:
    conn.send((True, b"x" * 8_000_000))  # blocks: the parent never reads it
    time.sleep(600)


def test_a_child_blocked_writing_to_a_parent_that_died_ends() -> None:
    """A forked child closes its copies of the parent's pipe ends (its own and its
    siblings'), so the parent's death breaks its pipe: a child blocked writing a
    large reply gets an error and ends instead of waiting for ever."""
    import subprocess
    import sys

    parent = subprocess.run([sys.executable, "-c", _ORPHAN_PARENT], capture_output=True,
                            text=True, timeout=60, cwd=Path(__file__).parents[2])  # fmt: skip
    pids = [int(pid) for pid in parent.stdout.split()]
    assert len(pids) == 2, parent.stderr
    assert alive_after(pids, 10.0) == []


def _read_one_then_stop(conn: Connection) -> None:
    conn.send((True, None))  # ready
    conn.send((True, len(conn.recv())))  # one message read, then no more
    time.sleep(60)  # until taken down


def test_a_message_a_child_does_not_read_is_a_timeout_not_a_hang() -> None:
    from pararl.mp.errors import WorkerTimeoutError

    group = ProcessGroup(_read_one_then_stop, [()], mp.get_context())
    pids = group.pids
    try:
        group.await_ready(30.0)
        big = b"x" * 4_000_000  # more than a pipe holds: written by a watched thread
        group.send(0, big, timeout=5.0)
        assert group.receive(0) == len(big)
        started = time.monotonic()
        with pytest.raises(WorkerTimeoutError, match="did not read a message of") as late:
            group.send(0, big, timeout=1.0)
        assert time.monotonic() - started < 10.0
        assert late.value.worker == 0
    finally:
        group.close()
    assert alive_after(pids, 2.0) == []
