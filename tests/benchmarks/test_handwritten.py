"""`python -m benchmarks handwritten`: every part end to end in one run in this process
(the fresh-interpreter timings stubbed: seconds each); `replay`, `checkpoint` and
`recurrent_core` are its parts under their own names; bad options exit with code 2."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from benchmarks.__main__ import main

from benchmarks import handwritten


def test_quick_run_of_every_part(
    bench: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handwritten, "construct_s", lambda name: 0.5)
    monkeypatch.setattr(handwritten, "import_s", lambda kind: 0.1)
    parts = ["adam", "tensorboard", "stacked", "replay", "checkpoint", "recurrent"]
    data = bench("handwritten", "--quick", "--parts", *parts, "--dqn-updates", "20",
                 "--capacity", "600", "--naive-capacity", "300", "--batches", "5",
                 "--checkpoint-env", "CartPole-v1", "--checkpoint-steps", "400")  # fmt: skip
    results = data["results"]
    assert set(results["adam"]) == {"FlatAdam", "torch Adam (fused)", "torch Adam (foreach)"}
    for row in results["adam"].values():
        assert len(row["update_s"]["samples"]) == len(row["construct_s"]["samples"])
        assert row["construct_s"]["median"] == 0.5  # the fresh-interpreter timing, stubbed
    board = results["tensorboard"]
    for writer in ("pararl", "SummaryWriter"):
        assert board[writer]["import_s"]["median"] == 0.1  # stubbed as well
    stacked = results["stacked"]
    assert set(stacked) == {"stacked layers", "torch.func vmap", "separate learners"}
    assert all(row["median"] > 0 for row in stacked.values())

    # replay: frames stored once cost about one frame per transition, the naive memory eight
    rows = {(r["kind"], r["sampling"]): r for r in results["replay"]}
    assert set(rows) == {(k, s) for k in ("frames", "naive") for s in ("uniform", "prioritized")}
    assert rows[("frames", "uniform")]["per_frame"] <= 1.05
    assert rows[("naive", "uniform")]["per_frame"] >= 8.0
    for (kind, sampling), row in rows.items():
        assert len(row["batch_ms"]["samples"]) == 1  # one spell of the one repeat
        if sampling == "prioritized":  # the sum tree's bytes come on top of the memory's
            assert row["bytes_per_transition"] > rows[(kind, "uniform")]["bytes_per_transition"]

    # checkpoint: both formats saved and loaded, the same state in files of about one size
    formats = {r["format"]: r for r in results["checkpoint"]}
    assert set(formats) == {"weights-only", "pickled"}
    for row in formats.values():
        assert len(row["save_s"]["samples"]) == len(row["load_s"]["samples"]) == 1
        assert row["megabytes"] > 0
    assert 0.5 < formats["weights-only"]["megabytes"] / formats["pickled"]["megabytes"] < 2

    # recurrent: every way of replaying sequences and the no-cut floor timed
    (core,) = results["recurrent"]
    assert set(core["ms"]) == {"padded", "packed", "loop", "floor"}
    assert all(s["median"] > 0 for s in core["ms"].values())
    assert core["pieces"] == handwritten.ENVS + core["cuts"]  # each cut starts one more piece

    for key in ("FlatAdam update time", "torch.func vmap step ÷ stacked layers",
                "frames / naive bytes per transition", "weights-only / pickled: save ",
                "padded"):  # fmt: skip
        assert key in data["key_ratios"]


@pytest.mark.parametrize(
    "args",
    [["handwritten", "--repeats", "0"], ["replay", "--capacity", "0"], ["replay", "--batches", "0"],
     ["checkpoint", "--checkpoint-steps", "0"], ["recurrent_core", "--calls", "0"],
     ["recurrent_core", "--core-sizes"]],
)  # fmt: skip
def test_bad_options_exit_with_code_2(args: list[str]) -> None:
    assert main([*args, "--quick"]) == 2


def test_stacked_steps_another_envs_network_each_way() -> None:
    """`--stacked-env MinAtar/Breakout-v1`: the run's CNN on its 256 rows per agent, each
    of the three ways stepping it."""
    pytest.importorskip("minatar")
    steps = handwritten.population_steps(2, "MinAtar/Breakout-v1")
    assert set(steps) == set(handwritten.STACKED)
    for step in steps.values():
        step()
