"""Metric writers: one CSV row per log point, TensorBoard scalars alongside."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pararl.logging.tbevents import EventWriter


class UnknownMetricError(ValueError):
    """A row named a metric that is not one of the run's columns: declare it where the
    loop declares its others (its `METRICS`), rather than have it vanish."""


class MetricsWriter:
    """Appends rows to `metrics.csv` (the run's columns, blanks where a row has none)
    and, when enabled, the same scalars to a TensorBoard event file. Flushes every row
    to both: nothing is lost on a crash.

    `columns` are every metric a row may name; any other raises `UnknownMetricError`.
    A file that exists already (a resumed run) keeps its header, widened first (and
    rewritten) if it lacks some of `columns`: rows appended stay aligned with it.
    `tensorboard`: a directory for a new event file, or an `EventWriter` to share
    (another writer's: closed by whoever made it); `purge_from`: a new event file's
    (`EventWriter`)."""

    def __init__(
        self,
        csv_path: Path,
        tensorboard: Path | EventWriter | None,
        columns: Sequence[str],
        purge_from: int | None = None,
    ) -> None:
        self.columns = tuple(columns)
        header = _widened(csv_path, self.columns)
        self._file = csv_path.open("a", newline="")
        self._csv = csv.DictWriter(self._file, fieldnames=header or self.columns)
        if not header:
            self._csv.writeheader()
        self._own_tb = isinstance(tensorboard, Path)
        self._tb = (
            EventWriter(tensorboard, purge_from) if isinstance(tensorboard, Path) else tensorboard
        )

    @property
    def events(self) -> EventWriter | None:
        """The TensorBoard event file this writer writes to (None: none)."""
        return self._tb

    def write(self, row: dict[str, Any]) -> None:
        unknown = [k for k in row if k not in self.columns]
        if unknown:
            raise UnknownMetricError(
                f"metrics {unknown} are not columns of this run ({', '.join(self.columns)})"
            )
        self._csv.writerow({k: ("" if v is None else v) for k, v in row.items()})
        self._file.flush()
        if self._tb is not None:
            step = int(row["env_steps"])
            for key, value in row.items():
                if key != "env_steps" and isinstance(value, (int, float)):
                    self._tb.add_scalar(key, value, step)
            self._tb.flush()

    def close(self) -> None:
        self._file.close()
        if self._tb is not None and self._own_tb:
            self._tb.close()


def column(csv_path: Path, name: str) -> list[float]:
    """The values of one column of a CSV file this package wrote, in row order (empty
    cells and a missing file: none)."""
    if not csv_path.is_file():
        return []
    return [float(r[name]) for r in _read(csv_path)[1] if r.get(name)]


def last_row(csv_path: Path, names: Sequence[str]) -> tuple[float, ...] | None:
    """The values of `names` in the last row of a CSV file this package wrote that
    has all of them (None: no such row, or no file)."""
    if not csv_path.is_file():
        return None
    rows = _read(csv_path)[1]
    full = (r for r in reversed(rows) if all(r.get(n) for n in names))
    row = next(full, None)
    return None if row is None else tuple(float(row[n]) for n in names)


def _read(csv_path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with csv_path.open(newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def _rewrite(csv_path: Path, header: Sequence[str], rows: list[dict[str, str]]) -> None:
    """`metrics.csv` as `header` and `rows`, atomically."""
    tmp = csv_path.with_name(csv_path.name + ".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        # cells past the header (a torn line's) have no column to go back into
        writer.writerows({k: v for k, v in row.items() if k is not None} for row in rows)
    tmp.replace(csv_path)


def _widened(csv_path: Path, columns: tuple[str, ...]) -> list[str]:
    """The header of an existing `metrics.csv` (empty: no file yet), with any of
    `columns` it lacks added at its end (the file rewritten to match)."""
    if not csv_path.is_file() or csv_path.stat().st_size == 0:
        return []
    header, rows = _read(csv_path)
    missing = [c for c in columns if c not in header]
    if missing:
        header += missing
        _rewrite(csv_path, header, rows)
    return header


def truncate_after(csv_path: Path, env_steps: int) -> tuple[int, int]:
    """Drop the rows of `metrics.csv` past `env_steps` (a resumed run redoes them), so
    that no step is logged twice; rewritten atomically, a no-op when nothing is past.
    Returns how many rows were dropped and the most env steps among them (0, 0: none)."""
    if not csv_path.is_file():
        return 0, 0
    header, rows = _read(csv_path)
    past = [bool(r.get("env_steps")) and float(r["env_steps"]) > env_steps for r in rows]
    if not any(past):
        return 0, 0
    _rewrite(csv_path, header, [r for r, p in zip(rows, past, strict=True) if not p])
    dropped = [int(float(r["env_steps"])) for r, p in zip(rows, past, strict=True) if p]
    return len(dropped), max(dropped)
