"""`python -m benchmarks maml_curves`: whole `pararl train maml` runs with the
reference configuration, their return before and after adaptation per meta-iteration
(from each run's `metrics.csv`), next to what the MAML paper reports."""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.lib import harness as h
from benchmarks.lib import training
from benchmarks.lib.figures import Panel, Series

# Finn et al. 2017 report curves, not numbers: after meta-training, one gradient step
# on a new task lifts the return well above the meta-policy's (2D navigation: Fig. 4,
# half-cheetah direction: Fig. 5), and pytorch-maml-rl's maintainers reach those
# curves on HalfCheetahDir/Vel after about 1,000 meta-updates.
PAPER = {
    "pararl/Navigation2D-v0": "Fig. 4: the adapted policy heads for the goal after one step",
    "pararl/HalfCheetahDir-v0": "Fig. 5: the gap opens over meta-training (~1,000 updates)",
}


@dataclass(frozen=True)
class Config(h.Options):
    """Meta-training curves of `pararl train maml` (return before and after one
    adaptation step per meta-iteration). --quick: Navigation2D, 2 small iterations."""

    runs: tuple[str, ...] = ("pararl/Navigation2D-v0:500", "pararl/HalfCheetahDir-v0:100")
    """ENV:META_ITERATIONS runs of `pararl train maml` (its defaults otherwise)."""
    seed: int = 0
    """Seed of every run."""
    workers: int = 2
    """Env worker processes."""
    timeout_s: float = 3600.0
    """Wall-time bound of each run (killed and reported as failed after it)."""
    train_args: tuple[str, ...] = ()
    """More `pararl train maml` options, as given on its command line."""


QUICK = {
    "runs": ("pararl/Navigation2D-v0:2",),
    "timeout_s": 300.0,
    "train_args": ("--meta-batch-size", "4", "--fast-batch-size", "4", "--episode-length", "20"),
}


def resolve(config: Config) -> Config:
    c = h.apply_quick(config, QUICK)
    h.require(c, ">= 1: workers", "> 0: timeout_s")
    h.check([(not c.runs, "--runs needs at least one ENV:ITERATIONS")])
    for spec in c.runs:
        parse_spec(spec)
    return c


@dataclass
class Curve:
    """One meta-training run."""

    env: str
    iterations: int  # asked for
    wall_s: float
    ok: bool
    points: list[dict[str, float]] = field(default_factory=list)  # iteration, pre, post, wall_s
    note: str = ""

    def last(self, key: str, n: int) -> float | None:
        values = [p[key] for p in self.points[-n:]]
        return statistics.fmean(values) if values else None


def parse_spec(spec: str) -> tuple[str, int]:
    """ENV:ITERATIONS."""
    env, _, iterations = spec.rpartition(":")
    bad = not env or not iterations.isdigit() or int(iterations) < 1
    h.check([(bad, f"--runs: '{spec}' is not ENV:ITERATIONS (iterations >= 1)")])
    return env, int(iterations)


def command(
    env: str, iterations: int, seed: int, workers: int, run_dir: Path, extra: Sequence[str] = ()
) -> list[str]:
    return training.train_command(
        "maml", *extra, "--no-tensorboard", env=env, meta_iterations=iterations, seed=seed,
        workers=workers,
        target_return=1e12,  # every iteration asked for
        run_dir=run_dir, progress="plain",
    )  # fmt: skip


def read_curve(run_dir: Path) -> list[dict[str, float]]:
    rows = [r for r in training.read_metrics(run_dir) if r.get("pre_return")]
    return [
        {
            "iteration": float(r["iteration"]),
            "pre": float(r["pre_return"]),
            "post": float(r["post_return"]),
            "wall_s": float(r["wall_s"]),
        }
        for r in rows
    ]


def run_curve(
    env: str,
    iterations: int,
    seed: int,
    workers: int,
    timeout_s: float,
    workdir: Path,
    extra: Sequence[str] = (),
) -> Curve:
    out = workdir / f"maml-{env.replace('/', '_')}"
    h.progress(f"maml: meta-training {env} for {iterations} iterations ...")
    cmd = command(env, iterations, seed, workers, out, extra)
    done = training.run_process(cmd, timeout_s, workdir)
    curve = Curve(env, iterations, done.wall_s, done.returncode == 0)
    curve.points = read_curve(out)
    if not curve.ok:
        curve.note = done.tail
    h.progress(f"maml: {env}: {len(curve.points)} iterations in {done.wall_s:.0f} s")
    return curve


def fmt(v: float | None) -> str:
    return "–" if v is None else f"{v:.1f}"


LAST = 10  # iterations averaged for the end of a run

COLUMNS: list[h.Col[Curve]] = [
    h.Col("env", lambda c: c.env, "l"),
    h.Col("meta-iterations", lambda c: f"{len(c.points)} / {c.iterations}"),
    h.Col("wall", lambda c: f"{c.wall_s / 60:.1f} min"),
    h.Col("first 10: pre → post", lambda c: first(c)),
    h.Col(f"last {LAST}: pre", lambda c: fmt(c.last("pre", LAST))),
    h.Col(f"last {LAST}: post", lambda c: fmt(c.last("post", LAST))),
    h.Col(
        "post > pre",
        lambda c: f"{sum(p['post'] > p['pre'] for p in c.points)} of {len(c.points)} iterations",
    ),
    h.Col("MAML paper", lambda c: PAPER.get(c.env, "–"), "l"),
    h.Col("note", lambda c: c.note, "l"),
]


def first(c: Curve) -> str:
    head = c.points[:LAST]
    if not head:
        return "–"
    pre, post = (statistics.fmean(p[k] for p in head) for k in ("pre", "post"))
    return f"{pre:.1f} → {post:.1f}"


def panels(curves: list[Curve]) -> list[Panel]:
    out = []
    for c in curves:
        x = [p["iteration"] for p in c.points]
        out.append(
            Panel(
                f"{c.env}: meta-training",
                [
                    Series(
                        "before adaptation", x, [p["pre"] for p in c.points], fmt="-", color="C1"
                    ),
                    Series("after one step", x, [p["post"] for p in c.points], fmt="-", color="C0"),
                ],
                xlabel="meta-iteration",
                ylabel="mean return of the tasks' episodes",
            )
        )
    return out


def measure(c: Config, meta: h.Metadata) -> list[Curve]:
    del meta
    with tempfile.TemporaryDirectory(prefix="pararl-bench-maml-") as tmp:
        return [
            run_curve(*parse_spec(spec), c.seed, c.workers, c.timeout_s, Path(tmp), c.train_args)
            for spec in c.runs
        ]


def report(curves: list[Curve], meta: h.Metadata) -> h.Report:
    gaps = [
        f"{c.env}: {fmt(c.last('pre', LAST))} before, {fmt(c.last('post', LAST))} after "
        f"adaptation over the last {min(LAST, len(c.points))} of {len(c.points)} iterations"
        for c in curves
    ]
    return h.Report(
        f"MAML-TRPO meta-training curves (`{h.PROG} maml_curves`)",
        "; ".join(gaps),
        [h.table(COLUMNS, curves)],
        panels(curves),
        "MAML-TRPO: return before and after adaptation per meta-iteration",
    )


__all__ = ["Config", "Curve", "measure", "report", "resolve", "run_curve"]
