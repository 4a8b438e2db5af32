"""What the DQN throughput and Ray benchmarks drive in timed spells:
`SeedDesign` (the multi-process DQN post's design, the whole net pickled back through a
pipe after every step: the cost measured) and `Pararl` (the async off-policy loop).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import multiprocessing as mp
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Literal

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from benchmarks.lib import harness as h
from pararl.algos.dqn import DQNState
from pararl.config import DQNConfig
from pararl.devices import resolve_device
from pararl.envs.make import env_factory
from pararl.models import num_params
from pararl.mp.threads import set_learner_threads
from pararl.runners.offpolicy import OffPolicyLoop, make_source
from pararl.seeding import seed_everything

GREEDY, MEMORY, TARGET_SYNC, BATCH, GAMMA, LR, LEARN_EVERY = 0.9, 2000, 200, 64, 0.9, 0.01, 5
ROW = 10  # s (4), a, r, s' (4)
Mode = Literal["actors", "loop"]
Workload = Literal["seed", "defaults"]
TAKE_WAIT_S = 0.05  # longest wait for a chunk inside a timed spell
FIRST_CHUNK_WAIT_S = 60.0  # longest a timed spell goes on for its first chunk


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
    base: gym.Env = env.unwrapped
    x_max, theta_max = base.x_threshold, base.theta_threshold_radians  # type: ignore[attr-defined]
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
    """The post's main process with `num_actors` children, as written but for: CPU
    only, no model saving, one torch thread per child, `None` stops a child, and the net
    goes back only to the child just heard from. Its memory starts full of
    random-policy transitions, so learning (every 5 transitions) runs from the first
    measured step, as in steady state."""

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
        self.procs: list[mp.process.BaseProcess] = []
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
        target = rows[:, 5:6] + GAMMA * self.target_net(rows[:, -4:]).detach().max(1)[0].view(
            BATCH, 1
        )
        loss = nn.MSELoss()(q, target)
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


def workload_config(workload: Workload, env: str = "CartPole-v1", seed: int = 0) -> DQNConfig:
    """`defaults`: pararl's DQN defaults. `seed`: the DQN post's learning work per transition
    (its net, batch, lr, gamma, 1-step targets, target sync, one update per 5
    transitions, epsilon 0.1, its reward shaping) on pararl's machinery: each actor
    steps 32 envs (the post's one), chunks of transitions, weights in shared memory."""
    # no step budget: spells run as long as they are timed (the learner loop takes no
    # chunk past a run's budget)
    base = DQNConfig(
        env=env, seed=seed, mode="async", progress="none", tensorboard=False, total_steps=10**12
    )
    if workload == "defaults":
        return base.for_env("discrete").config
    workload_cfg = dataclasses.replace(
        base,
        wrapper="cartpole-shaped",
        hidden=(20, 10),
        lr=LR,
        gamma=GAMMA,
        buffer_size=MEMORY,
        batch_size=BATCH,
        learning_starts=MEMORY,
        replay_ratio=1 / LEARN_EVERY,
        n_step=1,
        double_dqn=False,
        target_update=TARGET_SYNC,
        eps_start=1 - GREEDY,
        eps_end=1 - GREEDY,
        envs_per_worker=32,
    )
    return workload_cfg.for_env("discrete").config


@dataclass(frozen=True)
class Spell:
    env_steps: int
    updates: int
    seconds: float


class Pararl:
    """`OffPolicyLoop` over the source `pararl train` uses in async mode (`make_source`:
    actor processes, or Ray actors), with no evaluation, checkpoints or logs. Spells:
    `actors` (chunks into the replay only), `loop` (the production loop, with the
    config's replay ratio or, at 0, free-running)."""

    def __init__(
        self,
        config: DQNConfig,
        actors: int,
        learner_threads: int | None = None,
        report: Callable[[str], None] = print,
        fill_timeout_s: float = 120.0,
    ) -> None:
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
            deadline = time.monotonic() + fill_timeout_s
            while not self.state.can_learn():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"replay not filled to learn in {fill_timeout_s} s")
                self.loop.take(0.5)
        except BaseException:
            self.loop.close()
            raise

    def _turn(self, mode: Mode, left: float) -> None:
        if mode == "actors":
            self.loop.take(max(0.0, min(TAKE_WAIT_S, left)))
        else:
            self.loop.iterate()

    def _run(self, mode: Mode, seconds: float) -> float:
        start = time.perf_counter()
        while (left := start + seconds - time.perf_counter()) > 0:
            self._turn(mode, left)
        return time.perf_counter() - start

    def spell(self, mode: Mode, seconds: float, warmup_s: float) -> Spell:
        """`warmup_s` untimed, then `seconds` timed, in `mode`. Env steps arrive a
        chunk at a time: a timed block in which none arrived (shorter than one chunk's
        sampling, as on a loaded machine) goes on until one does, instead of
        measuring a rate of 0 (for at most `FIRST_CHUNK_WAIT_S` more)."""
        self._run(mode, warmup_s)
        steps, updates = self.state.env_steps, self.state.learner.updates
        elapsed = self._run(mode, seconds)
        deadline = time.monotonic() + FIRST_CHUNK_WAIT_S
        while self.state.env_steps == steps:
            if time.monotonic() > deadline:
                break
            elapsed += self._run(mode, TAKE_WAIT_S)
        state = self.state
        return Spell(state.env_steps - steps, state.learner.updates - updates, elapsed)

    def close(self) -> None:
        self.loop.close()


@dataclass
class RateRow:
    """One system (throughput) or spell (overlap): env steps/s and updates/s."""

    actors: int
    system: str
    label: str
    status: str = "ok"
    note: str = ""
    steps: h.Summary | None = None
    updates: h.Summary | None = None
    vs: float | None = None  # ratio to the anchor (the DQN post's design, local actors)


Runs = dict[str, tuple[Pararl | SeedDesign, Mode]]  # spell name: what runs it, and how


def spells(
    runners: Runs,
    rows: dict[str, RateRow],
    repeats: int,
    block_s: float,
    warmup_s: float,
) -> None:
    """The interleaved spells of every runner; failures are noted in the rows."""
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
