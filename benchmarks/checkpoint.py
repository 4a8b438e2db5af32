"""`python -m benchmarks checkpoint`: save and load time of a DQN run's checkpoint and
replay memory, weights-only (tensors, what pararl writes) against the pickled form
pararl wrote before (numpy arrays unpickled, `weights_only=False`).
"""

from __future__ import annotations

import functools
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.lib import harness as h

FORMATS = ("weights-only", "pickled")


@dataclass(frozen=True)
class Config(h.Options):
    """The final checkpoint and replay memory of an Atari DQN run, saved and loaded
    in each format, interleaved. --quick: a 2,000-step run, 2 repeats."""

    env: str = "ALE/Pong-v5"
    """Atari game of the run."""
    steps: int = 20_000
    """Env steps of the run (its replay memory holds them all)."""
    repeats: int = 5
    """Interleaved save and load rounds per format (median, min and max reported)."""


def resolve(config: Config) -> Config:
    c = h.apply_quick(config, {"steps": 2_000, "repeats": 2})
    h.require(c, "> 0: steps repeats")
    return c


@dataclass
class Row:
    """One format: seconds to save and to load the checkpoint with its memory."""

    format: str
    megabytes: float
    save_s: h.Summary
    load_s: h.Summary


def trained(c: Config, scratch: Path) -> Path:
    """A run of `c.steps` trained now."""
    from pararl import DQNConfig, train

    h.progress(f"checkpoint: training DQN on {c.env} for {c.steps:,} steps ...")
    run = scratch / "run"
    train(
        DQNConfig(
            env=c.env, total_steps=c.steps, learning_starts=min(1_000, c.steps // 2),
            buffer_size=c.steps, eval_every=10 * c.steps, eval_episodes=1,
            run_dir=run, progress="none", tensorboard=False,
        )
    )  # fmt: skip
    return run


def saved(fmt: str, path: Path, state: dict[str, Any]) -> float:
    """Seconds to write `state` to `path` in `fmt`, synced to disk as checkpoints are."""
    import torch

    from pararl import checkpoint

    def pickled() -> None:
        with path.open("wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())

    write = pickled if fmt == "pickled" else functools.partial(checkpoint.save, path, state)
    return h.timed(write)[0]


def loaded(fmt: str, path: Path) -> float:
    """Seconds to read `path` back in `fmt`, on the CPU."""
    import torch

    from pararl import checkpoint

    if fmt == "weights-only":
        return h.timed(functools.partial(checkpoint.load, path))[0]
    return h.timed(functools.partial(torch.load, path, map_location="cpu", weights_only=False))[0]


def measure(c: Config, meta: h.Metadata) -> list[Row]:
    del meta
    from pararl import checkpoint
    from pararl.errors import UsageError
    from pararl.rundir import RunDir
    from pararl.runners.checkpoints import replay_for

    with tempfile.TemporaryDirectory() as scratch:
        run = RunDir(trained(c, Path(scratch)))
        state = checkpoint.load(run.checkpoint("final"))
        state["replay"] = replay_for(run, state)
        if state["replay"] is None:
            raise UsageError(f"{run.root} has no replay memory saved with its final checkpoint")
        paths = {fmt: Path(scratch) / f"{fmt}.pt" for fmt in FORMATS}
        tasks = {fmt: functools.partial(saved, fmt, paths[fmt], state) for fmt in FORMATS}
        save = h.interleaved(tasks, c.repeats)
        load = h.interleaved(
            {f: functools.partial(loaded, f, paths[f]) for f in FORMATS}, c.repeats
        )
        return [Row(fmt, paths[fmt].stat().st_size / 1e6, h.summarize(save[fmt]),
                    h.summarize(load[fmt])) for fmt in FORMATS]  # fmt: skip


def seconds(s: h.Summary | None) -> str:
    return h.fmt_spread(s, lambda v: f"{v:.3f}")


COLUMNS: list[h.Col[Row]] = [
    h.Col("format", lambda r: r.format, "l"),
    h.Col("MB", lambda r: f"{r.megabytes:,.1f}"),
    h.Col("save s: median (min–max)", lambda r: seconds(r.save_s)),
    h.Col("load s: median (min–max)", lambda r: seconds(r.load_s)),
]


def report(rows: list[Row], meta: h.Metadata) -> h.Report:
    by = {r.format: r for r in rows}
    new, old = by["weights-only"], by["pickled"]
    ratios = (
        f"weights-only / pickled: save {h.fmt_ratio(h.ratio(new.save_s, old.save_s))}, "
        f"load {h.fmt_ratio(h.ratio(new.load_s, old.load_s))}"
    )
    note = (
        f"The final checkpoint of a {meta.params['steps']:,}-step DQN run on "
        f"{meta.params['env']}, with its replay memory in the same file (pararl writes "
        "the memory to `replay.pt` beside it), saved with fsync and loaded on the CPU. "
        "Weights-only: numpy arrays stored as tensors, `torch.load(weights_only=True)`; "
        "pickled: the arrays pickled, `weights_only=False`, as pararl wrote and read "
        "checkpoints before."
    )
    return h.Report(
        f"Checkpoints: weights-only against pickled (`{h.PROG} checkpoint`)",
        ratios,
        [h.table(COLUMNS, rows) + "\n\n" + note],
    )
