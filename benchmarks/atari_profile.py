"""Where the microseconds of one Atari agent step go: one env peeled layer by layer,
each layer timed in its own loop (CPU time, interleaved), for `benchmarks atari`.
"""

from __future__ import annotations

import functools
import importlib.util
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import psutil

from benchmarks import atari_runners as ar
from benchmarks.lib import harness as h
from benchmarks.lib.stepping import VectorStep, actions
from benchmarks.vector import calibrate
from pararl.envs.make import env_factory
from pararl.vector import SerialVectorEnv


@dataclass
class Layer:
    """A timed loop, per agent step: µs of wall time, of CPU in every process it uses
    (this one, and pararl's worker), and of the calling thread's CPU."""

    name: str
    wall_us: h.Summary
    cpu_us: float
    caller_cpu_us: float


@dataclass
class Part:
    """One line of the breakdown: a part of the step and its µs per agent step."""

    part: str
    us: float | None
    how: str


def preprocessing(env: gym.Env) -> gym.wrappers.AtariPreprocessing:
    """The `AtariPreprocessing` wrapper inside `env`."""
    while not isinstance(env, gym.wrappers.AtariPreprocessing):
        env = env.env  # type: ignore[attr-defined]
    return env


class Loops:
    """The loops over the layers of one env: each `run(name, steps)` steps that layer."""

    def __init__(self, env_id: str, seed: int) -> None:
        self.env, self.seed = env_factory(env_id)(), seed
        self.gym = ar.gym_env(env_id)  # Gymnasium's own wrappers, for comparison
        self.pre = preprocessing(self.env)
        self.ale = self.env.unwrapped.ale  # type: ignore[attr-defined]
        self.moves = self.env.unwrapped._action_set  # type: ignore[attr-defined]
        self.acts = list(actions(self.env.action_space, None, seed))
        self.screens = np.zeros((2, *self.pre.obs_buffer[0].shape), np.uint8)

    def emulator(self, steps: int) -> None:
        ale, moves, acts, pool, screens = (
            self.ale,
            self.moves,
            self.acts,
            len(self.acts),
            self.screens,
        )
        for i in range(steps):
            move = moves[acts[i % pool]]
            for frame in range(4):
                ale.act(move)
                if frame >= 2:
                    ale.getScreenGrayscale(screens[frame - 2])
            if ale.game_over():
                ale.reset_game()

    def resize(self, steps: int) -> None:
        get_obs = self.pre._get_obs
        for _ in range(steps):
            get_obs()

    def stepped(self, layer: gym.Env, steps: int) -> None:
        acts, pool = self.acts, len(self.acts)
        for i in range(steps):
            _, _, terminated, truncated, _ = layer.step(acts[i % pool])
            if terminated or truncated:
                layer.reset()

    def tasks(self) -> dict[str, Callable[[int], None]]:
        self.env.reset(seed=self.seed)
        self.gym.reset(seed=self.seed)
        return {
            "emulator": self.emulator,
            "resize": self.resize,
            "preprocessed": functools.partial(self.stepped, self.pre),
            "unstacked": functools.partial(self.stepped, self.env.env),  # type: ignore[attr-defined]
            "stacked": functools.partial(self.stepped, self.env),
            "gymnasium": functools.partial(self.stepped, self.gym),
        }


def vector_tasks(
    env_id: str, seed: int, closers: list[Callable[[], Any]]
) -> tuple[dict[str, Callable[[int], Any]], dict[str, list[psutil.Process]]]:
    """pararl (with its default worker spin, and without), its serial twin and EnvPool
    (if installed) with 1 worker (thread) and 1 env, full steps; and pararl's worker
    processes, whose CPU counts too."""
    one = ar.Case(env_id, workers=1, envs_per_worker=1, seed=seed)
    runners: dict[str, Callable[[int], Any]] = {}
    workers: dict[str, list[psutil.Process]] = {}
    for name in ("pararl_step", "pararl_nospin", "envpool_sync"):
        if name == "envpool_sync" and importlib.util.find_spec("envpool") is None:
            continue
        runner, _, close = ar.open_backend(name, one)
        closers.append(close)
        runner.reset()
        runners[name] = runner.run
        if name.startswith("pararl"):  # private: the benchmark reads the worker's pid
            group = runner.venv._transport.group  # type: ignore[attr-defined]
            workers[name] = [psutil.Process(pid) for pid in group.pids]
    serial = SerialVectorEnv([env_factory(env_id)])
    closers.append(serial.close)
    acts = actions(serial.single_action_space, 1, seed)
    runners["pararl_serial"] = VectorStep(serial, 1, acts, serial.reset).run
    serial.reset(seed=seed)
    return runners, workers


class Loop:
    """A layer's loop as a `vector.calibrate` runner."""

    unit = 1

    def __init__(self, task: Callable[[int], Any]) -> None:
        self.task = task

    def reset(self) -> None:
        """Each layer resets itself (at its episode ends)."""

    def run(self, steps: int) -> int:
        self.task(steps)
        return steps


def cpu_s(processes: list[psutil.Process]) -> float:
    return sum(sum(p.cpu_times()[:2]) for p in processes)


def timed_loops(env_id: str, seed: int, repeats: int, block_s: float) -> dict[str, Layer]:
    """Every layer's loop, calibrated to about `block_s`, timed round after round."""
    loops = Loops(env_id, seed)
    closers: list[Callable[[], Any]] = [loops.env.close, loops.gym.close]
    try:
        tasks = loops.tasks()
        vector, workers = vector_tasks(env_id, seed, closers)
        tasks |= vector
        steps = {}
        for name, task in tasks.items():
            task(10)  # warm up
            steps[name] = calibrate(Loop(task), block_s)
        cpu: dict[str, list[tuple[float, float]]] = {name: [] for name in tasks}

        def block(name: str) -> float:
            others = workers.get(name, [])
            thread, process, more = time.thread_time(), time.process_time(), cpu_s(others)
            elapsed, _ = h.timed(functools.partial(tasks[name], steps[name]))
            used = time.process_time() - process + cpu_s(others) - more
            cpu[name].append((used, time.thread_time() - thread))
            return 1e6 * elapsed / steps[name]

        walls = h.interleaved({n: functools.partial(block, n) for n in tasks}, repeats)
    finally:
        for close in reversed(closers):
            close()
    return {
        n: Layer(
            n,
            h.summarize(walls[n]),
            statistics.median(1e6 * c / steps[n] for c, _ in cpu[n]),
            statistics.median(1e6 * t / steps[n] for _, t in cpu[n]),
        )
        for n in walls
        if walls[n]
    }


def breakdown(layers: dict[str, Layer]) -> list[Part]:
    """The parts of a step in CPU µs (medians), as differences of the timed loops; the
    machine's other load shows in wall time, not in CPU time."""

    def cpu(name: str) -> float | None:
        return layers[name].cpu_us if name in layers else None

    def wall(name: str) -> float | None:
        return layers[name].wall_us.median if name in layers else None

    def minus(a: float | None, *b: float | None) -> float | None:
        return None if a is None or any(x is None for x in b) else a - sum(x or 0.0 for x in b)

    emulator, resize, pre = cpu("emulator"), cpu("resize"), cpu("preprocessed")
    unstacked = cpu("unstacked")
    pararl, serial, envpool = cpu("pararl_step"), cpu("pararl_serial"), cpu("envpool_sync")
    caller = layers["pararl_step"].caller_cpu_us if "pararl_step" in layers else None
    return [
        Part("emulation", emulator, "ALE alone: 4 frames, 2 grayscale screen reads"),
        Part("max-pool + area resize", resize, "AtariPreprocessing._get_obs (OpenCV) alone"),
        Part(
            "the preprocessing wrapper's Python",
            minus(pre, emulator, resize),
            "its step (an AtariPreprocessing) - the two above: bookkeeping, and "
            "Gymnasium's AtariEnv under it if it steps through that",
        ),
        Part(
            "wrappers above it",
            minus(unstacked, pre),
            "episode statistics, FIRE at reset: the env under FrameStackObservation - the above",
        ),
        Part("= the env step in a pararl worker", unstacked, "the env under FrameStackObservation"),
        Part(
            "pararl's batch code, worker and caller",
            minus(serial, unstacked),
            "the serial twin's step() (the same code, no pipes) - the env step",
        ),
        Part(
            "pipes, wake-ups, the worker's spin",
            minus(pararl, serial),
            "ParallelVectorEnv.step (CPU of caller and worker) - the serial twin's",
        ),
        Part("= pararl step(), 1 worker, 1 env", pararl, "CPU of the caller and the worker"),
        Part("  of which the caller", caller, "the calling thread's CPU"),
        Part("  its wall time", wall("pararl_step"), "µs per step() (waits included)"),
        Part("  CPU with spin_s=0", cpu("pararl_nospin"), "the worker blocks at once"),
        Part("  wall time with spin_s=0", wall("pararl_nospin"), "µs per step()"),
        Part(
            "FrameStackObservation",
            minus(cpu("stacked"), unstacked),
            "the whole env - its env step; not in pararl's step (a ring of frames)",
        ),
        Part(
            "Gymnasium's own wrappers, whole env",
            cpu("gymnasium"),
            "AtariPreprocessing + FrameStackObservation, as AsyncVectorEnv's workers step them",
        ),
        Part("EnvPool sync, 1 thread, 1 env", envpool, "CPU of its process (env thread too)"),
        Part("  beyond emulation", minus(envpool, emulator), "its C++ preprocessing and caller"),
        Part("  its wall time", wall("envpool_sync"), "µs per step()"),
    ]
