"""`python -m benchmarks dqn`: the DQN post's design does not deadlock with 2 children;
pararl's loop driven in spells (actors alone, the loop with and without a replay
ratio); throughput end to end at tiny durations; bad options exit 2."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from benchmarks.__main__ import main
from benchmarks.dqn import LEARN_EVERY, MEMORY, Pararl, SeedDesign, workload_config

from tests.benchmarks.conftest import PNG


def test_seed_design_two_children_do_not_deadlock() -> None:
    design = SeedDesign(2)
    procs = list(design.procs)
    try:
        taken = design.run_for(0.5)
        assert taken >= 2  # every round hears from both children: no deadlock
        assert taken % 2 == 0
        # the memory starts full: it learns at every LEARN_EVERY-th transition from the first
        assert design.learn_step == (MEMORY + taken) // LEARN_EVERY - MEMORY // LEARN_EVERY
    finally:
        design.close()
    assert len(procs) == 2
    assert not any(p.is_alive() for p in procs)


def test_pararl_spells_count_what_each_side_did() -> None:
    config = dataclasses.replace(workload_config("seed"), replay_ratio=0.0, learning_starts=64)
    driver = Pararl(config, 1, learner_threads=1)
    try:
        actors = driver.spell("actors", 0.2, 0.0)
        loop = driver.spell("loop", 0.3, 0.1)
    finally:
        driver.close()
    assert (actors.env_steps > 0, actors.updates) == (True, 0)
    assert loop.env_steps > 0
    assert loop.updates > 0  # free-running: both sides at once


def test_throughput_end_to_end(bench: Callable[..., dict[str, Any]], tmp_path: Path) -> None:
    data = bench(
        *("dqn", "--parts", "throughput", "--actors", "2", "--workloads", "seed"),
        *("--repeats", "1", "--block-s", "0.3", "--warmup-s", "0.1", "--learner-threads", "1"),
        *("--figure", str(tmp_path / "f.png"), "--update-benchmarks", "True"),
    )
    assert data["metadata"]["machine_note"] == "; learner process torch threads: 1"
    results = data["results"]
    assert results["solve"] is None
    rows = {r["system"]: r for r in results["throughput"]}
    assert set(rows) == {"seed_design", "pararl_seed", "pararl_seed_free"}
    seed_steps = rows["seed_design"]["steps"]["median"]
    assert len(rows["seed_design"]["steps"]["samples"]) == 1
    for name in ("pararl_seed", "pararl_seed_free"):
        assert rows[name]["status"] == "ok", rows[name]["note"]
        assert rows[name]["vs"] == pytest.approx(rows[name]["steps"]["median"] / seed_steps)
    assert (tmp_path / "f.png").read_bytes()[:8] == PNG
    text = (tmp_path / "BENCHMARKS.md").read_text()
    assert "<!-- bench:dqn:start -->" in text
    assert "- command: `python -m benchmarks dqn --parts throughput" in text


def test_bad_options_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dqn", "--repeats", "0"]) == 2
    assert "--repeats must be >= 1" in capsys.readouterr().err
    assert main(["dqn", "--parts", "throughput", "--actors", "0"]) == 2
    assert main(["dqn", "--parts", "solve", "--runs", "CartPole-v1"]) == 2
    assert main(["dqn", "--parts", "solve", "--systems", "pararl-ray"]) == 2


def test_throughput_workloads_have_no_step_budget() -> None:
    """The learner loop takes no chunk past a run's budget: a spell of a few seconds
    at tens of thousands of steps/s must never reach one."""
    for workload in ("defaults", "seed"):
        assert workload_config(workload).budget >= 10**9  # type: ignore[arg-type]
