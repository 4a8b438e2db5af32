"""What the tests of a batched run (`--seeds`) of any algorithm read: a run's final
checkpoint, its CSV rows, and whether each agent's evaluations are its seed's run's."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np

from pararl import checkpoint


def final(run: Path) -> dict[str, Any]:
    return checkpoint.load(run / "checkpoints" / "final.pt")


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def assert_evaluations_per_agent(batched: Path, alone: list[Path]) -> list[dict[str, str]]:
    """eval.csv has a row per agent at each evaluation, and agent i's returns are
    those of seed i's run alone (each agent plays its own seed's episodes); metrics.csv
    has each agent's rows. Returns the batch's metrics rows."""
    evals = rows(batched / "eval.csv")
    agents = [str(i) for i in range(len(alone))]
    assert [r["agent"] for r in evals] == agents * (len(evals) // len(agents))
    for i, run in enumerate(alone):
        own = [r for r in evals if r["agent"] == str(i)]
        theirs = rows(run / "eval.csv")
        assert [r["env_steps"] for r in own] == [r["env_steps"] for r in theirs]
        np.testing.assert_allclose(
            [float(r["eval_return"]) for r in own], [float(r["eval_return"]) for r in theirs]
        )
    metrics = rows(batched / "metrics.csv")
    assert {r["agent"] for r in metrics} == set(agents)
    return metrics


def assert_named_with_its_agent(
    error: BaseException, per_agent: int, first_seed: int, agent: int, own: int
) -> None:
    """A failed env's error says whose env it was: env `own` of agent `agent` (agent
    i's envs are the i-th block of `per_agent`), and that agent's seed."""
    note = "\n".join(getattr(error, "__notes__", []))
    env = agent * per_agent + own
    said = f"env {env} is agent {agent}'s (seed {first_seed + agent}, its env {own} of {per_agent})"
    assert said in note, note
