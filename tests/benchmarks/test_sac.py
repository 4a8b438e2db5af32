"""`python -m benchmarks sac`: the quick path end to end (pararl and SB3 on
HalfCheetah, a tiny budget and networks); its report on made-up runs: the time to
reach SB3's final return per seed, the ratios, the published figures; and the seeds
kept from one sitting to the next."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from benchmarks.__main__ import main
from benchmarks.lib.compare import Outcome, Run, as_json
from benchmarks.lib.harness import ROOT, Metadata

from benchmarks import learning
from benchmarks.lib import compare

sac = learning.benchmark("sac")

pytest.importorskip("mujoco")
pytest.importorskip("stable_baselines3")


@pytest.mark.slow
def test_quick_runs_both_systems(bench: Callable[..., dict[str, Any]], tmp_path: Path) -> None:
    args = ("--budget", "300", "--learning-starts", "200", "--hidden", "16", "--eval-every", "300")
    data = bench("sac", "--quick", *args, figure=False)
    runs = data["results"]["runs"]
    assert [r["system"] for r in runs] == ["pararl", "sb3"]
    for run in runs:
        assert run["ok"], run["note"]
        assert run["env_steps"] >= 300
        assert [p["env_steps"] for p in run["curve"]][-1] >= 300
    pararl, sb3_run = runs
    assert pararl["note"].startswith("learner on ")  # what pararl chose for the run
    # one update per env step after the random ones (SB3: exactly; pararl: within
    # the chunk it takes in at the end of the budget)
    assert sb3_run["updates"] == 300 - 200
    assert 300 - 200 - 64 <= pararl["updates"] <= pararl["env_steps"] - 200
    assert "HalfCheetah pararl SAC (async): final" in data["key_ratios"]


def curve(*points: tuple[float, float, float]) -> list[dict[str, float]]:
    return [{"env_steps": s, "wall_s": w, "eval_return": r} for s, w, r in points]


def report(runs: list[Run]) -> Any:
    params = {**dataclasses.asdict(sac.resolve(sac.Config(final_evals=1))), "keep_dir": None}
    return sac.report(Outcome("sac", runs), Metadata("x", params))


def test_report_reaches_sb3s_final_and_names_the_published_figures() -> None:
    runs = [
        Run("pararl", "HalfCheetah-v5", 0, 100.0, True, 300_000, 290_000,
            curve((1e5, 30.0, 2000.0), (2e5, 60.0, 4000.0), (3e5, 100.0, 5000.0))),
        Run("sb3", "HalfCheetah-v5", 0, 400.0, True, 300_000, 290_000,
            curve((1e5, 130.0, 1500.0), (2e5, 260.0, 3000.0), (3e5, 400.0, 4000.0))),
        Run("pararl", "Hopper-v5", 0, 90.0, False, note="Traceback: boom"),
    ]  # fmt: skip
    got = report(runs)
    # SB3 ends at 4000; pararl's first evaluation there is at 60 s: 0.15 of SB3's 400 s
    assert got.key_ratios.startswith(
        "HalfCheetah pararl SAC (async): final 5000 vs SB3 SAC 4000, wall ÷ SB3 SAC 0.25×, "
        "SB3 SAC's final reached in 0.15× its wall time"
    )
    text = "\n".join(got.blocks)
    assert "9535 ± 100" in text  # rl-zoo's HalfCheetah
    assert "2310 ± 343" in text  # CleanRL's Hopper
    assert "boom" in text
    assert len(got.panels) == 4  # return against steps and wall time, per env


def test_bad_options_are_refused() -> None:
    assert main(["sac", "--runs", "HalfCheetah-v5"]) == 2
    assert main(["sac", "--budget", "0"]) == 2
    assert main(["sac", "--hidden", "0"]) == 2
    assert main(["sac", "--systems", "cleanrl"]) == 2


def test_time_to_sb3s_final_is_taken_per_seed_against_that_seeds_sb3_run() -> None:
    runs = [
        # seed 0: SB3 ends at 3000 in 400 s; pararl first reaches 3000 at 100 s: 0.25
        Run("pararl", "HalfCheetah-v5", 0, 200.0, True,
            curve=curve((1e5, 50.0, 2000.0), (2e5, 100.0, 3500.0), (3e5, 200.0, 4000.0))),
        Run("sb3", "HalfCheetah-v5", 0, 400.0, True, curve=curve((3e5, 400.0, 3000.0))),
        # seed 1, another sitting: SB3 ends at 5000 in 1000 s; pararl first at 300 s: 0.3
        Run("pararl", "HalfCheetah-v5", 1, 400.0, True,
            curve=curve((1e5, 100.0, 4000.0), (2e5, 300.0, 5000.0))),
        Run("sb3", "HalfCheetah-v5", 1, 1000.0, True, curve=curve((3e5, 1000.0, 5000.0))),
        # seed 2: pararl never reaches its SB3's 6000
        Run("pararl", "HalfCheetah-v5", 2, 300.0, True, curve=curve((3e5, 300.0, 5900.0))),
        Run("sb3", "HalfCheetah-v5", 2, 900.0, True, curve=curve((3e5, 900.0, 6000.0))),
    ]  # fmt: skip
    ours = compare.lines(sac.ROW, runs, 1)[0]
    assert (ours.system, ours.paired, ours.reached) == ("pararl", 3, 2)
    assert ours.reach_s == 300.0  # median of 100, 300 and never
    assert ours.vs_anchor == pytest.approx(0.3)  # median of 0.25, 0.3 and never
    assert ours.anchor_final == 5000.0  # shown: SB3's median final
    never = compare.lines(sac.ROW, [runs[4], runs[5]], 1)[0]
    assert never.reach_s is None
    assert never.vs_anchor is None


def fake_runs(calls: list[tuple[str, str, int]], fail: str = "") -> Callable[..., Run]:
    def run_one(row: Any, c: Any, s: compare.System, env: str, seed: int, workdir: Path) -> Run:
        calls.append((s.name, env, seed))
        ok = s.name != fail
        points = curve((600, 5.0, 1.0 * seed))
        return Run(s.name, env, seed, 10.0 + len(calls), ok, curve=points, flags=as_json(s.flags))

    return run_one


def test_a_seed_whose_runs_ended_is_kept_and_read_back_not_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, str, int]] = []
    monkeypatch.setattr(compare, "run_one", fake_runs(calls))
    config = sac.resolve(
        sac.Config(runs=("HalfCheetah-v5:0", "Hopper-v5:3"), budget=600, keep_dir=tmp_path)
    )
    first = sac.measure(config, Metadata("x", {}, date="2026-01-02T03:04:05", git_commit="abc"))
    assert calls == [(s, e, n) for e, n in (("HalfCheetah-v5", 0), ("Hopper-v5", 3))
                     for s in ("pararl", "sb3")]  # fmt: skip
    kept = json.loads((tmp_path / "Hopper-v5-seed3.json").read_text())
    assert kept["settings"]["budget"] == 600
    assert [r["sitting"][:22] for r in kept["runs"]] == ["2026-01-02, commit abc"] * 2

    calls.clear()
    again = sac.measure(config, Metadata("y", {}))
    assert calls == []  # read back, nothing run
    assert again.runs == first.runs
    params = {**dataclasses.asdict(config), "keep_dir": tmp_path}
    table = "\n".join(sac.report(again, Metadata("y", params)).blocks)
    assert "2026-01-02, commit abc" in table  # the table says when each seed ran

    sac.measure(dataclasses.replace(config, fresh=True, runs=("Hopper-v5:3",)), Metadata("z", {}))
    assert calls == [("pararl", "Hopper-v5", 3), ("sb3", "Hopper-v5", 3)]
    replaced = json.loads((tmp_path / "Hopper-v5-seed3.json").read_text())
    assert replaced["runs"][0]["wall_s"] == 11.0  # the new runs replaced the kept ones


def test_a_system_whose_flags_changed_runs_again_alone_and_the_others_stay_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, str, int]] = []
    monkeypatch.setattr(compare, "run_one", fake_runs(calls))
    config = sac.resolve(sac.Config(runs=("Hopper-v5:0",), budget=600, keep_dir=tmp_path))
    sac.measure(config, Metadata("x", {}, date="2026-01-02T03:04:05", git_commit="abc"))
    changed = dataclasses.replace(sac.ROW, systems=tuple(
        dataclasses.replace(s, flags={**s.flags, "tau": 0.01}) if s.name == "pararl" else s
        for s in sac.ROW.systems))  # fmt: skip
    calls.clear()
    later = Metadata("y", {}, date="2026-02-03T04:05:06", git_commit="def")
    again = compare.measure(compare.with_options(changed, config), config, later)
    assert calls == [("pararl", "Hopper-v5", 0)]  # SB3's run read back
    assert [(r.system, r.sitting[:22]) for r in again.runs] == [
        ("pararl", "2026-02-03, commit def"), ("sb3", "2026-01-02, commit abc")]  # fmt: skip
    kept = json.loads((tmp_path / "Hopper-v5-seed0.json").read_text())
    assert [r["flags"].get("tau") for r in kept["runs"]] == [0.01, None]


def test_a_file_from_before_runs_kept_their_flags_is_read_as_the_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, str, int]] = []
    monkeypatch.setattr(compare, "run_one", fake_runs(calls))
    config = sac.resolve(sac.Config(runs=("Hopper-v5:0",), budget=600, keep_dir=tmp_path))
    runs = [dataclasses.asdict(Run(s, "Hopper-v5", 0, 5.0, True)) for s in ("pararl", "sb3")]
    for run in runs:
        del run["flags"], run["sitting"]
    old = {"settings": {**compare.settings(sac.ROW, config), "systems": ["pararl", "sb3"]},
           "sitting": "2025-12-01, commit old, 2 cores", "runs": runs}  # fmt: skip
    (tmp_path / "Hopper-v5-seed0.json").write_text(json.dumps(old))
    outcome = sac.measure(config, Metadata("x", {}))
    assert calls == []
    assert [r.sitting for r in outcome.runs] == ["2025-12-01, commit old, 2 cores"] * 2


def test_kept_runs_with_other_settings_are_neither_used_nor_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, str, int]] = []
    monkeypatch.setattr(compare, "run_one", fake_runs(calls))
    config = sac.resolve(sac.Config(runs=("HalfCheetah-v5:0",), budget=600, keep_dir=tmp_path))
    sac.measure(config, Metadata("x", {}))
    path = tmp_path / "HalfCheetah-v5-seed0.json"
    before = path.read_text()
    calls.clear()
    sac.measure(dataclasses.replace(config, budget=900), Metadata("x", {}))
    assert len(calls) == 2  # run again
    assert path.read_text() == before  # and the other settings' runs left alone


def test_a_seed_with_a_failed_run_is_not_kept_and_an_unreadable_file_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, str, int]] = []
    monkeypatch.setattr(compare, "run_one", fake_runs(calls, fail="sb3"))
    config = sac.resolve(sac.Config(runs=("HalfCheetah-v5:0",), budget=600, keep_dir=tmp_path))
    sac.measure(config, Metadata("x", {}))
    path = tmp_path / "HalfCheetah-v5-seed0.json"
    assert not path.exists()
    path.write_text("{ cut short")
    monkeypatch.setattr(compare, "run_one", fake_runs(calls))
    sac.measure(config, Metadata("x", {}))
    assert json.loads(path.read_text())["settings"]["budget"] == 600


def test_quick_keeps_nothing_and_a_full_run_keeps_in_the_repository() -> None:
    assert sac.resolve(sac.Config(quick=True)).keep_dir is None
    assert sac.resolve(sac.Config(quick=True)).learning_starts == 1_000
    assert sac.resolve(sac.Config()).keep_dir == ROOT / "results" / "sac"


def test_the_seeds_kept_in_the_repository_are_read_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs `results/sac` holds were kept by earlier code: this code's settings
    match theirs, so they are read back, not run again."""
    kept = sorted((ROOT / "results" / "sac").glob("*.json"))
    if not kept:
        pytest.skip("no kept seeds in this checkout")
    calls: list[tuple[str, str, int]] = []
    monkeypatch.setattr(compare, "run_one", fake_runs(calls))
    config = sac.resolve(sac.Config())
    outcome = sac.measure(config, Metadata("x", {}))
    assert calls == []
    assert {f"{r.env}:{r.seed}" for r in outcome.runs} == set(config.runs)
    assert all(r.ok and r.curve for r in outcome.runs)
    report = sac.report(outcome, Metadata("x", dataclasses.asdict(config)))
    assert report.key_ratios.startswith("HalfCheetah pararl SAC (async): final ")
    assert "3 seed(s)" in report.key_ratios
