"""`python -m benchmarks handwritten`: what pararl's hand-written replacements buy
against the libraries they replace: FlatAdam (`adam`), the event writer
(`tensorboard`), and the stacked layers of a population (`stacked`: `--seeds N`'s
batched update against `torch.func`'s `vmap` over the loss, and against N separate
updates).
"""

from __future__ import annotations

import copy
import functools
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from benchmarks.lib import harness as h

ADAMS = ("FlatAdam", "torch Adam (fused)", "torch Adam (foreach)")
WRITERS = ("pararl", "SummaryWriter")
STACKED = ("stacked layers", "torch.func vmap", "separate learners")


@dataclass(frozen=True)
class Config(h.Options):
    """Hand-written replacements (FlatAdam, the TensorBoard event writer, the stacked
    layers of a population) against the library code they replace. --quick: tiny spells."""

    parts: tuple[Literal["adam", "tensorboard", "stacked"], ...] = ("adam", "tensorboard",
                                                                     "stacked")  # fmt: skip
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


def resolve(config: Config) -> Config:
    quick = {"repeats": 1, "dqn_updates": 300, "tb_rows": 50, "steps": 5, "agents": 2}
    c = h.apply_quick(config, quick)
    h.require(c, ">= 1: repeats")
    return c


def fresh_seconds(code: str) -> float:
    """What `code`, run in a fresh interpreter, prints last (the seconds it timed)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def spells(fns: dict[str, Callable[[], object]], count: int, repeats: int,
           warm: int = 10) -> dict[str, h.Summary]:  # fmt: skip
    """Seconds per call of each of `fns`: `count` calls a spell, interleaved, after
    `warm` calls each."""
    for fn in fns.values():
        for _ in range(warm):
            fn()

    def spell(name: str) -> float:
        seconds, _ = h.timed(lambda: [fns[name]() for _ in range(count)])
        h.progress(f"handwritten: {name}: {seconds / count * 1e6:.0f} µs per call")
        return seconds / count

    times = h.interleaved({n: functools.partial(spell, n) for n in fns}, repeats)
    return {n: h.summarize(times[n]) for n in fns}


# --- adam ------------------------------------------------------------------------------


class TorchAdam:
    """`torch.optim.Adam` with the calls the DQN learner makes of its optimizer."""

    def __init__(self, params: list[Any], lr: float, variant: str) -> None:
        import torch

        self.params, self.optimizer = params, torch.optim.Adam(params, lr=lr, **{variant: True})
        self.zero_grad, self.step = self.optimizer.zero_grad, self.optimizer.step

    def clip_grad_norm_(self, max_norm: float) -> None:
        import torch

        torch.nn.utils.clip_grad_norm_(self.params, max_norm)


def dqn_update(name: str) -> Callable[[], object]:
    """One update of the default DQN learner (batch 64, one thread) with `name`'s Adam."""
    import gymnasium as gym
    import torch

    from pararl.algos.dqn import DQNState
    from pararl.config import DQNConfig
    from pararl.replay.nstep import Transitions

    torch.set_num_threads(1)  # as the learner runs with small models
    torch.manual_seed(0)
    cfg = DQNConfig()
    env = gym.make(cfg.env_name)
    spaces = env.observation_space, env.action_space
    env.close()
    state = DQNState(cfg.for_spaces(*spaces), *spaces, torch.device("cpu"))
    learner = state.learner
    if name != "FlatAdam":
        variant = "fused" if "fused" in name else "foreach"
        learner.optimizer = TorchAdam(list(learner.q.parameters()), state.settings.lr, variant)  # type: ignore[assignment]
    rng = np.random.default_rng(0)
    batch = Transitions(
        rng.normal(size=(64, 4)).astype(np.float32), rng.integers(0, 2, 64),
        rng.normal(size=64).astype(np.float32), rng.normal(size=(64, 4)).astype(np.float32),
        np.full(64, 0.99**3, np.float32),
    )  # fmt: skip
    return functools.partial(learner.update, batch)


def construct_s(name: str) -> float:
    """Seconds to construct the optimizer, in a fresh interpreter."""
    variant = "fused" if "fused" in name else "foreach"
    make = ("FlatAdam(q.parameters(), lr=1e-3)" if name == "FlatAdam" else
            f"torch.optim.Adam(q.parameters(), lr=1e-3, {variant}=True)")  # fmt: skip
    return fresh_seconds(
        "import time, torch; from pararl.models import QNetwork; "
        "from pararl.optim import FlatAdam; q = QNetwork(4, 2, (128, 128)); "
        f"t = time.perf_counter(); {make}; print(time.perf_counter() - t)"
    )


# --- tensorboard -----------------------------------------------------------------------

ROW = {f"metric_{i}": float(i) for i in range(20)}


def rows_s(kind: str, rows: int) -> float:
    """Seconds per metrics row (20 scalars, then a flush) of `kind`'s writer."""
    with tempfile.TemporaryDirectory() as tmp:
        if kind == "pararl":
            from pararl.logging.tbevents import EventWriter

            writer: Any = EventWriter(Path(tmp))
        else:
            from torch.utils.tensorboard import SummaryWriter

            writer = SummaryWriter(tmp)

        def write() -> None:
            for step in range(rows):
                for key, value in ROW.items():
                    writer.add_scalar(key, value, step)
                writer.flush()

        seconds, _ = h.timed(write)
        writer.close()
        return seconds / rows


def import_s(kind: str) -> float:
    """Seconds to import `kind`'s writer in a fresh interpreter, torch already imported."""
    module = "pararl.logging.tbevents" if kind == "pararl" else "torch.utils.tensorboard"
    return fresh_seconds(f"import time, torch; t = time.perf_counter(); import {module}; "
                         "print(time.perf_counter() - t)")  # fmt: skip


# --- stacked ----------------------------------------------------------------------------


def population_steps(agents: int) -> dict[str, Callable[[], object]]:
    """One PPO minibatch step (forward, backward, per-agent clip, Adam) of `agents`
    CartPole-sized actor-critics (64x64 tanh, 2 actions, 128 rows each), three ways."""
    import torch
    from torch.func import functional_call, grad, stack_module_state, vmap

    from pararl.algos.population import PopulationPPOLearner
    from pararl.algos.ppo import PPOHyper, PPOLearner, ppo_loss
    from pararl.models.build import actor_critic
    from pararl.models.heads import Categorical
    from pararl.models.normalize import NormSettings
    from pararl.models.population import Population
    from pararl.optim import RowAdam

    torch.set_num_threads(1)
    hyper, rows, cpu = PPOHyper(), 128, torch.device("cpu")

    def net(seed: int) -> Any:
        torch.manual_seed(seed)
        return actor_critic("mlp", (4,), np.dtype("<f4"), 2, True, (64, 64), False,
                            NormSettings(), Categorical(2), (), None)  # fmt: skip

    gen, n = torch.Generator().manual_seed(0), agents * rows
    mb = {"obs": torch.randn(n, 4, generator=gen),
          "actions": torch.randint(0, 2, (n,), generator=gen),
          "logprobs": torch.randn(n, generator=gen) * 0.1 - 0.7,
          **{k: torch.randn(n, generator=gen) for k in ("advantages", "returns",
                                                        "values")}}  # fmt: skip
    nets = [net(i) for i in range(agents)]
    batched = PopulationPPOLearner(Population([copy.deepcopy(x) for x in nets]), hyper, 1e-3, cpu)
    separate = [PPOLearner(copy.deepcopy(x), hyper, 1e-3, cpu) for x in nets]
    parts = {k: v.reshape(agents, rows, *v.shape[1:]) for k, v in mb.items()}

    class Evaluate(torch.nn.Module):  # functional_call calls forward: evaluate through it
        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> object:
            return self.model.evaluate(obs, actions)  # type: ignore[operator]

    params, buffers = stack_module_state(nets)
    leaves = {k: v.detach().requires_grad_() for k, v in params.items() if v.requires_grad}
    fixed = {**{k: v for k, v in params.items() if not v.requires_grad}, **buffers}
    base = Evaluate(copy.deepcopy(nets[0]).to("meta"))
    optimizer = RowAdam(list(leaves.values()), lr=1e-3, eps=1e-5)

    def loss(p: dict[str, Any], b: dict[str, Any], part: dict[str, Any]) -> torch.Tensor:
        state = {f"model.{k}": v for k, v in {**p, **b}.items()}
        evaluated = functional_call(base, state, (part["obs"], part["actions"]))
        adv = (part["advantages"] - part["advantages"].mean()) / (part["advantages"].std() + 1e-8)
        return ppo_loss(hyper, evaluated, part, adv, hyper.clip_coef)["loss"]

    grads_of = vmap(grad(loss))

    def vmapped() -> None:
        grads = grads_of(leaves, fixed, parts)
        for p, g in zip(optimizer.params, grads.values(), strict=True):
            p.grad = g.detach()
        optimizer.clip_grad_norm_(hyper.max_grad_norm)
        optimizer.step()

    def alone() -> None:
        for i, learner in enumerate(separate):
            one = {k: v[i] for k, v in parts.items()}
            learner._step(**one, clip=hyper.clip_coef, normalized=False, with_kl=False)

    return {STACKED[0]: lambda: batched._step(mb, False, False), STACKED[1]: vmapped,
            STACKED[2]: alone}  # fmt: skip


# --- the benchmark ---------------------------------------------------------------------


@dataclass
class Results:
    adam: dict[str, dict[str, h.Summary]] = field(default_factory=dict)
    tensorboard: dict[str, dict[str, h.Summary]] = field(default_factory=dict)
    stacked: dict[str, h.Summary] = field(default_factory=dict)
    dqn_updates: int = 0
    agents: int = 0


def measure(c: Config, meta: h.Metadata) -> Results:
    r = Results(dqn_updates=c.dqn_updates, agents=c.agents)
    if "adam" in c.parts:
        updates = spells({n: dqn_update(n) for n in ADAMS}, c.dqn_updates, c.repeats, warm=50)
        construct = h.interleaved({n: functools.partial(construct_s, n) for n in ADAMS}, c.repeats)
        r.adam = {n: {"update_s": updates[n], "construct_s": h.summarize(construct[n])}
                  for n in ADAMS}  # fmt: skip
    if "tensorboard" in c.parts:
        rows = h.interleaved(
            {k: functools.partial(rows_s, k, c.tb_rows) for k in WRITERS}, c.repeats
        )
        imports = h.interleaved({k: functools.partial(import_s, k) for k in WRITERS}, c.repeats)
        r.tensorboard = {k: {"row_s": h.summarize(rows[k]), "import_s": h.summarize(imports[k])}
                         for k in WRITERS}  # fmt: skip
    if "stacked" in c.parts:
        r.stacked = spells(population_steps(c.agents), c.steps, c.repeats)
    return r


def us(s: h.Summary) -> str:
    return h.fmt_spread(s, lambda v: f"{v * 1e6:.0f}")


def secs(s: h.Summary) -> str:
    return h.fmt_spread(s, lambda v: f"{v:.2f}")


def report(r: Results, meta: h.Metadata) -> h.Report:
    blocks, keys = [], []
    if r.adam:
        flat = r.adam["FlatAdam"]["update_s"]
        heads = ["optimizer", "µs per update (min–max)", "÷ FlatAdam",
                 f"s per {r.dqn_updates:,} updates", "construction s (min–max)"]  # fmt: skip
        rows = [[n, us(x["update_s"]), h.fmt_ratio(h.ratio(x["update_s"], flat)),
                 f"{x['update_s'].median * r.dqn_updates:.1f}", secs(x["construct_s"])]
                for n, x in r.adam.items()]  # fmt: skip
        blocks.append(
            "### DQN updates: FlatAdam against torch.optim.Adam\n\n"
            f"Spells of {r.dqn_updates:,} updates (forward, backward, grad-norm clip, Adam "
            "step) of the default DQN learner (Q-network 4-128-128-2, batch 64, one thread), "
            "interleaved; and the optimizer's construction in a fresh interpreter.\n\n"
            + h.text_table(heads, rows)
        )
        fused = h.fmt_ratio(h.ratio(flat, r.adam["torch Adam (fused)"]["update_s"]))
        keys.append(f"FlatAdam update time ÷ torch fused Adam {fused}")
    if r.tensorboard:
        rows = [[k, us(x["row_s"]), secs(x["import_s"])] for k, x in r.tensorboard.items()]
        blocks.append(
            "### TensorBoard scalars: pararl's event writer against SummaryWriter\n\n"
            "A metrics row is 20 scalars then a flush (what the session writes per log line); the "
            "import is timed in a fresh interpreter with torch already imported.\n\n"
            + h.text_table(["writer", "µs per row (min–max)", "import s (min–max)"], rows)
        )
        ours, theirs = (r.tensorboard[k]["row_s"] for k in WRITERS)
        keys.append(f"event writer row time ÷ SummaryWriter {h.fmt_ratio(h.ratio(ours, theirs))}")
    if r.stacked:
        own = r.stacked[STACKED[0]]
        rows = [[n, us(x), h.fmt_ratio(h.ratio(x, own))] for n, x in r.stacked.items()]
        blocks.append(
            f"### {r.agents} agents' PPO step: stacked layers against torch.func\n\n"
            f"One minibatch step (forward, backward, each agent's gradient clipped, Adam) of "
            f"{r.agents} CartPole-sized actor-critics (64x64 tanh, 128 rows each, one "
            "thread): `--seeds`'s batched twin (`models.population`), `torch.func`'s "
            "`vmap(grad(loss))` over stacked parameters with the same optimizer, and "
            f"{r.agents} separate learners.\n\n"
            + h.text_table(["way", "µs per step (min–max)", "÷ stacked layers"], rows)
        )
        vmapped, separate = (h.fmt_ratio(h.ratio(r.stacked[n], own)) for n in STACKED[1:])
        keys.append(
            f"torch.func vmap step ÷ stacked layers {vmapped}, separate ÷ stacked {separate}"
        )
    return h.Report(
        f"Hand-written replacements against the libraries (`{h.PROG} handwritten`)",
        "; ".join(keys),
        blocks,
    )
