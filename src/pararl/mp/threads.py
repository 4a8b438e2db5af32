"""How many torch threads each part of a run uses: the one home of the rules.

N processes with N intra-op threads each would fight for N cores, so every child
process (env workers, actors, Ray actors, the evaluation process) runs one thread
(`one_thread`). The learner's count follows what else runs beside it
(`set_learner_threads`); an update the env workers wait for takes every core
(`every_core_threads`); `torch_threads` (from `pararl.intraop`) holds a count for
one block of code. Like the rest of `mp`, this module never imports torch itself
(the vector envs run without it): each function imports it when called.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from pararl.intraop import torch_threads
from pararl.mp.topology import physical_cores

if TYPE_CHECKING:
    from torch import nn

SMALL_MODEL_PARAMS = 1_000_000
WIDE_BATCH = 256  # rows from which an MLP's update gains from more threads


def one_thread() -> None:
    """A child process's setting: one intra-op thread, for torch if it is loaded and for
    any native library loaded after this (torch, OpenMP and MKL read the variables)."""
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


def every_core_threads(given: int = 0) -> int:
    """Threads for an update that every other process waits for (PPO's update of a
    large network in serial or sync mode, MAML's outer step): `given`
    (`--learner-threads`) if not 0, else every physical core."""
    return given or physical_cores()


def takes_every_core(mode: str, convolutional: bool, batch_size: int) -> bool:
    """Whether an off-policy learner in `mode` takes every core: beside actor
    processes, a convolutional network or a batch of `WIDE_BATCH` rows or more.
    Actors held to the replay ratio idle most of the time (6-22% of a core on MinAtar
    and Pong, 3-7% on HalfCheetah), and on 2 cores two learner threads ran MinAtar
    Breakout's async DQN 1.14x (1.07-1.22x) and Pong's 1.18x as many updates/s as
    one, and SAC's update at HalfCheetah's sizes (batch 256, 256x256 networks)
    1.17-1.32x. DQN's MLP step on CartPole's batch of 64 gained nothing from a second
    thread (0.92x alone), so it keeps one."""
    return mode in ("async", "ray") and (convolutional or batch_size >= WIDE_BATCH)


def is_convolutional(net: nn.Module) -> bool:
    """Whether `net` has a 2-d convolution (the learner's thread rule reads it)."""
    import torch

    return any(isinstance(m, torch.nn.Conv2d) for m in net.modules())


def learner_threads(
    num_params: int, busy_processes: int, given: int = 0, every_core: bool = False
) -> int:
    """The learner's intra-op threads: `given` (`--learner-threads`) if not 0; every
    physical core if `every_core`; else one for small models (thread start-up and
    barriers cost more than they save, and spinning threads fight the actors for
    cores); otherwise the physical cores not taken by actors or env workers."""
    if given or every_core:
        return every_core_threads(given)
    if num_params < SMALL_MODEL_PARAMS:
        return 1
    return max(1, physical_cores() - busy_processes)


def set_learner_threads(
    num_params: int, busy_processes: int, given: int = 0, every_core: bool = False
) -> int:
    """Sets torch's intra-op threads to `learner_threads(...)` and returns the count."""
    import torch

    threads = learner_threads(num_params, busy_processes, given, every_core)
    torch.set_num_threads(threads)
    return threads


__all__ = [
    "SMALL_MODEL_PARAMS",
    "WIDE_BATCH",
    "every_core_threads",
    "is_convolutional",
    "learner_threads",
    "one_thread",
    "set_learner_threads",
    "takes_every_core",
    "torch_threads",
]
