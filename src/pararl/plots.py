"""Learning-curve plots from a run's metrics.csv and eval.csv: one run's returns, or
(a run of several agents, `--seeds`: rows with an `agent` column) the agents' IQM with
its 95% bootstrap band at each point, as Agarwal et al. 2021 draw curves over seeds."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from pararl import stats

BAND_REPS = 2_000  # bootstrap resamples per point of a band (a figure, not a claim)


def _column(rows: list[dict[str, str]], key: str, where: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for row in rows:
        if row.get(where) and row.get(key):
            xs.append(float(row[key]))
            ys.append(float(row[where]))
    return xs, ys


def _bands(
    rows: list[dict[str, str]], key: str, where: str
) -> tuple[list[float], list[float], list[float], list[float]]:
    """Over agents, at each `key` where every agent has a `where`: x, the IQM and its
    95% bootstrap interval (the same resamples' stream at every point: seeded)."""
    agents = {row["agent"] for row in rows if row.get("agent")}
    at: dict[float, dict[str, float]] = defaultdict(dict)
    for row in rows:
        if row.get("agent") and row.get(key) and row.get(where):
            at[float(row[key])][row["agent"]] = float(row[where])
    xs, mids, lows, highs = [], [], [], []
    for x in sorted(at):
        if len(at[x]) < len(agents):  # a point some agent has not reached
            continue
        values = np.array(list(at[x].values()))
        low, high = stats.bootstrap_ci(values, stats.iqm, BAND_REPS, rng=0)
        xs.append(x)
        mids.append(stats.iqm(values))
        lows.append(low)
        highs.append(high)
    return xs, mids, lows, highs


def _draw(
    ax: Any,
    rows: list[dict[str, str]],
    x_key: str,
    y_key: str,
    label: str,
    style: str,
    groups: dict[str, str],
) -> None:
    """One series: a line, or over agents the IQM and its band (one per group of
    agents with the same settings: `groups`, agent -> the settings' label)."""
    if not any(row.get("agent") for row in rows):
        xs, ys = _column(rows, x_key, y_key)
        if xs:
            ax.plot(xs, ys, style, label=label, markersize=3)
        return
    for index, group in enumerate(sorted(set(groups.values())) or [""]):
        members = {a for a, g in groups.items() if g == group}
        mine = [r for r in rows if not members or r.get("agent") in members]
        xs, mids, lows, highs = _bands(mine, x_key, y_key)
        if xs:
            agents = len({row["agent"] for row in mine if row.get("agent")})
            name = f"{label}{' ' + group if group else ''}: IQM of {agents} agents"
            # a sweep: one colour per setting, its training and evaluation curves alike
            color = {"color": f"C{index}"} if group else {}
            (line,) = ax.plot(xs, mids, style, label=name, markersize=3, **color)
            ax.fill_between(xs, lows, highs, alpha=0.2, color=line.get_color(), linewidth=0)


def _groups(run_dir: Path) -> dict[str, str]:
    """A run's agents by the settings they sweep (config.json's `resolved.agents`):
    agent -> e.g. "lr=0.001 gamma=0.99"; {} when they share their settings."""
    try:
        agents = json.loads((run_dir / "config.json").read_text())["resolved"]["agents"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    labels = {
        str(i): " ".join(f"{k}={v:g}" for k, v in a.items() if k != "seed")
        for i, a in enumerate(agents)
    }
    return labels if len(set(labels.values())) > 1 else {}


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def learning_curve(metrics_csv: Path, eval_csv: Path, out_png: Path, title: str) -> Path | None:
    """Return (training episodes and greedy evaluations; MAML: before and after
    adaptation) against env steps and wall time, side by side; a run of several
    agents: their IQM, with its 95% bootstrap band (a sweep: one per setting).
    Returns the PNG path, or None if there is nothing to plot."""
    # Figure + Agg canvas directly: importing pyplot costs half a second of start-up
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = _rows(metrics_csv) + _rows(eval_csv)  # each series reads its own rows
    if not rows:
        return None
    groups = _groups(metrics_csv.parent)  # a sweep's settings (config.json beside)
    fig = Figure(figsize=(11, 4))
    # fixed margins: tight_layout() measured every label and took ~30% of the drawing
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2, sharey=True)
    series = [
        ("episode_return", "training episodes", "-"),
        ("eval_return", "greedy evaluation", "o-"),
    ]
    if any(row.get("post_return") for row in rows):  # meta-RL: returns around adaptation
        series = [
            ("pre_return", "before adaptation", "-"),
            ("post_return", "after adaptation", "-"),
        ]
    for ax, x_key, x_label in (
        (axes[0], "env_steps", "env steps"),
        (axes[1], "wall_s", "wall time (s)"),
    ):
        for y_key, label, style in series:
            _draw(ax, rows, x_key, y_key, label, style, groups)
        ax.set_xlabel(x_label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("return")
    if axes[0].lines:  # nothing yet to plot (no episode ended, no evaluation): no legend
        axes[0].legend()
    fig.suptitle(title)
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.13, top=0.9, wspace=0.05)
    fig.savefig(out_png, dpi=110)
    return out_png
