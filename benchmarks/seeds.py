"""`python -m benchmarks seeds`: N seeds in one run (`--seeds N`, one batched update)
against N separate runs two at a time (what a user does on 2 cores) and one run alone,
in one sitting, every run to the same budget per agent with its default evaluations.

Reported: agent env steps/s of the whole (launch to exit), the ratio batched/separate,
the IQM of the agents' finals with its 95% bootstrap interval, and the Mann-Whitney p of
batched against separate finals (`pararl compare`'s): a batched agent should be the
agent its seed trains alone, so p should stay above 0.05.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.lib import harness as h
from benchmarks.lib import training as t

# name: algo, env, agents, env steps per agent, the ratio batched/separate the issue
# asks (None: none asked; HalfCheetah's: a batch with each agent's normalisation)
CASES: dict[str, tuple[str, str, int, int, float | None]] = {
    "cartpole-ppo": ("ppo", "CartPole-v1", 8, 50_000, 3.0),
    "cartpole-dqn": ("dqn", "CartPole-v1", 8, 50_000, 3.0),
    "breakout-ppo": ("ppo", "MinAtar/Breakout-v1", 8, 1_000_000, 1.8),
    "breakout-dqn": ("dqn", "MinAtar/Breakout-v1", 4, 200_000, 1.8),
    "halfcheetah-ppo": ("ppo", "HalfCheetah-v5", 4, 200_000, None),
}
DEFAULT_CASES = ("cartpole-ppo", "cartpole-dqn", "breakout-ppo", "breakout-dqn")
RUN_TIMEOUT_S = 6 * 3600.0  # one run's longest (MinAtar PPO, 1M steps, two at a time)
FLOOR_STEPS = 2_000  # vector steps of the envs alone
FLOP_STEPS = 4_096  # env steps per agent of the run whose FLOPs are counted
THREADS = 2  # the GEMM peak's threads: the 2 cores
MODES = ("auto", "serial", "sync", "async")  # a batch's (`pararl train --seeds N --mode`)
WAYS = ("batched", "separate", "single")  # how a case runs: the batch is always one
# the anchor of the GPU row (`make gpu-check`): PQN (Gallici et al. 2024) trains 10
# MinAtar seeds in under 5 minutes on one A40 by vectorising whole agents in JAX
PQN = "PQN (Gallici et al. 2024): 10 MinAtar seeds in under 5 minutes on one A40 (JAX)"


@dataclass(frozen=True)
class Config(h.Options):
    """N seeds in one batched run vs N separate runs two at a time vs one run alone.
    --quick: CartPole PPO, 2 agents, 2,048 steps each, nothing kept."""

    cases: tuple[str, ...] = DEFAULT_CASES  # Which cases (CASES; halfcheetah-ppo when named).
    agents: int | None = None  # Agents per case (default: the case's N).
    budget: int | None = None  # Env steps per agent (default: the case's).
    keep_dir: Path | None = None  # Keep the runs here (default: a temporary folder, removed after).
    mode: str = "auto"  # The batched run's --mode (async: an actor process beside the update).
    ways: tuple[str, ...] = WAYS  # Which ways run (the batch always; `batched` alone: the GPU row).
    learn_device: str = "auto"  # The batched run's --learn-device (cuda: the GPU row).


@dataclass(frozen=True)
class Way:
    """One way a case ran: its wall time, agents, env steps per agent and finals."""

    wall_s: float
    agents: int
    steps: int
    finals: tuple[float, ...]
    failed: str = ""

    @property
    def rate(self) -> float | None:
        return self.agents * self.steps / self.wall_s if not self.failed else None


@dataclass(frozen=True)
class Result:
    case: str
    batched: Way
    separate: Way | None  # None: not run (`--ways`)
    single: Way | None
    iqm: dict[str, tuple[float, float, float]]  # way -> (IQM, CI low, CI high)
    p: float | None  # Mann-Whitney, batched vs separate finals
    envs_alone: float | None = None  # agent steps/s of the batch's envs alone
    flops: float | None = None  # per agent env step, acting and learning
    peak: float | None = None  # GFLOP/s of fp32 GEMM at THREADS threads

    @property
    def floor_s(self) -> float | None:
        """The batch's envs alone plus its FLOPs at the GEMM peak: no run of the case's
        N x budget agent steps on this machine can be quicker."""
        if self.envs_alone is None or self.flops is None or self.peak is None:
            return None
        steps = self.batched.agents * self.batched.steps
        return steps / self.envs_alone + steps * self.flops / (self.peak * 1e9)


def resolve(c: Config) -> Config:
    c = h.apply_quick(c, {"cases": ("cartpole-ppo",), "agents": 2, "budget": 2_048})
    unknown = [name for name in c.cases if name not in CASES]
    h.check([(bool(unknown), f"--cases: unknown {unknown}; choose from {', '.join(CASES)}"),
             (c.agents is not None and c.agents < 2, "--agents must be >= 2"),
             (c.budget is not None and c.budget < 1, "--budget must be >= 1"),
             (c.mode not in MODES, f"--mode: choose from {', '.join(MODES)}"),
             (not set(c.ways) <= set(WAYS), f"--ways: choose from {', '.join(WAYS)}"),
             ("batched" not in c.ways, "--ways: the batch always runs; add batched")])  # fmt: skip
    return c


def _pool(commands: Sequence[list[str]], width: int, cwd: Path) -> tuple[float, list[str]]:
    """`commands` run `width` at a time, each logged beside its run dir: the wall time of
    the whole, and each failure's last line."""
    start, waiting = time.perf_counter(), list(commands)
    running: list[tuple[subprocess.Popen[str], Path, float]] = []
    failures: list[str] = []
    try:
        while waiting or running:
            while waiting and len(running) < width:
                cmd = waiting.pop(0)
                log = Path(cmd[cmd.index("--run-dir") + 1]).with_suffix(".log")
                with log.open("w") as out:
                    proc = t.start(cmd, cwd, out, subprocess.STDOUT)
                running.append((proc, log, time.perf_counter()))
            for proc, log, began in list(running):
                if proc.poll() is None and time.perf_counter() - began > RUN_TIMEOUT_S:
                    t.kill(proc)  # its log says how far it got
                if proc.poll() is None:
                    continue
                running.remove((proc, log, began))
                if proc.returncode:
                    last = log.read_text().strip().splitlines()[-1:]
                    failures.append(f"rc {proc.returncode}: {' '.join(last)}")
            time.sleep(0.2)
    finally:
        for proc, _, _ in running:
            t.kill(proc)
    return time.perf_counter() - start, failures


def _learn_device(run_dir: Path) -> str:
    """Where a batched run learned (its config.json; the CPU where it does not say)."""
    try:
        facts = json.loads((run_dir / "config.json").read_text())["resolved"]
        return str(facts["devices"]["learn"]).split(":")[0]
    except (OSError, ValueError, KeyError, TypeError):
        return "cpu"


def envs_alone(run_dir: Path, steps: int = FLOOR_STEPS) -> float | None:
    """Agent steps/s of a batched run's envs alone, laid out as its config.json says
    (every agent's envs, its workers, serial or sync), stepped with random actions: the
    ceiling of its throughput."""
    from benchmarks.lib.stepping import VectorStep, actions
    from pararl.envs.make import env_factory
    from pararl.vector import ParallelVectorEnv, SerialVectorEnv

    try:
        config = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        return None
    facts = config["resolved"]
    n = facts["num_envs"] * len(facts["seeds"])
    fns = [env_factory(config["env"], "none", training=True, kwargs={})] * n
    envs: SerialVectorEnv | ParallelVectorEnv = (
        SerialVectorEnv(fns, autoreset_mode="SameStep") if facts["mode"] == "serial"
        else ParallelVectorEnv(fns, num_workers=facts["workers"], autoreset_mode="SameStep")
    )  # fmt: skip
    try:
        runner = VectorStep(envs, n, actions(envs.single_action_space, n), lambda: None)
        envs.reset(seed=list(range(n)))
        runner.run(50 * n)
        seconds, done = h.timed(lambda: runner.run(steps * n))
        return done / seconds
    finally:
        envs.close()


def flops_per_step(algo: str, env: str, agents: int, steps: int = FLOP_STEPS) -> float | None:
    """FLOPs (matrix products and convolutions, forward and backward) per agent env step
    of a short serial batched run of the case in this process, counted by torch's
    `FlopCounterMode`: acting and every update. DQN learns from its first step here, so
    its count is the steady state's (a whole run's first `learning_starts` steps do less).
    Its update keeps one thread, where each agent's convolution is its own: torch's
    counter (2.13) takes a grouped convolution's backward pass for N times its work."""
    from torch.utils.flop_counter import FlopCounterMode

    import pararl

    with tempfile.TemporaryDirectory(prefix="pararl-flops-") as run_dir:
        options: dict[str, object] = dict(
            env=env, seeds=agents, mode="serial", total_steps=steps, run_dir=run_dir,
            progress="none", tensorboard=False, eval_in="inline", eval_every=10**12,
            eval_episodes=1, learner_threads=1)  # fmt: skip
        if algo == "dqn":
            options["learning_starts"] = 0
        config = (pararl.PPOConfig if algo == "ppo" else pararl.DQNConfig)(**options)  # type: ignore[arg-type]
        with FlopCounterMode(display=False) as counter:
            pararl.train(config)
    return counter.get_total_flops() / (agents * steps)


def run_case(name: str, c: Config, work: Path) -> Result:
    from pararl.compare import compare
    from pararl.errors import UsageError
    from pararl.scores import side

    algo, env, agents, budget, _ = CASES[name]
    n, budget = c.agents or agents, c.budget or budget
    root = work / name
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)

    def command(run_dir: str, **more: object) -> list[str]:
        return t.train_command(algo, env=env, total_steps=budget, target_return=1e9,
                               progress="none", run_dir=root / run_dir, tensorboard=False,
                               **more)  # fmt: skip

    def way(runs: list[str], wall_s: float, failures: list[str], agents: int) -> Way:
        try:
            finals = tuple(float(x) for x in side([root / r for r in runs]).scores)
        except UsageError:
            finals = ()
        return Way(wall_s, agents, budget, finals, "; ".join(failures))

    h.progress(f"{name}: {n} agents batched, {budget:,} steps each")
    batched_cmd = command("batched", seeds=n, mode=c.mode, learn_device=c.learn_device)
    batched = way(["batched"], *_pool([batched_cmd], 1, work), n)
    seeds = [f"seed{s}" for s in range(n)]
    separate = single = None
    if "separate" in c.ways:
        h.progress(f"{name}: {n} separate runs, two at a time")
        runs = [command(r, seed=s) for s, r in enumerate(seeds)]
        separate = way(seeds, *_pool(runs, 2, work), n)
    if "single" in c.ways:
        h.progress(f"{name}: one run alone")
        single = way(["single"], *_pool([command("single")], 1, work), 1)
    iqm, p = {}, None
    if batched.finals and separate is not None and separate.finals:
        result = compare(side([root / "batched"]), side([root / r for r in seeds]), reps=10_000)
        for label, summary in (("batched", result.summary_a), ("separate", result.summary_b)):
            iqm[label] = (summary.iqm, *summary.iqm_ci)
        p = result.p_value
    h.progress(f"{name}: the batch's envs alone, its FLOPs and the GEMM peak")
    import torch

    from benchmarks.learner import gemm_peak

    learned_on = torch.device(_learn_device(root / "batched"))
    peak = gemm_peak(learned_on, THREADS)
    floor = (envs_alone(root / "batched"), flops_per_step(algo, env, n), peak)
    return Result(name, batched, separate, single, iqm, p, *floor)


def measure(c: Config, meta: h.Metadata) -> list[Result]:
    work = c.keep_dir or Path(tempfile.mkdtemp(prefix="pararl-seeds-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        t.warm_up(work)
        return [run_case(name, c, work) for name in c.cases]
    finally:
        if c.keep_dir is None:
            shutil.rmtree(work, ignore_errors=True)


NOTES = (
    "Agent env steps/s: every agent's env steps over the wall time, launch to exit "
    "(start-up and evaluations included). Separate: the runs two at a time on the 2 "
    "cores, each in its --mode auto; batched: one run of N agents, --mode auto "
    "(on 2 cores: async for an MLP on cheap envs, one actor process beside the update, "
    "as a run of one of its agents alone; sync or serial for a CNN, whose update takes "
    "both cores). "
    "IQM of the agents' final evaluations with its 95% percentile "
    "bootstrap interval; p: two-sided Mann-Whitney, batched against separate finals. "
    "A section named for a mode (`--mode async`) ran the batch in that mode. "
    "Envs alone: the batch's envs (every agent's, on its workers) stepped with random "
    "actions and nothing else, the ceiling of its throughput. MFLOP / step: matrix "
    "products and convolutions, forward and backward, per agent env step, acting and "
    "learning (torch's FlopCounterMode over a short serial batched run; DQN learning from "
    "its first step). Floor: the N x budget agent steps at the envs-alone rate plus their "
    "FLOPs at this machine's fp32 GEMM peak on 2 threads; batched ÷ floor: how far the "
    "batched run's wall time is from it. An agent of a batch is the agent of its "
    "seed's run alone in the same mode (serial, sync, and PPO's async; the tests); "
    "a DQN batch's async acting is timing's, as its run's."
)


def _target(case: str) -> str:
    asked = CASES[case][4]
    return "-" if asked is None else f">= {asked:g}x"


def report(results: list[Result], meta: h.Metadata) -> h.Report:
    def iqm(r: Result, way: str) -> str:
        return "-" if way not in r.iqm else "{:.1f} [{:.1f}, {:.1f}]".format(*r.iqm[way])

    heads = ["case", "agents", "steps each", "batched s", "separate s", "single s",
             "agent steps/s batched", "separate", "ratio", "target", "envs alone",
             "MFLOP / step", "floor s", "batched ÷ floor", "IQM batched", "IQM separate",
             "p"]  # fmt: skip

    def wall(way: Way | None) -> str:
        return "–" if way is None else f"{way.wall_s:.0f}"

    rows, ratios, failed = [], [], []
    for r in results:
        separate_rate = None if r.separate is None else r.separate.rate
        ratio = h.ratio(r.batched.rate, separate_rate)
        if r.separate is None:  # the batch alone (the GPU row): its own rate
            ratios.append(f"{r.case} {r.batched.agents} agents in {r.batched.wall_s:.0f} s")
        else:
            ratios.append(f"{r.case} {h.fmt_ratio(ratio)}")
        rows.append(
            [r.case, str(r.batched.agents), f"{r.batched.steps:,}", f"{r.batched.wall_s:.0f}",
             wall(r.separate), wall(r.single), h.fmt_rate(r.batched.rate),
             h.fmt_rate(separate_rate), h.fmt_ratio(ratio), _target(r.case),
             h.fmt_rate(r.envs_alone), "-" if r.flops is None else f"{r.flops / 1e6:.2f}",
             h.fmt_num(r.floor_s, 1), h.fmt_ratio(h.ratio(r.batched.wall_s, r.floor_s)),
             iqm(r, "batched"), iqm(r, "separate"),
             "-" if r.p is None else f"{r.p:.2f}"]
        )  # fmt: skip
        ways = (("batched", r.batched), ("separate", r.separate), ("single", r.single))
        failed += [f"{r.case} {name}: {w.failed}" for name, w in ways if w and w.failed]
    blocks = [h.text_table(heads, rows), NOTES]
    if any(r.separate is None for r in results):
        blocks.append(
            f"Where only the batch ran (`--ways batched`), its anchor is published: {PQN}. "
            "The floor's FLOPs are at the GEMM peak of the device the batch learned on."
        )
    if failed:
        blocks.append("Failed: " + "; ".join(failed))
    return h.Report("Many seeds in one run", ", ".join(ratios) or "none", blocks)
