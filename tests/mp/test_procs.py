"""`ProcessGroup.await_ready`: a group whose children do not all say ready (one
fails while starting, or never answers) raises, naming the child, and leaves no
child running."""

from __future__ import annotations

import multiprocessing as mp
import time
from multiprocessing.connection import Connection

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
