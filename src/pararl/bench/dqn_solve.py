"""Time to solve CartPole-v1, measured on whole processes (`pararl bench dqn` and
`pararl bench ppo`, part `solve`; `SolveSettings.algo` says which algorithm).

Each run is a fresh process, timed on the wall clock from launch to exit, start-up
(imports, worker processes) included: `pararl train ALGO` with its defaults
(`pararl`, or `pararl-MODE` for `--mode MODE`), and Stable-Baselines3 with the
rl-baselines3-zoo settings (`pararl.bench.sb3_dqn`, `pararl.bench.sb3_ppo`). Each run
stops at its own periodic greedy evaluation reaching the target, or at the step
budget. Afterwards, untimed, the saved policy is checked on more episodes (`pararl
evaluate RUN_DIR`, `sb3_ALGO verify`): a run counts as solved only if its trainer
stopped on the target *and* the check reaches it too.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from pararl.bench.common import progress
from pararl.bench.sb3_dqn import RESULT_PREFIX
from pararl.bench.sb3_runner import result_prefix

Algo = Literal["dqn", "ppo"]
System = Literal[
    "pararl", "pararl-serial", "pararl-sync", "pararl-async", "pararl-averaging", "sb3"
]
ALL_SYSTEMS: tuple[System, ...] = (
    "pararl-serial",
    "pararl-sync",
    "pararl-async",
    "pararl-averaging",
    "sb3",
)
AVERAGING_REPLICAS = 2  # `--mode averaging --workers 2`, whatever the machine
ENV_ID = "CartPole-v1"
VERIFY_TIMEOUT_S = 300.0

FINAL_LINE = re.compile(
    r"^pararl: (?P<status>.+?) after (?P<steps>[\d,]+) env steps in (?P<secs>[\d.]+) s"
    r" \(best eval (?P<best>[^)]*)\)",
    re.MULTILINE,
)
EVALUATE_LINE = re.compile(r"mean return (?P<mean>-?[\d.]+|nan|-?inf) ± ", re.MULTILINE)


@dataclass(frozen=True)
class SolveSettings:
    budget: int = 100_000  # env steps at most
    target: float = 475.0
    eval_every: int = 5_000
    eval_episodes: int = 10
    verify_episodes: int = 20
    timeout_s: float = 1800.0  # one training process at most
    algo: Algo = "dqn"


@dataclass
class SolveRun:
    """One training process and its check."""

    system: str
    seed: int
    wall_s: float  # launch to exit
    returncode: int
    solved: bool  # stopped on the target and the check agrees
    stopped_on_target: bool
    env_steps: int | None
    status: str  # the trainer's own word: solved, step budget reached, timeout, ...
    train_s: float | None = None  # the trainer's own clock
    best_eval: float | None = None
    verify_mean: float | None = None
    note: str = ""


def parse_pararl_final(stderr: str) -> dict[str, Any] | None:
    """The last `pararl: STATUS after N env steps in T s (best eval B)` line."""
    matches = list(FINAL_LINE.finditer(stderr))
    if not matches:
        return None
    m = matches[-1]
    return {
        "status": m["status"],
        "env_steps": int(m["steps"].replace(",", "")),
        "train_s": float(m["secs"]),
        "best_eval": _float(m["best"]),
    }


def parse_evaluate(stdout: str) -> float | None:
    """The mean return printed by `pararl evaluate`."""
    matches = list(EVALUATE_LINE.finditer(stdout))
    return float(matches[-1]["mean"]) if matches else None


def parse_sb3(stdout: str, prefix: str = RESULT_PREFIX) -> dict[str, Any] | None:
    """The JSON of the last `sb3-dqn: {...}` line (`prefix`: another anchor's)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(prefix):
            data: dict[str, Any] = json.loads(line[len(prefix) :])
            return data
    return None


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if abs(value) != float("inf") else None


@dataclass(frozen=True)
class Finished:
    wall_s: float
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool


def run_process(cmd: Sequence[str], timeout_s: float, cwd: Path) -> Finished:
    """Run `cmd` in its own session; on timeout, kill its whole process group."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    start = time.perf_counter()
    proc = subprocess.Popen(
        list(cmd),
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the group we started, and only it
        out, err = proc.communicate()
        timed_out = True
    return Finished(time.perf_counter() - start, proc.returncode, out, err, timed_out)


def sb3_module(algo: Algo) -> str:
    return f"pararl.bench.sb3_{algo}"


def train_command(system: System, seed: int, out: Path, s: SolveSettings) -> list[str]:
    """The training process of `system`; it writes its run into `out`."""
    if system == "sb3":
        return [
            *(sys.executable, "-m", sb3_module(s.algo), "train"),
            *("--seed", str(seed), "--budget", str(s.budget), "--target", str(s.target)),
            *("--eval-every", str(s.eval_every), "--eval-episodes", str(s.eval_episodes)),
            *("--save", str(out / "model.zip")),
        ]
    mode = [] if system == "pararl" else ["--mode", system.removeprefix("pararl-")]
    if system == "pararl-averaging":
        mode += ["--workers", str(AVERAGING_REPLICAS)]
    return [
        *(sys.executable, "-m", "pararl.cli", "train", s.algo, "--env", ENV_ID, *mode),
        *("--seed", str(seed), "--run-dir", str(out), "--progress", "plain"),
        *("--total-steps", str(s.budget), "--target-return", str(s.target)),
        *("--eval-every", str(s.eval_every), "--eval-episodes", str(s.eval_episodes)),
    ]


def verify_command(system: System, out: Path, s: SolveSettings) -> list[str]:
    if system == "sb3":
        return [
            *(sys.executable, "-m", sb3_module(s.algo), "verify", str(out / "model.zip")),
            *("--episodes", str(s.verify_episodes)),
        ]
    return [
        *(sys.executable, "-m", "pararl.cli", "evaluate", str(out)),
        *("--episodes", str(s.verify_episodes)),
    ]


def tail(text: str, lines: int = 3) -> str:
    """The last `lines` lines of a process's output, on one line (for notes)."""
    return " | ".join(text.strip().splitlines()[-lines:])


def _verify(system: System, out: Path, s: SolveSettings) -> tuple[float | None, str]:
    done = run_process(verify_command(system, out, s), VERIFY_TIMEOUT_S, out.parent)
    if system == "sb3":
        parsed = parse_sb3(done.stdout, result_prefix(s.algo))
        mean = None if parsed is None else float(parsed["mean"])
    else:
        mean = parse_evaluate(done.stdout)
    note = "" if mean is not None else f"check failed (rc {done.returncode}): {tail(done.stderr)}"
    return mean, note


def run_one(system: System, seed: int, s: SolveSettings, workdir: Path) -> SolveRun:
    """Train once (timed), then check the result (untimed)."""
    out = workdir / f"{system}-seed{seed}"
    done = run_process(train_command(system, seed, out, s), s.timeout_s, workdir)
    parsed = (
        parse_sb3(done.stdout, result_prefix(s.algo))
        if system == "sb3"
        else parse_pararl_final(done.stderr)
    )
    run = SolveRun(system, seed, done.wall_s, done.returncode, False, False, None, "failed")
    if done.timed_out:
        run.status, run.note = "timeout", f"killed after {s.timeout_s:g} s"
        return run
    if parsed is None or done.returncode != 0:
        run.note = f"rc {done.returncode}: {tail(done.stderr)}"
        return run
    if system == "sb3":
        run.stopped_on_target = bool(parsed["solved"])
        run.status = "solved" if run.stopped_on_target else "step budget reached"
    else:
        run.status = str(parsed["status"])
        run.stopped_on_target = run.status == "solved"
    run.env_steps, run.train_s = int(parsed["env_steps"]), float(parsed["train_s"])
    run.best_eval = parsed["best_eval"]
    run.verify_mean, run.note = _verify(system, out, s)
    run.solved = (
        run.stopped_on_target and run.verify_mean is not None and run.verify_mean >= s.target
    )
    return run


def warm_up(workdir: Path) -> None:
    """Load what every run imports once, so the first timed run does not pay for a
    cold file cache alone."""
    code = (
        "import torch, gymnasium, stable_baselines3, pararl.cli, pararl.runners.dqn, "
        "pararl.runners.ppo"
    )
    run_process([sys.executable, "-c", code], 300.0, workdir)


def measure_solve(
    systems: Sequence[System], seeds: Sequence[int], s: SolveSettings
) -> list[SolveRun]:
    """Every system once per seed, interleaved (seed 0: A B C D, seed 1: A B C D ...)."""
    runs: list[SolveRun] = []
    with tempfile.TemporaryDirectory(prefix=f"pararl-bench-{s.algo}-") as tmp:
        workdir = Path(tmp)
        warm_up(workdir)
        for seed in seeds:
            for system in systems:
                progress(f"solve: {system} seed {seed} ...")
                run = run_one(system, seed, s, workdir)
                how = "solved" if run.solved else f"not solved ({run.status})"
                progress(
                    f"solve: {system} seed {seed}: {how}, {run.wall_s:.1f} s, "
                    f"{run.env_steps} env steps, check {run.verify_mean} {run.note}".rstrip()
                )
                runs.append(run)
    return runs


def censored_median(runs: Sequence[SolveRun]) -> float | None:
    """Median time to solve, an unsolved run counting as never: None when at most
    half of the runs solved (the median is then 'not solved')."""
    if not runs:
        return None
    times = sorted(r.wall_s if r.solved else float("inf") for r in runs)
    median = statistics.median(times)
    return None if median == float("inf") else median


def summarize_system(system: str, runs: Sequence[SolveRun]) -> dict[str, Any]:
    mine = [r for r in runs if r.system == system]
    solved = [r for r in mine if r.solved]
    steps = [r.env_steps for r in solved if r.env_steps is not None]
    return {
        "system": system,
        "runs": len(mine),
        "solved": len(solved),
        "time_to_solve_median_s": censored_median(mine),
        "solved_wall_s": {
            "median": statistics.median([r.wall_s for r in solved]) if solved else None,
            "min": min((r.wall_s for r in solved), default=None),
            "max": max((r.wall_s for r in solved), default=None),
        },
        "wall_s_median_all": statistics.median([r.wall_s for r in mine]) if mine else None,
        "env_steps_median_solved": statistics.median(steps) if steps else None,
    }


def solve_summary(runs: Sequence[SolveRun], systems: Sequence[str]) -> dict[str, Any]:
    """Per-system summaries and each pararl mode's ratio to SB3 (None: not solved)."""
    per = {name: summarize_system(name, runs) for name in systems}
    sb3 = per.get("sb3", {}).get("time_to_solve_median_s")
    ratios = {}
    for name, summary in per.items():
        mine = summary["time_to_solve_median_s"]
        if name != "sb3":
            ratios[name] = None if mine is None or sb3 is None else mine / sb3
    return {"systems": per, "ratio_to_sb3": ratios, "runs": [asdict(r) for r in runs]}
