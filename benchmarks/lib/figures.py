"""The one figure helper: a benchmark describes its panels as data (`Panel`s of
`Series`), `save_figure` draws them all the same way (matplotlib, files only)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from benchmarks.lib.stats import Summary


@dataclass
class Series:
    """Points of one label: a line, markers or bars, with optional min–max error bars
    and a note next to each point."""

    label: str | None
    x: Sequence[float]
    y: Sequence[float]
    kind: Literal["line", "points", "bar"] = "line"
    fmt: str = "-o"
    color: str | None = None
    width: float = 0.8  # of a bar
    err: tuple[list[float], list[float]] | None = None
    notes: list[str] | None = None

    @classmethod
    def of(cls, label: str | None, points: Iterable[tuple[float, Summary]], **kw: Any) -> Series:
        """From (x, summary) pairs: y at the median, error bars to min and max."""
        pts = list(points)
        err = ([s.median - s.min for _, s in pts], [s.max - s.median for _, s in pts])
        return cls(label, [x for x, _ in pts], [s.median for _, s in pts], err=err, **kw)


def grouped_bars(
    named: Mapping[str, Sequence[Summary | str]],
) -> tuple[list[Series], list[tuple[float, str]]]:
    """One bar per name in each group (group g at x = g), min–max error bars; a value
    that is a word (why it was not measured) stands on the axis instead."""
    width, series, texts = 0.8 / max(1, len(named)), [], []
    for i, (name, values) in enumerate(named.items()):
        xs = [g - 0.4 + (i + 0.5) * width for g in range(len(values))]
        pts = [(x, v) for x, v in zip(xs, values, strict=True) if isinstance(v, Summary)]
        series.append(Series.of(name, pts, kind="bar", width=width, color=f"C{i}"))
        texts += [(x, v) for x, v in zip(xs, values, strict=True) if isinstance(v, str) and v]
    return series, texts


@dataclass
class Panel:
    title: str
    series: list[Series]
    xlabel: str = ""
    ylabel: str = ""
    xticks: Sequence[tuple[float, str]] | None = None
    logx: float | None = None  # log base of the x axis
    logy: bool = False
    hlines: list[tuple[float, str, str | None]] = field(default_factory=list)  # y, style, label
    texts: list[tuple[float, str]] = field(default_factory=list)  # a word standing at x
    legend: bool = True


def _draw(ax: Any, p: Panel, legend: bool) -> None:
    from matplotlib.ticker import NullLocator

    for s in p.series:
        label, yerr = s.label or "_nolegend_", None if s.err is None else list(s.err)
        if s.kind == "bar":  # an empty one still shows in the legend, in its colour
            empty = not len(s.x)
            xs, ys, width = ([0.0], [0.0], 0.0) if empty else (s.x, s.y, s.width)
            yerr = None if empty else yerr
            ax.bar(xs, ys, width, yerr=yerr, capsize=3, color=s.color, label=label)
        else:
            fmt = s.fmt if s.kind == "line" else s.fmt.replace("-", "")
            ax.errorbar(s.x, s.y, yerr, fmt=fmt, capsize=3, color=s.color, label=label)
        for x, y, note in zip(s.x, s.y, s.notes or [], strict=False):
            if note:
                ax.annotate(note, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    for y, style, text in p.hlines:
        ax.axhline(y, color="black", linestyle=style, linewidth=1, label=text or "_nolegend_")
    for x, word in p.texts:
        ax.text(x, 0.02, word, transform=ax.get_xaxis_transform(), rotation=90, fontsize=7)
    if p.logx:
        ax.set_xscale("log", base=p.logx)
    if p.logy:
        ax.set_yscale("log")
    if p.xticks is not None:
        ax.set_xticks([x for x, _ in p.xticks], [t for _, t in p.xticks], fontsize=7)
        ax.xaxis.set_minor_locator(NullLocator())  # no ticks at values never run
    ax.set(title=p.title, xlabel=p.xlabel, ylabel=p.ylabel)
    ax.grid(True, which="both", alpha=0.3)
    if p.legend and legend:
        ax.legend(fontsize=7)


def save_figure(panels: Sequence[Panel], path: Path, legend_below: bool = False) -> Path | None:
    """One row of panels as a PNG; None when there is nothing to draw. `legend_below`:
    one legend under all panels (inside one it would hide what it explains)."""
    if not panels:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(max(5.5 * len(panels), 7.5), 4.8))
    axes = [axes] if len(panels) == 1 else list(axes)
    for ax, panel in zip(axes, panels, strict=True):
        _draw(ax, panel, not legend_below)
    if legend_below:
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.14 if legend_below else 0, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
