"""`python -m benchmarks vector_change --base REF`: `ParallelVectorEnv` of this
checkout against git ref REF's, each block in a fresh interpreter, interleaved.
"""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Literal

from benchmarks.lib import harness as h
from benchmarks.lib.figures import Panel, Series
from pararl.mp.topology import physical_cores

Version = Literal["base", "this"]

# One timed block, in its own interpreter: warm up, then step for `block_s` seconds.
BLOCK = """
import json, sys, time
import gymnasium as gym, numpy as np
import pararl, pararl.envs
from pararl.vector import ParallelVectorEnv
a = json.loads(sys.argv[1])
fns = [lambda: gym.make(a["env"])] * (a["workers"] * a["epw"])
envs = ParallelVectorEnv(fns, num_workers=a["workers"], autoreset_mode="SameStep")
try:
    envs.reset(seed=a["seed"])
    envs.action_space.seed(a["seed"])
    acts = [envs.action_space.sample() for _ in range(64)]
    for i in range(a["warmup"]):
        envs.step(acts[i % 64])
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < a["block_s"]:
        envs.step(acts[steps % 64])
        steps += 1
    elapsed = time.perf_counter() - start
finally:
    envs.close()
print(json.dumps({"rate": steps * len(fns) / elapsed, "module": pararl.__file__}))
"""


@dataclass(frozen=True)
class Config(h.Options):
    """Throughput of this checkout's ParallelVectorEnv against a git ref's.
    --quick: CartPole, 4 envs/worker, 2 short repeats."""

    base: str = "HEAD"
    """Git ref to compare against (HEAD: measure the uncommitted changes)."""
    envs: tuple[str, ...] = ("CartPole-v1", "HalfCheetah-v5")
    """Gymnasium env ids."""
    envs_per_worker: tuple[int, ...] = (1, 16, 256)
    """Envs per worker; total envs = workers × envs per worker."""
    workers: int | None = None
    """Worker processes; default: the physical cores available to this process."""
    repeats: int = 5
    """Timed blocks per version and case, interleaved."""
    block_s: float = 1.0
    """Seconds of stepping per timed block."""
    warmup_steps: int = 20
    """Untimed vector steps after reset."""
    seed: int = 0
    """Seed for env resets and the pre-drawn actions."""


QUICK = {"envs": ("CartPole-v1",), "envs_per_worker": (4,), "repeats": 2, "block_s": 0.2}


def resolve(config: Config) -> Config:
    config = h.apply_quick(config, QUICK)
    h.require(config, ">= 1: envs_per_worker repeats warmup_steps workers", "> 0: block_s")
    h.check([(commit(config.base) is None, f"--base: {config.base!r} is not a git ref here")])
    return config


def commit(ref: str) -> str | None:
    """The short commit of `ref`, or None when git does not know it."""
    done = subprocess.run(
        ["git", "rev-parse", "--short", "--verify", f"{ref}^{{commit}}"],
        cwd=h.ROOT,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() if done.returncode == 0 else None


@dataclass
class Cell:
    env: str
    envs_per_worker: int
    num_envs: int
    rates: dict[str, list[float]]

    def summary(self, version: Version) -> h.Summary | None:
        return h.maybe(self.rates.get(version, []))

    @property
    def ratio(self) -> float | None:
        return h.ratio(self.summary("this"), self.summary("base"))


@dataclass
class Result:
    config: Config
    base_commit: str
    cells: list[Cell]


def extract(ref: str, into: Path) -> Path:
    """`src/` of git ref `ref`, written under `into`; returns that `src` folder."""
    blob = subprocess.run(
        ["git", "archive", ref, "src"], cwd=h.ROOT, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def block(src: Path, args: dict[str, object]) -> float:
    """Env steps/s of one block run on the pararl found in `src`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(h.ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", BLOCK, json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=tempfile.gettempdir(),  # MuJoCo's warnings file lands there, not in the repo
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr else "failed")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(out["module"]).resolve().is_relative_to(src.resolve()):
        raise RuntimeError(f"imported pararl from {out['module']}, not from {src}")
    return float(out["rate"])


def complain(env: str, version: str, exc: Exception) -> None:
    h.progress(f"vector_change: {version} failed on {env}: {exc}")


def measure(c: Config, meta: h.Metadata) -> Result:
    del meta
    workers = c.workers or physical_cores()
    cells: list[Cell] = []
    with tempfile.TemporaryDirectory(prefix="pararl-bench-base-") as tmp:
        trees: dict[str, Path] = {"base": extract(c.base, Path(tmp)), "this": h.ROOT / "src"}
        for env in c.envs:
            for epw in c.envs_per_worker:
                h.progress(f"vector_change: {env}, {epw} envs/worker ...")
                args = {"env": env, "workers": workers, "epw": epw, "seed": c.seed,
                        "warmup": c.warmup_steps, "block_s": c.block_s}  # fmt: skip
                tasks = {v: functools.partial(block, src, args) for v, src in trees.items()}
                rates = h.interleaved(tasks, c.repeats, functools.partial(complain, env))
                cells.append(Cell(env, epw, workers * epw, rates))
    return Result(c, commit(c.base) or c.base, cells)


def report(result: Result, meta: h.Metadata) -> h.Report:
    del meta
    cols: list[h.Col[Cell]] = [
        h.Col("env", lambda x: x.env, "l"),
        h.Col("envs/worker", lambda x: x.envs_per_worker),
        h.Col("envs", lambda x: x.num_envs),
        h.Col(f"base {result.base_commit} (steps/s)", lambda x: h.fmt_spread(x.summary("base"))),
        h.Col("this checkout (steps/s)", lambda x: h.fmt_spread(x.summary("this"))),
        h.Col("this ÷ base", lambda x: h.fmt_ratio(x.ratio)),
    ]
    notes = (
        f"Median (min–max) of {result.config.repeats} interleaved blocks of "
        f"{result.config.block_s} s, each in a fresh interpreter; SAME_STEP autoreset, "
        "pre-drawn actions of the action space's dtype."
    )
    keys = []
    panels = []
    for env in dict.fromkeys(x.env for x in result.cells):
        mine = [x for x in result.cells if x.env == env and x.ratio is not None]
        ratios = [x.ratio for x in mine if x.ratio is not None]
        if ratios:
            geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
            keys.append(
                f"{env}: this ÷ base {geo:.3f} (geometric mean), {min(ratios):.3f} at worst"
            )
        series = [
            Series(
                version,
                [x.envs_per_worker for x in mine],
                [h.med(x.summary(version)) or 0.0 for x in mine],
            )
            for version in ("base", "this")
        ]
        panels.append(Panel(env, series, "envs per worker", "env steps/s", logx=2))
    return h.Report(
        f"Vector env change against {result.config.base} (`python -m benchmarks vector_change`)",
        "; ".join(keys) or "nothing measured",
        [notes + "\n\n" + h.table(cols, result.cells)],
        panels,
        figure_alt="throughput, base against this checkout",
    )
