"""`python -m benchmarks atari`: Atari samplers stepped with random actions, pararl
against EnvPool, ale-py, Gymnasium and SB3 with the preprocessing `pararl.envs.atari`
states; each backend in a driver process of its own (`lib.stepping`), timed in
interleaved blocks.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

import gymnasium as gym
import numpy as np

from benchmarks.lib import harness as h
from benchmarks.lib import stepping
from benchmarks.lib.stepping import SEED, Case, Partial, PipeBytes, Single, VectorStep, actions
from pararl.envs.atari import FireReset, is_atari, needs_fire, register_atari
from pararl.envs.make import env_factory
from pararl.mp.listen import SPIN_S

Backend = Literal["pararl_step", "pararl_nospin", "pararl_partial", "envpool_sync",
                  "envpool_async", "ale_sync", "ale_async", "gym_async", "sb3_subproc",
                  "single"]  # fmt: skip
BACKENDS: tuple[Backend, ...] = get_args(Backend)
PARARL: tuple[Backend, ...] = ("pararl_step", "pararl_nospin", "pararl_partial")
ENVPOOL: tuple[Backend, ...] = ("envpool_sync", "envpool_async")
ALE: tuple[Backend, ...] = ("ale_sync", "ale_async")
HALF_BATCH = frozenset({"pararl_partial", "envpool_async", "ale_async"})  # need >= 2 envs
MAX_FRAMES = 108_000  # the episode cap of EnvPool, ale-py and pararl (27,000 agent steps)
FRAME_SKIP = 4  # emulator frames per agent step
TARGETS = {"envpool": 0.9, "ale": 1.0, "gym_async": 2.0}  # pararl ÷ best of each
MODULES = {  # what each backend imports (SB3 brings torch: seconds), once before the drivers
    "envpool": ("envpool",),
    "ale": ("ale_py.vector_env",),
    "sb3": ("stable_baselines3.common.vec_env", "stable_baselines3.common.atari_wrappers"),
    "pararl": ("pararl.vector",),
    "gym": ("gymnasium.vector",),
}
LABELS = {
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
}


@dataclass(frozen=True)
class Config(h.Options):
    """Atari samplers: pararl against EnvPool, ale-py's vector env, Gymnasium, SB3.
    --quick: Pong, 2 workers × 1 env, 2 short blocks per backend (< 1 min)."""

    envs: tuple[str, ...] = ("ALE/Pong-v5", "ALE/Breakout-v5")  # Gymnasium ids of ale-py games.
    workers: tuple[int, ...] = (1, 2)  # pararl's processes, EnvPool's and ale-py's threads.
    envs_per_worker: tuple[int, ...] = (1, 2, 4, 8)  # Sweep of envs per worker.
    backends: tuple[Backend, ...] = BACKENDS  # Backends to time (the async ones need 2+ envs).
    repeats: int = 5  # Timed blocks per backend and case, interleaved across backends.
    block_s: float = 0.5  # Target seconds per timed block (its steps from a calibration).


QUICK = {"envs": ("ALE/Pong-v5",), "workers": (2,), "envs_per_worker": (1,), "repeats": 2,
         "block_s": 0.05}  # fmt: skip
WARMUP = 20  # untimed vector steps after reset, before calibration


def resolve(config: Config) -> Config:
    c = h.apply_quick(config, QUICK)
    c = replace(c, workers=tuple(sorted(set(c.workers))),
                envs_per_worker=tuple(sorted(set(c.envs_per_worker))))  # fmt: skip
    h.require(c, ">= 1: envs workers envs_per_worker backends repeats", "> 0: block_s")
    h.check(
        [(not register_atari(), "the Atari benchmark needs ale-py: pip install 'pararl[atari]'")]
    )
    h.check((not is_atari(e), f"--envs: '{e}' is not an ale-py game") for e in c.envs)
    return c


# --- the backends -----------------------------------------------------------------------


def game(env_id: str) -> str:
    """ale-py's ROM name: ALE/Pong-v5 -> pong."""
    name = env_id.split("/")[-1].split("-")[0].removesuffix("NoFrameskip")
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def envpool_id(env_id: str) -> str:
    """EnvPool's id: ALE/Pong-v5 -> Pong-v5."""
    return env_id.split("/")[-1].split("-")[0].removesuffix("NoFrameskip") + "-v5"


class Batched:
    """EnvPool's and ale-py's async stepping: `recv` gives `batch` envs (their ids in
    `info["env_id"]`), `send` steps exactly those (ale-py's `send` takes no ids: it
    steps the envs of the last `recv`). A block ends after a `recv`, so between blocks
    only the envs not yet returned finish their steps (a few ms)."""

    def __init__(self, venv: Any, batch: int, acts: np.ndarray, start: Callable[[], Any],
                 ids: bool) -> None:  # fmt: skip
        self.venv, self.unit, self.actions, self.start = venv, batch, acts, start
        self.send_ids, self.ids, self.i = ids, None, 0

    def reset(self) -> None:
        result = self.start()  # EnvPool: async_reset() -> None; ale-py: reset() -> B envs
        self.ids = None if result is None else result[1]["env_id"]

    def run(self, steps: int) -> int:
        acts, pool, done = self.actions, len(self.actions), 0
        while done < steps:
            if self.ids is not None:
                chosen = acts[self.i % pool]
                if self.send_ids:
                    self.venv.send(chosen, self.ids)
                else:
                    self.venv.send(chosen)
                self.i += 1
            self.ids = self.venv.recv()[4]["env_id"]
            done += self.unit
        return done


def raw_atari(env_id: str) -> gym.Env:
    """The game stepped one frame at a time, no sticky actions, EnvPool's episode cap."""
    register_atari()
    return gym.make(env_id, frameskip=1, repeat_action_probability=0.0,
                    max_num_frames_per_episode=MAX_FRAMES)  # fmt: skip


def gym_env(env_id: str) -> gym.Env:
    """Gymnasium's own preprocessing with the same settings: `AtariPreprocessing` and
    `FrameStackObservation`, FIRE at reset."""
    env: gym.Env = gym.wrappers.AtariPreprocessing(raw_atari(env_id), noop_max=30,
                                                   screen_size=84, scale_obs=False)  # fmt: skip
    env = FireReset(env) if needs_fire(env) else env
    return gym.wrappers.FrameStackObservation(env, 4)


def sb3_env(env_id: str) -> gym.Env:
    """SB3's AtariWrapper with EnvPool's settings (no life loss, no clipping)."""
    from stable_baselines3.common.atari_wrappers import AtariWrapper

    return AtariWrapper(raw_atari(env_id), noop_max=30, frame_skip=4, screen_size=84,
                        terminal_on_life_loss=False, clip_reward=False)  # fmt: skip


def threaded(name: str, case: Case) -> Any:
    """EnvPool's or ale-py's C++ vector env, `workers` threads, sync or async."""
    n, w = case.num_envs, case.workers
    batch = n // 2 if name in HALF_BATCH else n
    if name in ENVPOOL:
        import envpool

        venv: Any = envpool.make(
            envpool_id(case.env_id), env_type="gymnasium", num_envs=n, batch_size=batch,
            num_threads=w, seed=SEED, episodic_life=False, reward_clip=False, noop_max=30,
            stack_num=4, img_height=84, img_width=84, gray_scale=True, frame_skip=4,
            repeat_action_probability=0.0, use_fire_reset=True, max_episode_steps=MAX_FRAMES // 4,
        )  # fmt: skip
        acts, reset, start = actions(venv.action_space, batch), venv.reset, venv.async_reset
    else:
        from ale_py.vector_env import AtariVectorEnv

        venv = AtariVectorEnv(
            game(case.env_id), n, batch_size=batch, num_threads=w, noop_max=30, stack_num=4,
            img_height=84, img_width=84, grayscale=True, frameskip=4, maxpool=True,
            repeat_action_probability=0.0, use_fire_reset=True, episodic_life=False,
            reward_clipping=False, max_num_frames_per_episode=MAX_FRAMES,
        )  # fmt: skip
        acts = actions(venv.single_action_space, batch)
        reset = start = functools.partial(venv.reset, seed=SEED)
    if batch == n:
        return VectorStep(venv, n, acts, reset)
    return Batched(venv, batch, acts, start, ids=name in ENVPOOL)


def open_backend(name: str, case: Case) -> stepping.Opened:
    """Backend `name` for `case`, in its driver (`stepping.driver`)."""
    n = case.num_envs
    if name == "single":
        single = Single(env_factory(case.env_id)())
        return single, None, single.env.close
    if name in (*ENVPOOL, *ALE):
        runner: Any = threaded(name, case)
        return runner, None, runner.venv.close
    if name in PARARL:
        from pararl.vector import ParallelVectorEnv

        spin = 0.0 if name == "pararl_nospin" else SPIN_S  # 0: a worker blocks at once
        fns = [env_factory(case.env_id)] * n
        venv: Any = ParallelVectorEnv(fns, num_workers=case.workers, spin_s=spin)
        pipes = PipeBytes(venv._transport.group.conns)  # the parent ends (private)
        acts = actions(venv.single_action_space, n)
        runner = (
            Partial(venv, acts, min_envs=max(1, n // 2)) if name == "pararl_partial"
            else VectorStep(venv, n, acts, functools.partial(venv.reset, seed=SEED))
        )  # fmt: skip
        return runner, pipes, venv.close
    if name == "gym_async":
        from gymnasium.vector import AsyncVectorEnv

        venv = AsyncVectorEnv([functools.partial(gym_env, case.env_id)] * n, shared_memory=True)
        acts = actions(venv.single_action_space, n)
        reset = functools.partial(venv.reset, seed=SEED)
        return VectorStep(venv, n, acts, reset), PipeBytes(venv.parent_pipes), venv.close
    from stable_baselines3.common.vec_env import SubprocVecEnv, VecFrameStack

    inner = SubprocVecEnv([functools.partial(sb3_env, case.env_id)] * n, start_method="fork")
    venv = VecFrameStack(inner, n_stack=4)  # stacks in this process, as SB3's Atari setup
    acts = actions(venv.action_space, n)
    runner = VectorStep(venv, n, acts, lambda: (venv.seed(SEED), venv.reset()))
    return runner, PipeBytes(inner.remotes), venv.close


# --- the sweep --------------------------------------------------------------------------


@dataclass
class Cell(stepping.Cell):
    """One backend at one point of the sweep; its rate in agent steps/s."""

    vs_envpool: float | None = None  # ÷ the best EnvPool cell of the same game and workers


@dataclass
class GameResult:
    env_id: str
    cells: list[Cell] = field(default_factory=list)

    def best(self, backends: tuple[str, ...], workers: int) -> Cell | None:
        """The fastest measured cell of `backends` at `workers`, any envs per worker."""
        rated = [c for c in self.cells if c.backend in backends and c.workers == workers and c.rate]
        return max(rated, key=lambda c: h.med(c.rate) or 0.0) if rated else None


@dataclass
class Results:
    games: list[GameResult]


def missing(backend: str) -> str | None:
    """Why `backend` cannot run here (its package is not installed), or None."""
    package = {"envpool": "envpool", "sb3": "stable_baselines3"}.get(backend.split("_")[0])
    if package is None or importlib.util.find_spec(package) is not None:
        return None
    return f"{package} is not installed: pip install 'pararl[bench]'"


def measure(c: Config, meta: h.Metadata) -> Results:
    meta.versions |= {p: h._version(p) for p in ("ale-py", "envpool")}
    for family in {b.split("_")[0] for b in c.backends}:  # imported once, before the forks
        for module in MODULES.get(family, ()):
            if importlib.util.find_spec(module.split(".")[0]) is not None:
                importlib.import_module(module)
    results = Results([GameResult(env_id) for env_id in c.envs])
    for result in results.games:
        for workers in c.workers:
            for epw in c.envs_per_worker:
                case = Case(result.env_id, workers, epw)
                cells: dict[str, Cell] = {
                    b: Cell(workers, epw, case.num_envs, b, LABELS[b]) for b in c.backends
                }
                for cell in cells.values():
                    why = missing(cell.backend)
                    if cell.backend in HALF_BATCH and case.num_envs < 2:
                        why = "needs 2 envs or more"
                    if why:
                        cell.status, cell.note = "skipped", why
                stepping.measure_case(case, cells, open_backend, WARMUP, c.block_s, c.repeats)
                result.cells += cells.values()
        for cell in result.cells:
            best = result.best(ENVPOOL, cell.workers)
            cell.vs_envpool = h.ratio(cell.rate, best.rate if best else None)
    return results


# --- report -----------------------------------------------------------------------------


def us(value: float | None) -> str:
    return h.fmt_num(value, 0 if value is not None and value >= 100 else 1)


CELL_COLUMNS: list[h.Col[Cell]] = [
    h.Col("workers", lambda c: c.workers),
    h.Col("envs/worker", lambda c: c.envs_per_worker),
    h.Col("envs", lambda c: c.num_envs),
    h.Col("backend", lambda c: c.label, "l"),
    h.Col("agent steps/s (min–max)", lambda c: h.fmt_spread(c.rate) if c.rate
          else f"{c.status} ({c.note})"),
    h.Col("frames/s", lambda c: h.fmt_rate(c.rate.median * FRAME_SKIP if c.rate else None)),
    h.Col("vs best EnvPool", lambda c: h.fmt_ratio(c.vs_envpool)),
    h.Col("caller CPU µs/step: thread", lambda c: us(c.thread_cpu_us)),
    h.Col("process", lambda c: us(c.process_cpu_us)),
    h.Col("pipe bytes/step", lambda c: "no pipes" if c.rate and c.pipe_bytes is None
          else h.fmt_num(c.pipe_bytes, 0)),
]  # fmt: skip
ANCHORS = {"envpool": ("EnvPool", ENVPOOL), "ale": ("ale-py", ALE),
           "gym_async": ("Async", ("gym_async",))}  # fmt: skip
Target = tuple[GameResult, int]  # a game at a worker count


def ratio(t: Target, anchor: str) -> float | None:
    """pararl's best cell at the worker count against the anchor's best."""
    ours, theirs = (t[0].best(b, t[1]) for b in (PARARL, ANCHORS[anchor][1]))
    return h.ratio(ours.rate if ours else None, theirs.rate if theirs else None)


def where(cell: Cell | None) -> str:
    if cell is None or cell.rate is None:
        return "–"
    return f"{h.fmt_rate(cell.rate.median)} ({cell.label}, {cell.envs_per_worker}/worker)"


def versus(t: Target, anchor: str) -> str:
    value, goal = ratio(t, anchor), TARGETS[anchor]
    return "–" if value is None else f"{value:.2f}× ({'met' if value >= goal else 'missed'})"


TARGET_COLUMNS: list[h.Col[Target]] = [
    h.Col("game", lambda t: t[0].env_id, "l"),
    h.Col("workers", lambda t: t[1]),
    h.Col("best pararl", lambda t: where(t[0].best(PARARL, t[1])), "l"),
    h.Col("best EnvPool", lambda t: where(t[0].best(ENVPOOL, t[1])), "l"),
    h.Col(f"pararl ÷ EnvPool (≥ {TARGETS['envpool']})", lambda t: versus(t, "envpool")),
    h.Col("best ale-py", lambda t: where(t[0].best(ALE, t[1])), "l"),
    h.Col(f"÷ ale-py (≥ {TARGETS['ale']})", lambda t: versus(t, "ale")),
    h.Col("best AsyncVectorEnv", lambda t: where(t[0].best(("gym_async",), t[1])), "l"),
    h.Col(f"÷ Async (≥ {TARGETS['gym_async']})", lambda t: versus(t, "gym_async")),
]
NOTES = (
    "Random actions; agent steps/s (frames/s = {skip} × that), median of the interleaved "
    "blocks with their min–max. Workers are pararl's processes and EnvPool's and "
    "ale-py's threads; Gymnasium and SB3 run one process per env. Vs best EnvPool: ÷ the "
    "fastest EnvPool cell (either mode, any envs/worker) of the same game and workers. "
    "Caller CPU: CPU time per agent step of the process that steps the sampler, its "
    "calling thread and the whole process (EnvPool's and ale-py's env threads live in "
    "it). Pipe bytes: pickled messages both ways through the sampler's pipes per agent "
    "step. This machine has {cores} cores, shared with other work: more workers than "
    "cores (or Gymnasium's and SB3's one process per env) oversubscribe it, and the "
    "absolute numbers move from run to run; the ratios within one run are what to read."
)


def report(results: Results, meta: h.Metadata) -> h.Report:
    found = [(r, w) for r in results.games for w in sorted({c.workers for c in r.cells})]
    parts = []
    for t in found:
        if t[0].best(PARARL, t[1]) is None:
            continue
        ratios = ", ".join(f"{value:.2f}× best {name}" for a, (name, _) in ANCHORS.items()
                           if (value := ratio(t, a)) is not None)  # fmt: skip
        workers = f"{t[1]} worker{'s' * (t[1] > 1)}"
        parts.append(f"**{t[0].env_id.split('/')[-1]}, {workers}**: {ratios or '–'}")
    notes = NOTES.format(skip=FRAME_SKIP, cores=meta.physical_cores)
    summary = (
        "### Targets\n\npararl's best cell (step or send/recv, any envs/worker) against each "
        f"anchor's best at the same workers.\n\n{h.table(TARGET_COLUMNS, found)}"
    )
    blocks = [
        f"### {r.env_id}\n\n{notes}\n\n{h.table(CELL_COLUMNS, r.cells)}" for r in results.games
    ]

    def panel(r: GameResult, workers: int) -> Any:
        """At `workers`; dashed: the single env's median rate."""
        cells = [c for c in r.cells if c.workers == workers]
        singles = [c.rate.median for c in cells if c.backend == "single" and c.rate]
        line = (statistics.median(singles), LABELS["single"]) if singles else None
        title = f"{r.env_id}, {workers} worker{'s' * (workers > 1)}"
        return stepping.panel(title, cells, LABELS.__getitem__, "agent steps / s", line)

    return h.Report(
        f"Atari sampler (`{h.PROG} atari`)",
        "; ".join(parts) or "no pararl results",
        [summary, *blocks],
        [panel(r, w) for r, w in found],
        "agent steps/s against envs per worker",
        legend_below=True,
    )
