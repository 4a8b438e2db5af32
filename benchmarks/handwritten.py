"""`python -m benchmarks handwritten`: what pararl's hand-written replacements buy
against the libraries they replace: FlatAdam (`adam`), the event writer
(`tensorboard`), and the stacked layers of a population (`stacked`: `--seeds N`'s
batched update against `torch.func`'s `vmap` over the loss, and against N separate
updates).
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

    parts: tuple[Literal["adam", "tensorboard", "stacked"], ...] = (
        "adam",
        "tensorboard",
        "stacked",
    )
    """Parts to run."""

    repeats: int = 3
    """Interleaved repeats of every measurement (median, min and max reported)."""

    dqn_updates: int = 25_000
    """adam: DQN updates per spell (a default 100k-step DQN run does 24,750)."""

    tb_rows: int = 2_000
    """tensorboard: metrics rows written per spell."""

    agents: int = 8
    """stacked: agents updated together (CartPole-sized PPO actor-critics)."""

    steps: int = 300
    """stacked: minibatch steps per spell."""


QUICK = {"repeats": 1, "dqn_updates": 300, "tb_rows": 50, "steps": 5, "agents": 2}


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


# --- stacked ----------------------------------------------------------------------------

STACKED = ("stacked layers", "torch.func vmap", "separate learners")


def _population_spells(agents: int) -> dict[str, object]:
    """One PPO minibatch step (forward, backward, per-agent clip, Adam) of `agents`
    CartPole-sized actor-critics (64x64 tanh, 2 actions, 128 rows each), three ways."""
    import copy

    import torch
    from torch.func import functional_call, grad, stack_module_state, vmap

    from pararl.algos.population import PopulationPPOLearner
    from pararl.algos.ppo import PPOHyper, PPOLearner, ppo_loss
    from pararl.models import ActorCritic
    from pararl.models.build import actor_critic
    from pararl.models.heads import Categorical
    from pararl.models.normalize import NormSettings
    from pararl.models.population import Population
    from pararl.optim import RowAdam

    torch.set_num_threads(1)
    hyper, rows, cpu = PPOHyper(), 128, torch.device("cpu")

    def net(seed: int) -> ActorCritic:
        torch.manual_seed(seed)
        return actor_critic("mlp", (4,), np.dtype("<f4"), 2, True, (64, 64), False,
                            NormSettings(), Categorical(2), (), None)  # fmt: skip

    gen = torch.Generator().manual_seed(0)
    mb = {
        "obs": torch.randn(agents * rows, 4, generator=gen),
        "actions": torch.randint(0, 2, (agents * rows,), generator=gen),
        "logprobs": torch.randn(agents * rows, generator=gen) * 0.1 - 0.7,
        "advantages": torch.randn(agents * rows, generator=gen),
        "returns": torch.randn(agents * rows, generator=gen),
        "values": torch.randn(agents * rows, generator=gen),
    }
    nets = [net(i) for i in range(agents)]
    batched = PopulationPPOLearner(Population([copy.deepcopy(n) for n in nets]), hyper, 1e-3, cpu)
    separate = [PPOLearner(copy.deepcopy(n), hyper, 1e-3, cpu) for n in nets]
    parts = {k: v.reshape(agents, rows, *v.shape[1:]) for k, v in mb.items()}

    class Evaluate(torch.nn.Module):  # functional_call calls forward: evaluate through it
        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> object:
            return self.model.evaluate(obs, actions)  # type: ignore[operator]

    params, buffers = stack_module_state(nets)
    leaves = {k: v.detach().requires_grad_() for k, v in params.items() if v.requires_grad}
    fixed = {k: v for k, v in params.items() if not v.requires_grad}
    base = Evaluate(copy.deepcopy(nets[0]).to("meta"))
    optimizer = RowAdam(list(leaves.values()), lr=1e-3, eps=1e-5)

    def loss(p: dict, b: dict, part: dict) -> torch.Tensor:
        state = {f"model.{k}": v for k, v in {**p, **b}.items()}
        evaluated = functional_call(base, state, (part["obs"], part["actions"]))
        adv = part["advantages"]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        return ppo_loss(hyper, evaluated, part, adv, hyper.clip_coef)["loss"]

    grads_of = vmap(grad(loss))

    def vmapped() -> None:
        grads = grads_of(leaves, {**fixed, **buffers}, parts)
        for p, g in zip(optimizer.params, grads.values(), strict=True):
            p.grad = g.detach()
        optimizer.clip_grad_norm_(hyper.max_grad_norm)
        optimizer.step()

    def alone() -> None:
        for i, learner in enumerate(separate):
            one = {k: v[i] for k, v in parts.items()}
            learner._step(**one, clip=hyper.clip_coef, normalized=False, with_kl=False)

    return {
        "stacked layers": lambda: batched._step(mb, False, False),
        "torch.func vmap": vmapped,
        "separate learners": alone,
    }


def measure_stacked(c: Config) -> dict[str, h.Summary]:
    spells = _population_spells(c.agents)
    for fn in spells.values():
        for _ in range(10):
            fn()  # type: ignore[operator]

    def spell(name: str) -> float:
        fn = spells[name]
        seconds, _ = h.timed(lambda: [fn() for _ in range(c.steps)])  # type: ignore[operator]
        h.progress(f"stacked: {name}: {seconds / c.steps * 1e3:.2f} ms per step")
        return seconds / c.steps

    times = h.interleaved({n: functools.partial(spell, n) for n in STACKED}, c.repeats)
    return {n: h.summarize(times[n]) for n in STACKED}


# --- the benchmark ---------------------------------------------------------------------


@dataclass
class Results:
    adam: dict[str, dict[str, h.Summary]] = dataclasses.field(default_factory=dict)
    tensorboard: dict[str, dict[str, h.Summary]] = dataclasses.field(default_factory=dict)
    stacked: dict[str, h.Summary] = dataclasses.field(default_factory=dict)
    dqn_updates: int = 0
    agents: int = 0


def measure(c: Config, meta: h.Metadata) -> Results:
    r = Results(dqn_updates=c.dqn_updates, agents=c.agents)
    if "adam" in c.parts:
        r.adam = measure_adam(c)
    if "tensorboard" in c.parts:
        r.tensorboard = measure_tensorboard(c)
    if "stacked" in c.parts:
        r.stacked = measure_stacked(c)
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
    if r.stacked:
        own = r.stacked["stacked layers"]
        blocks.append(
            f"### {r.agents} agents' PPO step: stacked layers against torch.func\n\n"
            f"One minibatch step (forward, backward, each agent's gradient clipped, Adam) of "
            f"{r.agents} CartPole-sized actor-critics (64x64 tanh, 128 rows each, one "
            "thread): `--seeds`'s batched twin (`models.population`), `torch.func`'s "
            "`vmap(grad(loss))` over stacked parameters with the same optimizer, and "
            f"{r.agents} separate learners.\n\n"
            + h.table(
                [
                    h.Col[tuple]("way", lambda x: x[0], "l"),
                    h.Col[tuple]("µs per step (min–max)", lambda x: _us(x[1])),
                    h.Col[tuple]("÷ stacked layers", lambda x: h.fmt_ratio(h.ratio(x[1], own))),
                ],
                list(r.stacked.items()),
            )
        )
        keys.append(
            f"torch.func vmap step ÷ stacked layers "
            f"{h.fmt_ratio(h.ratio(r.stacked['torch.func vmap'], own))}, separate ÷ stacked "
            f"{h.fmt_ratio(h.ratio(r.stacked['separate learners'], own))}"
        )
    return h.Report(
        title=f"Hand-written replacements against the libraries (`{h.PROG} {NAME}`)",
        key_ratios="; ".join(keys),
        blocks=blocks,
    )
