"""The worker's wait for its next command: spins only while commands follow
replies closely, never with spin_s=0, and always delivers the command."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time

from pararl.mp.listen import CommandWait


def test_commands_in_a_tight_loop_are_caught_while_spinning() -> None:
    worker, caller = mp.Pipe()
    wait = CommandWait(worker, spin_s=0.05)
    for i in range(20):
        caller.send(i)
        assert wait.wait(1.0)
        assert worker.recv() == i
    assert wait.gap < 0.05
    assert wait.budget() > 0
    assert wait.spins >= 15


def test_a_slow_caller_makes_the_worker_block_instead_of_spinning() -> None:
    worker, caller = mp.Pipe()
    wait = CommandWait(worker, spin_s=1e-3)
    for i in range(6):
        # the caller's work between steps (20 ms) is far above spin_s
        threading.Timer(0.02, caller.send, (i,)).start()
        assert wait.wait(1.0)
        assert worker.recv() == i
    assert wait.gap >= 1e-3
    assert wait.budget() == 0.0


def test_spin_zero_never_spins() -> None:
    worker, caller = mp.Pipe()
    wait = CommandWait(worker, spin_s=0.0)
    for i in range(10):
        caller.send(i)
        assert wait.wait(1.0)
        worker.recv()
    assert wait.spins == 0
    assert wait.budget() == 0.0


def test_no_command_means_false_after_the_timeout() -> None:
    worker, _caller = mp.Pipe()
    wait = CommandWait(worker, spin_s=1e-3)
    start = time.perf_counter()
    assert not wait.wait(0.05)
    assert 0.04 <= time.perf_counter() - start < 1.0


def test_one_long_idle_spell_does_not_stop_spinning_for_long() -> None:
    worker, caller = mp.Pipe()
    wait = CommandWait(worker, spin_s=1e-3)
    for i in range(10):
        caller.send(i)
        wait.wait(1.0)
        worker.recv()
    # e.g. a training phase between two samples
    threading.Timer(0.2, caller.send, ("late",)).start()
    wait.wait(1.0)
    assert worker.recv() == "late"
    assert wait.budget() == 0.0
    for i in range(10):
        caller.send(i)
        wait.wait(1.0)
        worker.recv()
    assert wait.budget() > 0
