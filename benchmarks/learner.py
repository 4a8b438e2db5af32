"""`python -m benchmarks learner`: the learners alone (DQN, PPO, SAC updates on random
data in pararl's formats) against SB3's own `train()` with the same network, batch and
optimizer, and against the FLOP floor of this machine's GEMM peak.
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


@dataclass(frozen=True)
class Shape:
    """A case's observations and actions, the network pararl builds for them, and SB3's
    policy for the same network."""

    obs: tuple[int, ...]
    obs_dtype: str  # float32 | bool | uint8
    actions: int  # Discrete(n), or the dimension of a Box
    discrete: bool
    model: str
    text: str


SHAPES: dict[str, Shape] = {
    "mlp-dqn": Shape((4,), "float32", 2, True, "mlp", "CartPole MLP 256x256"),
    "minatar": Shape((10, 10, 4), "bool", 3, True, "minatar-cnn", "MinAtar CNN (Breakout)"),
    "nature": Shape((4, 84, 84), "uint8", 6, True, "nature-cnn", "Nature CNN, 4x84x84"),
    "mlp-ppo": Shape((17,), "float32", 6, False, "mlp", "64x64 tanh MLPs (HalfCheetah)"),
    "mlp-sac": Shape((17,), "float32", 6, False, "mlp", "256x256 actor, twin critics"),
}


def shape_of(case: str) -> Shape:
    kind = case.split("-", 1)[1]
    return SHAPES[f"mlp-{case[:3]}" if kind == "mlp" else kind]


@dataclass(frozen=True)
class Config(h.Options):
    """Updates/s of pararl's learners against SB3's train() and the FLOP floor, learner
    alone. --quick: small memories, few updates, one round."""

    cases: tuple[Case, ...] = CASES
    """Which learners (DQN: the CartPole MLP, MinAtar CNN, Nature CNN; PPO: the 64x64
    continuous MLP, MinAtar CNN, Nature CNN; SAC: HalfCheetah's 256x256 networks)."""
    compile: tuple[Setting, ...] = ("off", "on", "auto")
    """pararl's `--compile` settings to time, each once per step mode it gives on the
    device (CPU: off and auto run the step as written, on compiles it; CUDA: off as
    written, auto a recorded CUDA graph, on compiled and recorded)."""
    sb3: bool = True
    """Time SB3's train() on the same network, batch and optimizer."""
    prioritized: bool = True
    """DQN and SAC cases also with prioritized replay (pararl only: SB3 has none)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where the learners run (`auto`: CUDA when present)."""
    threads: int = 1
    """torch threads (the learner of a 2-core run has one core; 0: all)."""
    seconds: float = 2.0
    """Target length of one timed spell (the number of updates is set from the
    warm-up's rate)."""
    repeats: int = 3
    """Interleaved spells per system (median, min and max reported)."""
    memory: int = 10_000
    """Transitions in each DQN replay memory."""
    seed: int = 0
    """Seed of the data, the networks and the draws."""
    profile: bool = True
    """On the CPU, profile each learner's updates once (torch.profiler) and split an
    update's time: matrix kernels, the other operators, and what is outside operators
    (Python, replay sampling on the host)."""


QUICK = {"memory": 1_000, "seconds": 0.3, "repeats": 1, "cases": ("dqn-minatar", "ppo-mlp")}


def resolve(config: Config) -> Config:
    c = h.apply_quick(config, QUICK)
    h.require(c, "> 0: seconds repeats memory", ">= 0: threads")
    h.check([(not c.cases, "--cases needs at least one case")])
    return c


@dataclass
class Split:
    """Where one update's time goes, from a profiled spell (the report's intro says
    what each part holds); the profiler's own cost is in it."""

    matrix_ms: float
    other_ms: float
    outside_ms: float
    calls: float

    def text(self) -> str:
        return f"{self.matrix_ms:.2f} / {self.other_ms:.2f} / {self.outside_ms:.2f}"


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


# --- the machine's peak -------------------------------------------------------------


def gemm_peak(device: Any, threads: int, size: int = 512, seconds: float = 0.5) -> float:
    """fp32 GFLOP/s of a square matmul (the best of a few spells)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a = torch.randn(size, size, device=device)
        b = torch.randn(size, size, device=device)
        best = 0.0
        for _ in range(5):
            n, start = 0, time.perf_counter()
            while True:
                torch.mm(a, b)
                n += 1
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                if time.perf_counter() - start >= seconds / 5:
                    break
            best = max(best, 2 * size**3 * n / (time.perf_counter() - start) / 1e9)
        return best
    finally:
        torch.set_num_threads(before)


def threads_label(n: int) -> str:
    return f"{n} thread{'s' * (n > 1)}"


# --- pararl -------------------------------------------------------------------------


def _spaces(shape: Shape) -> tuple[Any, Any]:
    import gymnasium as gym

    dtype = np.dtype(shape.obs_dtype)
    high = 255 if dtype == np.uint8 else 1
    obs = gym.spaces.Box(0, high, shape.obs, dtype)
    if shape.discrete:
        return obs, gym.spaces.Discrete(shape.actions)
    return obs, gym.spaces.Box(-1.0, 1.0, (shape.actions,), np.float32)


def _random_obs(shape: Shape, n: int, rng: np.random.Generator) -> np.ndarray:
    dtype = np.dtype(shape.obs_dtype)
    if dtype == np.uint8:
        return rng.integers(0, 256, (n, *shape.obs), dtype=np.uint8)
    if dtype == np.bool_:
        return rng.random((n, *shape.obs)) < 0.1
    return rng.standard_normal((n, *shape.obs)).astype(np.float32)


def dqn_config(case: str, setting: str, prioritized: bool, device: str) -> Any:
    """The DQN config a run of this case has (the CartPole MLP 256x256)."""
    from pararl.config import DQNConfig

    hidden = (256, 256) if case == "dqn-mlp" else DQNConfig.hidden
    return DQNConfig(
        env=case,
        compile=setting,  # type: ignore[arg-type]
        prioritized=prioritized,
        device=device,  # type: ignore[arg-type]
        hidden=hidden,
    )


def pararl_replay(case: str, mode: str, prioritized: bool, c: Config, device: str) -> Any:
    """A DQN or SAC state of this case (its run's defaults; DQN on CartPole with an MLP
    256x256) with a full memory: frames as an actor adds them (8 envs, no episode ends)
    for image stacks, random transitions otherwise."""
    import torch

    from benchmarks.replay import fill
    from pararl.algos.dqn import DQNState
    from pararl.algos.sac import SACState
    from pararl.config import SACConfig, env_kind
    from pararl.replay.nstep import Transitions

    shape = shape_of(case)
    obs_space, act_space = _spaces(shape)
    torch.manual_seed(c.seed)
    stack = shape.obs[0] if shape.obs_dtype == "uint8" else 0
    kind, where = env_kind(obs_space, act_space), torch.device(device)
    if case.startswith("sac"):
        cfg = SACConfig(env=case, compile=mode, prioritized=prioritized, device=device)  # type: ignore[arg-type]
        state: Any = SACState(cfg.for_env(kind), obs_space, act_space, where)
    else:
        filled = dqn_config(case, mode, prioritized, device).for_env(kind)
        state = DQNState(filled, obs_space, act_space, where, frame_stack=stack)
    rng, n, s = np.random.default_rng(c.seed), c.memory, state.settings
    if stack:
        fill(state.replay, n, "frames", shape.obs, seed=c.seed)
    else:
        obs, next_obs = _random_obs(shape, n, rng), _random_obs(shape, n, rng)
        actions = (
            rng.integers(0, shape.actions, n)
            if shape.discrete
            else rng.uniform(-1, 1, (n, shape.actions)).astype(np.float32)
        )
        rewards = rng.standard_normal(n).astype(np.float32)
        discounts = np.full(n, s.gamma**s.n_step, np.float32)
        state.replay.add(Transitions(obs, actions, rewards, next_obs, discounts))
    state.env_steps = max(c.memory, s.learning_starts)
    return state


def rollout_batch(shape: Shape, n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    actions = (
        rng.integers(0, shape.actions, n)
        if shape.discrete
        else rng.standard_normal((n, shape.actions)).astype(np.float32)
    )
    return {
        "obs": _random_obs(shape, n, rng),
        "actions": actions,
        "logprobs": (-1.0 - rng.random(n)).astype(np.float32),
        "values": rng.standard_normal(n).astype(np.float32),
        "advantages": rng.standard_normal(n).astype(np.float32),
        "returns": rng.standard_normal(n).astype(np.float32),
    }


PPO_ENVS = 8  # the rollout's envs (pararl: 2 workers x 4; SB3: 8 DummyVecEnv envs)


def pararl_ppo(case: str, mode: str, c: Config, device: str) -> Any:
    """A PPOState of this case (its run's defaults) and a rollout of random data."""
    import torch

    from pararl.config import PPOConfig, env_kind
    from pararl.runners.ppo_state import PPOState

    shape = shape_of(case)
    obs_space, act_space = _spaces(shape)
    torch.manual_seed(c.seed)
    cfg = PPOConfig(env=case, compile=mode, act_device="cpu", learn_device=device)  # type: ignore[arg-type]
    return PPOState(cfg.for_env(env_kind(obs_space, act_space)), obs_space, act_space, PPO_ENVS)


# --- SB3 ----------------------------------------------------------------------------


def _sb3_env(shape: Shape) -> Any:
    import gymnasium as gym

    obs_space, act_space = _spaces(shape)

    class Spaces(gym.Env):  # SB3 reads the spaces only: nothing is stepped
        observation_space, action_space = obs_space, act_space

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            return obs_space.sample(), {}

        def step(self, action: Any) -> Any:
            return obs_space.sample(), 0.0, False, False, {}

    return Spaces()


def _sb3_policy(shape: Shape, algo: str) -> tuple[str, dict[str, Any]]:
    from benchmarks.lib.sb3 import minatar_policy

    if shape.model == "minatar-cnn":
        return "MlpPolicy", minatar_policy()
    if shape.model == "nature-cnn":
        return "CnnPolicy", {}
    if algo == "dqn":
        return "MlpPolicy", {"net_arch": [256, 256]}
    return "MlpPolicy", {}  # PPO's default: separate 64x64 tanh MLPs, as pararl's


def _fill_sb3_replay(model: Any, shape: Shape, c: Config) -> Any:
    """`model` (SB3's DQN or SAC) with its replay memory full of `c.memory` random
    transitions: action indices, or actions within [-1, 1]."""
    buf, rng, n = model.replay_buffer, np.random.default_rng(c.seed), c.memory
    assert buf is not None
    buf.observations[:n, 0] = _random_obs(shape, n, rng)
    buf.next_observations[:n, 0] = _random_obs(shape, n, rng)
    if shape.discrete:
        buf.actions[:n, 0, 0] = rng.integers(0, shape.actions, n)
    else:
        buf.actions[:n, 0] = rng.uniform(-1, 1, (n, shape.actions))
    buf.rewards[:n, 0] = rng.standard_normal(n)
    buf.pos, buf.full = 0, True
    return model


def _fill_sb3_rollout(model: Any, shape: Shape, c: Config, device: str) -> Any:
    """`model` (SB3's PPO) with its rollout buffer full of random steps."""
    import torch

    buf, rng, n = model.rollout_buffer, np.random.default_rng(c.seed), PPO_ENVS
    buf.reset()
    for _ in range(model.n_steps):
        actions = (
            rng.integers(0, shape.actions, (n, 1))
            if shape.discrete
            else rng.standard_normal((n, shape.actions))
        )
        buf.add(
            _random_obs(shape, n, rng),
            actions,
            rng.standard_normal(n),
            np.zeros(n, bool),
            torch.as_tensor(rng.standard_normal(n), dtype=torch.float32, device=device),
            torch.as_tensor(-1.0 - rng.random(n), dtype=torch.float32, device=device),
        )
    last = torch.zeros(n, device=device)
    buf.compute_returns_and_advantage(last_values=last, dones=np.zeros(n, bool))
    return model


def sb3_model(case: str, c: Config, device: str) -> Any:
    """SB3's DQN, PPO or SAC with this case's settings (pararl's, as `lib.sb3` reads
    them), its replay memory or rollout buffer full of random data."""
    from stable_baselines3 import DQN, PPO, SAC
    from stable_baselines3.common.env_util import make_vec_env

    from benchmarks.lib import sb3
    from pararl.config import PPOConfig, env_kind

    shape, algo = shape_of(case), case[:3]
    env = _sb3_env(shape)
    kind = env_kind(env.observation_space, env.action_space)
    policy, net = _sb3_policy(shape, algo)
    common: dict[str, Any] = {"device": device, "seed": c.seed}
    if algo == "dqn":
        cfg = dqn_config(case, "off", False, device).for_env(kind).config
        kwargs = sb3.dqn_settings(cfg, cfg.budget) | {"buffer_size": c.memory, "learning_starts": 0}
        kwargs["policy_kwargs"] |= net
        model: Any = DQN(policy, env, **common, **kwargs)
    elif algo == "sac":
        kwargs = sb3.mujoco_sac(0, [256, 256]) | {"buffer_size": c.memory}
        model = SAC("MlpPolicy", env, **common, **kwargs)
    else:
        settings = sb3.ppo_settings(PPOConfig(env=case).for_env(kind).config)
        envs = make_vec_env(lambda: _sb3_env(shape), n_envs=PPO_ENVS)
        model = PPO(policy, envs, **common, **settings, policy_kwargs=net)
    sb3.silent(model)
    if algo == "ppo":
        return _fill_sb3_rollout(model, shape, c, device)
    return _fill_sb3_replay(model, shape, c)


# --- timing -------------------------------------------------------------------------


@dataclass
class Learner:
    """Something to time: `run(k)` does k updates (k = minibatch steps for PPO, which
    rounds to whole rollouts) and returns how many it did."""

    row: Row
    run: Callable[[int], int]
    per_call: int  # updates one call of the underlying step does at least
    setup: Callable[[], float] | None = None  # pararl: the fused steps' own setup time
    rate: float = 0.0  # from the warm-up


def flops_per_update(fn: Callable[[], int]) -> float:
    """FLOPs of what `fn` does (matmuls, convolutions; forward and backward) per
    update it reports."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        updates = fn()
    return counter.get_total_flops() / max(1, updates)


# the operators whose own time is the matrix work FlopCounterMode counts
MATRIX_OPS = frozenset({
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::mkldnn_convolution",
    "aten::convolution_backward", "aten::_slow_conv2d_forward", "aten::_slow_conv2d_backward",
    "aten::mkldnn_linear", "aten::_mkldnn_convolution",
})  # fmt: skip


@contextlib.contextmanager
def _no_native_stderr() -> Iterator[None]:
    """The process's stderr (file descriptor 2) sent to /dev/null inside the block:
    the profiler's native library logs two lines per profile there ("profiler_start",
    "profiler_stop"), which no setting turns off. Python exceptions still propagate."""
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
    with _no_native_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        done = learner.run(k)
        wall_ms = (time.perf_counter() - start) * 1e3
    events = prof.key_averages()
    ops_ms = sum(e.self_cpu_time_total for e in events) / 1e3
    matrix_ms = sum(e.self_cpu_time_total for e in events if e.key in MATRIX_OPS) / 1e3
    calls = sum(e.count for e in events if e.key.startswith("aten::"))
    return Split(
        matrix_ms / done, (ops_ms - matrix_ms) / done, max(0.0, wall_ms - ops_ms) / done,
        calls / done,
    )  # fmt: skip


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def replay_updates(state: Any, device: str) -> Callable[[int], int]:
    """`k` -> `k` replay updates of `state` (DQN or SAC), waited for on the device."""

    def run(k: int) -> int:
        for _ in range(k):
            state.update()
        _sync(device)
        return k

    return run


def replay_learners(case: str, c: Config, device: str, settings: dict[str, str]) -> list[Learner]:
    """pararl's DQN or SAC under each step mode (`settings`: mode -> --compile), then
    SB3's: one replay batch per update."""
    out: list[Learner] = []
    samplings = (False, True) if c.prioritized else (False,)
    for prioritized in samplings:
        sampling = "prioritized" if prioritized else "uniform"
        for mode, setting in settings.items():
            state = pararl_replay(case, setting, prioritized, c, device)
            row = Row(case, sampling, f"pararl {mode}", state.settings.batch_size)
            setup = functools.partial(setup_s, state.learner)
            out.append(Learner(row, replay_updates(state, device), 1, setup))
        if c.sb3 and not prioritized:
            model = sb3_model(case, c, device)

            def run_sb3(k: int, model: Any = model) -> int:
                model.train(gradient_steps=k, batch_size=model.batch_size)
                _sync(device)
                return k

            out.append(Learner(Row(case, "uniform", "SB3", model.batch_size), run_sb3, 1))
    return out


def ppo_learners(case: str, c: Config, device: str, settings: dict[str, str]) -> list[Learner]:
    """pararl's PPO under each step mode (`settings`: mode -> --compile), then SB3's."""
    out: list[Learner] = []
    shape = shape_of(case)
    for mode, setting in settings.items():
        state = pararl_ppo(case, setting, c, device)
        s = state.settings
        n = PPO_ENVS * s.num_steps
        batch = rollout_batch(shape, n, c.seed)
        per_rollout = s.update_epochs * max(1, n // s.minibatch_size)
        rng = np.random.default_rng(c.seed)

        def run(
            k: int, state: Any = state, batch: Any = batch, per: int = per_rollout, rng: Any = rng
        ) -> int:
            rollouts = max(1, round(k / per))
            for _ in range(rollouts):
                state.learner.update(batch, rng)
            _sync(device)
            return rollouts * per

        row = Row(case, "rollout", f"pararl {mode}", s.minibatch_size)
        setup = functools.partial(setup_s, state.learner)
        out.append(Learner(row, run, per_rollout, setup))
    if c.sb3:
        model = sb3_model(case, c, device)
        per = model.n_epochs * (PPO_ENVS * model.n_steps // model.batch_size)

        def run_sb3(k: int, model: Any = model, per: int = per) -> int:
            rollouts = max(1, round(k / per))
            for _ in range(rollouts):
                model.train()
            _sync(device)
            return rollouts * per

        out.append(Learner(Row(case, "rollout", "SB3", model.batch_size), run_sb3, per))
    return out


def setup_s(learner: Any) -> float:
    """Seconds a pararl learner's fused steps spent compiling and recording."""
    return float(learner.steps.setup_s)


# past a fused step's warm-up (3 calls) and its recording (the 4th): six updates, or
# two rollouts (each has many minibatch steps of each kind)
WARM_CALLS, WARM_ROLLOUTS = 6, 2


def warm(learner: Learner, seconds: float) -> None:
    """First calls (compiling, recording, SB3's first train), their cost beyond plain
    updates kept apart; then the rate that sizes the spells."""
    start = time.perf_counter()
    done = learner.run(learner.per_call * (WARM_CALLS if learner.per_call == 1 else WARM_ROLLOUTS))
    first = time.perf_counter() - start
    start, more = time.perf_counter(), 0
    while time.perf_counter() - start < seconds / 4 or more == 0:
        more += learner.run(learner.per_call)
    rate = more / (time.perf_counter() - start)
    learner.rate = rate
    measured = learner.setup() if learner.setup else first - done / rate
    learner.row.setup_s = max(0.0, measured)


def measure(c: Config, meta: h.Metadata) -> Results:
    import torch

    device = "cuda" if c.device == "auto" and torch.cuda.is_available() else c.device
    device = "cpu" if device == "auto" else device
    if device == "cuda" and not torch.cuda.is_available():
        raise h.UsageError("--device cuda: torch sees no CUDA device")
    threads = c.threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else None
    from pararl.algos.fused import resolve_step_mode

    settings: dict[str, str] = {}  # step mode -> the first --compile setting giving it
    for setting in c.compile:
        settings.setdefault(resolve_step_mode(setting, torch.device(device)), setting)
    meta.machine_note = f"; {threads} torch thread(s), learners on {gpu or 'the CPU'}"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    peak_s = min(0.5, c.seconds)
    cpu = torch.device("cpu")
    counts = {1, cores, threads}
    peaks = {threads_label(n): gemm_peak(cpu, n, seconds=peak_s) for n in counts}
    if device == "cuda":
        peaks["cuda"] = gemm_peak(torch.device("cuda"), threads, size=4096, seconds=peak_s)
    results = Results(device, gpu, threads, {k: round(v, 1) for k, v in peaks.items()})
    peak = peaks["cuda"] if device == "cuda" else peaks[threads_label(threads)]
    for case in c.cases:
        h.progress(f"learner: {case} on {device}")
        build = ppo_learners if case.startswith("ppo") else replay_learners
        learners = build(case, c, device, settings)
        for learner in learners:
            try:
                warm(learner, c.seconds)
            except Exception as exc:  # e.g. a compile this torch cannot do
                learner.row.note = h.failure(exc)[:120]
        live = [x for x in learners if not x.row.note]
        for learner in live:
            if learner.row.system == "pararl eager":
                learner.row.flops = flops_per_update(
                    functools.partial(learner.run, learner.per_call)
                )
        tasks: dict[str, Callable[[], float]] = {}
        for learner in live:
            k = max(learner.per_call, int(learner.rate * c.seconds))

            def spell(x: Learner = learner, k: int = k) -> float:
                start = time.perf_counter()
                done = x.run(k)
                return done / (time.perf_counter() - start)

            tasks[f"{learner.row.system} {learner.row.sampling}"] = spell
        rates = h.interleaved(tasks, c.repeats, rotate=True)
        for learner in live:
            learner.row.updates_per_s = h.summarize(
                rates[f"{learner.row.system} {learner.row.sampling}"]
            )
            if c.profile and device == "cpu":
                learner.row.split = profile_split(learner, min(c.seconds, 0.5))
        _fill(learners, peak)
        results.rows += [x.row for x in learners]
    return results


def _fill(learners: list[Learner], peak: float) -> None:
    """FLOPs for every row of a case (the same math), GFLOP/s, floor (at `peak`) and
    ratios."""
    by_sampling: dict[str, list[Row]] = {}
    for x in learners:
        by_sampling.setdefault(x.row.sampling, []).append(x.row)
    sb3 = next((x.row for x in learners if x.row.system == "SB3"), None)
    for rows in by_sampling.values():
        eager = next((r for r in rows if r.system == "pararl eager"), None)
        flops = eager.flops if eager else None
        for r in rows:
            # SB3's update does the same matrix work (one forward fewer where pararl
            # computes double-DQN targets): the eager row's count, as an estimate
            r.flops = flops
            rate = h.med(r.updates_per_s)
            if r.flops and rate:
                r.gflops = r.flops * rate / 1e9
                r.floor_ms = r.flops / (peak * 1e9) * 1e3
            r.vs_sb3 = h.ratio(r.updates_per_s, sb3.updates_per_s) if sb3 else None
            r.vs_eager = h.ratio(r.updates_per_s, eager.updates_per_s) if eager else None


# --- report -------------------------------------------------------------------------


def report(r: Results, meta: h.Metadata) -> h.Report:
    del meta
    rows = r.rows

    def ms(row: Row) -> str:
        rate = h.med(row.updates_per_s)
        return "–" if not rate else f"{1e3 / rate:.3f}"

    def over_floor(row: Row) -> str:
        rate = h.med(row.updates_per_s)
        if not rate or not row.floor_ms:
            return "–"
        return f"{1e3 / rate / row.floor_ms:.1f}×"

    cols = [
        h.Col[Row]("learner", lambda x: x.case, "l"),
        h.Col[Row]("sampling", lambda x: x.sampling, "l"),
        h.Col[Row]("system", lambda x: x.system, "l"),
        h.Col[Row]("batch", lambda x: x.batch),
        h.Col[Row]("updates/s: median (min–max)", lambda x: h.fmt_spread(x.updates_per_s)),
        h.Col[Row]("ms / update", ms),
        h.Col[Row]("÷ SB3", lambda x: h.fmt_ratio(x.vs_sb3)),
        h.Col[Row]("÷ eager", lambda x: h.fmt_ratio(x.vs_eager)),
        h.Col[Row]("MFLOP / update", lambda x: h.fmt_num(x.flops and x.flops / 1e6, 2)),
        h.Col[Row]("GFLOP/s", lambda x: h.fmt_num(x.gflops, 2)),
        h.Col[Row]("floor ms", lambda x: h.fmt_num(x.floor_ms, 3)),
        h.Col[Row]("× floor", over_floor),
        h.Col[Row]("setup s", lambda x: h.fmt_num(x.setup_s, 1)),
        h.Col[Row](
            "profiled ms: matrix / other ops / outside",
            lambda x: x.split.text() if x.split else "–",
        ),
        h.Col[Row]("op calls", lambda x: f"{x.split.calls:.0f}" if x.split else "–"),
        h.Col[Row]("note", lambda x: x.note, "l"),
    ]
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
    )
    if any(row.split for row in rows):
        intro += (
            " Where an update's time goes (a profiled spell of each, the profiler's own "
            "cost included): milliseconds in matrix kernels (matrix products and "
            "convolutions, forward and backward: the work the floor counts), in all other "
            "operators (elementwise, the optimizer, copies), and outside operators "
            "(Python, the replay's host-side sampling, the framework between calls); op "
            "calls: operator calls per update, nested ones counted."
        )
    key = []
    for row in rows:
        if row.system != "SB3" and row.vs_sb3 is not None and row.sampling != "prioritized":
            key.append(f"{row.case} {row.system} ÷ SB3 {h.fmt_ratio(row.vs_sb3)}")
    panels = [_roofline(r)]
    return h.Report(
        title="Learners alone: pararl's gradient steps against SB3 and the FLOP floor "
        "(`python -m benchmarks learner`)",
        key_ratios="; ".join(key) or "none measured",
        blocks=[intro, h.table(cols, rows)],
        panels=panels,
        figure_alt="achieved GFLOP/s against FLOPs per update, with the GEMM peak",
    )


def _roofline(r: Results) -> Panel:
    systems = sorted({row.system for row in r.rows})
    series = []
    for i, system in enumerate(systems):
        pts = [
            row
            for row in r.rows
            if row.system == system and row.gflops and row.flops and row.sampling != "prioritized"
        ]
        series.append(
            Series(
                system,
                [row.flops / 1e6 for row in pts if row.flops],
                [row.gflops for row in pts if row.gflops],
                kind="points",
                fmt="o",
                color=f"C{i}",
                notes=[row.case for row in pts],
            )
        )
    peak_key = "cuda" if r.gpu else threads_label(r.threads)
    hlines: list[tuple[float, str, str | None]] = [
        (r.peak_gflops[peak_key], "--", f"fp32 GEMM peak ({peak_key})")
    ]
    return Panel(
        title=f"Updates against the FLOP peak ({r.gpu or 'CPU'})",
        series=series,
        xlabel="MFLOP per update",
        ylabel="achieved GFLOP/s",
        logx=10,
        logy=True,
        hlines=hlines,
    )


__all__ = ["Config", "measure", "report", "resolve"]
