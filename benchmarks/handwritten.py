"""`python -m benchmarks handwritten`: what pararl's hand-written replacements buy
against the libraries they replace: FlatAdam (`adam`) and the event writer
(`tensorboard`).
"""

from __future__ import annotations

import dataclasses
import functools
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from benchmarks.lib import harness as h

NAME = "handwritten"
ADAMS = ("FlatAdam", "torch Adam (fused)", "torch Adam (foreach)")


@dataclass(frozen=True)
class Config(h.Options):
    """Hand-written replacements (FlatAdam, the TensorBoard event writer) against the
    library code they replace. --quick: tiny spells."""

    parts: tuple[Literal["adam", "tensorboard"], ...] = ("adam", "tensorboard")
    """Parts to run."""

    repeats: int = 3
    """Interleaved repeats of every measurement (median, min and max reported)."""

    dqn_updates: int = 25_000
    """adam: DQN updates per spell (a default 100k-step DQN run does 24,750)."""

    tb_rows: int = 2_000
    """tensorboard: metrics rows written per spell."""


QUICK = {"repeats": 1, "dqn_updates": 300, "tb_rows": 50}


def resolve(config: Config) -> Config:
    c = h.apply_quick(config, QUICK)
    h.require(c, ">= 1: repeats")
    return c


# --- adam ------------------------------------------------------------------------------


class TorchAdam:
    """`torch.optim.Adam` with the two calls the DQN learner makes of its optimizer."""

    def __init__(self, params: list, lr: float, variant: str) -> None:
        import torch

        self.params = params
        if variant == "fused":
            self.optimizer = torch.optim.Adam(params, lr=lr, fused=True)
        else:
            self.optimizer = torch.optim.Adam(params, lr=lr, foreach=True)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def clip_grad_norm_(self, max_norm: float) -> None:
        import torch

        torch.nn.utils.clip_grad_norm_(self.params, max_norm)

    def step(self) -> None:
        self.optimizer.step()


def _learner(name: str) -> object:
    import gymnasium as gym
    import torch

    from pararl.algos.dqn import DQNState
    from pararl.config import DQNConfig

    torch.manual_seed(0)
    cfg = DQNConfig()
    env = gym.make(cfg.env_name)
    spaces = env.observation_space, env.action_space
    state = DQNState(cfg.for_spaces(*spaces), *spaces, torch.device("cpu"))
    env.close()
    learner = state.learner
    if name != "FlatAdam":
        variant = "fused" if "fused" in name else "foreach"
        lr = state.settings.lr
        learner.optimizer = TorchAdam(list(learner.q.parameters()), lr, variant)  # type: ignore[assignment]
    return learner


def _batch(size: int) -> object:
    from pararl.replay.nstep import Transitions

    rng = np.random.default_rng(0)
    obs = rng.normal(size=(size, 4)).astype(np.float32)
    return Transitions(
        obs,
        rng.integers(0, 2, size),
        rng.normal(size=size).astype(np.float32),
        rng.normal(size=(size, 4)).astype(np.float32),
        np.full(size, 0.99**3, np.float32),
    )


def measure_adam(c: Config) -> dict[str, dict[str, h.Summary]]:
    import torch

    torch.set_num_threads(1)  # as the learner runs with small models
    learners = {name: _learner(name) for name in ADAMS}
    batch = _batch(64)
    for learner in learners.values():
        for _ in range(50):
            learner.update(batch)  # type: ignore[attr-defined]

    def spell(name: str) -> float:
        learner = learners[name]
        seconds, _ = h.timed(lambda: [learner.update(batch) for _ in range(c.dqn_updates)])  # type: ignore[attr-defined]
        h.progress(f"adam: {name}: {seconds / c.dqn_updates * 1e6:.0f} µs per update")
        return seconds / c.dqn_updates

    per_update = h.interleaved({n: functools.partial(spell, n) for n in ADAMS}, c.repeats)
    construct = h.interleaved({n: functools.partial(_construct_s, n) for n in ADAMS}, c.repeats)
    return {
        n: {"update_s": h.summarize(per_update[n]), "construct_s": h.summarize(construct[n])}
        for n in ADAMS
    }


def _construct_s(name: str) -> float:
    variant = "fused" if "fused" in name else "foreach"
    make = (
        "FlatAdam(q.parameters(), lr=1e-3)"
        if name == "FlatAdam"
        else f"torch.optim.Adam(q.parameters(), lr=1e-3, {variant}=True)"
    )
    code = (
        "import time, torch; from pararl.models import QNetwork; "
        "from pararl.optim import FlatAdam; q = QNetwork(4, 2, (128, 128)); "
        f"t = time.perf_counter(); {make}; print(time.perf_counter() - t)"
    )
    return _fresh_seconds(code)


def _fresh_seconds(code: str) -> float:
    """What `code`, run in a fresh interpreter, prints last (the seconds it timed)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


# --- tensorboard -----------------------------------------------------------------------

ROW = {f"metric_{i}": float(i) for i in range(20)}


def _rows_s(kind: str, rows: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        if kind == "pararl":
            from pararl.logging.tbevents import EventWriter

            writer = EventWriter(Path(tmp))
            add, flush = writer.add_scalar, writer.flush
        else:
            from torch.utils.tensorboard import SummaryWriter

            sw = SummaryWriter(tmp)
            add, flush, writer = sw.add_scalar, sw.flush, sw  # type: ignore[assignment]
        start = time.perf_counter()
        for step in range(rows):
            for key, value in ROW.items():
                add(key, value, step)
            flush()
        seconds = time.perf_counter() - start
        writer.close()
        return seconds / rows


def _import_s(kind: str) -> float:
    module = "pararl.logging.tbevents" if kind == "pararl" else "torch.utils.tensorboard"
    code = (
        "import time, torch; t = time.perf_counter(); "
        f"import {module}; print(time.perf_counter() - t)"
    )
    return _fresh_seconds(code)


def measure_tensorboard(c: Config) -> dict[str, dict[str, h.Summary]]:
    kinds = ("pararl", "SummaryWriter")
    rows = h.interleaved({k: functools.partial(_rows_s, k, c.tb_rows) for k in kinds}, c.repeats)
    imports = h.interleaved({k: functools.partial(_import_s, k) for k in kinds}, c.repeats)
    return {k: {"row_s": h.summarize(rows[k]), "import_s": h.summarize(imports[k])} for k in kinds}


# --- the benchmark ---------------------------------------------------------------------


@dataclass
class Results:
    adam: dict[str, dict[str, h.Summary]] = dataclasses.field(default_factory=dict)
    tensorboard: dict[str, dict[str, h.Summary]] = dataclasses.field(default_factory=dict)
    dqn_updates: int = 0


def measure(c: Config, meta: h.Metadata) -> Results:
    r = Results(dqn_updates=c.dqn_updates)
    if "adam" in c.parts:
        r.adam = measure_adam(c)
    if "tensorboard" in c.parts:
        r.tensorboard = measure_tensorboard(c)
    return r


def _us(s: h.Summary) -> str:
    return h.fmt_spread(s, lambda v: f"{v * 1e6:.0f}")


def _s(s: h.Summary) -> str:
    return h.fmt_spread(s, lambda v: f"{v:.2f}")


def report(r: Results, meta: h.Metadata) -> h.Report:
    blocks, keys = [], []
    if r.adam:
        flat = r.adam["FlatAdam"]["update_s"]
        rows = [(n, v) for n, v in r.adam.items()]
        blocks.append(
            f"### DQN updates: FlatAdam against torch.optim.Adam\n\n"
            f"Spells of {r.dqn_updates:,} updates (forward, backward, grad-norm clip, Adam "
            "step) of the default DQN learner (Q-network 4-128-128-2, batch 64, one thread), "
            "interleaved; and the optimizer's construction in a fresh interpreter.\n\n"
            + h.table(
                [
                    h.Col[tuple]("optimizer", lambda x: x[0], "l"),
                    h.Col[tuple]("µs per update (min–max)", lambda x: _us(x[1]["update_s"])),
                    h.Col[tuple](
                        "÷ FlatAdam", lambda x: h.fmt_ratio(h.ratio(x[1]["update_s"], flat))
                    ),
                    h.Col[tuple](
                        f"s per {r.dqn_updates:,} updates",
                        lambda x: f"{x[1]['update_s'].median * r.dqn_updates:.1f}",
                    ),
                    h.Col[tuple]("construction s (min–max)", lambda x: _s(x[1]["construct_s"])),
                ],
                rows,
            )
        )
        fused = r.adam["torch Adam (fused)"]["update_s"]
        keys.append(f"FlatAdam update time ÷ torch fused Adam {h.fmt_ratio(h.ratio(flat, fused))}")
    if r.tensorboard:
        rows3 = list(r.tensorboard.items())
        blocks.append(
            "### TensorBoard scalars: pararl's event writer against SummaryWriter\n\n"
            "A metrics row is 20 scalars then a flush (what the session writes per log line); the "
            "import is timed in a fresh interpreter with torch already imported.\n\n"
            + h.table(
                [
                    h.Col[tuple]("writer", lambda x: x[0], "l"),
                    h.Col[tuple]("µs per row (min–max)", lambda x: _us(x[1]["row_s"])),
                    h.Col[tuple]("import s (min–max)", lambda x: _s(x[1]["import_s"])),
                ],
                rows3,
            )
        )
        tb = r.tensorboard
        keys.append(
            "event writer row time ÷ SummaryWriter "
            f"{h.fmt_ratio(h.ratio(tb['pararl']['row_s'], tb['SummaryWriter']['row_s']))}"
        )
    return h.Report(
        title=f"Hand-written replacements against the libraries (`{h.PROG} {NAME}`)",
        key_ratios="; ".join(keys),
        blocks=blocks,
    )
