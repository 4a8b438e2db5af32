"""Every random stream of a run, derived from its one `--seed`.

A stream is named by a role and a path of integers, e.g. the envs of actor 3 after
its second restart in a run resumed at step 40,000 are `("env", 3, 2, 40_000)`.
Each name maps to a child of `numpy.random.SeedSequence(seed)`: the path is the
child's `spawn_key`, which is what `SeedSequence.spawn` itself sets, so distinct
names give independent streams, and the same name gives the same stream on every
machine and in every process. Nothing here adds offsets to seeds: `seed + i`
schemes make streams of neighbouring workers overlap (actor i's env j and actor
i+1's env j-7 replayed each other's resets when seeds were `seed + 7i + j`).

Roles: `env` (reset seeds of training envs), `explore` (an actor's or sampler's
exploration), `torch` (network initialisation in a process), `replay` (minibatch
sampling of a learner), `eval` (reset seeds of evaluation episodes), `task` (the
tasks a meta-RL iteration draws), `noise` (a learner's own draws: SAC's
reparameterised actions), `eval-actions` (the actions a sampled evaluation draws).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Role = Literal["env", "explore", "torch", "replay", "eval", "task", "noise", "eval-actions"]
# new roles go last: a role's index is part of every stream name under it
ROLES: tuple[Role, ...] = (
    "env", "explore", "torch", "replay", "eval", "task", "noise", "eval-actions"
)  # fmt: skip
_MASK63 = (1 << 63) - 1  # env seeds as non-negative Python ints


def stream(seed: int, role: Role, *path: int) -> np.random.SeedSequence:
    """The seed sequence named `(role, *path)` under the run's `seed`."""
    if role not in ROLES:
        raise ValueError(f"unknown seed role {role!r}; one of {ROLES}")
    if seed < 0 or any(p < 0 for p in path):
        raise ValueError(f"seeds and seed paths are non-negative integers, got {seed}, {path}")
    return np.random.SeedSequence(seed, spawn_key=(ROLES.index(role), *path))


def generator(seed: int, role: Role, *path: int) -> np.random.Generator:
    """A numpy generator on the stream `(role, *path)`."""
    return np.random.default_rng(stream(seed, role, *path))


def integer(seed: int, role: Role, *path: int) -> int:
    """One 63-bit integer from the stream `(role, *path)` (for `torch.manual_seed`)."""
    return int(stream(seed, role, *path).generate_state(1, np.uint64)[0]) & _MASK63


def env_seeds(seed: int, count: int, role: Role = "env", *path: int) -> list[int]:
    """Reset seeds for `count` envs of the group `(role, *path)`: env j gets the
    j-th child of that stream, so no two envs of a run share a reset stream."""
    parent = stream(seed, role, *path)
    return [int(c.generate_state(1, np.uint64)[0]) & _MASK63 for c in parent.spawn(count)]


def seed_torch(seed: int, *path: int) -> None:
    """torch's global generator on the stream `("torch", *path)`: network
    initialisation in the process at `path` (torch is imported here, not by this
    module: the vector envs seed without it)."""
    import torch

    torch.manual_seed(integer(seed, "torch", *path))


def seed_everything(seed: int, rank: int = 0) -> None:
    """This process's global generators (Python's `random`, numpy's legacy global,
    torch's), each on its own stream: a learner process (`rank`: a replica's)."""
    import random

    random.seed(integer(seed, "torch", rank, 1))
    np.random.seed(integer(seed, "torch", rank, 2) % 2**32)
    seed_torch(seed, rank, 0)


__all__ = [
    "ROLES",
    "Role",
    "env_seeds",
    "generator",
    "integer",
    "seed_everything",
    "seed_torch",
    "stream",
]
