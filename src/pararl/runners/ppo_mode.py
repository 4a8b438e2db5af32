"""`--mode auto` for PPO (and a population of DQN agents, `--seeds`): step the envs in
this process, or in worker processes.

In sync mode the main process sends actions to the workers and waits for them at
every vector step, so workers pay only when the env time they take off this process
is larger than what talking to them costs: one round trip per step (a pipe write,
a wake-up, the reply, a wake-up back). With W workers the main process is spared
(1 - 1/W) of the envs' stepping time. CartPole steps in ~6 µs, so 8 of its envs
cost less than a round trip and are faster stepped here; HalfCheetah (~50 µs)
pays off from a few envs per worker. The env's step time is measured at start-up,
on one env with random actions, for a few milliseconds; the round trip is measured
on this machine the first time `auto` needs it (about a second: two workers step
CartPole) and kept in a small per-machine cache file for a week: a machine's speed
changes, and one measurement taken while it was busy (531 µs, against 148 µs on
the same machine quiet) would otherwise decide every run after it.

Where workers pay, a PPO run of discrete actions may still overlap its acting with
its update (async: actor processes on all cores but the learner's), which pays where
the update outweighs the acting: Pong on 2 cores, 1.22-1.25x sync's agent steps/s
(BENCHMARKS.md). So `auto` then times both sides of one iteration (`LoopSides`): one
rollout acted in this process, as an actor acts it, and one epoch of its update on
the thread counts each loop would give it, and takes the loop whose iteration is the
shorter. For Pong that is about 3.5 s at start-up.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from pararl.envs.make import env_factory
from pararl.envs.masks import random_action
from pararl.intraop import torch_threads
from pararl.mp.shared import local_arrays
from pararl.runners.ppo_state import PPOState
from pararl.samplers.rollout.actors import ActorPlan, SegmentActor
from pararl.samplers.rollout.collect import batch_of, rollout_specs
from pararl.seeding import env_seeds
from pararl.vector import ParallelVectorEnv

MEASURE_BUDGET_S = 0.03
ROUND_TRIP_STEPS = 300  # vector steps timed (after 50 of warm-up), in blocks
ROUND_TRIP_BLOCKS = 5  # the median block's step: a moment's load elsewhere is not kept
CACHE_MAX_AGE_S = 7 * 24 * 3600.0  # a cached round trip older than this is measured again


@dataclass(frozen=True)
class ModeChoice:
    mode: str
    env_step_s: float | None
    reason: str


def measure_step_s(env_fn: Callable[[], gym.Env], budget_s: float = MEASURE_BUDGET_S) -> float:
    """Mean seconds per `step` of one env with random actions (legal ones, where the
    env gives action masks; resets not counted). The env's own error, if it fails,
    says where it came from."""
    try:
        return _timed_steps(env_fn, budget_s)
    except Exception as exc:
        exc.add_note(
            "pararl: the env failed in the steps with random actions that time it before "
            "training (to choose --mode); check the env and its --env-kwargs"
        )
        raise


def _timed_steps(env_fn: Callable[[], gym.Env], budget_s: float) -> float:
    env = env_fn()
    try:
        env.action_space.seed(0)
        _, info = env.reset(seed=0)
        # first-step costs (lazy set-up) not counted
        _, _, _, _, info = env.step(random_action(env.action_space, info))
        steps, spent = 0, 0.0
        while spent < budget_s or steps < 20:
            action = random_action(env.action_space, info)
            start = time.perf_counter()
            _, _, terminated, truncated, info = env.step(action)
            spent += time.perf_counter() - start
            steps += 1
            if terminated or truncated:
                _, info = env.reset()
        return spent / steps
    finally:
        env.close()


def cache_file() -> Path:
    """Where measurements of this machine are kept (`$XDG_CACHE_HOME/pararl`)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pararl" / "machine.json"


def _machine_key() -> str:
    return f"{platform.node()}|{os.cpu_count()}|{platform.machine()}|{platform.python_version()}"


def measure_round_trip(envs_per_worker: int = 4, workers: int = 2) -> float:
    """Seconds of one vector step's round trip to worker processes: a parallel
    vector step of CartPole minus the envs' own stepping time."""
    fn = env_factory("CartPole-v1")
    envs = ParallelVectorEnv([fn] * (workers * envs_per_worker), num_workers=workers)
    try:
        envs.reset(seed=0)
        actions = np.zeros(envs.num_envs, dtype=np.int64)
        for _ in range(50):
            envs.step(actions)
        per_block, blocks = ROUND_TRIP_STEPS // ROUND_TRIP_BLOCKS, []
        for _ in range(ROUND_TRIP_BLOCKS):
            start = time.perf_counter()
            for _ in range(per_block):
                envs.step(actions)
            blocks.append((time.perf_counter() - start) / per_block)
        per_step = statistics.median(blocks)
    finally:
        envs.close()
    return max(0.0, per_step - envs_per_worker * measure_step_s(fn))


def round_trip_s(
    cache: Path | None = None,
    measure: Callable[[], float] = measure_round_trip,
    clock: Callable[[], float] = time.time,
) -> float:
    """This machine's round trip: from the cache if measured within `CACHE_MAX_AGE_S`
    (by `clock`), else measured now and cached (an unwritable cache only means
    measuring again next time)."""
    cache = cache or cache_file()
    key, now = _machine_key(), clock()
    saved: object = {}
    try:
        saved = json.loads(cache.read_text())
        entry = saved[key]  # type: ignore[index]
        if 0.0 <= now - float(entry["measured_at"]) <= CACHE_MAX_AGE_S:
            return float(entry["round_trip_s"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    value = measure()
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        entries = saved if isinstance(saved, dict) else {}
        entries[key] = {"round_trip_s": value, "measured_at": now}
        tmp = cache.with_suffix(".tmp")
        tmp.write_text(json.dumps(entries, indent=1))
        tmp.replace(cache)
    except OSError:
        pass
    return value


def choose_mode(
    requested: str,
    env_fn: Callable[[], gym.Env],
    num_envs: int,
    workers: int,
    round_trip: Callable[[], float] = round_trip_s,
    step_time: Callable[[Callable[[], gym.Env]], float] = measure_step_s,
) -> ModeChoice:
    """The requested mode, or for `auto` the one whose vector step is cheaper.
    `round_trip` and `step_time` measure this machine and the env (given, in tests)."""
    if requested != "auto":
        return ModeChoice(requested, None, "asked for")
    if workers < 2:
        return ModeChoice("serial", None, "one core")
    step_s = step_time(env_fn)
    spared = (1 - 1 / workers) * num_envs * step_s
    trip = round_trip()
    mode = "sync" if spared > trip else "serial"
    reason = (
        f"env step {step_s * 1e6:.1f} µs x {num_envs} envs: workers would spare "
        f"{spared * 1e6:.0f} µs per step, a round trip costs ~{trip * 1e6:.0f} µs here"
    )
    return ModeChoice(mode, step_s, reason)


@dataclass(frozen=True)
class Threads:
    """The update's torch threads in each loop: async's learner beside its actors
    (`own`), widened to `wide` once they wait (`LentCores`; `own` where the count is
    held), and sync's, which its workers wait for."""

    own: int
    wide: int
    sync: int


@dataclass(frozen=True)
class LoopSides:
    """One iteration's two sides, timed (seconds): a rollout of every env (`steps`
    vector steps) acted in one process on one thread (what an async actor does;
    `stepping_s` of it the envs' own steps), and its update on each loop's threads
    (`Threads`)."""

    steps: int
    acting_s: float
    stepping_s: float
    update_own_s: float
    update_wide_s: float
    update_sync_s: float

    def async_s(self, actors: int, lag: int = 1) -> float:
        """An async iteration at best: each actor's share of the acting beside the
        update on its own threads, then the update's rest on every core; with `lag` 0
        the actors wait for each update, so the two follow each other (the update on
        every core: nothing acts beside it)."""
        acting = self.acting_s / actors
        if lag == 0:
            return acting + self.update_wide_s
        if acting >= self.update_own_s:
            return acting
        return acting + (1 - acting / self.update_own_s) * self.update_wide_s

    def sync_s(self, workers: int, round_trip_s: float) -> float:
        """A sync iteration: the forward passes in this process, the envs' steps on
        `workers` at once and a round trip to them each step, then the update."""
        forward = max(0.0, self.acting_s - self.stepping_s)
        trips = self.steps * round_trip_s
        return forward + self.stepping_s / workers + trips + self.update_sync_s

    def describe(self, threads: Threads) -> str:
        def on(count: int) -> str:
            return f"{count} thread{'s' if count > 1 else ''}"

        update = f"an update {self.update_own_s:.2f} s on {on(threads.own)}"
        if threads.wide != threads.own:
            update += f", {self.update_wide_s:.2f} s on {threads.wide}"
        return f"a rollout acted in {self.acting_s:.2f} s on one core, {update}"


def time_sides(
    make_state: Callable[[], PPOState],
    env_fn: Callable[[], gym.Env],
    num_envs: int,
    env_step_s: float,
    threads: Callable[[PPOState], Threads],
    epochs: int,
) -> tuple[LoopSides, Threads]:
    """Act one rollout of `num_envs` envs with a new state's policy (`make_state`:
    the run's settings, one epoch per update) and time one epoch of its update on
    each count of `threads`, after one untimed; scaled to the run's `epochs`. torch's
    global stream is left as it was: the run's weights do not depend on this."""
    with torch.random.fork_rng(devices=[]), torch_threads(1):
        state = make_state()
        spec = state.rollout_spec
        plan = ActorPlan(state.make_model, env_fn, spec, state.mask_info, 0, seed=0)
        actor = SegmentActor(plan, env_seeds(0, num_envs), (0, 0, 0))
        arrays = local_arrays(rollout_specs(spec, num_envs))
        try:
            start = time.perf_counter()
            actor.collect(arrays)
            acting = time.perf_counter() - start
        finally:
            actor.close()
        batch = batch_of(arrays, spec)
        batch.pop("discounted")  # the reward scale's, not the loss's
        counts = threads(state)
        updates: dict[int, float] = {}
        for count in (counts.wide, *sorted({counts.own, counts.wide, counts.sync})):
            with torch_threads(count):
                start = time.perf_counter()
                state.learner.update(dict(batch), state.rng)
                updates[count] = time.perf_counter() - start  # the first: untimed
    sides = LoopSides(
        spec.num_steps,
        acting,
        min(acting, env_step_s * num_envs * spec.num_steps),
        epochs * updates[counts.own],
        epochs * updates[counts.wide],
        epochs * updates[counts.sync],
    )
    return sides, counts
