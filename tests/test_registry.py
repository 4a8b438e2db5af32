"""The table of algorithms: every row's functions are the algorithm's own, imported
when called, so listing the commands imports no torch."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest
import torch

from pararl.config import DQNConfig, MAMLConfig, PPOConfig, RunConfig, SACConfig
from pararl.errors import UsageError
from pararl.models import actor_critic
from pararl.registry import ALGORITHMS, algorithm_of


def test_rows_name_their_algorithms_and_configs() -> None:
    configs = {"dqn": DQNConfig, "sac": SACConfig, "ppo": PPOConfig, "maml": MAMLConfig}
    assert {name: row.config for name, row in ALGORITHMS.items()} == configs
    assert all(row.name == name for name, row in ALGORITHMS.items())
    for name, config in configs.items():
        assert algorithm_of(config()) is ALGORITHMS[name]
    with pytest.raises(UsageError, match="RunConfig"):
        algorithm_of(RunConfig())
    assert [n for n, row in ALGORITHMS.items() if row.evaluation is not None] == ["maml"]


@pytest.mark.parametrize(
    ("name", "trains", "loads"),
    [
        ("dqn", "train_dqn", "pararl.algos.dqn"),
        ("sac", "train_sac", "pararl.algos.sac"),
        ("ppo", "train_ppo", "pararl.algos.ppo"),
        ("maml", "train_maml", "pararl.algos.maml"),
    ],
)
def test_each_rows_functions_are_its_algorithms_own(
    monkeypatch: pytest.MonkeyPatch, name: str, trains: str, loads: str
) -> None:
    """A row's `train` and `greedy_policy` reach that algorithm's functions (stand-ins
    here that record their arguments), with the config and arguments unchanged."""
    calls: list[tuple[str, Any, Any]] = []

    def stand_in(what: str) -> Any:
        return lambda config, *args, **kwargs: calls.append((what, config, (args, kwargs))) or what

    monkeypatch.setattr(f"pararl.runners.train.{trains}", stand_in("train"))
    monkeypatch.setattr(f"{loads}.greedy_policy", stand_in("policy"))
    row, config, state = ALGORITHMS[name], ALGORITHMS[name].config(), {"learner": {}}
    assert row.train(config, stop="now") == "train"
    assert row.greedy_policy(config, state) == "policy"
    assert calls == [("train", config, ((), {"stop": "now"})), ("policy", config, ((state,), {}))]


def test_mamls_evaluation_is_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    monkeypatch.setattr("pararl.runners.maml_eval.run", lambda *args: seen.append(args) or {})
    cfg, write_video = object(), print
    evaluation = ALGORITHMS["maml"].evaluation
    assert evaluation is not None
    assert evaluation(cfg, write_video) == {}  # type: ignore[arg-type]
    assert seen == [(cfg, write_video)]


def test_the_ppo_row_loads_a_checkpoints_model() -> None:
    torch.manual_seed(0)
    model = actor_critic("mlp", (4,), np.float32, 2, True, PPOConfig().hidden)
    state = {"obs_shape": (4,), "action_dim": 2, "discrete": True, "format": 2}
    state["learner"] = {"model": model.state_dict()}
    loaded = ALGORITHMS["ppo"].greedy_policy(PPOConfig(), state)
    saved, got = model.state_dict(), loaded.state_dict()
    assert saved.keys() == got.keys()
    assert all(torch.equal(saved[k], got[k]) for k in saved)


def test_listing_the_commands_imports_no_torch() -> None:
    code = (
        "import sys; from pararl.cli import main; main(['--help']); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"
