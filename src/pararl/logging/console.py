"""Console output: a rich progress bar on a terminal, plain log lines elsewhere."""

from __future__ import annotations

import sys
from typing import Any

_FIELDS = (
    ("steps_per_s", "steps/s", "{:,.0f}"),
    ("updates_per_s", "upd/s", "{:,.0f}"),
    ("episode_return", "return", "{:.1f}"),
    ("eval_return", "eval", "{:.1f}"),
    ("epsilon", "eps", "{:.3f}"),
    ("policy_lag", "lag", "{:.1f}"),
)


def summary(row: dict[str, Any]) -> str:
    parts = []
    for key, label, fmt in _FIELDS:
        value = row.get(key)
        if value is not None:
            parts.append(f"{label} {fmt.format(value)}")
    return "  ".join(parts)


class Console:
    """Shows progress towards `total` env steps. `mode`: auto | bar | plain | none."""

    def __init__(self, total: int, mode: str = "auto", title: str = "train") -> None:
        if mode == "auto":
            mode = "bar" if sys.stderr.isatty() else "plain"
        self.mode, self.total, self.title = mode, total, title
        self._bar: Any = None
        if mode == "bar":
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.completed:,}/{task.total:,}"),
                TimeElapsedColumn(),
                TextColumn("{task.fields[info]}"),
                transient=False,
            )
            self._task = self._bar.add_task(title, total=total, info="")
            self._bar.start()

    def update(self, row: dict[str, Any]) -> None:
        if self.mode == "bar":
            self._bar.update(
                self._task, completed=min(row["env_steps"], self.total), info=summary(row)
            )
        elif self.mode == "plain":
            print(
                f"[{self.title}] {row['env_steps']:,}/{self.total:,} steps  {summary(row)}",
                file=sys.stderr,
                flush=True,
            )

    def message(self, text: str) -> None:
        if self.mode == "bar":
            self._bar.console.print(text)
        elif self.mode == "plain":
            print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
