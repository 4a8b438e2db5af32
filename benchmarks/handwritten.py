"""`python -m benchmarks handwritten`: pararl's own parts, each alone, against what they
replace: FlatAdam (`adam`), the event writer (`tensorboard`), a population's stacked
layers (`stacked`), frames stored once (`replay`), weights-only checkpoints
(`checkpoint`), one call over cut sequences (`recurrent`).
"""

from __future__ import annotations

import copy
import functools
import math
import os
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
KINDS, SAMPLINGS = ("frames", "naive"), ("uniform", "prioritized")
STACK, FRAME, ENVS, N_STEP, BATCH = 4, 84, 8, 3, 32  # replay: frames of a stack, its side, ...
EPISODE_LENGTH = 400  # replay: the mean; an episode ends with probability 1/this a step
FORMATS = ("weights-only", "pickled")
WAYS = ("padded", "packed", "loop", "floor")  # recurrent: `floor` is one call, no cut
SEQUENCE, FEATURES = 32, 64  # recurrent: steps of each env's sequence, features per step
Part = Literal["adam", "tensorboard", "stacked", "replay", "checkpoint", "recurrent"]


@dataclass(frozen=True)
class Config(h.Options):
    """pararl's own parts alone against what they replace. --quick: tiny spells."""

    parts: tuple[Part, ...] = ("adam", "tensorboard", "stacked")  # Parts to run.
    repeats: int = 3  # Interleaved repeats of every measurement (median, min and max reported).
    dqn_updates: int = 25_000  # adam: DQN updates per spell (a 100k-step run does 24,750).
    tb_rows: int = 2_000  # tensorboard: metrics rows written per spell.
    agents: int = 8  # stacked: agents updated together (PPO actor-critics).
    stacked_env: str = "CartPole-v1"
    """stacked: whose network and minibatch: CartPole-v1's 64x64 tanh MLP on 128 rows, or
    another env's as `pararl train ppo` builds it, on its minibatch (MinAtar: a CNN, 256)."""
    steps: int = 300  # stacked: minibatch steps per spell.
    capacity: int = 100_000  # replay: capacity of the memory of frames (transitions).
    naive_capacity: int = 25_000  # replay: capacity of the naive one (56 KB a transition).
    batches: int = 300  # replay: batches per timed spell.
    checkpoint_env: str = "ALE/Pong-v5"  # checkpoint: the env of the DQN run saved and loaded.
    checkpoint_steps: int = 20_000  # checkpoint: its env steps (its memory holds them all).
    core_sizes: tuple[int, ...] = (64, 256)  # recurrent: LSTM widths.
    episode_lengths: tuple[int, ...] = (25, 200, 100_000)  # recurrent: mean episode lengths.
    calls: int = 20  # recurrent: forward-backward passes per timed spell.


def resolve(config: Config) -> Config:
    quick = {"repeats": 1, "dqn_updates": 300, "tb_rows": 50, "steps": 5, "agents": 2,
             "capacity": 5_000, "naive_capacity": 2_000, "batches": 50,
             "checkpoint_steps": 2_000, "core_sizes": (16,), "episode_lengths": (10,),
             "calls": 2}  # fmt: skip
    c = h.apply_quick(config, quick)
    h.require(c, ">= 1: repeats", "> 0: capacity naive_capacity batches checkpoint_steps calls",
              "> 0: core_sizes episode_lengths")  # fmt: skip
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

    return each(spell, tuple(fns), repeats)


def each(fn: Callable[..., float], names: tuple[str, ...], repeats: int,
         *args: Any) -> dict[str, h.Summary]:  # fmt: skip
    """`fn(name, *args)` of every name, interleaved `repeats` times."""
    times = h.interleaved({n: functools.partial(fn, n, *args) for n in names}, repeats)
    return {n: h.summarize(times[n]) for n in names}


# --- adam ------------------------------------------------------------------------------


class TorchAdam:
    """`torch.optim.Adam` with the calls the DQN learner makes of its optimizer."""

    def __init__(self, params: list[Any], lr: float, variant: str) -> None:
        import torch

        fused = variant == "fused"
        self.params, self.optimizer = params, torch.optim.Adam(params, lr, fused=fused,
                                                               foreach=not fused)  # fmt: skip
        self.zero_grad, self.step = self.optimizer.zero_grad, self.optimizer.step

    def clip_grad_norm_(self, max_norm: float) -> None:
        import torch

        torch.nn.utils.clip_grad_norm_(self.params, max_norm)


def dqn_update(name: str) -> Callable[[], object]:
    """One update of the default DQN learner (batch 64, one thread) with `name`'s Adam."""
    import torch

    from pararl.algos.dqn import DQNState
    from pararl.config import DQNConfig
    from pararl.envs.make import probe_env
    from pararl.replay.nstep import Transitions

    torch.set_num_threads(1)  # as the learner runs with small models
    torch.manual_seed(0)
    cfg = DQNConfig()
    spaces = probe_env(cfg.env_name)
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


def population_steps(agents: int, env: str = "CartPole-v1") -> dict[str, Callable[[], object]]:
    """One PPO minibatch step of `agents` actor-critics, three ways: CartPole-sized, or
    the network and minibatch `pararl train ppo --env ENV` has."""
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
    gen = torch.Generator().manual_seed(0)
    if env == "CartPole-v1":
        make = functools.partial(actor_critic, "mlp", (4,), np.dtype("<f4"), 2, True, (64, 64),
                                 False, NormSettings(), Categorical(2), (), None)  # fmt: skip
        actions = 2

        def observations(n: int) -> torch.Tensor:
            return torch.randn(n, 4, generator=gen)
    else:  # the run's own network, on random observations of its space
        from pararl.config import PPOConfig
        from pararl.envs.make import probe_env
        from pararl.runners.ppo_state import PPOState

        space, act_space = probe_env(env)[:2]
        state = PPOState(PPOConfig(env=env).for_spaces(space, act_space), space, act_space, 8)
        make, rows, actions = state.make_model, state.settings.minibatch_size, state.action_dim
        space.seed(0)

        def observations(n: int) -> torch.Tensor:
            return torch.as_tensor(np.stack([space.sample() for _ in range(n)]))

    def net(seed: int) -> Any:
        torch.manual_seed(seed)
        return make()

    n = agents * rows
    mb = {"obs": observations(n), "actions": torch.randint(0, actions, (n,), generator=gen),
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


# --- replay -----------------------------------------------------------------------------


def fill(memory: Any, capacity: int, kind: str, shape: tuple[int, ...], envs: int = 8,
         n_step: int = 1, episode_length: float = math.inf, seed: int = 0) -> None:  # fmt: skip
    """Steps of `envs` envs, as an actor emits them, until the ring has wrapped: stacks of
    random frames (`shape`), a new one a step; an episode ends with probability
    1/`episode_length` a step (half terminated, half truncated). `kind`: `frames` (chunks
    of frame steps) or `naive` (n-step transitions of whole stacks)."""
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


@dataclass
class ReplayRow:
    """One memory kind with one way of sampling."""

    kind: str
    sampling: str
    capacity: int
    bytes_per_transition: float
    per_frame: float  # bytes per transition / bytes of one frame
    batch_ms: h.Summary


def memory_of(kind: str, sampling: str, capacity: int) -> Any:
    """A filled memory of `kind`: frames stored once (`FrameReplay`) or whole stacks."""
    from pararl.replay.frame_memory import FrameReplay
    from pararl.replay.prioritized import PrioritizedReplay
    from pararl.replay.uniform import ReplayBuffer

    shape = (STACK, FRAME, FRAME)
    memory: Any = FrameReplay(capacity, shape) if kind == "frames" else ReplayBuffer(
        capacity, shape, np.uint8)  # fmt: skip
    if sampling == "prioritized":
        memory = PrioritizedReplay(memory, alpha=0.6)
    fill(memory, capacity, kind, shape, ENVS, N_STEP, EPISODE_LENGTH)
    return memory


def batch_ms(sampling: str, memory: Any, batches: int) -> float:
    """Milliseconds per batch (prioritized: with the priority update after each)."""
    rng = np.random.default_rng(0)

    def run() -> None:
        for _ in range(batches):
            if sampling == "prioritized":
                sample = memory.sample_prioritized(BATCH, rng, beta=0.4)
                memory.update_priorities(sample.slots, rng.random(BATCH))
            else:
                memory.sample(BATCH, rng)

    return 1e3 * h.timed(run)[0] / batches


def replay_rows(c: Config) -> list[ReplayRow]:
    rows = []
    for kind in KINDS:  # one kind's memories at a time: the naive one is large
        capacity = c.capacity if kind == "frames" else c.naive_capacity
        h.progress(f"handwritten: filling the {kind} memories ...")
        built = {s: memory_of(kind, s, capacity) for s in SAMPLINGS}
        times = h.interleaved({s: functools.partial(batch_ms, s, m, c.batches)
                               for s, m in built.items()}, c.repeats)  # fmt: skip
        for sampling, memory in built.items():
            per = memory.nbytes / capacity
            rows.append(ReplayRow(kind, sampling, capacity, per, per / (FRAME * FRAME),
                                  h.summarize(times[sampling])))  # fmt: skip
        del built
    return rows


# --- checkpoint -------------------------------------------------------------------------


@dataclass
class CheckpointRow:
    """One format: seconds to save and to load the checkpoint with its memory."""

    format: str
    megabytes: float
    save_s: h.Summary
    load_s: h.Summary


def saved_s(fmt: str, path: Path, state: dict[str, Any]) -> float:
    """Seconds to write `state` to `path` in `fmt`, synced to disk as checkpoints are."""
    import torch

    from pararl import checkpoint

    def pickled() -> None:
        with path.open("wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())

    return h.timed(pickled if fmt == "pickled" else lambda: checkpoint.save(path, state))[0]


def loaded_s(fmt: str, path: Path) -> float:
    """Seconds to read `path` back in `fmt`, on the CPU."""
    import torch

    from pararl import checkpoint

    if fmt == "weights-only":
        return h.timed(lambda: checkpoint.load(path))[0]
    return h.timed(lambda: torch.load(path, map_location="cpu", weights_only=False))[0]


def checkpoint_rows(c: Config) -> list[CheckpointRow]:
    """A DQN run's final checkpoint, with its replay memory, saved and loaded each way."""
    from pararl import DQNConfig, checkpoint, train
    from pararl.rundir import RunDir
    from pararl.runners.checkpoints import replay_for

    with tempfile.TemporaryDirectory() as scratch:
        h.progress(f"handwritten: training DQN on {c.checkpoint_env} for {c.checkpoint_steps:,} "
                   "steps ...")  # fmt: skip
        steps, run = c.checkpoint_steps, RunDir(Path(scratch) / "run")
        train(DQNConfig(env=c.checkpoint_env, total_steps=steps, buffer_size=steps,
                        learning_starts=min(1_000, steps // 2), eval_every=10 * steps,
                        eval_episodes=1, run_dir=run.root, progress="none",
                        tensorboard=False))  # fmt: skip
        state = checkpoint.load(run.checkpoint("final"))
        state["replay"] = replay_for(run, state)
        if state["replay"] is None:
            raise h.UsageError(f"{run.root} has no replay memory saved with its final checkpoint")
        paths = {fmt: Path(scratch) / f"{fmt}.pt" for fmt in FORMATS}
        save = each(lambda f: saved_s(f, paths[f], state), FORMATS, c.repeats)
        load = each(lambda f: loaded_s(f, paths[f]), FORMATS, c.repeats)
        return [CheckpointRow(f, paths[f].stat().st_size / 1e6, save[f], load[f])
                for f in FORMATS]  # fmt: skip


# --- recurrent --------------------------------------------------------------------------


@dataclass
class CoreRow:
    """One core width and episode length: ms per forward-backward, by way."""

    size: int
    episode_length: int
    cuts: int  # episode starts inside the sequences
    pieces: int  # the pieces the cuts make
    ms: dict[str, h.Summary]


def starts(length: int) -> Any:
    """Where episodes start in the minibatch: each env's step with probability 1/length."""
    import torch

    return torch.rand(SEQUENCE, ENVS, generator=torch.Generator().manual_seed(0)) < 1 / length


def core_ms(way: str, size: int, length: int, calls: int) -> float:
    """Milliseconds per forward-backward of one minibatch, one torch thread (`floor`: no cut)."""
    import torch

    from pararl.intraop import torch_threads
    from pararl.models.recurrent import CoreSettings, RecurrentCore

    torch.manual_seed(0)
    replay = "padded" if way == "floor" else way
    core = RecurrentCore(FEATURES, CoreSettings("lstm", size), replay)  # type: ignore[arg-type]
    x = torch.randn(SEQUENCE, ENVS, FEATURES, requires_grad=True)
    state, first = torch.zeros(ENVS, core.rows, size), starts(length)
    if way == "floor":
        first[:] = False

    def run() -> None:
        for _ in range(calls):
            core.zero_grad(set_to_none=True)
            core.sequence(x, state, first).sum().backward()

    with torch_threads(1):
        run()  # warm-up
        return 1e3 * h.timed(run)[0] / calls


def core_rows(c: Config) -> list[CoreRow]:
    from pararl.models.recurrent import Pieces

    rows = []
    for size in c.core_sizes:
        for length in c.episode_lengths:
            h.progress(f"handwritten: width {size}, episodes of ~{length} steps ...")
            first = starts(length).numpy()
            ms = each(core_ms, WAYS, c.repeats, size, length, c.calls)
            rows.append(CoreRow(size, length, int(np.count_nonzero(first[1:])),
                                len(Pieces.of(first).length), ms))  # fmt: skip
    return rows


# --- the benchmark ---------------------------------------------------------------------


@dataclass
class Results:
    adam: dict[str, dict[str, h.Summary]] = field(default_factory=dict)
    tensorboard: dict[str, dict[str, h.Summary]] = field(default_factory=dict)
    stacked: dict[str, h.Summary] = field(default_factory=dict)
    replay: list[ReplayRow] = field(default_factory=list)
    checkpoint: list[CheckpointRow] = field(default_factory=list)
    recurrent: list[CoreRow] = field(default_factory=list)


def measure(c: Config, meta: h.Metadata) -> Results:
    r = Results()
    if "adam" in c.parts:
        updates = spells({n: dqn_update(n) for n in ADAMS}, c.dqn_updates, c.repeats, warm=50)
        construct = each(construct_s, ADAMS, c.repeats)
        r.adam = {n: {"update_s": updates[n], "construct_s": construct[n]} for n in ADAMS}
    if "tensorboard" in c.parts:
        rows, imports = (
            each(rows_s, WRITERS, c.repeats, c.tb_rows),
            each(import_s, WRITERS, c.repeats),
        )
        r.tensorboard = {k: {"row_s": rows[k], "import_s": imports[k]} for k in WRITERS}
    if "stacked" in c.parts:
        r.stacked = spells(population_steps(c.agents, c.stacked_env), c.steps, c.repeats)
    if "replay" in c.parts:
        r.replay = replay_rows(c)
    if "checkpoint" in c.parts:
        r.checkpoint = checkpoint_rows(c)
    if "recurrent" in c.parts:
        r.recurrent = core_rows(c)
    return r


def us(s: h.Summary) -> str:
    return h.fmt_spread(s, lambda v: f"{v * 1e6:.0f}")


def secs(s: h.Summary, digits: int = 2) -> str:
    return h.fmt_spread(s, lambda v: f"{v:.{digits}f}")


def ratio(a: h.Summary | None, b: h.Summary | None) -> str:
    return h.fmt_ratio(h.ratio(a, b))


Shown = tuple[str, str]  # a part's key ratios and its block


def adam_shown(r: Results, p: dict[str, Any]) -> Shown:
    flat, n = r.adam["FlatAdam"]["update_s"], p["dqn_updates"]
    heads = ["optimizer", "µs per update (min–max)", "÷ FlatAdam", f"s per {n:,} updates",
             "construction s (min–max)"]  # fmt: skip
    rows = [[name, us(x["update_s"]), ratio(x["update_s"], flat),
             f"{x['update_s'].median * n:.1f}", secs(x["construct_s"])]
            for name, x in r.adam.items()]  # fmt: skip
    return (
        f"FlatAdam update time ÷ torch fused Adam {ratio(flat, r.adam[ADAMS[1]]['update_s'])}",
        "### DQN updates: FlatAdam against torch.optim.Adam\n\n"
        f"Spells of {n:,} updates (forward, backward, grad-norm clip, Adam step) of the "
        "default DQN learner (Q-network 4-128-128-2, batch 64, one thread), interleaved; and "
        "the optimizer's construction in a fresh interpreter.\n\n" + h.text_table(heads, rows),
    )


def tensorboard_shown(r: Results, p: dict[str, Any]) -> Shown:
    rows = [[k, us(x["row_s"]), secs(x["import_s"])] for k, x in r.tensorboard.items()]
    ours, theirs = (r.tensorboard[k]["row_s"] for k in WRITERS)
    return (
        f"event writer row time ÷ SummaryWriter {ratio(ours, theirs)}",
        "### TensorBoard scalars: pararl's event writer against SummaryWriter\n\n"
        "A metrics row is 20 scalars then a flush (what the session writes per log line); the "
        "import is timed in a fresh interpreter with torch already imported.\n\n"
        + h.text_table(["writer", "µs per row (min–max)", "import s (min–max)"], rows),
    )


def stacked_shown(r: Results, p: dict[str, Any]) -> Shown:
    own, n = r.stacked[STACKED[0]], p["agents"]
    rows = [[name, us(x), ratio(x, own)] for name, x in r.stacked.items()]
    vmapped, separate = (ratio(r.stacked[name], own) for name in STACKED[1:])
    env = p.get("stacked_env", "CartPole-v1")
    nets = ("CartPole-sized actor-critics (64x64 tanh, 128 rows each" if env == "CartPole-v1"
            else f"{env} actor-critics (`pararl train ppo`'s network and minibatch")  # fmt: skip
    return (
        f"torch.func vmap step ÷ stacked layers {vmapped}, separate ÷ stacked {separate}",
        f"### {n} agents' PPO step: stacked layers against torch.func, {env}\n\n"
        f"One minibatch step (forward, backward, each agent's gradient clipped, Adam) of {n} "
        f"{nets}, one thread): `--seeds`'s "
        "batched twin (`models.population`), `torch.func`'s `vmap(grad(loss))` over stacked "
        f"parameters with the same optimizer, and {n} separate learners.\n\n"
        + h.text_table(["way", "µs per step (min–max)", "÷ stacked layers"], rows),
    )


def replay_shown(r: Results, p: dict[str, Any]) -> Shown:
    by = {(x.kind, x.sampling): x for x in r.replay}
    frames, naive = by[("frames", "uniform")], by[("naive", "uniform")]
    keys = [f"frames / naive bytes per transition: "
            f"{frames.bytes_per_transition / naive.bytes_per_transition:.3f}"]  # fmt: skip
    keys += [f"{k}: prioritized / uniform time per batch "
             f"{ratio(by[(k, 'prioritized')].batch_ms, by[(k, 'uniform')].batch_ms)}"
             for k in KINDS]  # fmt: skip
    cols: list[h.Col[ReplayRow]] = [
        h.Col("memory", lambda x: x.kind, "l"),
        h.Col("sampling", lambda x: x.sampling, "l"),
        h.Col("capacity", lambda x: f"{x.capacity:,}"),
        h.Col("bytes / transition", lambda x: f"{x.bytes_per_transition:,.0f}"),
        h.Col("÷ one frame", lambda x: f"{x.per_frame:.3f}"),
        h.Col("ms / batch: median (min–max)", lambda x: secs(x.batch_ms, 3)),
    ]
    return (
        "; ".join(keys),
        "### Replay memories for image stacks\n\n"
        f"Batches of {BATCH}, {STACK}x{FRAME}x{FRAME} uint8 stacks, {ENVS} envs interleaved "
        f"(episodes of ~{EPISODE_LENGTH} steps), n = {N_STEP}; prioritized times include the "
        f"priority update after each batch.\n\n{h.table(cols, r.replay)}",
    )


def checkpoint_shown(r: Results, p: dict[str, Any]) -> Shown:
    new, old = r.checkpoint
    cols: list[h.Col[CheckpointRow]] = [
        h.Col("format", lambda x: x.format, "l"),
        h.Col("MB", lambda x: f"{x.megabytes:,.1f}"),
        h.Col("save s: median (min–max)", lambda x: secs(x.save_s, 3)),
        h.Col("load s: median (min–max)", lambda x: secs(x.load_s, 3)),
    ]
    return (
        f"weights-only / pickled: save {ratio(new.save_s, old.save_s)}, "
        f"load {ratio(new.load_s, old.load_s)}",
        "### Checkpoints: weights-only against pickled\n\n"
        f"The final checkpoint of a {p['checkpoint_steps']:,}-step DQN run on "
        f"{p['checkpoint_env']}, with its replay memory in the same file (pararl writes the "
        "memory to `replay.pt` beside it), saved with fsync and loaded on the CPU. "
        "Weights-only: numpy arrays stored as tensors, `torch.load(weights_only=True)`; "
        "pickled: the arrays pickled, `weights_only=False`, as pararl wrote and read "
        f"checkpoints before.\n\n{h.table(cols, r.checkpoint)}",
    )


def recurrent_shown(r: Results, p: dict[str, Any]) -> Shown:
    def ms(way: str) -> h.Col[CoreRow]:
        return h.Col(f"{way} ms", lambda x: secs(x.ms[way]))

    cols: list[h.Col[CoreRow]] = [
        h.Col("width", lambda x: str(x.size)),
        h.Col("episode length", lambda x: f"{x.episode_length:,}"),
        h.Col("cuts / pieces", lambda x: f"{x.cuts} / {x.pieces}"),
        *(ms(way) for way in WAYS),
        h.Col("padded ÷ loop", lambda x: ratio(x.ms["padded"], x.ms["loop"])),
        h.Col("padded ÷ floor", lambda x: ratio(x.ms["padded"], x.ms["floor"])),
    ]
    keys = [f"width {x.size}, episodes ~{x.episode_length}: padded "
            f"{ratio(x.ms['padded'], x.ms['loop'])} loop's time, packed "
            f"{ratio(x.ms['packed'], x.ms['loop'])}" for x in r.recurrent]  # fmt: skip
    return (
        "; ".join(keys),
        "### Replaying recurrent sequences\n\n"
        f"One minibatch: {ENVS} envs x {SEQUENCE} steps of {FEATURES} features through a "
        "one-layer LSTM, forward and backward, one torch thread, the pieces that episode "
        "starts cut replayed three ways (`pararl.models.recurrent`): `padded` (the default: "
        "side by side in one call, padded), `packed` (a packed batch of variable lengths) "
        "and `loop` (one call per time step, CleanRL's); `floor`: the same steps in one "
        f"call with no episode start inside.\n\n{h.table(cols, r.recurrent)}",
    )


SHOWN: dict[str, Callable[[Results, dict[str, Any]], Shown]] = {
    "adam": adam_shown, "tensorboard": tensorboard_shown, "stacked": stacked_shown,
    "replay": replay_shown, "checkpoint": checkpoint_shown, "recurrent": recurrent_shown,
}  # fmt: skip


def report(r: Results, meta: h.Metadata) -> h.Report:
    shown = [fn(r, meta.params) for part, fn in SHOWN.items() if getattr(r, part)]
    return h.Report(
        f"pararl's own parts against what they replace (`{h.PROG} handwritten`)",
        "; ".join(key for key, _ in shown),
        [block for _, block in shown],
    )
