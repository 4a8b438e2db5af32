"""`python -m benchmarks recurrent_core`: the three ways a recurrent PPO update replays
sequences that episode starts cut (`pararl.models.recurrent`): `padded` (the default:
the pieces side by side in one call, padded), `packed` (the pieces as a packed batch
of variable lengths) and `loop` (one call per time step, CleanRL's), forward and
backward, against the floor of one call over the same steps with no cut at all.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from benchmarks.lib import harness as h

REPLAYS = ("padded", "packed", "loop")
WAYS = (*REPLAYS, "floor")


@dataclass(frozen=True)
class Config(h.Options):
    """Forward and backward of one minibatch of env sequences through an LSTM core, by
    the way its episode starts are handled, at several episode lengths. --quick: few
    repeats of small cores."""

    steps: int = 32
    """Steps of each env's sequence (a rollout's --num-steps)."""
    envs: int = 8
    """Envs in the minibatch."""
    sizes: tuple[int, ...] = (64, 256)
    """Core widths."""
    features: int = 64
    """Features per step that the core reads."""
    episode_lengths: tuple[int, ...] = (25, 200, 100_000)
    """Mean episode lengths: an env's step starts an episode with probability 1/this
    (CartPole early in training, a long episode, and practically none)."""
    calls: int = 20
    """Forward-backward passes per timed spell."""
    repeats: int = 5
    """Interleaved spells per way (median, min and max reported)."""
    threads: int = 1
    """Torch threads (an update on one core, as beside the actors)."""


def resolve(config: Config) -> Config:
    quick = {"sizes": (16,), "episode_lengths": (10,), "calls": 2, "repeats": 1, "steps": 8}
    c = h.apply_quick(config, quick)
    h.require(c, "> 0: steps envs features calls repeats threads sizes episode_lengths")
    return c


@dataclass
class Row:
    """One core width and episode length: ms per forward-backward, by way."""

    size: int
    episode_length: int
    cuts: int  # episode starts inside the sequences
    pieces: int  # the pieces the cuts make
    ms: dict[str, h.Summary]


def starts(c: Config, length: int) -> Any:
    """Where episodes start in the minibatch: each env's step with probability 1/length."""
    import torch

    gen = torch.Generator().manual_seed(0)
    return torch.rand(c.steps, c.envs, generator=gen) < 1 / length


def spell(replay: str, size: int, length: int, c: Config) -> float:
    """Milliseconds per forward-backward of one minibatch (`floor`: no cuts)."""
    import torch

    from pararl.intraop import torch_threads
    from pararl.models.recurrent import CoreSettings, RecurrentCore

    torch.manual_seed(0)
    core = RecurrentCore(c.features, CoreSettings("lstm", size), "padded")  # type: ignore[arg-type]
    if replay != "floor":
        core.replay = replay  # type: ignore[assignment]
    x = torch.randn(c.steps, c.envs, c.features, requires_grad=True)
    state = torch.zeros(c.envs, core.rows, size)
    first = starts(c, length)
    if replay == "floor":
        first[:] = False

    def run() -> None:
        for _ in range(c.calls):
            core.zero_grad(set_to_none=True)
            core.sequence(x, state, first).sum().backward()

    with torch_threads(c.threads):
        run()  # warm-up
        seconds, _ = h.timed(run)
    return 1e3 * seconds / c.calls


def measure(c: Config, meta: h.Metadata) -> list[Row]:
    del meta
    import numpy as np

    from pararl.models.recurrent import Pieces

    rows = []
    for size in c.sizes:
        for length in c.episode_lengths:
            h.progress(f"recurrent_core: width {size}, episodes of ~{length} steps ...")
            first = starts(c, length).numpy()
            tasks = {way: functools.partial(spell, way, size, length, c) for way in WAYS}
            times = h.interleaved(tasks, c.repeats)
            ms = {way: h.summarize(t) for way, t in times.items()}
            rows.append(Row(size, length, int(np.count_nonzero(first[1:])),
                            len(Pieces.of(first).length), ms))  # fmt: skip
    return rows


def _ms(way: str) -> h.Col[Row]:
    return h.Col(f"{way} ms", lambda r: h.fmt_spread(r.ms[way], lambda v: f"{v:.2f}"))


COLUMNS: list[h.Col[Row]] = [
    h.Col("width", lambda r: str(r.size)),
    h.Col("episode length", lambda r: f"{r.episode_length:,}"),
    h.Col("cuts / pieces", lambda r: f"{r.cuts} / {r.pieces}"),
    *(_ms(way) for way in WAYS),
    h.Col("padded ÷ loop", lambda r: h.fmt_ratio(h.ratio(r.ms["padded"], r.ms["loop"]))),
    h.Col("padded ÷ floor", lambda r: h.fmt_ratio(h.ratio(r.ms["padded"], r.ms["floor"]))),
]


def report(rows: list[Row], meta: h.Metadata) -> h.Report:
    p = meta.params
    ratios = [
        f"width {r.size}, episodes ~{r.episode_length}: padded "
        f"{h.fmt_ratio(h.ratio(r.ms['padded'], r.ms['loop']))} loop's time, "
        f"packed {h.fmt_ratio(h.ratio(r.ms['packed'], r.ms['loop']))}"
        for r in rows
    ]
    note = (
        f"One minibatch: {p['envs']} envs x {p['steps']} steps of {p['features']} features "
        f"through a one-layer LSTM, forward and backward, {p['threads']} torch "
        f"thread(s); `floor`: the same steps in one call with no episode start inside."
    )
    return h.Report(
        f"Replaying recurrent sequences (`{h.PROG} recurrent_core`)",
        "; ".join(ratios) or "none",
        [h.table(COLUMNS, rows) + "\n\n" + note],
    )
