"""A run's scores: each of its agents' final evaluation return, read from its
eval.csv; and the runs that one side of a comparison names (`pararl compare`): a run,
several, or a directory whose subdirectories are runs, all their agents pooled, so
that one run of N agents compares with N runs of one.

eval.csv has a row per evaluation, in the order of its env steps
(`runners.session.EVAL_METRICS`). A run of several agents (seeds) has an `agent`
column, 0 to N - 1; a run without one is one agent, 0. An agent's score is the
`eval_return` of its last row: in a run that trained its whole budget, the evaluation
of its final weights.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pararl.errors import UsageError
from pararl.rundir import RunDir

# eval.csv's columns read here (`runners.session.EVAL_METRICS`; `agent`: a run of
# several agents)
RETURN = "eval_return"
STEPS = "env_steps"
AGENT = "agent"


@dataclass(frozen=True)
class Final:
    """An agent's final evaluation: its run, its number in the run, the env steps of the
    weights evaluated (None: not recorded) and the return."""

    run: Path
    agent: int
    env_steps: int | None
    score: float


def final_returns(run_dir: Path) -> list[Final]:
    """Each agent's last evaluation in `run_dir`'s eval.csv, by agent number. A run
    with no evaluation yet is refused (UsageError): comparing without it would drop
    the agent."""
    run = RunDir(Path(run_dir))
    path = run.evaluations
    last: dict[int, Final] = {}
    if path.is_file():
        with path.open(newline="") as f:
            for line, row in enumerate(csv.DictReader(f), start=2):
                cell = (row.get(RETURN) or "").strip()
                if not cell:
                    continue
                agent = _agent(row.get(AGENT), path, line)
                score = _number(cell, RETURN, path, line)
                steps = (row.get(STEPS) or "").strip()
                at = int(_number(steps, STEPS, path, line)) if steps else None
                last[agent] = Final(run.root, agent, at, score)
    if not last:
        raise UsageError(
            f"{run.root} has no evaluations yet (no rows in {path.name}): a run evaluates "
            f"every --eval-every env steps and when its budget ends; train it on with "
            f"`pararl train --resume {run.root}` (a finished run: with a larger --total-steps)"
        )
    return [last[agent] for agent in sorted(last)]


def _agent(cell: str | None, path: Path, line: int) -> int:
    """An agent number (a blank cell, or no column: agent 0)."""
    text = (cell or "").strip()
    if not text:
        return 0
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value.is_integer() or value < 0:
        raise UsageError(f"{path} line {line}: {AGENT} {text!r} is not an agent number")
    return int(value)


def _number(text: str, name: str, path: Path, line: int) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise UsageError(f"{path} line {line}: {name} {text!r} is not a finite number")
    return value


def runs_of(path: Path) -> list[Path]:
    """The runs `path` names: itself if it is a run (it holds config.json), else its
    subdirectories that are runs, by name."""
    if not path.exists():
        raise UsageError(f"{path} does not exist; pass a run directory or a directory of runs")
    if not path.is_dir():
        raise UsageError(f"{path} is not a directory; pass a run directory or a directory of runs")
    if RunDir(path).config.is_file():
        return [path]
    runs = sorted(sub for sub in path.iterdir() if sub.is_dir() and RunDir(sub).config.is_file())
    if not runs:
        raise UsageError(
            f"{path} is not a pararl run directory (no config.json), nor a directory of runs "
            "(none of its subdirectories has one); pass the directory pararl train saved "
            "a run in, or the directory above several"
        )
    return runs


def _saved_config(run_dir: Path) -> dict[str, Any]:
    """`run_dir`'s config.json (empty: none, or unreadable: the scores do not need it)."""
    try:
        data = json.loads(RunDir(run_dir).config.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def env_of(run_dir: Path) -> str | None:
    """The env id `run_dir`'s config.json names (None: it names none)."""
    env = _saved_config(run_dir).get("env")
    return env if isinstance(env, str) else None


def agent_settings(run_dir: Path) -> list[dict[str, object]]:
    """Each agent's seed and swept settings, as config.json lists them under
    `resolved.agents` (empty: a run that lists none)."""
    resolved = _saved_config(run_dir).get("resolved")
    agents = resolved.get("agents") if isinstance(resolved, dict) else None
    return [a for a in agents if isinstance(a, dict)] if isinstance(agents, list) else []


def split_selector(text: str) -> tuple[Path, dict[str, str]]:
    """`RUN` or `RUN:NAME=VALUE[,NAME=VALUE...]` (a sweep's combination, or `seed=N`):
    the path and the settings its agents must have (a path that exists as given is a
    path, whatever it holds)."""
    path, _, tail = text.rpartition(":")
    if not path or Path(text).exists() or "=" not in tail:
        return Path(text), {}
    pairs = [item.partition("=") for item in tail.split(",")]
    if any(not name or not sep or not value for name, sep, value in pairs):
        raise UsageError(
            f"{text}: select agents as RUN:NAME=VALUE[,NAME=VALUE...], e.g. runs/sweep:lr=1e-3"
        )
    names = [name for name, _, _ in pairs]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UsageError(
            f"{text}: {', '.join(twice)} named twice (an agent has one value of each); to "
            "pool agents of several values, give the run once for each after --a or --b"
        )
    return Path(path), {name: value for name, _, value in pairs}


def _same(value: object, wanted: str) -> bool:
    try:
        return math.isclose(float(value), float(wanted), rel_tol=1e-9)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value) == wanted


def selected(finals: list[Final], run: Path, wanted: dict[str, str], given: str) -> list[Final]:
    """The agents of `run` whose settings are `wanted`; refused when a setting is not
    one its agents list, or when no agent has them (the values there are named)."""
    if not wanted:
        return finals
    agents = agent_settings(run)
    seed = _saved_config(run).get("seed")
    if not agents and {f.agent for f in finals} == {0} and type(seed) is int:
        agents = [{"seed": seed}]  # a run of one agent: its seed
    known = sorted({name for a in agents for name in a})
    for name in wanted:
        if name not in known:
            count = len({f.agent for f in finals})
            alone = "one agent" if count <= 1 else f"{count} agents"
            listed = ", ".join(known) or f"none: it trained {alone} without a sweep"
            raise UsageError(f"{given}: {run}'s agents have no setting {name!r} (theirs: {listed})")
    keep = {k for k, a in enumerate(agents)
            if all(_same(a.get(name), value) for name, value in wanted.items())}  # fmt: skip
    if not keep:
        values = "; ".join(f"{name}: {', '.join(sorted({str(a.get(name)) for a in agents}))}"
                           for name in wanted)  # fmt: skip
        raise UsageError(f"{given}: no agent of {run} has those settings (its values: {values})")
    return [f for f in finals if f.agent in keep]


@dataclass(frozen=True)
class Side:
    """One side of a comparison: the paths it was given, the runs they name, and every
    agent's final evaluation (run by run, agent by agent)."""

    paths: tuple[Path, ...]
    runs: tuple[Path, ...]
    finals: tuple[Final, ...]

    @property
    def scores(self) -> NDArray[np.float64]:
        return np.array([final.score for final in self.finals], dtype=np.float64)

    @property
    def envs(self) -> list[str]:
        """The env ids its runs' configs name, each once."""
        return sorted({env for run in self.runs if (env := env_of(run)) is not None})

    @property
    def steps(self) -> tuple[int, int] | None:
        """The fewest and most env steps of its final evaluations (None: not recorded)."""
        known = [final.env_steps for final in self.finals if final.env_steps is not None]
        return (min(known), max(known)) if known else None


def side(paths: Sequence[Path], name: str = "") -> Side:
    """The side `paths` name (`name`: how errors call it, e.g. "A"). A run named twice
    (also through a directory of runs) is refused: its agents would count twice."""
    runs: list[Path] = []
    seen: dict[Path, Path] = {}  # each run's resolved path: the path given that named it
    finals: list[Final] = []
    for path in paths:
        where, wanted = split_selector(str(path))
        for run in runs_of(where):
            key = run.resolve()
            if key in seen:
                on = f" on side {name}" if name else ""
                first = seen[key]
                by = f" (by {first} and by {path})" if str(first) != str(path) else ""
                raise UsageError(f"{run} is named twice{on}{by}: its agents would count twice")
            seen[key] = Path(path)
            runs.append(run)
            finals += selected(final_returns(run), run, wanted, str(path))
    return Side(tuple(Path(p) for p in paths), tuple(runs), tuple(finals))


__all__ = [
    "AGENT",
    "RETURN",
    "STEPS",
    "Final",
    "Side",
    "agent_settings",
    "env_of",
    "final_returns",
    "runs_of",
    "selected",
    "side",
    "split_selector",
]
