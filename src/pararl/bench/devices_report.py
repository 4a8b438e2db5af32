"""Tables, key ratios, the plot and the BENCHMARKS.md section of `pararl bench
devices`, all rebuilt from the JSON-ready dict `devices.measure` returns."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pararl.bench.common import fmt_ratio, markdown_table
from pararl.bench.publish import new_figure, save_figure, section_header

LABELS = {
    "cpu-only": "CPU only",
    "gpu-only": "GPU only",
    "cpu-act-gpu-learn": "CPU acting + GPU learning",
    "auto": "auto",
}
SEED_002 = (
    "seeds/002 (PPO on CartPole, its own machine): GPU only 2m08s, CPU only 47 s, "
    "CPU sampling + GPU training 43–45 s; CPU only fastest for 64-wide nets, CPU acting "
    "+ GPU learning from 128 wide up."
)


def _s(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _spread(summary: dict[str, float] | None) -> str:
    if summary is None:
        return "–"
    return f"{summary['median']:.1f} ({summary['min']:.1f}–{summary['max']:.1f})"


def _median(summary: dict[str, float] | None) -> float | None:
    return None if summary is None else summary["median"]


def _picked(cell: dict[str, Any]) -> str:
    picked = cell.get("picked")
    return "–" if not picked else f"act {picked['act']}, learn {picked['learn']}"


def placement_table(data: dict[str, Any]) -> str:
    rows = []
    for width in data["widths"]:
        for name, cell in width["placements"].items():
            what = "–" if cell["wall_s"] is None else fmt_ratio(cell["ratio_to_cpu"])
            status = cell["status"] + (f" ({cell['note']})" if cell["note"] else "")
            rows.append(
                [
                    width["width"],
                    LABELS.get(name, name) + (" ★" if name == width["fastest"] else ""),
                    _spread(cell["wall_s"]) if cell["wall_s"] else status,
                    _s(_median(cell["train_s"])),
                    _s(_median(cell["startup_s"])),
                    what,
                    _picked(cell) if name == "auto" else "",
                ]
            )
    return markdown_table(
        [
            "width",
            "placement",
            "wall s, median (min–max)",
            "trainer s",
            "start-up s",
            "÷ CPU only",
            "auto picked",
        ],
        rows,
        align="rlrrrrl",
    )


def auto_table(data: dict[str, Any]) -> str:
    rows = []
    for width in data["widths"]:
        cell = width["placements"].get("auto")
        if cell is None:
            continue
        timings = cell.get("timings_ms") or {}
        text = ", ".join(f"{k} {v:.3g}" for k, v in sorted(timings.items())) or "none (no choice)"
        rows.append([width["width"], _picked(cell), cell.get("reason") or "–", text])
    if not rows:
        return ""
    table = markdown_table(
        ["width", "auto picked", "why", "start-up timings (ms)"], rows, align="rlll"
    )
    return (
        "What `--act-device auto --learn-device auto` chose, and the timings it chose on "
        "(one forward at the sampling batch, one update at the minibatch size, per device; "
        f"from each run's config.json):\n\n{table}"
    )


def tables(data: dict[str, Any]) -> list[str]:
    p = data["metadata"]["params"]
    gpu = data["metadata"].get("gpu")
    notes = (
        f"`pararl train ppo --env {p['env']}` for {p['total_steps']:,} env steps (no early "
        f"stop, one {p['eval_episodes']}-episode evaluation at the end, no TensorBoard), "
        f"MLPs of {p['depth']} hidden layers of each width; whole processes, launch to "
        f"exit; {p['repeats']} interleaved round(s). Trainer s: the run's own clock (from "
        "after the device choice); start-up s = wall − trainer. ★: fastest placement. "
        + (f"GPU: {gpu}. " if gpu else "No CUDA here: GPU placements not run. ")
        + SEED_002
    )
    parts = [f"### PPO wall time by device placement\n\n{notes}\n\n{placement_table(data)}"]
    auto = auto_table(data)
    if auto:
        parts.append(auto)
    return parts


def key_ratios(data: dict[str, Any]) -> str:
    parts = []
    for width in data["widths"]:
        cells = width["placements"]
        ratios = [
            f"{LABELS[name]} {fmt_ratio(cells[name]['ratio_to_cpu'])}"
            for name in ("gpu-only", "cpu-act-gpu-learn")
            if name in cells and cells[name]["ratio_to_cpu"] is not None
        ]
        fastest = LABELS.get(width["fastest"] or "", "–")
        text = f"width {width['width']}: fastest {fastest}"
        if ratios:
            text += " (÷ CPU only: " + ", ".join(ratios) + ")"
        if "auto" in cells:
            text += f", auto picked {_picked(cells['auto'])}"
        parts.append(text)
    if not data["cuda"]:
        parts.append("no CUDA: GPU placements not measured")
    return "; ".join(parts)


def markdown_section(data: dict[str, Any], tables: Sequence[str], figure_link: str | None) -> str:
    title = "PPO device placement: where to act, where to learn (`pararl bench devices`)"
    lines = [section_header(title, data["metadata"], data["key_ratios"]), ""]
    if figure_link:
        lines += [f"![device placement benchmark]({figure_link})", ""]
    return "\n".join(lines) + "\n" + "\n\n".join(tables)


def plot(data: dict[str, Any], path: Path) -> Path | None:
    """Median wall time (min–max) per width, one bar per placement."""
    widths = data["widths"]
    if not widths:
        return None
    from matplotlib.patches import Patch

    fig, (ax,) = new_figure(1, width=7.5)
    names = list(widths[0]["placements"])
    bar = 0.8 / len(names)
    for i, name in enumerate(names):
        for x, width in enumerate(widths):
            cell = width["placements"][name]
            pos = x - 0.4 + (i + 0.5) * bar
            wall = cell["wall_s"]
            if wall is None:  # not run: say why, standing on the axis
                where = ax.get_xaxis_transform()
                ax.text(pos, 0.02, cell["status"], transform=where, rotation=90, fontsize=7)
                continue
            err = [[wall["median"] - wall["min"]], [wall["max"] - wall["median"]]]
            ax.bar(pos, wall["median"], bar, yerr=err, capsize=2, color=f"C{i}")
    handles = [Patch(color=f"C{i}", label=LABELS.get(n, n)) for i, n in enumerate(names)]
    ax.set_xticks(range(len(widths)), [f"{w['width']} wide" for w in widths])
    ax.set_ylabel("wall time, launch to exit (s): median, min–max")
    steps = data["metadata"]["params"]["total_steps"]
    ax.set_title(f"PPO {data['metadata']['params']['env']}, {steps:,} env steps")
    ax.legend(handles=handles, fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    return save_figure(fig, path)
