"""`pararl bench devices`: where PPO should act and learn (the seeds/002 study).

seeds/002 timed PPO on CartPole three ways — GPU only 2m08s, CPU only 47 s, CPU
sampling + GPU training 43–45 s — and found CPU-only fastest for 64-wide nets and
CPU acting + GPU learning fastest from 128 wide up. This benchmark repeats that for
several hidden widths: the wall time of `pararl train ppo` for a fixed number of env
steps (no early stop: `--target-return 1e9`, one evaluation at the end) with
`--act-device/--learn-device` cpu/cpu, cuda/cuda, cpu/cuda, and auto/auto — for
which it reports what `auto` picked and the start-up timings it picked on (the
run's config.json, `resolved.devices`). Without CUDA the GPU placements are not
run and say "no CUDA"; the CPU rows still run.

Each run is a whole `pararl train ppo` process, not an in-process `pararl.train`
call, because:
- that is what a user runs and what seeds/002 timed: CUDA initialisation, the
  device-choice timings and worker start-up are part of what a placement costs;
- a process per run starts clean: no CUDA context, cached kernels or allocator
  pool left by the previous placement, and no torch thread count left behind
  (training sets it globally, by model size);
- a run that fails (CUDA out of memory, a crash) is reported, and the rest go on.
Start-up is reported on its own: wall time minus the trainer's own clock (which
starts once the devices are chosen and the run directory is made).

Runs are interleaved (every width and placement once per round, `repeats` rounds)
and the median is reported with min and max, and each placement's ratio to
CPU-only. Writes `devices.json`, a PNG and (full mode) the bench:devices section
of BENCHMARKS.md.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pararl.bench import devices_report
from pararl.bench.common import command_line, interleaved, progress, run_metadata
from pararl.bench.dqn_solve import parse_pararl_final, run_process, tail, warm_up
from pararl.bench.publish import OutputOptions, apply_quick, check, outputs, publish

PROG = "pararl bench devices"
SECTION = "devices"
Placement = Literal["cpu-only", "gpu-only", "cpu-act-gpu-learn", "auto"]
ALL_PLACEMENTS: tuple[Placement, ...] = ("cpu-only", "gpu-only", "cpu-act-gpu-learn", "auto")
DEVICES: dict[str, tuple[str, str]] = {  # placement -> (--act-device, --learn-device)
    "cpu-only": ("cpu", "cpu"),
    "gpu-only": ("cuda", "cuda"),
    "cpu-act-gpu-learn": ("cpu", "cuda"),
    "auto": ("auto", "auto"),
}
NO_CUDA = "no CUDA"


@dataclass(frozen=True)
class DevicesBenchConfig(OutputOptions):
    """PPO wall time for a fixed number of env steps, per device placement and hidden
    width (seeds/002: act on the CPU, learn on the GPU?).

    Never run two benchmarks at once. --quick sets the options left at their defaults
    to a tiny run (< 1 min without CUDA) and writes only into --out-dir.
    """

    quick: bool = False
    """Fast check of the harness: widths 64 and 1024, 2,048 steps, 1 round; no claims."""

    env: str = "CartPole-v1"
    """Gymnasium env id."""

    total_steps: int = 20_000
    """Env steps per run (the run never stops early)."""

    widths: tuple[int, ...] = (64, 128, 256, 1024)
    """Hidden widths; each run's MLPs have `depth` layers of that width."""

    depth: int = 2
    """Hidden layers of the actor and critic MLPs."""

    placements: tuple[Placement, ...] = ALL_PLACEMENTS
    """Placements to time (`auto`: pararl's measured choice)."""

    repeats: int = 3
    """Rounds; every width and placement runs once per round."""

    eval_episodes: int = 2
    """Episodes of the one evaluation at the end of each run."""

    seed: int = 0
    """Training seed (the same for every run)."""

    run_timeout_s: float = 900.0
    """One training process is killed after this long (reported as a timeout)."""


QUICK: dict[str, Any] = {
    "total_steps": 2_048,
    "widths": (64, 1024),
    "repeats": 1,
    "eval_episodes": 1,
    "run_timeout_s": 120.0,
}


def resolve(config: DevicesBenchConfig) -> DevicesBenchConfig:
    """Apply --quick to the options left at their defaults, then check every value."""
    if config.quick:
        config = apply_quick(config, QUICK)
    check(
        [
            (config.total_steps < 1, "--total-steps must be >= 1"),
            (not config.widths or min(config.widths) < 1, "--widths needs values >= 1"),
            (config.depth < 1, "--depth must be >= 1"),
            (not config.placements, "--placements needs at least one"),
            (config.repeats < 1, "--repeats must be >= 1 (3 or more for results worth keeping)"),
            (config.eval_episodes < 1, "--eval-episodes must be >= 1"),
            (not config.run_timeout_s > 0, "--run-timeout-s must be > 0"),
        ]
    )
    return config


def train_command(config: DevicesBenchConfig, width: int, placement: str, out: Path) -> list[str]:
    act, learn = DEVICES[placement]
    steps = str(config.total_steps)
    return [
        *(sys.executable, "-m", "pararl.cli", "train", "ppo", "--env", config.env),
        *("--seed", str(config.seed), "--hidden", *[str(width)] * config.depth),
        *("--act-device", act, "--learn-device", learn),
        *("--total-steps", steps, "--target-return", "1e9", "--eval-every", steps),
        *("--eval-episodes", str(config.eval_episodes), "--no-tensorboard"),
        *("--progress", "plain", "--run-dir", str(out)),
    ]


def run_one(
    config: DevicesBenchConfig, width: int, placement: str, round_: int, workdir: Path
) -> dict[str, Any]:
    """One training process: wall time, the trainer's clock, and what it resolved."""
    out = workdir / f"w{width}-{placement}-r{round_}"
    done = run_process(train_command(config, width, placement, out), config.run_timeout_s, workdir)
    final = parse_pararl_final(done.stderr)
    run: dict[str, Any] = {
        "width": width,
        "placement": placement,
        "round": round_,
        "wall_s": done.wall_s,
        "returncode": done.returncode,
        "status": "failed",
        "note": "",
    }
    if done.timed_out:
        run.update(status="timeout", note=f"killed after {config.run_timeout_s:g} s")
    elif final is None or done.returncode != 0:
        run["note"] = f"rc {done.returncode}: {tail(done.stderr)}"
    else:
        run.update(status="ok", env_steps=final["env_steps"], train_s=final["train_s"])
        run["startup_s"] = done.wall_s - final["train_s"]
        resolved = json.loads((out / "config.json").read_text()).get("resolved", {})
        run["resolved"] = {k: resolved.get(k) for k in ("mode", "num_envs", "learner_threads")}
        run["devices"] = resolved.get("devices")
    return run


def _summary(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize_cell(runs: list[dict[str, Any]], width: int, placement: str) -> dict[str, Any]:
    mine = [r for r in runs if r["width"] == width and r["placement"] == placement]
    ok = [r for r in mine if r["status"] == "ok"]
    cell: dict[str, Any] = {
        "width": width,
        "placement": placement,
        "runs": len(mine),
        "ok": len(ok),
        "wall_s": _summary([r["wall_s"] for r in ok]),
        "train_s": _summary([r["train_s"] for r in ok]),
        "startup_s": _summary([r["startup_s"] for r in ok]),
        "status": "ok" if ok else (mine[-1]["status"] if mine else NO_CUDA),
        "note": "" if ok or not mine else mine[-1]["note"],
    }
    if ok and placement == "auto":
        devices = ok[-1]["devices"] or {}
        cell["picked"] = {"act": devices.get("act"), "learn": devices.get("learn")}
        cell["reason"] = devices.get("reason")
        cell["timings_ms"] = devices.get("timings_ms")
    return cell


def summarize_width(
    runs: list[dict[str, Any]], width: int, placements: tuple[str, ...]
) -> dict[str, Any]:
    """Every placement of one width, each placement's ratio to CPU-only, the fastest."""
    cells = {p: summarize_cell(runs, width, p) for p in placements}
    cpu = cells.get("cpu-only", {}).get("wall_s")
    for cell in cells.values():
        wall = cell["wall_s"]
        cell["ratio_to_cpu"] = (
            None if wall is None or cpu is None else wall["median"] / cpu["median"]
        )
    timed = {p: c["wall_s"]["median"] for p, c in cells.items() if c["wall_s"] and p != "auto"}
    return {
        "width": width,
        "placements": cells,
        "fastest": min(timed, key=lambda p: timed[p]) if timed else None,
    }


def measure(config: DevicesBenchConfig, cuda: bool) -> dict[str, Any]:
    """Every (width, placement) once per round, interleaved; GPU ones only with CUDA."""
    runs: list[dict[str, Any]] = []
    rounds: dict[str, int] = {}

    def task(width: int, placement: str, workdir: Path) -> float:
        name = f"{width}/{placement}"
        rounds[name] = rounds.get(name, 0) + 1
        progress(f"devices: width {width}, {placement}, round {rounds[name]} ...")
        run = run_one(config, width, placement, rounds[name], workdir)
        runs.append(run)
        progress(f"devices: width {width}, {placement}: {run['status']}, {run['wall_s']:.1f} s")
        if run["status"] != "ok":
            raise RuntimeError(run["note"] or run["status"])
        return float(run["wall_s"])

    def failed(name: str, exc: Exception) -> None:
        progress(f"devices: {name} failed, not run again: {exc}")

    runnable = [p for p in config.placements if cuda or "cuda" not in DEVICES[p]]
    with tempfile.TemporaryDirectory(prefix="pararl-bench-devices-") as tmp:
        workdir = Path(tmp)
        warm_up(workdir)
        tasks = {
            f"{w}/{p}": functools.partial(task, w, p, workdir)
            for w in config.widths
            for p in runnable
        }
        interleaved(tasks, config.repeats, on_error=failed)
    return {
        "cuda": cuda,
        "widths": [summarize_width(runs, w, config.placements) for w in config.widths],
        "runs": runs,
    }


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def run(config: DevicesBenchConfig) -> dict[str, Any]:
    """Measure, print the tables, write JSON, PNG and (full mode) BENCHMARKS.md."""
    command = command_line(PROG, config)
    config = resolve(config)
    outs = outputs(SECTION, config)
    meta = run_metadata(dataclasses.asdict(config), command)
    cuda = cuda_available()
    if cuda:
        import torch

        meta["gpu"] = torch.cuda.get_device_name(0)
    start = time.perf_counter()
    data: dict[str, Any] = {"benchmark": SECTION, "metadata": meta, **measure(config, cuda)}
    meta["wall_s"] = round(time.perf_counter() - start, 1)
    data["key_ratios"] = devices_report.key_ratios(data)
    publish(
        PROG,
        SECTION,
        data,
        outs,
        devices_report.tables(data),
        devices_report.plot,
        devices_report.markdown_section,
    )
    progress(f"{PROG}: done in {meta['wall_s']} s")
    return data
