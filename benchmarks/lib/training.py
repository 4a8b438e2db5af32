"""Whole training processes (`pararl train` or an anchor), timed launch to exit or run
until a condition holds, and what they leave: last line, `metrics.csv`, `eval.csv`,
`pararl evaluate`'s return.
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from benchmarks.lib.harness import ROOT, progress
from pararl.errors import handled

FINAL_LINE = re.compile(
    r"^pararl: (?P<status>.+?) after (?P<steps>[\d,]+) env steps in (?P<secs>[\d.]+) s"
    r" \((?:best eval )?(?P<best>[^)]*)\)",
    re.MULTILINE,
)
EVALUATE_LINE = re.compile(r"mean return (?P<mean>-?[\d.]+|nan|-?inf) ± ", re.MULTILINE)
Point = tuple[float, int, int]  # wall s, env steps, updates
Ending = Literal["ended", "deadline", "until", "interrupted"]
POLL_S = 2.0  # how often a running child is looked at
STOP_GRACE_S = 600.0  # a run asked to stop saves its checkpoint (and replay memory) in this


PARARL = [sys.executable, "-m", "pararl.cli"]


def train_command(algo: str, *extra: str, **options: object) -> list[str]:
    """`pararl train ALGO` with `options` as its flags: `name=value` is `--name value`
    (a tuple gives its values, True the flag alone, False `--no-name`), then `extra`."""
    args: list[str] = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            args.append(flag if value else "--no-" + flag[2:])
        else:
            args += [flag, *map(str, value if isinstance(value, tuple) else (value,))]
    return [*PARARL, "train", algo, *args, *extra]


def evaluate_command(run_dir: Path, episodes: int) -> list[str]:
    """`pararl evaluate RUN_DIR` of its best checkpoint."""
    return [*PARARL, "evaluate", str(run_dir), "--episodes", str(episodes)]


def _environment() -> dict[str, str]:
    """This checkout importable (`benchmarks.*`, and `pararl` if not installed)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path}


def start(
    cmd: Sequence[str], cwd: Path, stdout: Any = subprocess.PIPE, stderr: Any = subprocess.PIPE
) -> subprocess.Popen[str]:
    """`cmd` in its own session (so that its whole process group can be killed)."""
    return subprocess.Popen(
        list(cmd), cwd=cwd, env=_environment(), stdout=stdout, stderr=stderr,
        text=True, start_new_session=True,
    )  # fmt: skip


def kill(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """Kill the process group `start` made (that group, and only it); its output."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    out, err = proc.communicate()
    return out or "", err or ""


@dataclass(frozen=True)
class Finished:
    wall_s: float
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool

    @property
    def tail(self) -> str:
        """Why the run ended badly, on one line (for notes): its time limit, or its exit
        code and the last lines of its stderr."""
        if self.timed_out:
            return f"killed at its time limit, {self.wall_s:.0f} s"
        return f"rc {self.returncode}: " + " | ".join(self.stderr.strip().splitlines()[-3:])


def run_process(cmd: Sequence[str], timeout_s: float, cwd: Path) -> Finished:
    """`cmd` to its end, launch to exit; killed (its process group) after `timeout_s`."""
    start_s = time.perf_counter()
    proc = start(cmd, cwd)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return Finished(time.perf_counter() - start_s, -9, *kill(proc), True)
    except BaseException:  # Ctrl-C here: its own session does not get it
        kill(proc)
        raise
    return Finished(time.perf_counter() - start_s, proc.returncode, out, err, False)


Stopped = tuple[Ending, int | None, str]  # how a run ended, its exit code, what it wrote


def run_until(cmd: Sequence[str], log_path: Path, cwd: Path, deadline: float | None,
              until: Callable[[], bool] | None = None) -> Stopped:  # fmt: skip
    """`cmd` run (output appended to `log_path`) until it ends, the deadline passes or
    `until()` holds; Ctrl-C or SIGTERM here asks it to stop too. Then (not when it
    ended) SIGTERM to its main process, which saves the run, stops its workers and
    exits; its whole group killed if it has not within `STOP_GRACE_S` (Ctrl-C and
    SIGTERM here ignored meanwhile: a second one would lose the save), and whatever of
    its group outlives it once it has exited."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    offset = log_path.stat().st_size if log_path.exists() else 0
    with log_path.open("a") as log:
        proc = start(cmd, cwd, stdout=log, stderr=subprocess.STDOUT)
        how: Ending = "ended"
        try:
            while how == "ended":
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=POLL_S)
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    how = "deadline"
                elif until is not None and until():
                    how = "until"
        except KeyboardInterrupt:
            how = "interrupted"
        if how != "ended":
            progress(f"stopping the run (it saves first; at most {STOP_GRACE_S:.0f} s)")
            with handled(dict.fromkeys((signal.SIGINT, signal.SIGTERM), signal.SIG_IGN)):
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    kill(proc)
    reap(proc.pid)
    with log_path.open("rb") as f:
        f.seek(offset)
        return how, proc.returncode, f.read().decode(errors="replace")


def reap(group: int, grace_s: float = 10.0) -> None:
    """What a run left in its process group once its main process has exited (Sample
    Factory's workers outlive it when it is stopped): SIGTERM, so that they clean up
    (its resource tracker unlinks their semaphores), then SIGKILL after `grace_s`."""
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is empty
        os.killpg(group, signal.SIGTERM)
        end = time.monotonic() + grace_s
        while time.monotonic() < end:
            os.killpg(group, 0)  # raises once the last of it has gone
            time.sleep(0.1)
        os.killpg(group, signal.SIGKILL)


def warm_up(workdir: Path) -> None:
    """Load what every run imports once, so the first timed run does not pay for a cold
    file cache alone."""
    code = "import torch, gymnasium, stable_baselines3, pararl.cli, pararl.runners.offpolicy, "
    run_process([sys.executable, "-c", code + "pararl.runners.ppo"], 300.0, workdir)


def parse_final(stderr: str) -> dict[str, Any] | None:
    """The last `pararl: STATUS after N env steps in T s (best eval B)` line."""
    found = list(FINAL_LINE.finditer(stderr))
    if not found:
        return None
    m = found[-1]
    best = float(m["best"]) if re.fullmatch(r"-?[\d.]+", m["best"]) else None
    steps, seconds = int(m["steps"].replace(",", "")), float(m["secs"])
    return {"status": m["status"], "env_steps": steps, "train_s": seconds, "best_eval": best}


def parse_evaluate(stdout: str) -> float | None:
    """The mean return printed by `pararl evaluate`."""
    found = list(EVALUATE_LINE.finditer(stdout))
    return float(found[-1]["mean"]) if found else None


def read_metrics(run_dir: Path, name: str = "metrics.csv") -> list[dict[str, str]]:
    """The rows of a run's metrics.csv (or its eval.csv) so far (none before it exists)."""
    with contextlib.suppress(FileNotFoundError), (run_dir / name).open() as f:
        return list(csv.DictReader(f))
    return []


def evaluations(rows: list[dict[str, str]]) -> list[dict[str, float]]:
    """Every greedy evaluation: its env steps, wall seconds and mean return."""
    keys = ("env_steps", "wall_s", "eval_return")
    return [{k: float(r[k]) for k in keys} for r in rows if r.get("eval_return")]


def totals(rows: list[dict[str, str]]) -> tuple[int, int]:
    """The env steps and gradient updates a run got to."""
    updates = max((int(float(r["updates"])) for r in rows if r.get("updates")), default=0)
    return max((int(float(r["env_steps"])) for r in rows), default=0), updates


def clock(rows: list[dict[str, str]]) -> list[Point]:
    """(wall s, env steps, updates) of every complete row (a running run's last one
    may be cut short)."""
    points: list[Point] = []
    for row in rows:
        with contextlib.suppress(ValueError, TypeError, KeyError):
            updates = int(float(row.get("updates") or 0))
            points.append((float(row["wall_s"]), int(float(row["env_steps"])), updates))
    return points
