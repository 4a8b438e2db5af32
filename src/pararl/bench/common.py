"""Pieces every benchmark shares: run metadata, timing, summaries, tables, and
writing results (JSON, and a benchmark's own section of BENCHMARKS.md).

Benchmarks on shared machines are noisy, so they measure pararl and its anchors
side by side, interleaved, several times, and report the median with min and max
(see BENCHMARKING.md in the shared notes). These helpers keep that uniform.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from pararl.mp.topology import physical_cores

DEFAULT_PACKAGES = ("torch", "gymnasium", "numpy", "stable-baselines3", "mujoco")

BENCHMARKS_INTRO = """# pararl benchmarks

Each section below is written by one `pararl bench ...` command, which states the exact
command, the date, the commit and the machine's cores. Absolute numbers move from run to
run and machine to machine; the ratios to the anchors (measured side by side, interleaved,
in the same run) are what to compare. Rerun a benchmark to rewrite its section.
"""


# --- where things are and what ran -------------------------------------------------


def repo_root() -> Path:
    """The source checkout pararl runs from (editable install), else the cwd.

    Results belong next to the code that produced them, wherever the command is
    started from; an installed wheel has no checkout, so the cwd is the best guess.
    """
    for parent in Path(__file__).resolve().parents:
        if (parent / "pyproject.toml").is_file() and (parent / "src" / "pararl").is_dir():
            return parent
    return Path.cwd()


def _git(args: Sequence[str], cwd: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None  # not a checkout, or git missing: metadata says "unknown"
    return done.stdout.strip()


def git_commit(cwd: Path | None = None) -> str | None:
    """Short commit hash of HEAD, or None outside a git checkout."""
    return _git(["rev-parse", "--short", "HEAD"], cwd or repo_root()) or None


def git_dirty(cwd: Path | None = None) -> bool | None:
    """Whether tracked files differ from HEAD (numbers then belong to no commit)."""
    out = _git(["status", "--porcelain", "--untracked-files=no"], cwd or repo_root())
    return None if out is None else bool(out)


def package_versions(packages: Iterable[str] = DEFAULT_PACKAGES) -> dict[str, str | None]:
    """Installed versions, read without importing (importing torch takes seconds)."""
    versions: dict[str, str | None] = {}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def affinity_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def run_metadata(
    params: Mapping[str, Any], command: str, packages: Iterable[str] = DEFAULT_PACKAGES
) -> dict[str, Any]:
    """Everything needed to judge a result later: code, machine, software, parameters."""
    return {
        "command": command,
        "date": datetime.now().astimezone().isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "git_dirty": git_dirty(),
        "cpu_count": os.cpu_count(),
        "affinity_cpus": affinity_cpus(),
        "physical_cores": physical_cores(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "versions": package_versions(packages),
        "params": dict(params),
    }


def cores_text(meta: Mapping[str, Any]) -> str:
    return (
        f"{meta['cpu_count']} logical / {meta['affinity_cpus']} in affinity / "
        f"{meta['physical_cores']} physical"
    )


def command_line(prog: str, config: Any) -> str:
    """The command that reproduces `config`: `prog` plus every field not at its default.

    Built from the config rather than `sys.argv` so that it is exact however the
    benchmark was started (console script, `python -m`, a test calling `run`).
    """
    parts = [prog]
    # where results go (OutputOptions, inherited, so listed first) reads best last
    where = {"out_dir", "figure", "benchmarks_md", "update_benchmarks"}
    for field in sorted(dataclasses.fields(config), key=lambda f: f.name in where):
        if field.default is not dataclasses.MISSING:
            default = field.default
        elif field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        else:
            default = dataclasses.MISSING
        value = getattr(config, field.name)
        if value == default:
            continue
        flag = "--" + field.name.replace("_", "-")
        # tyro spells a plain bool as a flag pair and an optional one (`bool | None`)
        # with a value; a bool default tells the two apart without parsing annotations.
        if isinstance(value, bool) and isinstance(default, bool):
            parts.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, (tuple, list)):
            parts.extend([flag, *(str(v) for v in value)])
        else:
            parts.extend([flag, str(value)])
    return " ".join(parts)


# --- timing and summaries -----------------------------------------------------------


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call, on the monotonic high-resolution clock."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def interleaved(
    tasks: Mapping[str, Callable[[], float]],
    repeats: int,
    on_error: Callable[[str, Exception], None] | None = None,
) -> dict[str, list[float]]:
    """Run every task once per round, round after round (A, B, C, A, B, C, ...).

    Interleaving spreads slow drifts of the machine (other jobs, thermal state)
    over all tasks instead of charging them to whichever ran last. Each task
    returns its measurement. A task that raises is reported to `on_error` and
    dropped from later rounds (when `on_error` is None, the error propagates).
    """
    results: dict[str, list[float]] = {name: [] for name in tasks}
    alive = list(tasks)
    for _ in range(repeats):
        for name in list(alive):
            try:
                results[name].append(tasks[name]())
            except Exception as exc:
                if on_error is None:
                    raise
                on_error(name, exc)
                alive.remove(name)
    return results


@dataclass(frozen=True)
class Summary:
    """Median, min and max of repeated measurements, with the samples kept."""

    median: float
    min: float
    max: float
    samples: tuple[float, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "samples": list(self.samples),
        }


def summarize(samples: Sequence[float]) -> Summary:
    if not samples:
        raise ValueError("summarize needs at least one sample")
    return Summary(statistics.median(samples), min(samples), max(samples), tuple(samples))


# --- formatting ---------------------------------------------------------------------


def fmt_rate(value: float | None) -> str:
    """A throughput with 3-4 significant digits: 950, 12.3k, 1.25M."""
    if value is None:
        return "–"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            scaled = value / scale
            return f"{scaled:.3g}{suffix}" if scaled < 100 else f"{scaled:.0f}{suffix}"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


def fmt_ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def fmt_percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


def markdown_table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], align: str | None = None
) -> str:
    """A GitHub markdown table; `align` has one letter per column: l, r or c."""
    align = align or "l" * len(headers)
    if len(align) != len(headers):
        raise ValueError(f"align has {len(align)} letters for {len(headers)} columns")
    marks = {"l": ":--", "r": "--:", "c": ":-:"}
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    for row in rows:
        cells = [str(c).replace("|", "\\|") for c in row]
        if len(cells) != len(headers):
            raise ValueError(f"row has {len(cells)} cells for {len(headers)} columns")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --- writing results ----------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    """numpy scalars/arrays, paths and dataclasses, which `json` cannot write itself."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def write_json(path: Path, data: Any) -> Path:
    """Write `data` as indented JSON, atomically (a crash leaves the old file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=_jsonable) + "\n")
    tmp.replace(path)
    return path


def section_markers(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"


def replace_section(path: Path, name: str, body: str, intro: str = BENCHMARKS_INTRO) -> None:
    """Put `body` between the `bench:NAME` start/end markers of the markdown file.

    The rest of the file is left alone; a missing section is appended, and a
    missing file is created with `intro`. Markers that are out of order or
    unmatched would make the edit guess, so they raise instead.
    """
    start, end = section_markers(name)
    block = f"{start}\n{body.strip()}\n{end}"
    text = path.read_text() if path.exists() else intro.rstrip() + "\n"
    has_start, has_end = start in text, end in text
    if has_start != has_end or (has_start and text.index(start) > text.index(end)):
        raise ValueError(
            f"{path}: markers for section '{name}' are unmatched or out of "
            f"order; fix them by hand ({start} ... {end})"
        )
    if has_start:
        head, rest = text.split(start, 1)
        tail = rest.split(end, 1)[1]
        text = head + block + tail
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def relative_link(target: Path, from_dir: Path) -> str:
    """A markdown link target for `target`, relative to the document's folder."""
    return Path(os.path.relpath(target.resolve(), from_dir.resolve())).as_posix()


def progress(message: str) -> None:
    """Progress goes to stderr so stdout holds only the tables."""
    print(message, file=sys.stderr, flush=True)
