"""The samplers `benchmarks atari` times, each in a driver process of its own (so its
process time is the caller's CPU alone), with the bytes through its pipes counted on
the parent ends; all with the preprocessing `pararl.envs.atari` states.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Literal, get_args

import gymnasium as gym
import numpy as np

from benchmarks.lib import stepping
from benchmarks.lib.stepping import Partial, Runner, VectorStep, actions, calibrate
from pararl.envs.atari import FireReset, needs_fire, register_atari
from pararl.envs.make import env_factory
from pararl.mp.listen import SPIN_S

Backend = Literal[
    "pararl_step",
    "pararl_nospin",
    "pararl_partial",
    "envpool_sync",
    "envpool_async",
    "ale_sync",
    "ale_async",
    "gym_async",
    "sb3_subproc",
    "single",
]
BACKENDS: tuple[Backend, ...] = get_args(Backend)
PARARL: tuple[Backend, ...] = ("pararl_step", "pararl_nospin", "pararl_partial")
ENVPOOL: tuple[Backend, ...] = ("envpool_sync", "envpool_async")
ALE: tuple[Backend, ...] = ("ale_sync", "ale_async")
HALF_BATCH = frozenset({"pararl_partial", "envpool_async", "ale_async"})  # need >= 2 envs
THREADED = frozenset({*ENVPOOL, *ALE})  # env threads inside the caller's process
MAX_FRAMES = 108_000  # the episode cap of EnvPool, ale-py and pararl (27,000 agent steps)


MODULES = {  # what each backend imports (SB3 brings torch: seconds)
    "envpool": ("envpool",),
    "ale": ("ale_py.vector_env",),
    "sb3": ("stable_baselines3.common.vec_env", "stable_baselines3.common.atari_wrappers"),
    "pararl": ("pararl.vector",),
    "gym": ("gymnasium.vector",),
}


def preload(backends: Sequence[str]) -> None:
    """Import what `backends` need once, here, so that drivers forked from this
    process start without importing it again (those not installed are skipped)."""
    for family in {b.split("_")[0] for b in backends}:
        for module in MODULES.get(family, ()):
            if importlib.util.find_spec(module.split(".")[0]) is not None:
                importlib.import_module(module)


def label(name: str) -> str:
    return {
        "pararl_step": "pararl step",
        "pararl_nospin": "pararl step, spin_s=0",
        "pararl_partial": "pararl send/recv(min_envs=envs/2)",
        "envpool_sync": "EnvPool sync",
        "envpool_async": "EnvPool async (batch envs/2)",
        "ale_sync": "ale-py AtariVectorEnv sync",
        "ale_async": "ale-py AtariVectorEnv async (batch envs/2)",
        "gym_async": "gymnasium AsyncVectorEnv (shm), Gymnasium's AtariPreprocessing",
        "sb3_subproc": "SB3 SubprocVecEnv + VecFrameStack",
        "single": "single env (pararl's preprocessing), plain loop",
    }[name]


@dataclass(frozen=True)
class Case:
    """One point of the sweep: a game, workers (threads for EnvPool and ale-py) and
    envs per worker."""

    env_id: str  # Gymnasium's id, e.g. ALE/Pong-v5
    workers: int
    envs_per_worker: int
    seed: int

    @property
    def num_envs(self) -> int:
        return self.workers * self.envs_per_worker

    @property
    def game(self) -> str:
        """ale-py's ROM name: ALE/Pong-v5 -> pong."""
        name = self.env_id.split("/")[-1].split("-")[0].removesuffix("NoFrameskip")
        return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")

    @property
    def envpool_id(self) -> str:
        """EnvPool's id: ALE/Pong-v5 -> Pong-v5."""
        return self.env_id.split("/")[-1].split("-")[0].removesuffix("NoFrameskip") + "-v5"


class PipeBytes:
    """Bytes of the pickled messages through `conns` (parent ends), both ways.

    `Connection.send` pickles and hands the bytes to `_send_bytes`; `recv` takes them
    from `_recv_bytes` before unpickling. Wrapping these two on the instances counts
    every message's payload (the 4-byte length header aside) and nothing else."""

    def __init__(self, conns: Sequence[Connection]) -> None:
        self.sent = self.received = 0
        for conn in conns:
            send, recv = conn._send_bytes, conn._recv_bytes  # type: ignore[attr-defined]
            conn._send_bytes = functools.partial(self._send, send)  # type: ignore[attr-defined]
            conn._recv_bytes = functools.partial(self._recv, recv)  # type: ignore[attr-defined]

    def _send(self, send: Callable[[Any], None], buf: Any) -> None:
        self.sent += memoryview(buf).nbytes
        send(buf)

    def _recv(self, recv: Callable[..., Any], *args: Any) -> Any:
        buf = recv(*args)
        self.received += buf.getbuffer().nbytes
        return buf

    @property
    def total(self) -> int:
        return self.sent + self.received


class Single(stepping.Single):
    """One preprocessed env in this process, reset on episode end."""

    def __init__(self, case: Case) -> None:
        self.env, self.seed = env_factory(case.env_id)(), case.seed
        self.actions = list(actions(self.env.action_space, None, case.seed))


class Batched:
    """EnvPool's and ale-py's async stepping: `recv` gives `batch` envs (their ids in
    `info["env_id"]`), `send` steps exactly those. A block ends after a `recv`, so
    between blocks only the envs not yet returned finish their steps (a few ms)."""

    def __init__(self, venv: Any, batch: int, acts: np.ndarray, start: Callable[[], Any]) -> None:
        self.venv, self.unit, self.actions, self.start = venv, batch, acts, start
        self.ids: np.ndarray | None = None
        self.i = 0

    def reset(self) -> None:
        result = self.start()  # EnvPool: async_reset() -> None; ale-py: reset() -> B envs
        self.ids = None if result is None else result[1]["env_id"]

    def send(self, acts: np.ndarray, ids: np.ndarray) -> None:
        self.venv.send(acts, ids)

    def run(self, steps: int) -> int:
        acts, pool, done = self.actions, len(self.actions), 0
        while done < steps:
            if self.ids is not None:
                self.send(acts[self.i % pool], self.ids)
                self.i += 1
            self.ids = self.venv.recv()[4]["env_id"]
            done += self.unit
        return done


class AleBatched(Batched):
    """ale-py's `send` takes no ids: it steps the envs of the last `recv`."""

    def send(self, acts: np.ndarray, ids: np.ndarray) -> None:
        self.venv.send(acts)


def gym_env(env_id: str) -> gym.Env:
    """Gymnasium's own preprocessing with the same settings: `AtariPreprocessing` (which
    steps `AtariEnv` once per frame) and `FrameStackObservation`, FIRE at reset."""
    register_atari()
    env = gym.make(env_id, frameskip=1, repeat_action_probability=0.0,
                   max_num_frames_per_episode=MAX_FRAMES)  # fmt: skip
    env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84,
                                          grayscale_obs=True, scale_obs=False)  # fmt: skip
    env = FireReset(env) if needs_fire(env) else env
    return gym.wrappers.FrameStackObservation(env, 4)


def sb3_env(env_id: str) -> gym.Env:
    """SB3's AtariWrapper with EnvPool's settings (no life loss, no clipping)."""
    from stable_baselines3.common.atari_wrappers import AtariWrapper

    register_atari()
    env = gym.make(env_id, frameskip=1, repeat_action_probability=0.0,
                   max_num_frames_per_episode=MAX_FRAMES)  # fmt: skip
    return AtariWrapper(env, noop_max=30, frame_skip=4, screen_size=84,
                        terminal_on_life_loss=False, clip_reward=False)  # fmt: skip


def threaded(name: str, case: Case) -> Runner:
    """EnvPool's or ale-py's C++ vector env, `workers` threads, sync or async."""
    n, w, seed = case.num_envs, case.workers, case.seed
    batch = n // 2 if name in HALF_BATCH else n
    if name in ENVPOOL:
        import envpool

        venv: Any = envpool.make(
            case.envpool_id, env_type="gymnasium", num_envs=n, batch_size=batch,
            num_threads=w, seed=seed, episodic_life=False, reward_clip=False, noop_max=30,
            stack_num=4, img_height=84, img_width=84, gray_scale=True, frame_skip=4,
            repeat_action_probability=0.0, use_fire_reset=True, max_episode_steps=MAX_FRAMES // 4,
        )  # fmt: skip
        acts = actions(venv.action_space, batch, seed)
        if batch == n:
            return VectorStep(venv, n, acts, venv.reset)
        return Batched(venv, batch, acts, venv.async_reset)
    from ale_py.vector_env import AtariVectorEnv

    venv = AtariVectorEnv(
        case.game, n, batch_size=batch, num_threads=w, noop_max=30, stack_num=4,
        img_height=84, img_width=84, grayscale=True, frameskip=4, maxpool=True,
        repeat_action_probability=0.0, use_fire_reset=True, episodic_life=False,
        reward_clipping=False, max_num_frames_per_episode=MAX_FRAMES,
    )  # fmt: skip
    acts = actions(venv.single_action_space, batch, seed)
    if batch == n:
        return VectorStep(venv, n, acts, functools.partial(venv.reset, seed=seed))
    return AleBatched(venv, batch, acts, functools.partial(venv.reset, seed=seed))


def open_backend(name: str, case: Case) -> tuple[Runner, PipeBytes | None, Callable[[], None]]:
    """The runner of `name` for `case`, the counter on its pipes (None: no pipes) and
    what closes it."""
    n, seed = case.num_envs, case.seed
    if name == "single":
        single = Single(case)
        return single, None, single.env.close
    if name in THREADED:
        runner: Any = threaded(name, case)
        return runner, None, runner.venv.close
    fns: list[Callable[[], gym.Env]] = [env_factory(case.env_id)] * n
    if name in PARARL:
        from pararl.vector import ParallelVectorEnv

        spin = 0.0 if name == "pararl_nospin" else SPIN_S  # 0: a worker blocks at once
        venv: Any = ParallelVectorEnv(fns, num_workers=case.workers, spin_s=spin)
        pipes = PipeBytes(venv._transport.group.conns)  # the parent ends (private)
        acts = actions(venv.single_action_space, n, seed)
        if name != "pararl_partial":
            return (
                VectorStep(venv, n, acts, functools.partial(venv.reset, seed=seed)),
                pipes,
                venv.close,
            )
        return Partial(venv, acts, seed, min_envs=max(1, n // 2)), pipes, venv.close
    if name == "gym_async":
        from gymnasium.vector import AsyncVectorEnv

        gym_fns = [functools.partial(gym_env, case.env_id)] * n
        venv = AsyncVectorEnv(gym_fns, shared_memory=True)
        pipes = PipeBytes(venv.parent_pipes)
        acts = actions(venv.single_action_space, n, seed)
        return (
            VectorStep(venv, n, acts, functools.partial(venv.reset, seed=seed)),
            pipes,
            venv.close,
        )
    from stable_baselines3.common.vec_env import SubprocVecEnv, VecFrameStack

    sb3_fns = [functools.partial(sb3_env, case.env_id)] * n
    inner = SubprocVecEnv(sb3_fns, start_method="fork")  # type: ignore[arg-type]
    venv = VecFrameStack(inner, n_stack=4)  # stacks in this process, as SB3's Atari setup
    pipes = PipeBytes(inner.remotes)
    acts = actions(venv.action_space, n, seed)
    return VectorStep(venv, n, acts, lambda: (venv.seed(seed), venv.reset())), pipes, venv.close


@dataclass
class Block:
    """One timed block: agent steps, wall seconds, CPU seconds of the calling thread
    and of the whole calling process (which holds EnvPool's and ale-py's env threads
    too), and the pipe bytes both ways (None: the backend has no pipes)."""

    steps: int
    wall_s: float
    thread_cpu_s: float
    process_cpu_s: float
    pipe_bytes: int | None


def timed_block(runner: Runner, steps: int, pipes: PipeBytes | None) -> Block:
    bytes_before = pipes.total if pipes else 0
    wall, thread, process = time.perf_counter(), time.thread_time(), time.process_time()
    done = runner.run(steps)
    wall, thread = time.perf_counter() - wall, time.thread_time() - thread
    process = time.process_time() - process
    return Block(done, wall, thread, process, pipes.total - bytes_before if pipes else None)


def driver(conn: Connection, name: str, case: Case, warmup_steps: int) -> None:
    """A backend's process: build it (reply: None, or why it failed), then serve
    ("calibrate", block_s) -> steps per block and ("block", steps) -> `Block` until
    ("close", _). Runs under `pararl.mp.procs.ProcessGroup`."""
    try:
        runner, pipes, close = open_backend(name, case)
        runner.reset()
        runner.run(max(warmup_steps, 1) * runner.unit)
    except Exception as exc:
        conn.send((True, f"{type(exc).__name__}: {exc}"))
        return
    try:
        conn.send((True, None))
        while (msg := conn.recv())[0] != "close":
            if msg[0] == "calibrate":
                conn.send((True, calibrate(runner, msg[1])))
            else:
                conn.send((True, timed_block(runner, msg[1], pipes)))
    finally:
        close()
