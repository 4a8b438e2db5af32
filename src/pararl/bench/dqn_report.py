"""Tables, key ratios, the plot and the BENCHMARKS.md section of `pararl bench dqn`.

Every function takes the JSON-ready dicts the measuring parts return, so a report
can be rebuilt from `dqn.json` alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pararl.bench.common import fmt_percent, fmt_rate, fmt_ratio, markdown_table
from pararl.bench.publish import section_header

LABELS = {
    "pararl-serial": "pararl serial",
    "pararl-sync": "pararl sync",
    "pararl-async": "pararl async",
    "pararl-averaging": "pararl averaging, 2 replicas",
    "sb3": "SB3 DQN (zoo)",
    "seed_design": "seed design (net per step)",
    "pararl_seed": "pararl async, seed's workload",
    "pararl_defaults": "pararl async, defaults",
    "pararl_seed_free": "pararl async, seed's workload, no ratio",
    "pararl_defaults_free": "pararl async, defaults, no ratio",
    "actors": "actors alone",
    "learner": "learner alone",
    "ratio": "together (replay ratio, as run_async)",
    "free": "together (free-running)",
}


def label(name: str, labels: dict[str, str] | None = None) -> str:
    """A system's display name; `labels` (e.g. a solve result's own) come first."""
    return (labels or {}).get(name) or LABELS.get(name, name)


def _s(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _rate(summary: dict[str, Any] | None, key: str = "median") -> str:
    return "–" if summary is None else fmt_rate(summary[key])


def solve_tables(solve: dict[str, Any]) -> str:
    """Summary and per-run tables of a solve result (`solve["labels"]`, if there,
    names the systems)."""
    names = solve.get("labels")
    rows = []
    for name, s in solve["systems"].items():
        wall = s["solved_wall_s"]
        rows.append(
            [
                label(name, names),
                f"{s['solved']}/{s['runs']}",
                _s(s["time_to_solve_median_s"]) if s["time_to_solve_median_s"] else "not solved",
                f"{_s(wall['min'])}–{_s(wall['max'])}" if wall["min"] is not None else "–",
                _s(s["wall_s_median_all"]),
                _s(s["env_steps_median_solved"], 0),
                fmt_ratio(solve["ratio_to_sb3"].get(name)) if name != "sb3" else "1.00×",
            ]
        )
    summary = markdown_table(
        [
            "system",
            "solved",
            "time to solve, median (s)",
            "solved runs min–max (s)",
            "median wall, all runs (s)",
            "env steps (median, solved)",
            "vs SB3",
        ],
        rows,
        align="lcrrrrr",
    )
    runs = markdown_table(
        ["system", "seed", "wall (s)", "trainer says", "env steps", "check mean", "solved"],
        [
            [
                label(r["system"], names),
                r["seed"],
                _s(r["wall_s"]),
                r["status"] + (f" ({r['note']})" if r["note"] else ""),
                "–" if r["env_steps"] is None else f"{r['env_steps']:,}",
                _s(r["verify_mean"]),
                "yes" if r["solved"] else "no",
            ]
            for r in solve["runs"]
        ],
        align="lrrlrrc",
    )
    p = solve["settings"]
    notes = (
        f"Whole processes, launch to exit (start-up included), budget {p['budget']:,} env "
        f"steps, stop when the greedy evaluation ({p['eval_episodes']} episodes every "
        f"{p['eval_every']:,} steps) reaches {p['target']:g}; solved = stopped on the target "
        f"and a {p['verify_episodes']}-episode check of the saved policy reaches it too. "
        "An unsolved run counts as never solved in the median."
    )
    title = "### Time to solve CartPole-v1"
    return f"{title}\n\n{notes}\n\n{summary}\n\nRuns, in the order run:\n\n{runs}"


def throughput_table(rows: list[dict[str, Any]], timing: dict[str, Any]) -> str:
    lines = []
    for row in rows:
        for name, s in row["systems"].items():
            rate = s["transitions_per_s"]
            if rate is None:
                lines.append([row["actors"], label(name), f"{s['status']} ({s['note']})", *"–––"])
                continue
            ratio = 1.0 if name == "seed_design" else row["ratio_to_seed"].get(name)
            lines.append(
                [
                    row["actors"],
                    label(name),
                    _rate(rate),
                    f"{_rate(rate, 'min')}–{_rate(rate, 'max')}",
                    _rate(s["updates_per_s"]),
                    fmt_ratio(ratio),
                ]
            )
    table = markdown_table(
        ["actors", "system", "transitions/s (median)", "min–max", "updates/s", "vs seed"],
        lines,
        align="rlrrrr",
    )
    notes = (
        "Transitions stored per second by the learner process, steady state (the seed "
        "design's memory starts full so that it learns every 5 transitions from the "
        f"start); {timing['repeats']} interleaved spells of {timing['block_s']:g} s after "
        f"{timing['warmup_s']:g} s warm-up. pararl runs `run_async`'s loop (replay ratio "
        "gating) without evaluation or logging."
    )
    return f"### Transitions/s: the seed's design against pararl async\n\n{notes}\n\n{table}"


def overlap_table(overlap: dict[str, Any]) -> str:
    rows = []
    for mode, m in overlap["modes"].items():
        steps, updates = m["steps_per_s"], m["updates_per_s"]
        rows.append(
            [
                label(mode),
                _rate(steps),
                "–" if steps is None else f"{_rate(steps, 'min')}–{_rate(steps, 'max')}",
                _rate(updates),
                "–" if updates is None else f"{_rate(updates, 'min')}–{_rate(updates, 'max')}",
            ]
        )
    table = markdown_table(
        ["spell", "env steps/s", "min–max", "updates/s", "min–max"], rows, align="lrrrr"
    )
    e = overlap["efficiency"]
    notes = (
        f"{overlap['actors']} actor(s), {overlap['workload']} workload (net "
        f"{tuple(overlap['hidden'])}, batch {overlap['batch_size']}, replay ratio "
        f"{overlap['replay_ratio']:g}). Together ÷ alone — replay-ratio run: actors "
        f"{fmt_percent(e['actors_ratio'])}, learner {fmt_percent(e['learner_ratio'])}; "
        f"free-running: actors {fmt_percent(e['actors_free'])}, learner "
        f"{fmt_percent(e['learner_free'])}. With a replay ratio at most one side can run "
        f"flat out: the ideal is min(actors alone, learner alone ÷ ratio) = "
        f"{fmt_rate(e['ideal_steps_per_s'])} steps/s, and the run reaches "
        f"{fmt_percent(e['ratio_vs_ideal'])} of it."
    )
    return f"### Overlap of acting and learning (pararl async)\n\n{notes}\n\n{table}"


def key_ratios(data: dict[str, Any]) -> str:
    parts = []
    if "solve" in data:
        ratios = data["solve"]["ratio_to_sb3"]
        text = ", ".join(
            f"{label(k)} {fmt_ratio(v) if v is not None else 'not solved'}"
            for k, v in ratios.items()
        )
        parts.append(f"time to solve ÷ SB3 (target ≤ 0.5): {text}")
    if "throughput" in data:
        for row in data["throughput"]:
            text = ", ".join(f"{label(k)} {fmt_ratio(v)}" for k, v in row["ratio_to_seed"].items())
            parts.append(f"{row['actors']} actor(s), transitions/s ÷ seed (target ≥ 100×): {text}")
    if "overlap" in data:
        e = data["overlap"]["efficiency"]
        parts.append(
            "overlap together ÷ alone, free-running (target ≥ 80% both): "
            f"actors {fmt_percent(e['actors_free'])}, learner {fmt_percent(e['learner_free'])}; "
            f"with the replay ratio, the run reaches {fmt_percent(e['ratio_vs_ideal'])} of "
            "the slower side's limit"
        )
    return "; ".join(parts)


def markdown_section(data: dict[str, Any], tables: list[str], figure_link: str | None) -> str:
    meta = data["metadata"]
    threads = f"; learner process torch threads: {meta['torch_threads']}"
    lines = [
        section_header(
            "DQN: time to solve, throughput against the seed, overlap (`pararl bench dqn`)",
            meta,
            key_ratios(data),
            threads,
        ),
        "",
    ]
    if figure_link:
        lines += [f"![DQN benchmark]({figure_link})", ""]
    return "\n".join(lines) + "\n" + "\n\n".join(tables)


# --- the figure ---------------------------------------------------------------------


def plot_solve(ax: Any, solve: dict[str, Any]) -> None:
    systems = list(solve["systems"])
    for x, name in enumerate(systems):
        runs = [r for r in solve["runs"] if r["system"] == name]
        for r in runs:
            ax.plot(
                x, r["wall_s"], "o" if r["solved"] else "x", color="C0" if r["solved"] else "C3"
            )
        median = solve["systems"][name]["time_to_solve_median_s"]
        if median is not None:
            ax.hlines(median, x - 0.3, x + 0.3, color="black")
    names = [label(n, solve.get("labels")) for n in systems]
    ax.set_xticks(range(len(systems)), names, rotation=20, fontsize=8)
    top = max((r["wall_s"] for r in solve["runs"]), default=1.0)
    ax.set_ylim(0, 1.1 * top)
    ax.set_ylabel("wall time, launch to exit (s)")
    ax.set_title("CartPole-v1: o solved, x not; bar: median")
    ax.grid(True, axis="y", alpha=0.3)


def _plot_throughput(ax: Any, rows: list[dict[str, Any]]) -> None:
    names = list(rows[0]["systems"])
    step = 0.6 / max(1, len(names) - 1)
    for i, name in enumerate(names):
        xs, med, lo, hi = [], [], [], []
        for x, row in enumerate(rows):
            rate = row["systems"][name]["transitions_per_s"]
            if rate is not None and rate["median"] > 0:
                xs.append(x - 0.3 + i * step)
                med.append(rate["median"])
                lo.append(rate["median"] - rate["min"])
                hi.append(rate["max"] - rate["median"])
                ratio = row["ratio_to_seed"].get(name)
                if ratio is not None:
                    ax.annotate(
                        fmt_ratio(ratio),
                        (xs[-1], med[-1]),
                        fontsize=7,
                        xytext=(4, 4),
                        textcoords="offset points",
                    )
        ax.errorbar(
            xs, med, yerr=[lo, hi], marker="o", linestyle="none", capsize=3, label=label(name)
        )
    ax.set_xticks(range(len(rows)), [f"{r['actors']} actor(s)" for r in rows])
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_yscale("log")
    ax.set_ylabel("transitions / s (median, min–max)")
    ax.set_title("seed design vs pararl async")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", which="both", alpha=0.3)


def _plot_overlap(ax: Any, overlap: dict[str, Any]) -> None:
    e = overlap["efficiency"]
    bars = [
        ("actors, replay ratio", e["actors_ratio"], "C0"),
        ("learner, replay ratio", e["learner_ratio"], "C1"),
        ("async run ÷ ideal", e["ratio_vs_ideal"], "C2"),
        ("actors, free-running", e["actors_free"], "C0"),
        ("learner, free-running", e["learner_free"], "C1"),
    ]
    for x, (_, value, color) in enumerate(bars):
        ax.bar(x, value or 0.0, 0.7, color=color)
    ax.axhline(0.8, color="black", linestyle="--", label="target 0.8")
    ax.set_xticks(range(len(bars)), [name for name, _, _ in bars], rotation=20, fontsize=7)
    ax.set_ylim(0, 1.2)
    ax.set_ylabel("fraction (together ÷ alone; run ÷ ideal)")
    ax.set_title(f"async overlap, {overlap['actors']} actor(s)")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)


def plot(data: dict[str, Any], path: Path) -> Path | None:
    """One panel per part that ran."""
    panels = [
        (key, fn)
        for key, fn in (
            ("solve", plot_solve),
            ("throughput", _plot_throughput),
            ("overlap", _plot_overlap),
        )
        if data.get(key)
    ]
    if not panels:
        return None
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.8), squeeze=False)
    for ax, (key, fn) in zip(axes[0], panels, strict=True):
        fn(ax, data[key])
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
