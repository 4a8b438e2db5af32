"""`python -m benchmarks dqn`: DQN's time to solve against SB3 (`solve`, a row of
`lib.compare`) and transitions/s (`throughput`) of the DQN post's design (`SeedDesign`:
the whole net pickled through a pipe after every step) against pararl's async loop
(`Pararl`, which `ray` drives too), in timed spells.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import multiprocessing as mp
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from types import SimpleNamespace
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from benchmarks.lib import compare
from benchmarks.lib import harness as h
from benchmarks.lib.compare import Outcome, System
from benchmarks.lib.figures import Panel, Series

Part = Literal["solve", "throughput"]
Mode = Literal["actors", "loop"]
Workload = Literal["seed", "defaults"]
GREEDY, MEMORY, TARGET_SYNC, BATCH, GAMMA, LR, LEARN_EVERY = 0.9, 2000, 200, 64, 0.9, 0.01, 5
ROW = 10  # a stored transition: s (4), a, r, s' (4)
TAKE_WAIT_S = 0.05  # longest wait for a chunk inside a timed spell
FIRST_CHUNK_WAIT_S = 60.0  # longest a timed spell goes on for its first chunk
SOLVE = compare.solve_cartpole("dqn", (
    System("pararl-serial", "pararl serial", "dqn", {"mode": "serial"}),
    System("pararl-sync", "pararl sync", "dqn", {"mode": "sync"}),
    System("pararl-async", "pararl async", "dqn", {"mode": "async"}),
    # `--mode averaging --workers 2`, whatever the machine
    System("pararl-averaging", "pararl averaging, 2 replicas", "dqn",
           {"mode": "averaging", "workers": 2}),
), budget=100_000, quick=1_200)  # fmt: skip
LABELS = {
    "seed_design": "DQN post's design (net per step)",
    "pararl_seed": "pararl async, seed's workload",
    "pararl_defaults": "pararl async, defaults",
    "pararl_seed_free": "pararl async, seed's workload, no ratio",
    "pararl_defaults_free": "pararl async, defaults, no ratio",
}


@dataclass(frozen=True)
class Config(compare.Options, h.Options):
    """DQN: time to solve CartPole against SB3, transitions/s against the DQN post's design.
    --quick: 1 seed, 1,200-step budget, short spells (1-2 min)."""

    parts: tuple[Part, ...] = ("solve", "throughput")  # Parts to run.
    actors: tuple[int, ...] = (1, 2)  # throughput: actor processes (the post's children).
    workloads: tuple[Workload, ...] = ("seed", "defaults")  # throughput: pararl's configs.
    repeats: int = 3  # throughput: timed spells per system, interleaved.
    block_s: float = 3.0  # throughput: seconds per timed spell.
    warmup_s: float = 1.0  # throughput: untimed seconds before each spell.
    learner_threads: int | None = None  # throughput: the learner's threads (`pararl train`'s).


def resolve(config: Config) -> Config:
    quick = {"workloads": ("seed",), "repeats": 2, "block_s": 0.6, "warmup_s": 0.3}
    c = h.apply_quick(compare.resolve(SOLVE, config), quick)
    h.require(c, ">= 0: parts warmup_s", ">= 1: actors repeats learner_threads", "> 0: block_s")
    if "throughput" in c.parts:
        h.require(c, ">= 0: workloads")
    return c


# --- the DQN post's design ----------------------------------------------------------------


class SeedNet(nn.Module):
    """The post's MLP: 4 -> 20 (ReLU) -> 10 (sigmoid) -> 2, weights N(0, 0.1)."""

    def __init__(self) -> None:
        super().__init__()
        self.in_to_y1, self.in_to_y2, self.out = (
            nn.Linear(4, 20),
            nn.Linear(20, 10),
            nn.Linear(10, 2),
        )
        for layer in (self.in_to_y1, self.in_to_y2, self.out):
            layer.weight.data.normal_(0, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.sigmoid(self.in_to_y2(F.relu(self.in_to_y1(x)))))


def shaped_reward(env: gym.Env, s: np.ndarray) -> float:
    """The post's CartPole shaping: position and angle terms, not the env's reward."""
    base: Any = env.unwrapped
    x_max, theta_max = base.x_threshold, base.theta_threshold_radians
    return float(
        3 * ((x_max - abs(s[0])) / x_max - 0.8) + (theta_max - abs(s[2])) / theta_max - 0.5
    )


def seed_child(pipe: Connection, seed: int) -> None:
    """Receive the net, act one step, send the transition; until `None`."""
    torch.set_num_threads(1)
    np.random.seed(seed)
    env = gym.make("CartPole-v1").unwrapped
    s, _ = env.reset(seed=seed)
    try:
        while (net := pipe.recv()) is not None:
            net = net.cpu()
            torch.optim.Adam(net.parameters(), lr=LR)  # the post's Agent, rebuilt each step
            if np.random.uniform() < GREEDY:
                action = int(torch.max(net(torch.unsqueeze(torch.FloatTensor(s), 0)), 1)[1].item())
            else:
                action = int(np.random.randint(0, 2))
            s_, _, terminated, truncated, _ = env.step(action)
            pipe.send(np.hstack((s, action, shaped_reward(env, s_), s_)))
            s = env.reset()[0] if terminated or truncated else s_
    finally:
        env.close()


class SeedDesign:
    """The post's main process with `num_actors` children, as written but for: CPU only,
    no model saving, one torch thread a child, `None` stops a child, the net sent only to
    the child just heard from, and a memory that starts full (random-policy transitions),
    so that it learns every 5 transitions from the first timed step, as in steady state."""

    def __init__(self, num_actors: int, seed: int = 0) -> None:
        self.net, self.real_net, self.target_net = SeedNet(), SeedNet(), SeedNet()
        self.optimizer = torch.optim.Adam(self.real_net.parameters(), lr=LR)
        self.mem, self.stored, self.learn_step = np.zeros((MEMORY, ROW)), 0, 0
        env, rng = gym.make("CartPole-v1").unwrapped, np.random.default_rng(seed)
        s, _ = env.reset(seed=seed)
        for _ in range(MEMORY):  # prefill with a random policy
            a = int(rng.integers(2))
            s_, _, terminated, _, _ = env.step(a)
            self.store(np.hstack((s, a, shaped_reward(env, s_), s_)))
            s = env.reset()[0] if terminated else s_
        env.close()
        self.net.load_state_dict(self.real_net.state_dict())
        ctx = mp.get_context()
        self.pipes: list[Connection] = []
        self.procs: list[Any] = []
        for i in range(num_actors):
            main_end, child_end = ctx.Pipe()
            proc = ctx.Process(target=seed_child, args=(child_end, seed + i), daemon=True)
            proc.start()
            child_end.close()
            self.pipes.append(main_end)
            self.procs.append(proc)
            main_end.send(self.net)  # the first net; from now on one per received step

    def store(self, row: np.ndarray) -> None:
        self.mem[self.stored % MEMORY, :] = row
        self.stored += 1

    def learn(self) -> None:
        if self.learn_step % TARGET_SYNC == 0:
            self.target_net.load_state_dict(self.real_net.state_dict())
        self.learn_step += 1
        rows = torch.FloatTensor(self.mem[np.random.choice(MEMORY, BATCH), :])
        q = self.real_net(rows[:, :4]).gather(1, rows[:, 4:5].long())
        q_next = self.target_net(rows[:, -4:]).detach().max(1)[0].view(BATCH, 1)
        loss = nn.MSELoss()(q, rows[:, 5:6] + GAMMA * q_next)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def run_for(self, seconds: float) -> int:
        """Receive, store, learn and answer for about `seconds`; transitions taken."""
        before, deadline = self.stored, time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            for pipe in self.pipes:
                self.store(pipe.recv())
                if self.stored > MEMORY and self.stored % LEARN_EVERY == 0:
                    self.learn()
                self.net.load_state_dict(self.real_net.state_dict())
                pipe.send(self.net)  # the post sends it to all: with 2+ children, pipes fill up
        return self.stored - before

    def close(self, grace: float = 2.0) -> None:
        """Take each child's pending transition, tell it to stop, reap it."""
        for pipe in self.pipes:
            with contextlib.suppress(OSError, EOFError, ValueError):
                if pipe.poll(grace):
                    pipe.recv()
                pipe.send(None)
        for proc in self.procs:
            proc.join(grace)
            if proc.is_alive():
                proc.kill()
                proc.join(1.0)
        for pipe in self.pipes:
            pipe.close()
        self.pipes, self.procs = [], []


# --- pararl's loop ----------------------------------------------------------------------


def workload_config(workload: Workload, env: str = "CartPole-v1", seed: int = 0) -> Any:
    """`defaults`: pararl's DQN defaults; `seed`: the DQN post's learning work per transition
    (its net, batch, lr, gamma, 1-step targets, target sync, an update per 5 transitions,
    epsilon 0.1, reward shaping) on pararl's machinery, 32 envs an actor. No step budget:
    the learner loop takes no chunk past one, and spells run as long as they are timed."""
    from pararl.config import DQNConfig

    base = DQNConfig(env=env, seed=seed, mode="async", progress="none", tensorboard=False,
                     total_steps=10**12)  # fmt: skip
    if workload == "seed":
        base = dataclasses.replace(
            base, wrapper="cartpole-shaped", hidden=(20, 10), lr=LR, gamma=GAMMA,
            buffer_size=MEMORY, batch_size=BATCH, learning_starts=MEMORY,
            replay_ratio=1 / LEARN_EVERY, n_step=1, double_dqn=False, target_update=TARGET_SYNC,
            eps_start=1 - GREEDY, eps_end=1 - GREEDY, envs_per_worker=32,
        )  # fmt: skip
    return base.for_env("discrete").config


@dataclass(frozen=True)
class Spell:
    env_steps: int
    updates: int
    seconds: float


class Pararl:
    """`OffPolicyLoop` over `pararl train`'s async source (actor processes, or Ray actors),
    no evaluation, checkpoints or logs; spells of `actors` (chunks into the replay only)
    or the whole `loop` (its replay ratio, or free-running at 0)."""

    def __init__(self, config: Any, actors: int, learner_threads: int | None = None,
                 report: Callable[[str], None] = print, fill_s: float = 120.0) -> None:  # fmt: skip
        from pararl.algos.dqn import DQNState
        from pararl.devices import resolve_device
        from pararl.envs.make import env_factory
        from pararl.models import num_params
        from pararl.mp.threads import set_learner_threads
        from pararl.runners.offpolicy import OffPolicyLoop, make_source
        from pararl.seeding import seed_everything

        config = dataclasses.replace(config, workers=actors)
        config.validate()
        seed_everything(config.seed)
        env = env_factory(config.env, config.wrapper)()
        spaces = env.observation_space, env.action_space
        env.close()
        self.state = DQNState(config.for_spaces(*spaces), *spaces, resolve_device(config.device))
        if learner_threads is None:  # as `pararl train` chooses
            set_learner_threads(num_params(self.state.learner.q), actors)
        else:
            torch.set_num_threads(learner_threads)
        self.loop = OffPolicyLoop(self.state, make_source(self.state, "async", report))
        try:  # actors alone until the replay holds enough to learn from
            deadline = time.monotonic() + fill_s
            while not self.state.can_learn():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"replay not filled to learn in {fill_s} s")
                self.loop.take(0.5)
        except BaseException:
            self.loop.close()
            raise

    def _run(self, mode: Mode, seconds: float) -> float:
        start = time.perf_counter()
        while (left := start + seconds - time.perf_counter()) > 0:
            if mode == "actors":
                self.loop.take(max(0.0, min(TAKE_WAIT_S, left)))
            else:
                self.loop.iterate()
        return time.perf_counter() - start

    def spell(self, mode: Mode, seconds: float, warmup_s: float) -> Spell:
        """`warmup_s` untimed, then `seconds` timed, in `mode`; a block in which no chunk
        arrived (a loaded machine) goes on until one does, for `FIRST_CHUNK_WAIT_S` at most."""
        self._run(mode, warmup_s)
        steps, updates = self.state.env_steps, self.state.learner.updates
        elapsed = self._run(mode, seconds)
        deadline = time.monotonic() + FIRST_CHUNK_WAIT_S
        while self.state.env_steps == steps and time.monotonic() <= deadline:
            elapsed += self._run(mode, TAKE_WAIT_S)
        return Spell(self.state.env_steps - steps, self.state.learner.updates - updates, elapsed)

    def close(self) -> None:
        self.loop.close()


@dataclass
class RateRow:
    """One system's env steps/s and updates/s."""

    actors: int
    system: str
    label: str
    status: str = "ok"
    note: str = ""
    steps: h.Summary | None = None
    updates: h.Summary | None = None
    vs: float | None = None  # ratio to the anchor (the DQN post's design, local actors)


def spells(runners: dict[str, tuple[Any, Mode]], rows: dict[str, RateRow], repeats: int,
           block_s: float, warmup_s: float) -> None:  # fmt: skip
    """Interleaved spells of every runner (`SeedDesign` or `Pararl`, and its mode)."""
    steps: dict[str, list[float]] = {n: [] for n in rows}
    updates: dict[str, list[float]] = {n: [] for n in rows}

    def spell(name: str) -> float:
        runner, mode = runners[name]
        if isinstance(runner, SeedDesign):
            runner.run_for(warmup_s)
            seconds, count = h.timed(functools.partial(runner.run_for, block_s))
            steps[name].append(count / seconds)
        else:
            s = runner.spell(mode, block_s, warmup_s)
            steps[name].append(s.env_steps / s.seconds)
            if mode != "actors":
                updates[name].append(s.updates / s.seconds)
        return 0.0

    def failed(name: str, exc: Exception) -> None:
        h.progress(f"{name} failed: {h.failure(exc)}")
        rows[name].status, rows[name].note = "failed", h.failure(exc)

    h.interleaved({n: functools.partial(spell, n) for n in runners}, repeats, failed)
    for name, row in rows.items():
        row.steps, row.updates = h.maybe(steps[name]), h.maybe(updates[name])


# --- the benchmark ----------------------------------------------------------------------


@dataclass
class Results:
    solve: Outcome | None = None
    throughput: list[RateRow] = field(default_factory=list)


def throughput(actors: int, c: Config) -> list[RateRow]:
    """The DQN post's design and pararl (each workload, ratio and free) with `actors` actors."""
    names = ["seed_design"] + [f"pararl_{w}{f}" for w in c.workloads for f in ("", "_free")]
    rows = {n: RateRow(actors, n, LABELS[n]) for n in names}
    runners: dict[str, tuple[Any, Mode]] = {}
    h.progress(f"throughput, {actors} actor(s): starting ...")
    try:
        for name in names:
            try:
                if name == "seed_design":
                    runners[name] = (SeedDesign(actors), "loop")
                    continue
                cfg = workload_config(name.split("_")[1])  # type: ignore[arg-type]
                cfg = dataclasses.replace(cfg, replay_ratio=0.0) if name.endswith("_free") else cfg
                runners[name] = (Pararl(cfg, actors, c.learner_threads, h.progress), "loop")
            except Exception as exc:
                rows[name].status, rows[name].note = "failed", h.failure(exc)
        spells(runners, rows, c.repeats, c.block_s, c.warmup_s)
    finally:
        for runner, _ in runners.values():
            runner.close()
    for row in rows.values():
        row.vs = h.ratio(row.steps, rows["seed_design"].steps)
    return list(rows.values())


def measure(c: Config, meta: h.Metadata) -> Results:
    import torch

    if c.learner_threads is not None:
        torch.set_num_threads(c.learner_threads)
    meta.machine_note = f"; learner process torch threads: {torch.get_num_threads()}"
    out = Results()
    if "solve" in c.parts:
        out.solve = compare.measure(SOLVE, c, meta)
    if "throughput" in c.parts:
        out.throughput = [r for n in sorted(set(c.actors)) for r in throughput(n, c)]
    return out


THROUGHPUT: list[h.Col[RateRow]] = [
    h.Col("actors", lambda r: r.actors),
    h.Col("system", lambda r: r.label, "l"),
    h.Col("transitions/s (median)", lambda r: h.fmt_rate(h.med(r.steps)) if r.status == "ok"
          else f"{r.status} ({r.note})"),
    h.Col("min–max", lambda r: h.fmt_range(r.steps)),
    h.Col("updates/s", lambda r: h.fmt_rate(h.med(r.updates))),
    h.Col("vs seed", lambda r: h.fmt_ratio(r.vs)),
]  # fmt: skip


def report(r: Results, meta: h.Metadata) -> h.Report:
    p = meta.params
    blocks, panels, ratios = [], [], []
    if r.solve:
        text, solved, curves = compare.report(SOLVE, r.solve, SimpleNamespace(**p))
        blocks += solved
        panels += curves
        ratios.append(f"time to solve (target ≤ 0.5): {text}")
    if r.throughput:
        blocks.append(
            "### Transitions/s: the DQN post's design against pararl async\n\nTransitions stored "
            "per second by the learner process, steady state (the DQN post's memory starts "
            f"full so that it learns every 5 transitions from the start); {p['repeats']} "
            f"interleaved spells of {p['block_s']:g} s after {p['warmup_s']:g} s warm-up. "
            "pararl runs its production learner loop (`OffPolicyLoop`, replay ratio gating; `no "
            "ratio`: replay ratio 0) without evaluation or logging.\n\n"
            + h.table(THROUGHPUT, r.throughput)
        )
        counts = sorted({row.actors for row in r.throughput})
        for n in counts:
            text = ", ".join(f"{row.label} {h.fmt_ratio(row.vs)}" for row in r.throughput
                             if row.actors == n and row.system != "seed_design")  # fmt: skip
            ratios.append(f"{n} actor(s), transitions/s ÷ seed (target ≥ 100×): {text}")
        series = []  # transitions/s per system, the ratio to the seed noted, per count
        systems = list(dict.fromkeys(row.system for row in r.throughput))
        for i, name in enumerate(systems):
            mine = [row for row in r.throughput if row.system == name and row.steps]
            off = -0.3 + i * 0.6 / max(1, len(systems) - 1)
            points = [(counts.index(row.actors) + off, row.steps) for row in mine if row.steps]
            notes = [h.fmt_ratio(row.vs) if row.vs else "" for row in mine]
            series.append(Series.of(LABELS[name], points, kind="points", notes=notes))
        ticks = [(i, f"{n} actor(s)") for i, n in enumerate(counts)]
        ylabel = "transitions / s (median, min–max)"
        panels.append(Panel("DQN post's design vs pararl async", series, ylabel=ylabel,
                            xticks=ticks, logy=True))  # fmt: skip
    return h.Report(
        f"DQN: time to solve, throughput against the seed (`{h.PROG} dqn`)",
        "; ".join(ratios),
        blocks,
        panels,
        "DQN benchmark",
    )
