"""Results of `pararl bench vector`: derived ratios, markdown tables, the plot and
the BENCHMARKS.md section."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pararl.bench.common import (
    Summary,
    fmt_percent,
    fmt_rate,
    fmt_ratio,
    markdown_table,
)
from pararl.bench.publish import section_header
from pararl.bench.vector_backends import backend_label

PARARL_MODES = ("pararl_step", "pararl_min_envs", "pararl_timeout")


@dataclass
class Cell:
    """One backend at one point of the sweep."""

    backend: str
    status: str  # "ok", "skipped" or "failed"
    note: str = ""
    steps_per_block: int = 0
    rate: Summary | None = None
    ratio_to_best_async: float | None = None
    efficiency: float | None = None
    of_loops: float | None = None  # steps/s ÷ the parallel loops' steps/s, same case

    def as_dict(self, timeout_s: float) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "label": backend_label(self.backend, timeout_s),
            "status": self.status,
            "note": self.note,
            "steps_per_block": self.steps_per_block,
            "steps_per_s": None if self.rate is None else self.rate.as_dict(),
            "ratio_to_best_async": self.ratio_to_best_async,
            "efficiency": self.efficiency,
            "of_loops": self.of_loops,
        }


@dataclass
class CaseResult:
    envs_per_worker: int
    num_envs: int
    cells: dict[str, Cell]

    def median(self, backend: str) -> float | None:
        cell = self.cells.get(backend)
        return None if cell is None or cell.rate is None else cell.rate.median


@dataclass
class EnvResult:
    env_id: str
    env_kwargs: dict[str, Any]
    workers: int
    skipped: str | None = None
    cases: list[CaseResult] = field(default_factory=list)
    best_async: tuple[float, int] | None = None  # (median steps/s, envs per worker)
    single_rate: float | None = None  # median over the cases' single-env medians

    def derive(self) -> None:
        """Fill in ratios to AsyncVectorEnv's best setting and efficiencies.

        Efficiency uses the single-env rate of the same case: it was measured
        interleaved with the others, so it saw the same machine.
        """
        asyncs = [(c.median("gym_async"), c.envs_per_worker) for c in self.cases]
        measured = [(rate, epw) for rate, epw in asyncs if rate is not None]
        self.best_async = max(measured) if measured else None
        singles = [r for r in (c.median("single") for c in self.cases) if r is not None]
        self.single_rate = statistics.median(singles) if singles else None
        for case in self.cases:
            single, loops = case.median("single"), case.median("loops")
            for cell in case.cells.values():
                if cell.rate is None:
                    continue
                if self.best_async is not None:
                    cell.ratio_to_best_async = cell.rate.median / self.best_async[0]
                if single:
                    cell.efficiency = cell.rate.median / (self.workers * single)
                if loops:
                    cell.of_loops = cell.rate.median / loops

    def best_pararl(self) -> tuple[float, Cell, CaseResult] | None:
        found = [
            (cell.rate.median, cell, case)
            for case in self.cases
            for name, cell in case.cells.items()
            if name in PARARL_MODES and cell.rate is not None
        ]
        return max(found, key=lambda t: t[0]) if found else None

    def as_dict(self, timeout_s: float) -> dict[str, Any]:
        return {
            "env_id": self.env_id,
            "env_kwargs": self.env_kwargs,
            "workers": self.workers,
            "skipped": self.skipped,
            "best_async": None
            if self.best_async is None
            else {"steps_per_s": self.best_async[0], "envs_per_worker": self.best_async[1]},
            "single_env_steps_per_s": self.single_rate,
            "cases": [
                {
                    "envs_per_worker": c.envs_per_worker,
                    "num_envs": c.num_envs,
                    "results": [cell.as_dict(timeout_s) for cell in c.cells.values()],
                }
                for c in self.cases
            ],
        }


def env_table(result: EnvResult, timeout_s: float) -> str:
    """Markdown: a heading, what the ratios mean, and one row per (case, backend)."""
    title = f"### {result.env_id}"
    if result.env_kwargs:
        title += " (" + ", ".join(f"{k}={v}" for k, v in result.env_kwargs.items()) + ")"
    if result.skipped:
        return f"{title}\n\nskipped: {result.skipped}"
    best = (
        "–"
        if result.best_async is None
        else f"{fmt_rate(result.best_async[0])} steps/s at {result.best_async[1]} envs/worker"
    )
    rows = []
    for case in result.cases:
        for cell in case.cells.values():
            label = backend_label(cell.backend, timeout_s)
            if cell.rate is None:
                rows.append(
                    [
                        case.envs_per_worker,
                        case.num_envs,
                        label,
                        f"{cell.status} ({cell.note})",
                        "–",
                        "–",
                        "–",
                        "–",
                        "–",
                    ]
                )
                continue
            rows.append(
                [
                    case.envs_per_worker,
                    case.num_envs,
                    label,
                    fmt_rate(cell.rate.median),
                    fmt_rate(cell.rate.min),
                    fmt_rate(cell.rate.max),
                    fmt_ratio(cell.ratio_to_best_async),
                    fmt_percent(cell.efficiency),
                    fmt_percent(cell.of_loops),
                ]
            )
    table = markdown_table(
        [
            "envs/worker",
            "envs",
            "backend",
            "steps/s (median)",
            "min",
            "max",
            "vs best Async",
            "efficiency",
            "of loops",
        ],
        rows,
        align="rrlrrrrrr",
    )
    notes = (
        f"{result.workers} workers. Best AsyncVectorEnv: {best}. Efficiency = steps/s ÷ "
        f"({result.workers} × the single-env rate of the same row group). Of loops = "
        f"steps/s ÷ the rate of {result.workers} single-env loops run at once in their own "
        "processes, same row group: what the cores gave the reference workload then."
    )
    return f"{title}\n\n{notes}\n\n{table}"


def key_ratios(results: list[EnvResult], timeout_s: float) -> str:
    """One line per env: best pararl vs best Async, and best pararl efficiency."""
    parts = []
    for result in results:
        best = result.best_pararl()
        if result.skipped or best is None:
            continue
        rate, cell, case = best
        where = f"{backend_label(cell.backend, timeout_s)}, {case.envs_per_worker} envs/worker"
        vs_async = (
            "no Async measured"
            if result.best_async is None
            else f"{rate / result.best_async[0]:.2f}× best AsyncVectorEnv"
        )
        ceiling = ""
        loops = case.cells.get("loops")
        if cell.of_loops is not None and loops is not None:
            ceiling = (
                f" ({fmt_percent(cell.of_loops)} of {result.workers} parallel loops, which "
                f"reached {fmt_percent(loops.efficiency)} of {result.workers} × single)"
            )
        parts.append(
            f"**{result.env_id}**: best pararl {fmt_rate(rate)} steps/s ({where}) = "
            f"{vs_async}, efficiency {fmt_percent(cell.efficiency)}{ceiling}"
        )
    return "; ".join(parts) if parts else "no pararl results"


def markdown_section(
    meta: dict[str, Any], tables: list[str], figure_link: str | None, ratios: str
) -> str:
    lines = [
        section_header("Vector env stepping throughput (`pararl bench vector`)", meta, ratios),
        "",
    ]
    if figure_link:
        lines += [f"![steps/s against envs per worker]({figure_link})", ""]
    return "\n".join(lines) + "\n" + "\n\n".join(tables)


def plot(results: list[EnvResult], path: Path, timeout_s: float) -> Path | None:
    """Steps/s against envs per worker (log-log), one panel per measured env, one
    line per backend (bars: min..max), dashed: workers × single-env rate."""
    shown = [r for r in results if not r.skipped and r.cases]
    if not shown:
        return None
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    width = max(8.0, 5.5 * len(shown))
    fig, axes = plt.subplots(1, len(shown), figsize=(width, 5.0), squeeze=False)
    for ax, result in zip(axes[0], shown, strict=True):
        names = [n for n in result.cases[0].cells if n != "single"]
        for name in names:
            points = [
                (c.envs_per_worker, rate)
                for c in result.cases
                if name in c.cells and (rate := c.cells[name].rate) is not None
            ]
            if not points:
                continue
            med = [rate.median for _, rate in points]
            err = [
                [rate.median - rate.min for _, rate in points],
                [rate.max - rate.median for _, rate in points],
            ]
            ax.errorbar(
                [epw for epw, _ in points],
                med,
                yerr=err,
                marker="o",
                capsize=3,
                label=backend_label(name, timeout_s),
            )
        if result.single_rate:
            ax.axhline(
                result.workers * result.single_rate,
                color="black",
                linestyle="--",
                label=f"{result.workers} × single env",
            )
        ax.set_xscale("log", base=2)
        sweep = [c.envs_per_worker for c in result.cases]
        ax.set_xticks(sweep, [str(epw) for epw in sweep])
        ax.xaxis.set_minor_locator(NullLocator())  # no ticks at values never run
        ax.set_yscale("log")
        ax.set_xlabel(f"envs per worker ({result.workers} workers)")
        ax.set_ylabel("env steps / s")
        ax.set_title(result.env_id)
        ax.grid(True, which="both", alpha=0.3)
    # One legend under all panels: inside a panel it hides the lines it explains.
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
