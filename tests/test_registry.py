"""The table of algorithms: every row's functions are the algorithm's own, imported
when called, so listing the commands imports no torch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from pararl.config import MAMLConfig, PPOConfig
from pararl.models import actor_critic
from pararl.registry import ALGORITHMS, algorithm_of


def test_rows_name_their_algorithms_functions() -> None:
    from pararl.algos import ppo
    from pararl.runners import maml_eval

    assert set(ALGORITHMS) == {"dqn", "sac", "ppo", "maml"}
    assert algorithm_of(PPOConfig()) is ALGORITHMS["ppo"]
    assert ALGORITHMS["maml"].evaluation is not None
    assert ALGORITHMS["ppo"].evaluation is None
    model = actor_critic("mlp", (4,), np.float32, 2, True, PPOConfig().hidden)
    state = {"obs_shape": (4,), "action_dim": 2, "discrete": True, "format": 2}
    state["learner"] = {"model": model.state_dict()}
    loaded = ALGORITHMS["ppo"].greedy_policy(PPOConfig(), state)
    assert type(loaded) is type(ppo.greedy_policy(PPOConfig(), state))
    assert maml_eval.run.__module__ == "pararl.runners.maml_eval"
    assert algorithm_of(MAMLConfig()).name == "maml"


def test_listing_the_commands_imports_no_torch() -> None:
    code = (
        "import sys; from pararl.cli import main; main(['--help']); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"
