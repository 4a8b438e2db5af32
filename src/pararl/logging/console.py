"""Console output: a rich progress bar on a terminal, plain log lines elsewhere."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def rate(value: float) -> str:
    """A rate as the progress line shows it: 3,015; 12; 0.13 (MAML's meta-updates come
    seconds apart, which whole numbers would show as 0)."""
    return f"{value:,.0f}" if abs(value) >= 10 or value == 0 else f"{value:.2g}"


_ONE, _THREE = "{:.1f}".format, "{:.3f}".format
_FIELDS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("steps_per_s", "steps/s", rate),
    ("updates_per_s", "upd/s", rate),
    ("episode_return", "return", _ONE),
    ("return_iqm", "iqm", _ONE),  # a population's (`--seeds`): over its agents
    ("eval_return", "eval", _ONE),
    ("eval_iqm", "iqm", _ONE),
    ("pre_return", "pre", _ONE),
    ("post_return", "post", _ONE),
    ("epsilon", "eps", _THREE),
    ("policy_lag", "lag", _ONE),
)


def summary(row: dict[str, Any]) -> str:
    parts = []
    for key, label, shown in _FIELDS:
        value = row.get(key)
        if value is not None:
            parts.append(f"{label} {shown(value)}")
            if key == "eval_return" and row.get("eval_skipped"):
                parts[-1] += f" ({skipped(row['eval_skipped'])})"
    return "  ".join(parts)


def skipped(count: int) -> str:
    """The evaluations a run skipped (`runners.session`), for the progress line."""
    return f"{count:,} skipped"


SKIPPED_WIDTH = 14  # " (12 skipped)" and a space


def _short(value: float) -> str:
    return f"{value / 1e3:.1f}k" if value >= 10_000 else f"{value:,.0f}"


class Console:
    """Shows progress towards `total` env steps (`agents` > 1: each agent's). `mode`:
    auto | bar | plain | none.

    The bar is one line that fits the terminal (80 columns hold all of it; narrower
    ones drop the bar, then the time left): title, bar, steps / budget, steps/s,
    time left, last evaluation, and from about 95 columns how many evaluations were
    skipped (each evaluation's line says so too). Plain mode prints the full metrics
    summary instead, skipped evaluations included."""

    def __init__(
        self, total: int, mode: str = "auto", title: str = "train", start: int = 0, agents: int = 1
    ) -> None:
        if mode == "auto":
            mode = "bar" if sys.stderr.isatty() else "plain"
        self.mode, self.total, self.title = mode, total, title
        # a population's (`--seeds`) steps, budget and rates are each agent's
        self._each = " each" if agents > 1 else ""
        self._bar: Any = None
        self._iqm: float | None = None  # a population's last evaluation's IQM
        self._skipped = 0  # evaluations skipped, as the last row said
        self._skipped_shown = False  # whether the bar has room for them
        if mode == "bar":
            self._start_bar(start)

    def _start_bar(self, start: int) -> None:
        from rich.console import Console as RichConsole
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        console = RichConsole(stderr=True)
        left = console.width - 1
        # what fits, by priority: steps, last evaluation, rate, time left, title, bar,
        # the evaluations skipped (beside the last evaluation, the bar narrowed for it)
        wanted = [("steps", len(f"{self.total:,}") * 2 + 1), ("eval", 12), ("rate", 8)]
        wanted.append(("eta", 7))
        shown = set()
        for name, width in wanted:
            if width + 1 <= left:
                shown.add(name)
                left -= width + 1
        title = self.title if len(self.title) <= min(18, left - 1) else self.title[: left - 2] + "…"
        title = title if left >= 9 else ""
        left -= len(title) + 1 if title else 0
        columns: list[Any] = [TextColumn("{task.description}")] if title else []
        self._skipped_shown = left >= 8 + SKIPPED_WIDTH
        if self._skipped_shown:
            left -= SKIPPED_WIDTH
        if left >= 8:
            columns.append(BarColumn(bar_width=min(30, left - 1)))
        columns.append(TextColumn("{task.completed:,}/{task.total:,}"))
        if "rate" in shown:
            columns.append(TextColumn("{task.fields[rate]}"))
        if "eta" in shown:
            columns.append(TimeRemainingColumn())
        if "eval" in shown:
            columns.append(TextColumn("{task.fields[eval]}"))
        self._bar = Progress(*columns, console=console, transient=False)
        self._task = self._bar.add_task(title, total=self.total, completed=start, rate="", eval="")
        self._bar.start()

    def update(self, row: dict[str, Any]) -> None:
        if self.mode == "bar":
            self._skipped = int(row.get("eval_skipped") or 0)
            self._iqm = row.get("eval_iqm")
            self._show(row["env_steps"], row.get("eval_return"), row.get("steps_per_s"))
        elif self.mode == "plain":
            print(
                f"[{self.title}] {row['env_steps']:,}/{self.total:,} steps{self._each}  "
                f"{summary(row)}",
                file=sys.stderr,
                flush=True,
            )

    def _show(self, steps: int, last_eval: float | None, rate: float | None) -> None:
        fields: dict[str, Any] = {"completed": min(steps, self.total)}
        if rate is not None:
            fields["rate"] = f"{_short(rate)}/s"
        if last_eval is not None:
            fields["eval"] = f"eval {last_eval:.1f}"
            if self._iqm is not None:  # a population's: its median agent's, and the IQM
                fields["eval"] += f" iqm {self._iqm:.1f}"
            if self._skipped and self._skipped_shown:
                fields["eval"] += f" ({skipped(self._skipped)})"
        self._bar.update(self._task, **fields)

    def message(self, text: str) -> None:
        if self.mode == "bar":
            self._bar.console.print(text)
        elif self.mode == "plain":
            print(text, file=sys.stderr, flush=True)

    def close(
        self, steps: int | None = None, last_eval: float | None = None, skipped: int = 0
    ) -> None:
        """Stop the display, showing the run's final steps and evaluation (and how
        many evaluations it skipped)."""
        if self._bar is not None:
            if steps is not None:
                self._skipped = skipped
                self._show(steps, last_eval, None)
            self._bar.stop()
            self._bar = None
