"""`python -m benchmarks seeds`: N seeds in one run (`--seeds N`, one batched update)
against N separate runs two at a time (what a user does on 2 cores) and one run alone,
in one sitting.

Each case runs three ways, every run to the same budget per agent, its evaluations
as the run's defaults make them (a batched run's inline, each agent on its seed's
episodes; a separate run's in its evaluation process):

- `batched`: `pararl train ALGO --seeds N`, seeds 0..N-1;
- `separate`: N runs of one seed each, two at a time, the next starting as one ends;
- `single`: seed 0 alone (the wall time one agent costs).

Reported: agent env steps per second of the whole (every agent's steps over the wall
time, launch to exit), the ratio batched/separate, the IQM of the agents' final
evaluations with its 95% bootstrap interval, and the Mann-Whitney p of batched
against separate finals (`pararl compare`'s numbers): a batched agent should be the
agent its seed trains alone, so p should stay above 0.05.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.lib import harness as h
from benchmarks.lib import stats
from benchmarks.lib import training as t
from pararl.compare import compare
from pararl.errors import UsageError
from pararl.scores import side


@dataclass(frozen=True)
class Case:
    algo: str
    env: str
    agents: int
    budget: int  # env steps per agent
    target: float  # the ratio batched/separate the issue asks for
    flags: dict[str, object] = field(default_factory=dict)


CASES = {
    "cartpole-ppo": Case("ppo", "CartPole-v1", 8, 50_000, 3.0),
    "cartpole-dqn": Case("dqn", "CartPole-v1", 8, 50_000, 3.0),
    "breakout-ppo": Case("ppo", "MinAtar/Breakout-v1", 8, 1_000_000, 1.8),
    "breakout-dqn": Case("dqn", "MinAtar/Breakout-v1", 4, 200_000, 1.8),
}
RUN_TIMEOUT_S = 6 * 3600.0  # one run's longest (MinAtar PPO, 1M steps, two at a time)
QUICK = {"cases": ("cartpole-ppo",), "agents": 2, "budget": 2_048}


@dataclass(frozen=True)
class Config(h.Options):
    """N seeds in one batched run vs N separate runs two at a time vs one run alone.
    --quick: CartPole PPO, 2 agents, 2,048 steps each, nothing kept."""

    cases: tuple[str, ...] = tuple(CASES)
    """Which cases: cartpole-ppo, cartpole-dqn, breakout-ppo, breakout-dqn."""
    agents: int | None = None
    """Agents per case (default: the case's N)."""
    budget: int | None = None
    """Env steps per agent (default: the case's)."""
    keep_dir: Path | None = None
    """Keep the runs here (default: a temporary folder, removed after)."""


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
    separate: Way
    single: Way
    iqm: dict[str, tuple[float, float, float]]  # way -> (IQM, CI low, CI high)
    p: float | None  # Mann-Whitney, batched vs separate finals
    envs_alone: float | None = None  # agent steps/s of the batch's envs alone (the floor)


def resolve(c: Config) -> Config:
    c = h.apply_quick(c, QUICK)
    unknown = [name for name in c.cases if name not in CASES]
    h.check(
        [
            (bool(unknown), f"--cases: unknown {unknown}; choose from {', '.join(CASES)}"),
            (c.agents is not None and c.agents < 2, "--agents must be >= 2"),
            (c.budget is not None and c.budget < 1, "--budget must be >= 1"),
        ]
    )
    return c


def _command(case: Case, budget: int, run_dir: Path, **more: object) -> list[str]:
    options: dict[str, object] = {
        "env": case.env, "total_steps": budget, "target_return": 1e9, "progress": "none",
        "run_dir": run_dir, "tensorboard": False, **case.flags, **more,
    }  # fmt: skip
    return t.train_command(case.algo, **options)


def _pool(commands: Sequence[list[str]], width: int, cwd: Path) -> tuple[float, list[str]]:
    """`commands` run `width` at a time, the next starting as one ends, each writing
    to a log of its own beside its run dir: the wall time of the whole, and each
    failure's last line."""
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


FLOOR_STEPS = 2_000  # vector steps of the envs alone


def envs_alone(run_dir: Path, steps: int = FLOOR_STEPS) -> float | None:
    """Agent steps/s of a batched run's envs alone, laid out as the run laid them
    out (config.json: every agent's envs, its workers, serial or sync), stepped with
    random actions: what the run's throughput can never exceed."""
    import json

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
        SerialVectorEnv(fns, autoreset_mode="SameStep")
        if facts["mode"] == "serial"
        else ParallelVectorEnv(fns, num_workers=facts["workers"], autoreset_mode="SameStep")
    )
    try:
        envs.reset(seed=list(range(n)))
        space = envs.action_space
        space.seed(0)
        actions = [space.sample() for _ in range(64)]
        for i in range(50):
            envs.step(actions[i % 64])
        start = time.perf_counter()
        for i in range(steps):
            envs.step(actions[i % 64])
        return n * steps / (time.perf_counter() - start)
    finally:
        envs.close()


def _finals(runs: Sequence[Path]) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in side(list(runs)).scores)
    except UsageError:
        return ()


def run_case(name: str, c: Config, work: Path) -> Result:
    case = CASES[name]
    n, budget = c.agents or case.agents, c.budget or case.budget
    root = work / name
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    h.progress(f"{name}: {n} agents batched, {budget:,} steps each")
    batched_s, batched_failed = _pool([_command(case, budget, root / "batched", seeds=n)], 1, work)
    h.progress(f"{name}: {n} separate runs, two at a time")
    alone = [_command(case, budget, root / f"seed{s}", seed=s) for s in range(n)]
    separate_s, failures = _pool(alone, 2, work)
    h.progress(f"{name}: one run alone")
    single_s, single_failed = _pool([_command(case, budget, root / "single")], 1, work)
    seeds = [root / f"seed{s}" for s in range(n)]
    ways = {
        "batched": Way(
            batched_s, n, budget, _finals([root / "batched"]), "; ".join(batched_failed)
        ),
        "separate": Way(separate_s, n, budget, _finals(seeds), "; ".join(failures)),
        "single": Way(single_s, 1, budget, _finals([root / "single"]), "; ".join(single_failed)),
    }  # fmt: skip
    iqm, p = {}, None
    if ways["batched"].finals and ways["separate"].finals:
        result = compare(side([root / "batched"]), side(seeds), reps=10_000)
        for way, summary in (("batched", result.summary_a), ("separate", result.summary_b)):
            iqm[way] = (summary.iqm, *summary.iqm_ci)
        p = result.p_value
    h.progress(f"{name}: the batch's envs alone")
    floor = envs_alone(root / "batched")
    return Result(name, ways["batched"], ways["separate"], ways["single"], iqm, p, floor)


def measure(c: Config, meta: h.Metadata) -> list[Result]:
    work = c.keep_dir or Path(tempfile.mkdtemp(prefix="pararl-seeds-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        t.warm_up(work)
        return [run_case(name, c, work) for name in c.cases]
    finally:
        if c.keep_dir is None:
            shutil.rmtree(work, ignore_errors=True)


def _iqm(r: Result, way: str) -> str:
    if way not in r.iqm:
        return "-"
    value, low, high = r.iqm[way]
    return f"{value:.1f} [{low:.1f}, {high:.1f}]"


def report(results: list[Result], meta: h.Metadata) -> h.Report:
    heads = ["case", "agents", "steps each", "batched s", "separate s", "single s",
             "agent steps/s batched", "separate", "ratio", "target", "envs alone",
             "IQM batched", "IQM separate", "p"]  # fmt: skip
    rows: list[list[str]] = []
    ratios = []
    for r in results:
        case = CASES[r.case]
        ratio = stats.ratio(r.batched.rate, r.separate.rate)
        ratios.append(f"{r.case} {h.fmt_ratio(ratio)}")
        rows.append(
            [r.case, str(r.batched.agents), f"{r.batched.steps:,}", f"{r.batched.wall_s:.0f}",
             f"{r.separate.wall_s:.0f}", f"{r.single.wall_s:.0f}", h.fmt_rate(r.batched.rate),
             h.fmt_rate(r.separate.rate), h.fmt_ratio(ratio), f">= {case.target:g}x",
             h.fmt_rate(r.envs_alone), _iqm(r, "batched"), _iqm(r, "separate"),
             "-" if r.p is None else f"{r.p:.2f}"]
        )  # fmt: skip
    failed = [f"{r.case} {way}: {w.failed}" for r in results
              for way, w in (("batched", r.batched), ("separate", r.separate),
                             ("single", r.single)) if w.failed]  # fmt: skip
    notes = (
        "Agent env steps/s: every agent's env steps over the wall time, launch to exit "
        "(start-up and evaluations included). Separate: the runs two at a time on the 2 "
        "cores, each in its --mode auto; batched: one run of N agents, --mode auto "
        "(sync on 2 cores). IQM of the agents' final evaluations with its 95% percentile "
        "bootstrap interval; p: two-sided Mann-Whitney, batched against separate finals. "
        "Envs alone: the batch's envs (every agent's, on its workers) stepped with random "
        "actions and nothing else, the ceiling of its throughput. On 2 cores --mode auto "
        "runs a single CartPole run async (an actor process beside the learner) and a "
        "batch sync: the separate runs' finals come from that schedule, not the batch's "
        "(an agent of a batch is the agent of its seed's sync run: the tests)."
    )
    blocks = [h.text_table(heads, rows), notes]
    if failed:
        blocks.append("Failed: " + "; ".join(failed))
    return h.Report("Many seeds in one run", ", ".join(ratios) or "none", blocks)
