"""`python -m benchmarks replay`: bytes per transition and time per batch of the
frame-deduplicated memory against whole stacked observations, uniform and
prioritized.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.lib import harness as h

KINDS = ("frames", "naive")
STACK, FRAME, ENVS, N_STEP, BATCH = 4, 84, 8, 3, 32  # frames of a stack, its side, ...
EPISODE_LENGTH = 400  # the mean: an episode ends with probability 1/this a step
SAMPLINGS = ("uniform", "prioritized")


@dataclass(frozen=True)
class Config(h.Options):
    """Replay memories for 4x84x84 uint8 stacks: bytes per transition and time per
    batch, frames stored once vs whole observations, uniform vs prioritized.
    --quick: small rings, few batches."""

    capacity: int = 100_000
    """Capacity of the frame-deduplicated memory (transitions = frames)."""
    naive_capacity: int = 25_000
    """Capacity of the naive memory (56 KB per transition: 100k would hold 5.6 GB on a
    shared machine; bytes per transition do not depend on it)."""
    batches: int = 300
    """Batches per timed spell."""
    repeats: int = 5
    """Interleaved spells per memory (median, min and max reported)."""


def resolve(config: Config) -> Config:
    c = h.apply_quick(config, {"capacity": 5_000, "naive_capacity": 2_000, "batches": 50,
                               "repeats": 2})  # fmt: skip
    h.require(c, "> 0: capacity naive_capacity batches repeats")
    return c


@dataclass
class Row:
    """One memory kind with one way of sampling."""

    kind: str
    sampling: str
    capacity: int
    bytes_per_transition: float
    per_frame: float  # bytes per transition / bytes of one frame
    batch_ms: h.Summary


def fill(memory: Any, capacity: int, kind: str, shape: tuple[int, ...], envs: int = 8,
         n_step: int = 1, episode_length: float = math.inf, seed: int = 0) -> None:  # fmt: skip
    """Steps of `envs` envs until the ring has wrapped once, as an actor emits them:
    stacks of random frames (`shape`: stack, height, width), each step adding a new one;
    an episode ends with probability 1/`episode_length` per step, half of the ends by
    termination, half by truncation. `kind`: `frames` (chunks of frame steps) or `naive`
    (n-step transitions of whole stacks)."""
    from pararl.replay.frame_steps import FrameStepBuilder
    from pararl.replay.nstep import NStepBuilder

    rng, stack = np.random.default_rng(seed), shape[0]
    pool = rng.integers(0, 256, size=(256, *shape[1:]), dtype=np.uint8)
    obs = np.repeat(pool[rng.integers(0, 256, envs)][:, None], stack, axis=1)
    frames = FrameStepBuilder(envs, shape, n_step, 0.99) if kind == "frames" else None
    naive = NStepBuilder(envs, shape, n_step, 0.99, obs_dtype=np.uint8)
    if frames is not None:
        frames.reset(obs)
    ended = np.zeros(envs, np.bool_)
    chunk, steps = 32, capacity // envs + 2 * n_step + stack
    for t in range(steps):
        action = rng.integers(0, 6, envs)
        reward = rng.normal(size=envs)
        new = pool[rng.integers(0, 256, envs)]
        next_obs = np.concatenate([obs[:, 1:], new[:, None]], axis=1)
        next_obs[ended] = np.repeat(new[ended][:, None], stack, axis=1)  # reset steps
        end = ~ended & (rng.random(envs) < 1 / episode_length)
        term = end & (rng.random(envs) < 0.5)
        trunc = end & ~term
        if frames is not None:
            frames.add(obs, action, reward, next_obs, term, trunc)
            if (t + 1) % chunk == 0 or t == steps - 1:
                memory.add(frames.chunk()[0])
        else:
            memory.add(naive.add(obs, action, reward, next_obs, term, trunc))
        obs, ended = next_obs, end


def build(c: Config, kind: str, sampling: str) -> tuple[Any, int]:
    """A memory of `kind`, filled: frames stored once (`FrameReplay`) or whole stacks."""
    from pararl.replay.frame_memory import FrameReplay
    from pararl.replay.prioritized import PrioritizedReplay
    from pararl.replay.uniform import ReplayBuffer

    shape = (STACK, FRAME, FRAME)
    capacity = c.capacity if kind == "frames" else c.naive_capacity
    memory: Any = FrameReplay(capacity, shape) if kind == "frames" else ReplayBuffer(
        capacity, shape, np.uint8)  # fmt: skip
    if sampling == "prioritized":
        memory = PrioritizedReplay(memory, alpha=0.6)
    fill(memory, capacity, kind, shape, ENVS, N_STEP, EPISODE_LENGTH)
    return memory, capacity


def spell(memory: Any, c: Config, rng: np.random.Generator) -> float:
    """Milliseconds per batch over `c.batches` batches (prioritized: with the priority
    update after each)."""
    prioritized = hasattr(memory, "sample_prioritized")

    def run() -> None:
        for _ in range(c.batches):
            if prioritized:
                sample = memory.sample_prioritized(BATCH, rng, beta=0.4)
                memory.update_priorities(sample.slots, rng.random(BATCH))
            else:
                memory.sample(BATCH, rng)

    seconds, _ = h.timed(run)
    return 1e3 * seconds / c.batches


def measure(c: Config, meta: h.Metadata) -> list[Row]:
    rows = []
    for kind in KINDS:  # one kind's memories at a time: the naive one is large
        built = {}
        for sampling in SAMPLINGS:
            h.progress(f"replay: filling {kind} / {sampling} ...")
            built[sampling] = build(c, kind, sampling)
        tasks = {s: functools.partial(spell, m, c, np.random.default_rng(0))
                 for s, (m, _) in built.items()}  # fmt: skip
        times = h.interleaved(tasks, c.repeats)
        for sampling, (memory, capacity) in built.items():
            per = memory.nbytes / capacity
            rows.append(Row(kind, sampling, capacity, per, per / (FRAME * FRAME),
                            h.summarize(times[sampling])))  # fmt: skip
        del built, tasks
    return rows


COLUMNS: list[h.Col[Row]] = [
    h.Col("memory", lambda r: r.kind, "l"),
    h.Col("sampling", lambda r: r.sampling, "l"),
    h.Col("capacity", lambda r: f"{r.capacity:,}"),
    h.Col("bytes / transition", lambda r: f"{r.bytes_per_transition:,.0f}"),
    h.Col("÷ one frame", lambda r: f"{r.per_frame:.3f}"),
    h.Col("ms / batch: median (min–max)", lambda r: h.fmt_spread(r.batch_ms, lambda v: f"{v:.3f}")),
]


def report(rows: list[Row], meta: h.Metadata) -> h.Report:
    by = {(r.kind, r.sampling): r for r in rows}
    ratios = []
    frames, naive = by.get(("frames", "uniform")), by.get(("naive", "uniform"))
    if frames and naive:
        ratios.append(
            f"frames / naive bytes per transition: "
            f"{frames.bytes_per_transition / naive.bytes_per_transition:.3f}"
        )
    for kind in KINDS:
        u, p = by.get((kind, "uniform")), by.get((kind, "prioritized"))
        if u and p:
            slower = h.fmt_ratio(h.ratio(p.batch_ms, u.batch_ms))
            ratios.append(f"{kind}: prioritized / uniform time per batch {slower}")
    note = (
        f"Batches of {BATCH}, {STACK}x{FRAME}x{FRAME} uint8 stacks, {ENVS} envs interleaved "
        f"(episodes of ~{EPISODE_LENGTH} steps), n = {N_STEP}; prioritized "
        "times include the priority update after each batch."
    )
    return h.Report(
        f"Replay memories for image stacks (`{h.PROG} replay`)",
        "; ".join(ratios) or "none",
        [h.table(COLUMNS, rows) + "\n\n" + note],
    )
