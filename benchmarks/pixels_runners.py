"""The runs of `benchmarks.pixels`: one training process per run, pararl's
(`pararl train`) or SB3's (`benchmarks.pixels_sb3`), and what is read from them.

- MinAtar: a learning curve over the whole budget (`Run`, as `benchmarks.mujoco`'s,
  with the curve read from pararl's metrics.csv or SB3's result line).
- Pong: the clock of a run, (wall s, agent steps, updates) points, stopped a slice
  of wall time after its first gradient update (pararl by SIGTERM, which it answers
  by finishing cleanly; SB3 by its callback); `window_rate` reads agent steps/s over
  that slice the same way for both.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import harness as h
from benchmarks.mujoco import Run, read_pararl
from benchmarks.solve import parse_pararl_final, parse_sb3, run_process

PPO_WORKERS, PPO_ENVS_PER_WORKER = 2, 4  # 8 envs, as SB3's (`pixels_sb3.PPO_ENVS`)
NEVER = 10**12  # a step count no run reaches: no evaluation, no checkpoint, no target


def algo_of(system: str) -> str:
    """`pararl-dqn-per` -> `dqn`."""
    return system.split("-")[1]


def pararl_command(system: str, env: str, seed: int, run_dir: Path, **flags: object) -> list[str]:
    """`pararl train ALGO` for `system` (`pararl-dqn`: async DQN, `pararl-dqn-per`: with
    prioritized replay, `pararl-ppo`: 8 envs), its defaults otherwise."""
    algo = algo_of(system)
    common = {"env": env, "seed": seed, "run_dir": run_dir, "progress": "plain", **flags}
    if algo == "dqn":
        common["mode"] = "async"
    else:
        common |= {"workers": PPO_WORKERS, "envs_per_worker": PPO_ENVS_PER_WORKER}
    args = [str(x) for k, v in common.items() for x in ("--" + k.replace("_", "-"), v)]
    extra = ["--prioritized"] if system.endswith("-per") else []
    return [sys.executable, "-m", "pararl.cli", "train", algo, *args, *extra, "--no-tensorboard"]


def sb3_command(system: str, part: str, **flags: object) -> list[str]:
    args = [str(x) for k, v in flags.items() for x in ("--" + k.replace("_", "-"), v)]
    return [sys.executable, "-m", "benchmarks.pixels_sb3", algo_of(system), part, *args]


@dataclass(frozen=True)
class Budget:
    """A MinAtar run's budget and evaluations."""

    steps: int
    eval_every: int
    eval_episodes: int
    timeout_s: float


def launch_clock(curve: list[dict[str, float]], wall_s: float, own_s: float | None) -> None:
    """Put a curve on the launch-to-exit clock: each system's clock starts at its own
    point of its start-up, so what its process spent outside it (imports, building
    envs and networks, shutting down) is added to every point, all as if start-up."""
    offset = 0.0 if own_s is None else max(wall_s - own_s, 0.0)
    for point in curve:
        point["wall_s"] = round(point["wall_s"] + offset, 3)


def minatar_run(system: str, env: str, seed: int, b: Budget, workdir: Path) -> Run:
    """One whole MinAtar run of `system`, launch to exit, with its curve on that clock."""
    out = workdir / f"{system}-{env.replace('/', '_')}-{seed}"
    flags = {"seed": seed, "budget": b.steps, "eval_every": b.eval_every}
    if system.startswith("sb3"):
        cmd = sb3_command(system, "minatar", env=env, eval_episodes=b.eval_episodes, **flags)
        done = run_process(cmd, b.timeout_s, workdir)
        result = parse_sb3(done.stdout, algo_of(system))
        run = Run(system, env, seed, done.wall_s, done.returncode == 0 and result is not None)
        if result is not None:
            run.curve, run.env_steps = result["curve"], result["env_steps"]
            run.updates = result["updates"]
            launch_clock(run.curve, done.wall_s, result["train_s"])
    else:
        cmd = pararl_command(
            system, env, seed, out, total_steps=b.steps, eval_every=b.eval_every,
            eval_episodes=b.eval_episodes, target_return=NEVER,
        )  # fmt: skip
        done = run_process(cmd, b.timeout_s, workdir)
        run = Run(system, env, seed, done.wall_s, done.returncode == 0)
        if (out / "metrics.csv").is_file():
            run.curve, run.env_steps, run.updates = read_pararl(out)
            final = parse_pararl_final(done.stderr)
            launch_clock(run.curve, done.wall_s, None if final is None else final["train_s"])
    if not run.ok:
        run.note = done.tail
    return run


def time_to_reach(run: Run, target: float) -> float:
    """Wall s (the run's own clock) of its first evaluation at `target` or above; inf
    when none reaches it."""
    return next((p["wall_s"] for p in run.curve if p["eval_return"] >= target), math.inf)


def censored_median(values: Sequence[float]) -> float | None:
    """The median, a run that never got there counting as infinitely late; None when
    that median is infinite (or there is nothing)."""
    if not values:
        return None
    m = statistics.median(values)
    return None if math.isinf(m) else m


Point = tuple[float, int, int]  # wall s, agent steps, updates


@dataclass
class Slice:
    """One Pong run's clock and its agent steps/s over the slice after its first update."""

    system: str
    points: list[Point] = field(default_factory=list)
    rate: float | None = None
    window_s: float | None = None
    updates_per_s: float | None = None
    note: str = ""


def window_rate(points: Sequence[Point], slice_s: float) -> tuple[float, float, float] | None:
    """(agent steps/s, seconds measured, updates/s) from the first point with an update
    to the last one within `slice_s` of it; None without two such points."""
    start = next((i for i, p in enumerate(points) if p[2] > 0), None)
    if start is None:
        return None
    t0, s0, u0 = points[start]
    inside = [p for p in points[start + 1 :] if p[0] - t0 <= slice_s * 1.05]
    if not inside:
        return None
    t1, s1, u1 = inside[-1]
    return (s1 - s0) / (t1 - t0), t1 - t0, (u1 - u0) / (t1 - t0)


def read_clock(run_dir: Path) -> list[Point]:
    """(wall s, env steps, updates) of every complete row of a running run's metrics.csv."""
    points: list[Point] = []
    with contextlib.suppress(FileNotFoundError), (run_dir / "metrics.csv").open() as f:
        for row in csv.DictReader(f):
            with contextlib.suppress(ValueError, TypeError):
                updates = int(float(row.get("updates") or 0))
                points.append((float(row["wall_s"]), int(float(row["env_steps"])), updates))
    return points


def pararl_slice(system: str, env: str, learning_starts: int, slice_s: float,
                 timeout_s: float, workdir: Path) -> Slice:  # fmt: skip
    """`pararl train` on Pong until `slice_s` after its first update, then SIGTERM; the
    run is killed (with its process group) if it has not finished `timeout_s` after
    launch."""
    out = workdir / f"{system}-pong"
    flags: dict[str, object] = dict(
        total_steps=NEVER, eval_every=NEVER, checkpoint_every=NEVER, log_every_s=1.0,
        target_return=NEVER,
    )  # fmt: skip
    if algo_of(system) == "dqn":
        flags["learning_starts"] = learning_starts
    cmd = pararl_command(system, env, 0, out, **flags)
    path = os.pathsep.join(p for p in (str(h.ROOT), os.environ.get("PYTHONPATH")) if p)
    env_vars = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path}
    proc = subprocess.Popen(
        cmd, cwd=workdir, env=env_vars, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    deadline, result = time.monotonic() + timeout_s, Slice(system)
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(1.0)
        points = read_clock(out)
        first = next((p[0] for p in points if p[2] > 0), None)
        if first is not None and points[-1][0] - first >= slice_s:
            proc.send_signal(signal.SIGTERM)  # pararl finishes cleanly (exit status 143)
            break
    try:
        _, err = proc.communicate(timeout=max(deadline - time.monotonic(), 30.0))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the group we started, and only it
        _, err = proc.communicate()
        result.note = f"killed after {timeout_s:g} s"
    result.points = read_clock(out)
    if proc.returncode not in (0, 143) and not result.note:
        result.note = f"rc {proc.returncode}: " + " | ".join(err.strip().splitlines()[-3:])
    return result


def sb3_slice(system: str, env: str, learning_starts: int, slice_s: float,
              timeout_s: float, workdir: Path) -> Slice:  # fmt: skip
    cmd = sb3_command(system, "pong", env=env, slice_s=slice_s, learning_starts=learning_starts)
    done = run_process(cmd, timeout_s, workdir)
    parsed = parse_sb3(done.stdout, algo_of(system))
    result = Slice(system, [tuple(p) for p in parsed["points"]] if parsed else [])
    if parsed is None or done.returncode != 0:
        result.note = done.tail
    return result


def pong_slice(system: str, envs: tuple[str, str], learning_starts: int, slice_s: float,
               timeout_s: float, workdir: Path) -> Slice:  # fmt: skip
    """One Pong throughput run of `system` (`envs`: pararl's id, SB3's id)."""
    if system.startswith("sb3"):
        run = sb3_slice(system, envs[1], learning_starts, slice_s, timeout_s, workdir)
    else:
        run = pararl_slice(system, envs[0], learning_starts, slice_s, timeout_s, workdir)
    measured = window_rate(run.points, slice_s)
    if measured is not None:
        run.rate, run.window_s, run.updates_per_s = measured
    elif not run.note:
        run.note = "no update within the run"
    return run
