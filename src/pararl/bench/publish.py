"""The end of a benchmark command, shared by `pararl bench ppo` and `pararl bench
devices`: --quick defaults, where results go, and writing them (JSON, PNG, the
printed tables and, in full mode, the command's section of BENCHMARKS.md with the
command, date, commit and cores).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pararl.bench.common import (
    cores_text,
    relative_link,
    replace_section,
    repo_root,
    write_json,
)

C = TypeVar("C")


def apply_quick(config: C, quick: Mapping[str, Any]) -> C:
    """`config` with the --quick values for every option left at its default."""
    defaults = type(config)()
    changes = {k: v for k, v in quick.items() if getattr(config, k) == getattr(defaults, k)}
    return dataclasses.replace(config, **changes)  # type: ignore[type-var]


def check(problems: Sequence[tuple[bool, str]]) -> None:
    """Raise UsageError with the first message whose condition holds."""
    from pararl.errors import UsageError

    for bad, message in problems:
        if bad:
            raise UsageError(message)


@dataclass(frozen=True)
class OutputOptions:
    """Where a benchmark writes its results; shared by every `pararl bench` command."""

    out_dir: Path | None = None
    """Folder for NAME.json (and, with --quick, the PNG); default: <repo>/bench_results."""

    figure: Path | None = None
    """PNG path; default: <repo>/figures/bench_NAME.png (--quick: in --out-dir)."""

    benchmarks_md: Path | None = None
    """Markdown file whose bench:NAME section is rewritten; default: <repo>/BENCHMARKS.md."""

    update_benchmarks: bool | None = None
    """Rewrite the BENCHMARKS.md section; default: yes, except with --quick."""


@dataclass(frozen=True)
class SolveOptions:
    """The time-to-solve part's options, shared by `pararl bench dqn` and `bench ppo`."""

    seeds: tuple[int, ...] = (0, 1, 2)
    """solve: training seeds; every system runs once per seed."""

    budget: int = 100_000
    """solve: env steps at most per run."""

    target: float = 475.0
    """solve: mean greedy return that counts as solved."""

    eval_every: int = 5_000
    """solve: env steps between greedy evaluations."""

    eval_episodes: int = 10
    """solve: episodes per evaluation."""

    verify_episodes: int = 20
    """solve: episodes of the untimed check of each run's saved policy."""

    run_timeout_s: float = 1800.0
    """solve: one training process is killed after this long (counted not solved)."""


@dataclass(frozen=True)
class Outputs:
    json: Path
    figure: Path
    benchmarks_md: Path
    update: bool


def outputs(name: str, config: Any) -> Outputs:
    """Paths from a bench config's `out_dir`, `figure`, `benchmarks_md` and
    `update_benchmarks`: <repo>/bench_results/NAME.json, <repo>/figures/bench_NAME.png
    (with --quick: next to the JSON), <repo>/BENCHMARKS.md, updated unless --quick."""
    root = repo_root()
    out_dir = config.out_dir or root / "bench_results"
    default_figure = (out_dir if config.quick else root / "figures") / f"bench_{name}.png"
    update = not config.quick if config.update_benchmarks is None else config.update_benchmarks
    return Outputs(
        out_dir / f"{name}.json",
        config.figure or default_figure,
        config.benchmarks_md or root / "BENCHMARKS.md",
        update,
    )


def section_header(
    title: str, meta: Mapping[str, Any], key_ratios: str, machine_extra: str = ""
) -> str:
    """The top of a BENCHMARKS.md section: what ran, when, on which code and machine
    (`machine_extra` is appended to the cores line)."""
    versions = ", ".join(f"{k} {v}" for k, v in meta["versions"].items() if v)
    commit = meta["git_commit"] or "unknown"
    if meta.get("git_dirty"):
        commit += " (with uncommitted changes)"
    lines = [
        f"## {title}",
        "",
        f"- command: `{meta['command']}`",
        f"- date: {meta['date']}; commit: {commit}",
        f"- cores: {cores_text(meta)}; Python {meta['python']}; {versions}{machine_extra}",
        "",
        f"Key ratios: {key_ratios}.",
    ]
    return "\n".join(lines)


def publish(
    prog: str,
    name: str,
    data: dict[str, Any],
    outs: Outputs,
    tables: Sequence[str],
    plot: Callable[[dict[str, Any], Path], Path | None],
    section: Callable[[dict[str, Any], Sequence[str], str | None], str],
) -> None:
    """Plot, write the JSON, print the tables, and (if asked) rewrite the section."""
    meta = data["metadata"]
    written = plot(data, outs.figure)
    data["figure"] = None if written is None else str(written)
    json_path = write_json(outs.json, data)
    print(
        f"## {prog}: {meta['date']}, commit {meta['git_commit'] or 'unknown'}, "
        f"cores {cores_text(meta)}, {meta['wall_s']} s\n"
    )
    print("\n\n".join(tables))
    print(f"\nKey ratios: {data['key_ratios']}.\n")
    print(f"wrote {json_path}" + (f" and {written}" if written else ""))
    if outs.update:
        link = None if written is None else relative_link(written, outs.benchmarks_md.parent)
        replace_section(outs.benchmarks_md, name, section(data, tables, link))
        print(f"updated {outs.benchmarks_md} (section bench:{name})")


def new_figure(panels: int, width: float = 5.5, height: float = 4.8) -> tuple[Any, Any]:
    """A matplotlib figure (files only, no display) with `panels` axes in a row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, panels, figsize=(width * panels, height), squeeze=False)
    return fig, axes[0]


def save_figure(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
