"""The one harness every benchmark runs on: options, interleaving, tables, metadata,
JSON, figures and its section of BENCHMARKS.md.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import metadata
from pathlib import Path
from platform import platform, python_version
from typing import Any, Generic, Literal, TypeVar

from benchmarks.lib.figures import Panel, save_figure

# the summaries every benchmark reports, reached through here (`h.summarize`, ...)
from benchmarks.lib.stats import Summary as Summary
from benchmarks.lib.stats import maybe as maybe
from benchmarks.lib.stats import med as med
from benchmarks.lib.stats import ratio as ratio
from benchmarks.lib.stats import summarize as summarize
from pararl.errors import UsageError
from pararl.mp.topology import available_cpus, physical_cores

ROOT = Path(__file__).resolve().parents[2]  # the checkout
PROG = "python -m benchmarks"
PACKAGES = ("torch", "gymnasium", "numpy", "stable-baselines3", "mujoco")
INTRO = f"""# pararl benchmarks

Each section below is written by one `{PROG} NAME` command, which states the exact
command, the date, the commit and the machine's cores. Absolute numbers move from run to
run and machine to machine; the ratios to the anchors (measured side by side, interleaved,
in the same run) are what to compare. Rerun a benchmark to rewrite its section.
"""
C = TypeVar("C")
R = TypeVar("R")


@dataclass(frozen=True)
class Options:
    """What every benchmark accepts: --quick and where results go."""

    quick: bool = False  # Fast check (tiny sizes, no claims), BENCHMARKS.md left alone.
    out_dir: Path | None = None  # NAME.json's folder (--quick: the PNG's); <repo>/bench_results.
    figure: Path | None = None  # PNG path; <repo>/figures/bench_NAME.png (--quick: in --out-dir).
    benchmarks_md: Path | None = None  # File whose bench:NAME section is rewritten; BENCHMARKS.md.
    update_benchmarks: bool | None = None  # Rewrite that section; default: yes, but for --quick.
    section: str | None = None
    """Name of the run's section, JSON and figure (bench:SECTION, SECTION.json,
    bench_SECTION.png); default: the benchmark's NAME. Another name keeps a second run
    of the same benchmark (other options) beside the first."""


def apply_quick(config: C, quick: Mapping[str, Any]) -> C:
    """With --quick, `config` with the QUICK values for every option left at its default."""
    if not getattr(config, "quick", False):
        return config
    defaults = type(config)()
    changes = {k: v for k, v in quick.items() if getattr(config, k) == getattr(defaults, k)}
    return dataclasses.replace(config, **changes)  # type: ignore[type-var]


def check(problems: Iterable[tuple[bool, str]]) -> None:
    """Raise UsageError with the first message whose condition holds."""
    for bad, message in problems:
        if bad:
            raise UsageError(message)


def require(config: Any, *rules: str) -> None:
    """UsageError unless each rule `OP LOW: NAME ...` (OP: >= or >) holds for the named
    options (every value of a tuple, which needs one; None is a default)."""
    for rule in rules:
        bound, names = rule.split(":")
        op, low = bound.split()
        for name in names.split():
            value, flag = getattr(config, name), "--" + name.replace("_", "-")
            values = value if isinstance(value, tuple) else (value,)
            numbers = [v for v in values if isinstance(v, (int, float))]
            bad = any(v <= float(low) if op == ">" else v < float(low) for v in numbers)
            check([(not values, f"{flag} needs at least one value"),
                   (bad, f"{flag} must be {op} {low}")])  # fmt: skip


def command_line(name: str, config: Any) -> str:
    """`python -m benchmarks NAME` and every option not at its default (where results
    go last): the command that reproduces the run, however it was started."""
    parts = [f"{PROG} {name}"]
    where = {f.name for f in dataclasses.fields(Options)} - {"quick"}
    for f in sorted(dataclasses.fields(config), key=lambda f: f.name in where):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        value, flag = getattr(config, f.name), "--" + f.name.replace("_", "-")
        if value == default:
            continue
        if isinstance(value, bool) and isinstance(default, bool):  # tyro's flag pair
            parts.append(flag if value else "--no-" + flag[2:])
        else:
            parts += [flag, *map(str, value if isinstance(value, (tuple, list)) else [value])]
    return " ".join(parts)


def interleaved(tasks: Mapping[str, Callable[[], float]], repeats: int,
                on_error: Callable[[str, Exception], None] | None = None,
                rotate: bool = False) -> dict[str, list[float]]:  # fmt: skip
    """Every task once per round, round after round (A, B, C, A, B, C, ...), so slow
    drifts of the machine hit all alike; `rotate` starts each round one task later. A
    task that raises goes to `on_error` and is dropped from later rounds (without
    `on_error` it propagates)."""
    results: dict[str, list[float]] = {name: [] for name in tasks}
    alive = list(tasks)
    for r in range(repeats):
        k = r % len(alive) if rotate and alive else 0
        for name in alive[k:] + alive[:k]:
            try:
                results[name].append(tasks[name]())
            except Exception as exc:
                if on_error is None:
                    raise
                on_error(name, exc)
                alive.remove(name)
    return results


def timed(fn: Callable[[], R]) -> tuple[float, R]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def progress(message: str) -> None:
    """Progress goes to stderr, so stdout holds only the tables."""
    print(message, file=sys.stderr, flush=True)


def failure(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)  # read without importing (torch takes seconds)
    except metadata.PackageNotFoundError:
        return None


def _dirty() -> bool | None:
    """Whether tracked files differ from HEAD (the numbers then belong to no commit)."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return None if status is None else bool(status)


@dataclass
class Metadata:
    """Everything needed to judge a result later: code, machine, software, parameters."""

    command: str
    params: dict[str, Any]
    date: str = field(default_factory=lambda: datetime.now().astimezone().isoformat("T", "seconds"))
    git_commit: str | None = field(default_factory=lambda: _git("rev-parse", "--short", "HEAD"))
    git_dirty: bool | None = field(default_factory=_dirty)
    cpu_count: int | None = field(default_factory=os.cpu_count)
    affinity_cpus: int = field(default_factory=lambda: len(available_cpus()))
    physical_cores: int = field(default_factory=physical_cores)
    platform: str = field(default_factory=platform)
    python: str = field(default_factory=python_version)
    versions: dict[str, str | None] = field(
        default_factory=lambda: {p: _version(p) for p in PACKAGES}
    )
    machine_note: str = ""  # appended to the cores line (torch threads, the GPU)
    wall_s: float = 0.0

    @property
    def cores(self) -> str:
        cpus = f"{self.cpu_count} logical / {self.affinity_cpus} in affinity"
        return f"{cpus} / {self.physical_cores} physical"


def fmt_rate(value: float | None) -> str:
    """A rate with 3-4 significant digits: 950, 12.3k, 1.25M."""
    if value is None:
        return "–"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            scaled = value / scale
            return f"{scaled:.3g}{suffix}" if scaled < 100 else f"{scaled:.0f}{suffix}"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


def fmt_ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def fmt_pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


def fmt_num(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def fmt_range(s: Summary | None, fmt: Callable[[float], str] = fmt_rate) -> str:
    return "–" if s is None else f"{fmt(s.min)}–{fmt(s.max)}"


def fmt_spread(s: Summary | None, fmt: Callable[[float], str] = fmt_rate) -> str:
    """`median (min–max)`."""
    return "–" if s is None else f"{fmt(s.median)} ({fmt_range(s, fmt)})"


@dataclass(frozen=True)
class Col(Generic[R]):
    """A table column: its header, how a row fills its cell, its alignment (l, r, c)."""

    header: str
    cell: Callable[[R], object]
    align: Literal["l", "r", "c"] = "r"


def table(columns: Sequence[Col[R]], rows: Iterable[R]) -> str:
    """A GitHub markdown table, one line per row."""
    marks = {"l": ":--", "r": "--:", "c": ":-:"}
    lines = [f"| {' | '.join(c.header for c in columns)} |"]
    lines.append("|" + "|".join(marks[c.align] for c in columns) + "|")
    cells = ([str(c.cell(row)).replace("|", "\\|") for c in columns] for row in rows)
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells])


def text_table(heads: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A table of words (published figures, say): the first column left, the rest right."""

    def cell(i: int) -> Callable[[Sequence[str]], str]:
        return lambda row: row[i]

    return table([Col(name, cell(i), "l" if i == 0 else "r") for i, name in enumerate(heads)], rows)


@dataclass
class Report:
    """What a benchmark shows: its section title, key ratios, markdown blocks (tables
    with their notes) and figure panels."""

    title: str
    key_ratios: str
    blocks: list[str]
    panels: list[Panel] = field(default_factory=list)
    figure_alt: str = "benchmark"
    preface: list[str] = field(default_factory=list)  # before the figure (a source's numbers)
    legend_below: bool = False


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, Path) or hasattr(value, "tolist"):
        return str(value) if isinstance(value, Path) else value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def write_atomic(path: Path, text: str) -> None:
    """Atomically: a crash leaves the old file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def markers(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"


def replace_section(path: Path, name: str, body: str) -> None:
    """Put `body` between the `bench:NAME` markers; the rest of the file stays. A
    missing section is appended, a missing file starts with INTRO; unmatched or
    misordered markers raise instead of guessing."""
    start, end = markers(name)
    block = f"{start}\n{body.strip()}\n{end}"
    text = path.read_text() if path.exists() else INTRO
    if (start in text) != (end in text) or (start in text and text.index(start) > text.index(end)):
        raise ValueError(f"{path}: markers of section '{name}' are unmatched or out of order")
    if start in text:
        head, rest = text.split(start, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    write_atomic(path, text)


def section(report: Report, meta: Metadata, figure_link: str | None) -> str:
    """The BENCHMARKS.md section: what ran, when, on which code and machine, then the
    key ratios, the figure and the blocks."""
    versions = ", ".join(f"{k} {v}" for k, v in meta.versions.items() if v)
    dirty = " (with uncommitted changes)" if meta.git_dirty else ""
    lines = [
        f"## {report.title}\n",
        f"- command: `{meta.command}`",
        f"- date: {meta.date}; commit: {meta.git_commit or 'unknown'}{dirty}",
        f"- cores: {meta.cores}; Python {meta.python}; {versions}{meta.machine_note}\n",
        f"Key ratios: {report.key_ratios}.\n",
        *(f"{block}\n" for block in report.preface),
        *([f"![{report.figure_alt}]({figure_link})\n"] if figure_link else []),
    ]
    return "\n".join(lines) + "\n" + "\n\n".join(report.blocks)


def execute(name: str, config: C, resolve: Callable[[C], C], measure: Callable[[C, Metadata], R],
            report: Callable[[R, Metadata], Report]) -> R:  # fmt: skip
    """Resolve the options, measure, then publish: figure, JSON, the printed tables and
    (full mode, or --update-benchmarks True) the BENCHMARKS.md section."""
    command = command_line(name, config)
    label = getattr(config, "section", None)
    check(
        [(label is not None and not re.fullmatch(r"[a-z0-9_]+", label), "--section: a-z, 0-9, _")]
    )
    config = resolve(config)
    opts: Any = config
    torch = sys.modules.get("torch")
    threads = None if torch is None else torch.get_num_threads()
    meta = Metadata(command, dataclasses.asdict(opts))
    start = time.perf_counter()
    try:
        results = measure(config, meta)
    finally:
        if threads is not None:  # a caller in this process keeps its torch threads
            sys.modules["torch"].set_num_threads(threads)
    meta.wall_s = round(time.perf_counter() - start, 1)
    rep = report(results, meta)
    if opts.section:  # its own heading too
        rep = dataclasses.replace(rep, title=f"{rep.title}, section {opts.section}")
    name = opts.section or name
    out_dir = opts.out_dir or ROOT / "bench_results"
    figure = opts.figure or (out_dir if opts.quick else ROOT / "figures") / f"bench_{name}.png"
    md = opts.benchmarks_md or ROOT / "BENCHMARKS.md"
    written = save_figure(rep.panels, figure, rep.legend_below)
    data = {"benchmark": name, "metadata": meta, "key_ratios": rep.key_ratios, "figure": written}
    json_path = out_dir / f"{name}.json"
    text = json.dumps(data | {"results": results}, indent=2, default=_jsonable)
    write_atomic(json_path, text + "\n")
    print(f"## {meta.command}: {meta.date}, commit {meta.git_commit or 'unknown'}, ", end="")
    print(f"cores {meta.cores}, {meta.wall_s} s\n\n" + "\n\n".join(rep.blocks))
    also = f" and {written}" if written else ""
    print(f"\nKey ratios: {rep.key_ratios}.\n\nwrote {json_path}{also}")
    if not opts.quick if opts.update_benchmarks is None else opts.update_benchmarks:
        link = written and Path(os.path.relpath(written.resolve(), md.parent.resolve())).as_posix()
        replace_section(md, name, section(rep, meta, link or None))
        print(f"updated {md} (section bench:{name})")
    progress(f"{name}: done in {meta.wall_s} s")
    return results
