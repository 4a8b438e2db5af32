"""`python -m benchmarks ppo_async`: the quick path end to end (the floor, then async,
serial and SB3 PPO on Breakout at a tiny budget, each pararl run's facts read back),
the commands of its systems, and the report's arithmetic on made-up runs: a run's
facts from its rows, the wall ratios, the Mann-Whitney p-value (`pararl.stats`'s,
tested in tests/test_stats.py), the floor ratio and the targets' verdicts."""

from __future__ import annotations

import dataclasses
import multiprocessing
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from benchmarks.__main__ import main
from benchmarks.lib.compare import Outcome, Run

from benchmarks import ppo_async as pa
from benchmarks.lib import compare
from benchmarks.lib import harness as h

BREAKOUT = "MinAtar/Breakout-v1"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_quick_run_measures_the_floor_then_each_system(
    bench: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    pytest.importorskip("stable_baselines3")
    pytest.importorskip("minatar")
    # serial's run goes through the same harness (its command: test_commands_of_the_systems;
    # its facts without busy fractions: test_a_runs_facts_from_its_rows)
    args = ("--systems", "pararl-async", "sb3", "--budget", "2048", "--eval-every", "2048")
    data = bench("ppo_async", "--quick", *args, "--floor-repeats", "1", figure=False)
    results = data["results"]
    runs = results["outcome"]["runs"]
    assert [r["system"] for r in runs] == ["pararl-async", "sb3"]
    for run in runs:
        assert run["ok"], run["note"]
        assert run["env_steps"] >= 2_048
        assert run["curve"], "no evaluation"
        # two rollouts of 8 x 128, each 4 epochs of 4 minibatches
        assert run["updates"] == 2 * 4 * 4, run["system"]
    async_ = runs[0]["extra"]
    assert async_["mode"] == "async"
    assert "asked for" in async_["mode_reason"]
    assert async_["rollouts"] == 2
    assert async_["policy_lag"] == pytest.approx(1 / 2)  # 0 for the first rollout, then 1
    assert 0 < async_["actor_busy"] <= 1
    assert 0 < async_["learner_busy"] <= 1
    assert async_["iteration_s"] > 0
    assert runs[1]["extra"] == {}
    (floor,) = results["floors"]
    assert floor["env"] == BREAKOUT
    assert (floor["num_envs"], floor["num_steps"], floor["epochs"], floor["minibatches"]) == (
        8,
        128,
        4,
        4,
    )
    assert len(floor["acting"]["samples"]) == len(floor["update"]["samples"]) == 1
    assert floor["acting"]["median"] > 0
    assert floor["update"]["median"] > 0
    # each side again beside a process doing the other, which is gone afterwards
    assert len(floor["acting_beside"]["samples"]) == len(floor["update_beside"]["samples"]) == 1
    assert floor["acting_beside"]["median"] > 0
    assert len(floor["update_wide"]["samples"]) == 1
    assert floor["update_beside"]["median"] > 0
    assert not multiprocessing.active_children()
    assert data["key_ratios"].startswith("Breakout: async wall ÷ SB3 ")
    assert "iteration ÷ floor" in data["key_ratios"]
    assert not (tmp_path / "BENCHMARKS.md").exists()


def test_commands_of_the_systems(tmp_path: Path) -> None:
    c = pa.resolve(pa.Config(systems=("pararl-async", "pararl-sync", "sb3"), sb3_threads=1))
    row = pa.ROW
    for mode in ("async", "serial", "sync"):
        cmd = compare.pararl_command(row, c, row.system(f"pararl-{mode}"), BREAKOUT, 1, tmp_path)
        text = " ".join(cmd)
        assert f"--mode {mode}" in text
        assert "--log-every-s 0.0" in text  # a metrics.csv row per rollout
        assert cmd[cmd.index("--total-steps") + 1] == "1000000"
        assert cmd[cmd.index("--eval-every") + 1] == "100000"
    anchor = compare.anchor_command(row, c, row.system("sb3"), BREAKOUT, 1, tmp_path)
    assert anchor[anchor.index("--anchor") + 1] == "minatar"
    assert anchor[anchor.index("--threads") + 1] == "1"
    assert [s.name for s in pa.ROW.systems if s.default] == ["pararl-async", "pararl-serial", "sb3"]
    assert c.keep_dir == h.ROOT / "results" / "ppo_async"
    quick = pa.resolve(pa.Config(quick=True))
    assert (quick.runs, quick.budget, quick.keep_dir) == ((f"{BREAKOUT}:0",), 8_192, None)


@pytest.mark.parametrize(
    "args", [["--runs", "CartPole-v1:0"], ["--floor-repeats", "0"], ["--systems", "x"]]
)
def test_bad_options_exit_with_code_2(args: list[str]) -> None:
    assert main(["ppo_async", "--quick", *args]) == 2


def test_a_runs_facts_from_its_rows() -> None:
    """Rollouts of 1,024 steps; one row is two rollouts after the last (a log tick
    that missed one): the mean iteration spans every rollout after the first, the
    median only rollouts a row apart; busy fractions and lag are the rows' means."""
    config = {"num_steps": 128, "resolved": {"mode": "async", "mode_reason": "why",
                                             "num_envs": 8}}  # fmt: skip
    rows = [
        {"env_steps": "1024", "wall_s": "2.0", "actor_busy": "0.9", "learner_busy": "1.0",
         "policy_lag": "0.0", "update_threads": "1.0"},
        {"env_steps": "2048", "wall_s": "2.5", "actor_busy": "0.7", "learner_busy": "0.8",
         "policy_lag": "1.0", "update_threads": "1.0"},
        {"env_steps": "3072", "wall_s": "2.7", "actor_busy": "0.8", "learner_busy": "0.9",
         "policy_lag": "1.0", "update_threads": "1.0"},
        {"env_steps": "5120", "wall_s": "3.7", "actor_busy": "0.6", "learner_busy": "0.5",
         "policy_lag": "1.0", "update_threads": "1.0"},
    ]  # fmt: skip
    facts = pa.run_facts(rows, config)
    assert facts["rollouts"] == 5
    assert facts["iteration_s"] == pytest.approx((3.7 - 2.0) / 4)
    assert facts["iteration_median_s"] == pytest.approx(statistics.median([0.5, 0.2]))
    assert facts["actor_busy"] == pytest.approx(0.75)
    assert facts["learner_busy"] == pytest.approx(0.8)
    assert facts["policy_lag"] == pytest.approx(0.75)
    assert (facts["mode"], facts["mode_reason"], facts["num_envs"]) == ("async", "why", 8)
    serial = pa.run_facts([{k: rows[0][k] for k in ("env_steps", "wall_s")}], config)
    assert (serial["rollouts"], serial["iteration_s"], serial["actor_busy"]) == (1, None, None)


def _run(system: str, seed: int, final: float, wall: float, **extra: float) -> Run:
    curve = [{"env_steps": s, "wall_s": wall * s / 3, "eval_return": final} for s in (1, 2, 3)]
    return Run(system, BREAKOUT, seed, wall, True, 3, 0, curve, extra=dict(extra))


def _floor(acting: float, update: float, beside: tuple[float, float] | None = None
           ) -> pa.Floor:  # fmt: skip
    a, u = (None, None) if beside is None else (h.summarize([b]) for b in beside)
    return pa.Floor(BREAKOUT, h.summarize([acting]), h.summarize([update]), 8, 128, 4, 4, 256,
                    a, u)  # fmt: skip


def test_two_jobs_side_by_side_run_at_their_speeds_beside_each_other_then_alone() -> None:
    assert pa.overlapped(40, 40, 70, 70) == pytest.approx(70)  # cores that never meet: the longer
    # acting ends after 60 s beside; the update has done 60/80 of its 70 s and ends alone
    assert pa.overlapped(40, 60, 70, 80) == pytest.approx(60 + 70 * (1 - 60 / 80))
    assert pa.overlapped(70, 80, 40, 60) == pytest.approx(77.5)  # either order
    assert pa.overlapped(50, 100, 50, 100) == pytest.approx(100)  # equal: no faster than serial
    # the update's rest on every core (the actor's lent): 70 s of work at 50 s for all of it
    assert pa.overlapped(40, 60, 70, 80, b_rest=50) == pytest.approx(60 + 50 * (1 - 60 / 80))
    wide = dataclasses.replace(_floor(0.04, 0.07, (0.06, 0.08)), update_wide=h.summarize([0.05]))
    assert wide.beside_s == pytest.approx(0.0725)
    assert _floor(0.04, 0.07).beside_s is None  # not measured
    assert _floor(0.04, 0.07, (0.06, 0.08)).beside_s == pytest.approx(0.0775)


MADE_UP = [
    *(_run("pararl-async", i, f, w, iteration_s=it)
      for i, (f, w, it) in enumerate([(3, 60, 0.20), (4, 62, 0.21), (5, 64, 0.19)])),
    *(_run("pararl-serial", i, f, w, iteration_s=0.33)
      for i, (f, w) in enumerate([(3.5, 100), (4.5, 105), (5.5, 110)])),
    *(_run("sb3", i, f, w) for i, (f, w) in enumerate([(6, 120), (7, 130), (8, 150)])),
]  # fmt: skip


def test_ratios_p_values_floor_and_targets_on_made_up_runs() -> None:
    serial, sb3 = pa.compared(Outcome("ppo_async", MADE_UP), 3)
    assert (serial.other, sb3.other) == ("pararl-serial", "sb3")
    assert serial.wall_ratio == pytest.approx(62 / 105)
    assert sb3.wall_ratio == pytest.approx(62 / 130)
    assert serial.p == pytest.approx(0.7)
    assert sb3.p == pytest.approx(0.1)
    assert (serial.seeds, serial.smallest_p) == ("3 vs 3", pytest.approx(0.1))
    (it,) = pa.iterations(MADE_UP, [_floor(0.137, 0.182)])
    assert it.floor.floor_s == pytest.approx(0.182)  # the longer of the two
    assert it.floor.serial_s == pytest.approx(0.319)
    assert it.ratio == pytest.approx(0.20 / 0.182)  # the median async run's iteration
    assert (serial.targets, sb3.targets, it.met) == ({"final": True, "wall": True},
                                                     {"wall": True}, True)  # fmt: skip
    (elsewhere,) = pa.iterations(
        MADE_UP, [dataclasses.replace(_floor(0.137, 0.182), sitting="another day")]
    )
    assert (elsewhere.iteration, elsewhere.ratio) == (None, None)  # kept runs: not its own
    synced = MADE_UP + [_run("pararl-sync", i, 4, 90, iteration_s=0.31) for i in range(3)]
    (both,) = pa.iterations(synced, [_floor(0.137, 0.182, (0.15, 0.19))])
    side_by_side = 0.15 + 0.182 * (1 - 0.15 / 0.19)  # acting ends first, the update alone
    assert both.floor.beside_s == pytest.approx(side_by_side)
    assert both.beside_ratio == pytest.approx(0.20 / side_by_side)
    assert both.best_vs_sync == pytest.approx(side_by_side / 0.31)
    assert (it.beside_ratio, it.best_vs_sync) == (None, None)  # no sync run, no beside
    (slow,) = pa.iterations(MADE_UP, [_floor(0.137, 0.15)])
    assert slow.met is False  # 0.20 / 0.15 = 1.33
    far = dataclasses.replace(serial, wall_ratio=0.61, p=0.03)
    assert far.targets == {"final": False, "wall": False}
    # the wall ratio pairs each seed's runs (one sitting), not the medians (100 / 100)
    runs = [_run("pararl-async", i, 3, w) for i, w in enumerate((50, 100, 200))]
    runs += [_run("pararl-serial", i, 3, w) for i, w in enumerate((100, 100, 800))]
    assert pa.versus(runs, BREAKOUT, "pararl-serial", 3).wall_ratio == pytest.approx(0.5)
    unmeasured = pa.versus(MADE_UP, BREAKOUT, "pararl-sync", 3)
    assert (unmeasured.p, unmeasured.wall_ratio) == (None, None)
    assert unmeasured.targets == {"final": None, "wall": None}


def test_the_report_states_each_target_and_its_verdict() -> None:
    c = pa.resolve(pa.Config())
    meta = h.Metadata("python -m benchmarks ppo_async", dataclasses.asdict(c))
    results = pa.Results(Outcome("ppo_async", MADE_UP), [_floor(0.137, 0.182)])
    rep = pa.report(results, meta)
    assert rep.key_ratios == (
        "Breakout: async wall ÷ serial 0.59× (≤ 0.6: met), SB3 0.48× (≤ 0.5: met), final "
        "4.0 vs serial 4.5 (p = 0.70, 3 vs 3 seeds), iteration ÷ floor 1.10× (≤ 1.2: met)"
    )
    text = "\n".join(rep.blocks)
    assert "All met: yes." in text
    assert "the smallest p Mann-Whitney can give is 0.10" in text
    assert "| 0.59× | final met, wall met |" in text  # against serial
    assert "| 0.48× | wall met |" in text  # against SB3
    assert (
        "| Breakout | 137 (137–137) | 182 (182–182) | 182 | 200 (190–210) | 1.10× (met) |" in text
    )
    assert [p.title for p in rep.panels] == [
        f"{BREAKOUT}: return vs env steps",
        f"{BREAKOUT}: return vs wall time",
    ]
