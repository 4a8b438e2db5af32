"""The thread-count rules (`pararl.mp.threads`)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import torch

from pararl.models.build import q_network
from pararl.mp.threads import (
    every_core_threads,
    is_convolutional,
    set_learner_threads,
    takes_every_core,
    torch_threads,
)
from pararl.mp.topology import physical_cores


def test_a_convolutional_or_wide_learner_beside_actors_takes_every_core() -> None:
    cnn = q_network("minatar-cnn", (10, 10, 4), np.dtype(np.bool_), 3, (128,))
    mlp = q_network("mlp", (4,), np.dtype(np.float32), 2, (64, 64))
    assert is_convolutional(cnn)
    assert not is_convolutional(mlp)
    modes = ("serial", "sync", "async", "ray")
    assert [takes_every_core(m, True, 32) for m in modes] == [False, False, True, True]
    assert not takes_every_core("async", False, 64)  # DQN's MLP batch on CartPole
    assert [takes_every_core(m, False, 256) for m in modes] == [False, False, True, True]
    with torch_threads(None):  # restores the count after
        assert set_learner_threads(10_000, 1, every_core=True) == physical_cores()
        assert torch.get_num_threads() == physical_cores()
        assert set_learner_threads(10_000, 1) == 1  # a small model, otherwise
        assert set_learner_threads(10_000, 1, given=3, every_core=True) == 3  # given wins
        big = set_learner_threads(5_000_000, busy_processes=physical_cores())
        assert big == 1  # the cores its workers leave, at least one


def test_an_update_everyone_waits_for_takes_every_core_unless_told() -> None:
    assert every_core_threads() == physical_cores()
    assert every_core_threads(given=3) == 3


def test_torch_threads_holds_a_count_for_a_block_and_restores_it() -> None:
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_one_thread_reaches_native_libraries_loaded_after_it() -> None:
    """A child pinned before it imports torch runs torch on one thread."""
    code = (
        "from pararl.mp.threads import one_thread; one_thread(); "
        "import torch, os; print(torch.get_num_threads(), os.environ['OMP_NUM_THREADS'])"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "1"]
