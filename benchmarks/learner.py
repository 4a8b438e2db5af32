"""`python -m benchmarks learner`: the learners alone (DQN, PPO, SAC updates on random
data) against SB3's own `train()` with the same network, batch and optimizer, and
against the FLOP floor of this machine's GEMM peak.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np

from benchmarks.lib import harness as h
from benchmarks.lib.figures import Panel, Series

Case = Literal[
    "dqn-mlp", "dqn-minatar", "dqn-nature", "ppo-mlp", "ppo-minatar", "ppo-nature", "sac-mlp"
]
CASES: tuple[Case, ...] = get_args(Case)
Setting = Literal["off", "on", "auto"]
SEED = 0  # of the data, the networks and the draws
PPO_ENVS = 8  # the rollout's envs (pararl: 2 workers x 4; SB3: 8 DummyVecEnv envs)


@dataclass(frozen=True)
class Shape:
    """A case's observations and actions, and the network both systems build for them."""

    obs: tuple[int, ...]
    obs_dtype: str  # float32 | bool | uint8
    actions: int  # Discrete(n), or the dimension of a Box
    discrete: bool
    model: str


SHAPES: dict[str, Shape] = {
    "mlp-dqn": Shape((4,), "float32", 2, True, "mlp"),  # CartPole MLP 256x256
    "minatar": Shape((10, 10, 4), "bool", 3, True, "minatar-cnn"),  # Breakout's planes
    "nature": Shape((4, 84, 84), "uint8", 6, True, "nature-cnn"),
    "mlp-ppo": Shape((17,), "float32", 6, False, "mlp"),  # 64x64 tanh MLPs (HalfCheetah)
    "mlp-sac": Shape((17,), "float32", 6, False, "mlp"),  # 256x256 actor, twin critics
}


def shape_of(case: str) -> Shape:
    kind = case.split("-", 1)[1]
    return SHAPES[f"mlp-{case[:3]}" if kind == "mlp" else kind]


@dataclass(frozen=True)
class Config(h.Options):
    """Updates/s of pararl's learners alone against SB3's train() and the FLOP floor.
    --quick: small memories, few updates, one round."""

    cases: tuple[Case, ...] = CASES  # Which learners: an algorithm on a network.
    compile: tuple[Setting, ...] = ("off", "on", "auto")  # `--compile`s, one per step mode.
    prioritized: bool = True  # DQN and SAC also with prioritized replay (SB3 has none).
    device: Literal["auto", "cpu", "cuda"] = "auto"  # Where they run (`auto`: CUDA if present).
    threads: int = 1  # torch threads (the learner of a 2-core run has one core; 0: all).
    seconds: float = 2.0  # Target length of a timed spell (its updates: the warm-up's rate).
    repeats: int = 3  # Interleaved spells per system (median, min and max reported).
    memory: int = 10_000  # Transitions in each DQN replay memory.


def resolve(config: Config) -> Config:
    quick = {"memory": 1_000, "seconds": 0.3, "repeats": 1, "cases": ("dqn-minatar", "ppo-mlp")}
    c = h.apply_quick(config, quick)
    h.require(c, "> 0: seconds repeats memory", ">= 0: threads")
    h.check([(not c.cases, "--cases needs at least one case")])
    return c


@dataclass
class Split:
    """Where one update's time goes, from a profiled spell (`SPLIT_NOTE`)."""

    matrix_ms: float
    other_ms: float
    outside_ms: float
    calls: float


@dataclass
class Row:
    """One learner (case, sampling) under one system."""

    case: str
    sampling: str  # uniform | prioritized | rollout
    system: str  # pararl eager | pararl compile | ... | SB3
    batch: int
    updates_per_s: h.Summary | None = None
    setup_s: float | None = None  # compile / record / first call, beyond a plain update
    flops: float | None = None  # per update, forward + backward
    gflops: float | None = None  # achieved, at the median rate
    floor_ms: float | None = None  # flops / the peak at the run's threads
    vs_sb3: float | None = None
    vs_eager: float | None = None
    split: Split | None = None  # where an update's time goes (CPU, profiled)
    note: str = ""


@dataclass
class Results:
    device: str
    gpu: str | None
    threads: int
    peak_gflops: dict[str, float]  # "1 thread", "N threads", "cuda"
    rows: list[Row] = field(default_factory=list)


def gemm_peak(device: Any, threads: int, size: int = 512, seconds: float = 0.5) -> float:
    """fp32 GFLOP/s of a square matmul (the best of a few spells)."""
    import torch

    from pararl.intraop import torch_threads

    with torch_threads(threads):
        a = torch.randn(size, size, device=device)
        b = torch.randn(size, size, device=device)
        best = 0.0
        for _ in range(5):
            n, start = 0, time.perf_counter()
            while n == 0 or time.perf_counter() - start < seconds / 5:
                torch.mm(a, b)
                n += 1
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
            best = max(best, 2 * size**3 * n / (time.perf_counter() - start) / 1e9)
        return best


def threads_label(n: int) -> str:
    return f"{n} thread{'s' * (n > 1)}"


# --- random data in pararl's formats, and SB3's -----------------------------------------


def spaces(shape: Shape) -> tuple[Any, Any]:
    import gymnasium as gym

    dtype = np.dtype(shape.obs_dtype)
    obs = gym.spaces.Box(0, 255 if dtype == np.uint8 else 1, shape.obs, dtype)
    if shape.discrete:
        return obs, gym.spaces.Discrete(shape.actions)
    return obs, gym.spaces.Box(-1.0, 1.0, (shape.actions,), np.float32)


def random_obs(shape: Shape, n: int, rng: np.random.Generator) -> np.ndarray:
    dtype = np.dtype(shape.obs_dtype)
    if dtype == np.uint8:
        return rng.integers(0, 256, (n, *shape.obs), dtype=np.uint8)
    if dtype == np.bool_:
        return rng.random((n, *shape.obs)) < 0.1
    return rng.standard_normal((n, *shape.obs)).astype(np.float32)


def random_actions(shape: Shape, n: int, rng: np.random.Generator) -> np.ndarray:
    """Action indices, or actions within [-1, 1]."""
    if shape.discrete:
        return rng.integers(0, shape.actions, n)
    return rng.uniform(-1, 1, (n, shape.actions)).astype(np.float32)


def pararl_replay(case: str, mode: str, prioritized: bool, c: Config, device: str) -> Any:
    """A DQN or SAC state of this case (its run's defaults; CartPole's DQN 256x256) with a
    full memory: frames as an actor adds them for image stacks, else random transitions."""
    import torch

    from benchmarks.handwritten import fill
    from pararl.algos.dqn import DQNState
    from pararl.algos.sac import SACState
    from pararl.config import DQNConfig, SACConfig, env_kind
    from pararl.replay.nstep import Transitions

    shape = shape_of(case)
    obs_space, act_space = spaces(shape)
    torch.manual_seed(SEED)
    stack = shape.obs[0] if shape.obs_dtype == "uint8" else 0
    kind, where = env_kind(obs_space, act_space), torch.device(device)
    options: dict[str, Any] = dict(env=case, compile=mode, prioritized=prioritized, device=device)
    if case.startswith("sac"):
        state: Any = SACState(SACConfig(**options).for_env(kind), obs_space, act_space, where)
    else:
        hidden = (256, 256) if case == "dqn-mlp" else DQNConfig.hidden
        filled = DQNConfig(**options, hidden=hidden).for_env(kind)
        state = DQNState(filled, obs_space, act_space, where, frame_stack=stack)
    rng, n, s = np.random.default_rng(SEED), c.memory, state.settings
    if stack:
        fill(state.replay, n, "frames", shape.obs, seed=SEED)
    else:
        obs, next_obs = random_obs(shape, n, rng), random_obs(shape, n, rng)
        actions, rewards = random_actions(shape, n, rng), rng.standard_normal(n).astype(np.float32)
        discounts = np.full(n, s.gamma**s.n_step, np.float32)
        state.replay.add(Transitions(obs, actions, rewards, next_obs, discounts))
    state.env_steps = max(c.memory, s.learning_starts)
    return state


def sb3_model(case: str, c: Config, device: str) -> Any:
    """SB3's DQN, PPO or SAC with this case's settings (pararl's, as `lib.sb3` reads them)
    and network, its replay memory or rollout buffer full of random data."""
    import gymnasium as gym
    import torch
    from stable_baselines3 import DQN, PPO, SAC
    from stable_baselines3.common.env_util import make_vec_env

    from benchmarks.lib import sb3
    from pararl.config import DQNConfig, PPOConfig, env_kind

    shape, algo = shape_of(case), case[:3]
    obs_space, act_space = spaces(shape)

    class Spaces(gym.Env):  # SB3 reads the spaces only: nothing is stepped
        observation_space, action_space = obs_space, act_space

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            return obs_space.sample(), {}

    kind = env_kind(obs_space, act_space)
    policy, net = "MlpPolicy", {"net_arch": [256, 256]} if algo == "dqn" else {}
    if shape.model == "minatar-cnn":
        net = sb3.minatar_policy()
    elif shape.model == "nature-cnn":
        policy, net = "CnnPolicy", {}
    rng, n = np.random.default_rng(SEED), c.memory
    common: dict[str, Any] = {"device": device, "seed": SEED}
    if algo == "ppo":  # its default: separate 64x64 tanh MLPs, as pararl's
        settings = sb3.ppo_settings(PPOConfig(env=case).for_env(kind).config)
        envs = make_vec_env(Spaces, n_envs=PPO_ENVS)
        model: Any = sb3.silent(PPO(policy, envs, **common, **settings, policy_kwargs=net))
        buf = model.rollout_buffer
        buf.reset()
        for _ in range(model.n_steps):
            values, logprobs = rng.standard_normal(PPO_ENVS), -1.0 - rng.random(PPO_ENVS)
            buf.add(random_obs(shape, PPO_ENVS, rng),
                    random_actions(shape, PPO_ENVS, rng).reshape(PPO_ENVS, -1),
                    rng.standard_normal(PPO_ENVS), np.zeros(PPO_ENVS, bool),
                    *(torch.as_tensor(x, dtype=torch.float32, device=device)
                      for x in (values, logprobs)))  # fmt: skip
        buf.compute_returns_and_advantage(last_values=torch.zeros(PPO_ENVS, device=device),
                                          dones=np.zeros(PPO_ENVS, bool))  # fmt: skip
        return model
    if algo == "dqn":
        hidden = (256, 256) if case == "dqn-mlp" else DQNConfig.hidden
        cfg = DQNConfig(env=case, device=device, hidden=hidden).for_env(kind).config  # type: ignore[arg-type]
        kwargs = sb3.dqn_settings(cfg, cfg.budget) | {"buffer_size": n, "learning_starts": 0}
        kwargs["policy_kwargs"] |= net
        model = DQN(policy, Spaces(), **common, **kwargs)
    else:
        kwargs = sb3.mujoco_sac(0, [256, 256]) | {"buffer_size": n}
        model = SAC("MlpPolicy", Spaces(), **common, **kwargs)
    buf = sb3.silent(model).replay_buffer
    buf.observations[:n, 0] = random_obs(shape, n, rng)
    buf.next_observations[:n, 0] = random_obs(shape, n, rng)
    buf.actions[:n, 0] = random_actions(shape, n, rng).reshape(n, -1)
    buf.rewards[:n, 0] = rng.standard_normal(n)
    buf.pos, buf.full = 0, True
    return model


# --- timing -------------------------------------------------------------------------


@dataclass
class Learner:
    """Something to time: `run(k)` does about k updates (PPO: whole rollouts) and returns
    how many it did."""

    row: Row
    run: Callable[[int], int]
    per_call: int  # updates one call of the underlying step does at least
    setup: Callable[[], float] | None = None  # pararl: the fused steps' own setup time
    rate: float = 0.0  # from the warm-up


# the operators whose own time is the matrix work FlopCounterMode counts
MATRIX_OPS = frozenset({
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::mkldnn_convolution",
    "aten::convolution_backward", "aten::_slow_conv2d_forward", "aten::_slow_conv2d_backward",
    "aten::mkldnn_linear", "aten::_mkldnn_convolution",
})  # fmt: skip


@contextlib.contextmanager
def no_native_stderr() -> Iterator[None]:
    """File descriptor 2 to /dev/null inside: the profiler's native library logs two lines
    a profile there, which no setting turns off."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def profile_split(learner: Learner, seconds: float) -> Split:
    """`learner`'s updates for about `seconds`, profiled (CPU): where the time goes."""
    from torch.profiler import ProfilerActivity, profile

    k = max(learner.per_call, int(learner.rate * seconds))
    with no_native_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
        wall_s, done = h.timed(functools.partial(learner.run, k))
    events = prof.key_averages()
    ops_ms = sum(e.self_cpu_time_total for e in events) / 1e3
    matrix_ms = sum(e.self_cpu_time_total for e in events if e.key in MATRIX_OPS) / 1e3
    calls = sum(e.count for e in events if e.key.startswith("aten::"))
    outside = max(0.0, 1e3 * wall_s - ops_ms)
    return Split(matrix_ms / done, (ops_ms - matrix_ms) / done, outside / done, calls / done)


def synced(device: str, fn: Callable[[int], int]) -> Callable[[int], int]:
    """`fn`, waited for on the device."""

    def run(k: int) -> int:
        done = fn(k)
        if device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()
        return done

    return run


def rollouts(step: Callable[[], Any], per: int) -> Callable[[int], int]:
    """`k` -> the `per`-update rollouts of `step` nearest `k` updates (at least one)."""

    def run(k: int) -> int:
        count = max(1, round(k / per))
        for _ in range(count):
            step()
        return count * per

    return run


def learners(case: str, c: Config, device: str, settings: dict[str, str]) -> list[Learner]:
    """pararl's learner of `case` under each step mode (`settings`: mode -> --compile) and
    sampling (a replay batch an update; PPO: a rollout's minibatch steps), then SB3's."""
    out: list[Learner] = []
    ppo = case.startswith("ppo")
    samplings = ["rollout"] if ppo else ["uniform", "prioritized"][: 1 + c.prioritized]
    for sampling in samplings:
        for mode, setting in settings.items():
            if ppo:
                state, per = pararl_ppo(case, setting, device)
                batch = random_rollout(shape_of(case), PPO_ENVS * state.settings.num_steps)
                step = functools.partial(state.learner.update, batch, np.random.default_rng(SEED))
                run, size = rollouts(step, per), state.settings.minibatch_size
            else:
                state = pararl_replay(case, setting, sampling == "prioritized", c, device)
                run, per, size = functools.partial(updates, state), 1, state.settings.batch_size
            row = Row(case, sampling, f"pararl {mode}", size)
            out.append(Learner(row, synced(device, run), per, functools.partial(setup_s, state)))
        if sampling != "prioritized":
            model = sb3_model(case, c, device)
            if ppo:
                per = model.n_epochs * (PPO_ENVS * model.n_steps // model.batch_size)
                run = rollouts(model.train, per)
            else:
                run, per = functools.partial(sb3_updates, model), 1
            out.append(
                Learner(Row(case, sampling, "SB3", model.batch_size), synced(device, run), per)
            )
    return out


def setup_s(state: Any) -> float:
    """Seconds a pararl learner's fused steps spent compiling and recording."""
    return float(state.learner.steps.setup_s)


def updates(state: Any, k: int) -> int:
    for _ in range(k):
        state.update()
    return k


def sb3_updates(model: Any, k: int) -> int:
    model.train(gradient_steps=k, batch_size=model.batch_size)
    return k


def pararl_ppo(case: str, mode: str, device: str) -> tuple[Any, int]:
    """A PPOState of this case (its run's defaults), and its updates per rollout."""
    import torch

    from pararl.config import PPOConfig, env_kind
    from pararl.runners.ppo_state import PPOState

    obs_space, act_space = spaces(shape_of(case))
    torch.manual_seed(SEED)
    cfg = PPOConfig(env=case, compile=mode, act_device="cpu", learn_device=device)  # type: ignore[arg-type]
    state = PPOState(cfg.for_env(env_kind(obs_space, act_space)), obs_space, act_space, PPO_ENVS)
    s = state.settings
    return state, s.update_epochs * max(1, PPO_ENVS * s.num_steps // s.minibatch_size)


def random_rollout(shape: Shape, n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(SEED)
    batch = {"obs": random_obs(shape, n, rng), "actions": random_actions(shape, n, rng),
             "logprobs": (-1.0 - rng.random(n)).astype(np.float32)}  # fmt: skip
    for key in ("values", "advantages", "returns"):
        batch[key] = rng.standard_normal(n).astype(np.float32)
    return batch


WARM_CALLS, WARM_ROLLOUTS = 6, 2  # past a fused step's warm-up (3 calls) and recording (4th)


def warm(learner: Learner, seconds: float) -> None:
    """First calls (compiling, recording, SB3's first train), their cost beyond plain
    updates kept; then the rate that sizes the spells."""
    calls = WARM_CALLS if learner.per_call == 1 else WARM_ROLLOUTS
    first, done = h.timed(functools.partial(learner.run, learner.per_call * calls))
    start, more = time.perf_counter(), 0
    while time.perf_counter() - start < seconds / 4 or more == 0:
        more += learner.run(learner.per_call)
    learner.rate = more / (time.perf_counter() - start)
    measured = learner.setup() if learner.setup else first - done / learner.rate
    learner.row.setup_s = max(0.0, measured)


def measure(c: Config, meta: h.Metadata) -> Results:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from pararl.algos.fused import resolve_step_mode
    from pararl.mp.topology import available_cpus

    device = "cuda" if c.device == "auto" and torch.cuda.is_available() else c.device
    device = "cpu" if device == "auto" else device
    if device == "cuda" and not torch.cuda.is_available():
        raise h.UsageError("--device cuda: torch sees no CUDA device")
    threads = c.threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else None
    settings: dict[str, str] = {}  # step mode -> the first --compile setting giving it
    for setting in c.compile:
        settings.setdefault(resolve_step_mode(setting, torch.device(device)), setting)
    meta.machine_note = f"; {threads} torch thread(s), learners on {gpu or 'the CPU'}"
    cores = len(available_cpus())
    peak_s, cpu = min(0.5, c.seconds), torch.device("cpu")
    peaks = {threads_label(n): gemm_peak(cpu, n, seconds=peak_s) for n in {1, cores, threads}}
    if device == "cuda":
        peaks["cuda"] = gemm_peak(torch.device("cuda"), threads, size=4096, seconds=peak_s)
    results = Results(device, gpu, threads, {k: round(v, 1) for k, v in peaks.items()})
    peak = peaks["cuda"] if device == "cuda" else peaks[threads_label(threads)]
    for case in c.cases:
        h.progress(f"learner: {case} on {device}")
        found = learners(case, c, device, settings)
        for learner in found:
            try:
                warm(learner, c.seconds)
            except Exception as exc:  # e.g. a compile this torch cannot do
                learner.row.note = h.failure(exc)[:120]
        live = [x for x in found if not x.row.note]
        for learner in live:
            if learner.row.system == "pararl eager":  # matmuls, convolutions; both passes
                with FlopCounterMode(display=False) as counter:
                    done = learner.run(learner.per_call)
                learner.row.flops = counter.get_total_flops() / max(1, done)
        tasks: dict[str, Callable[[], float]] = {}
        for learner in live:
            k = max(learner.per_call, int(learner.rate * c.seconds))

            def spell(x: Learner = learner, k: int = k) -> float:
                seconds, done = h.timed(functools.partial(x.run, k))
                return done / seconds

            tasks[f"{learner.row.system} {learner.row.sampling}"] = spell
        rates = h.interleaved(tasks, c.repeats, rotate=True)
        for learner in live:
            learner.row.updates_per_s = h.summarize(
                rates[f"{learner.row.system} {learner.row.sampling}"]
            )
            if device == "cpu":
                learner.row.split = profile_split(learner, min(c.seconds, 0.5))
        fill_ratios([x.row for x in found], peak)
        results.rows += [x.row for x in found]
    return results


def fill_ratios(rows: list[Row], peak: float) -> None:
    """FLOPs (the eager row's count for every row: SB3's has the same matrix work, one
    forward fewer than double-DQN's), GFLOP/s, the floor at `peak`, and ratios."""
    sb3 = next((r for r in rows if r.system == "SB3"), None)
    for sampling in dict.fromkeys(r.sampling for r in rows):
        mine = [r for r in rows if r.sampling == sampling]
        eager = next((r for r in mine if r.system == "pararl eager"), None)
        for r in mine:
            r.flops = eager.flops if eager else None
            rate = h.med(r.updates_per_s)
            if r.flops and rate:
                r.gflops = r.flops * rate / 1e9
                r.floor_ms = r.flops / (peak * 1e9) * 1e3
            r.vs_sb3 = h.ratio(r.updates_per_s, sb3.updates_per_s) if sb3 else None
            r.vs_eager = h.ratio(r.updates_per_s, eager.updates_per_s) if eager else None


# --- report -------------------------------------------------------------------------


def ms(row: Row) -> float | None:
    rate = h.med(row.updates_per_s)
    return 1e3 / rate if rate else None


COLUMNS: list[h.Col[Row]] = [
    h.Col("learner", lambda x: x.case, "l"),
    h.Col("sampling", lambda x: x.sampling, "l"),
    h.Col("system", lambda x: x.system, "l"),
    h.Col("batch", lambda x: x.batch),
    h.Col("updates/s: median (min–max)", lambda x: h.fmt_spread(x.updates_per_s)),
    h.Col("ms / update", lambda x: h.fmt_num(ms(x), 3)),
    h.Col("÷ SB3", lambda x: h.fmt_ratio(x.vs_sb3)),
    h.Col("÷ eager", lambda x: h.fmt_ratio(x.vs_eager)),
    h.Col("MFLOP / update", lambda x: h.fmt_num(x.flops and x.flops / 1e6, 2)),
    h.Col("GFLOP/s", lambda x: h.fmt_num(x.gflops, 2)),
    h.Col("floor ms", lambda x: h.fmt_num(x.floor_ms, 3)),
    h.Col("× floor", lambda x: h.fmt_num(h.ratio(ms(x), x.floor_ms), 1) + "×" * bool(x.floor_ms)),
    h.Col("setup s", lambda x: h.fmt_num(x.setup_s, 1)),
    h.Col("profiled ms: matrix / other ops / outside", lambda x: "–" if not x.split else
          f"{x.split.matrix_ms:.2f} / {x.split.other_ms:.2f} / {x.split.outside_ms:.2f}"),
    h.Col("op calls", lambda x: f"{x.split.calls:.0f}" if x.split else "–"),
    h.Col("note", lambda x: x.note, "l"),
]  # fmt: skip
SPLIT_NOTE = (
    " Where an update's time goes (a profiled spell of each, the profiler's own cost "
    "included): milliseconds in matrix kernels (matrix products and convolutions, "
    "forward and backward: the work the floor counts), in all other operators "
    "(elementwise, the optimizer, copies), and outside operators (Python, the replay's "
    "host-side sampling, the framework between calls); op calls: operator calls per "
    "update, nested ones counted."
)


def report(r: Results, meta: h.Metadata) -> h.Report:
    where = f"{r.gpu} (CUDA)" if r.gpu else f"the CPU, {r.threads} torch thread(s)"
    peaks = ", ".join(f"{k} {v:.1f}" for k, v in r.peak_gflops.items())
    intro = (
        f"Learners alone on {where}: random data in pararl's formats (DQN: a full replay "
        "memory, sampling included; PPO: one rollout, per minibatch step), against SB3's "
        "own `train()` on the same network, batch and optimizer, its sampling included. "
        f"fp32 GEMM peak (GFLOP/s): {peaks}. Floor: FLOPs (matrix products and "
        "convolutions, forward and backward, counted on pararl's eager step) ÷ the peak at "
        "the run's threads. Setup: the first calls' time beyond plain updates (compiling, "
        "recording a CUDA graph, SB3's first call), never in the rates."
    ) + (SPLIT_NOTE if any(row.split for row in r.rows) else "")
    shown = [row for row in r.rows if row.sampling != "prioritized"]
    key = [f"{row.case} {row.system} ÷ SB3 {h.fmt_ratio(row.vs_sb3)}" for row in shown
           if row.system != "SB3" and row.vs_sb3 is not None]  # fmt: skip
    series = []
    for i, system in enumerate(sorted({row.system for row in r.rows})):
        pts = [row for row in shown if row.system == system and row.gflops and row.flops]
        series.append(Series(system, [(row.flops or 0) / 1e6 for row in pts],
                             [row.gflops or 0 for row in pts], kind="points", fmt="o",
                             color=f"C{i}", notes=[row.case for row in pts]))  # fmt: skip
    peak_key = "cuda" if r.gpu else threads_label(r.threads)
    line: list[tuple[float, str, str | None]] = [
        (r.peak_gflops[peak_key], "--", f"fp32 GEMM peak ({peak_key})")
    ]
    title = f"Updates against the FLOP peak ({r.gpu or 'CPU'})"
    roofline = Panel(title, series, "MFLOP per update", "achieved GFLOP/s", logx=10,
                     logy=True, hlines=line)  # fmt: skip
    return h.Report(
        "Learners alone: pararl's gradient steps against SB3 and the FLOP floor "
        f"(`{h.PROG} learner`)",
        "; ".join(key) or "none measured",
        [intro, h.table(COLUMNS, r.rows)],
        [roofline],
        "achieved GFLOP/s against FLOPs per update, with the GEMM peak",
    )
