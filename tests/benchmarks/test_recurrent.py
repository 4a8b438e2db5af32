"""`python -m benchmarks recurrent`: pararl's flags are the zoo's RecurrentPPO settings
and parse as `pararl train ppo` reads them; the anchor builds the zoo's MlpLstmPolicy;
each env runs at its own budget; the quick path end to end for every system (a tiny
budget), one row of the comparison harness."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tyro

from benchmarks import learning as recurrent
from benchmarks.lib import compare, sb3
from pararl.config import PPOConfig

pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")

RECURRENT_FLAGS = ["--recurrent", "lstm", "--recurrent-size", "64", "--recurrent-layers", "1"]


def test_pararls_flags_are_the_zoos_settings() -> None:
    s, policy = sb3.ZOO_LSTM, sb3.ZOO_LSTM_POLICY
    flags = recurrent.recurrent_flags()
    assert flags["num_envs"] == sb3.ZOO_PPO_ENVS == 8
    assert (flags["num_steps"], flags["minibatch_size"]) == (s["n_steps"], s["batch_size"])
    assert (flags["update_epochs"], flags["gamma"]) == (s["n_epochs"], s["gamma"])
    assert (flags["gae_lambda"], flags["ent_coef"]) == (s["gae_lambda"], s["ent_coef"])
    assert (flags["lr"], flags["clip_coef"]) == (sb3.ZOO_PPO_LR, sb3.ZOO_PPO_CLIP)
    assert flags["anneal_lr"] is True
    assert flags["anneal_clip"] is True  # the zoo's lin_0.001 and lin_0.2
    assert (flags["norm_obs"], flags["norm_reward"]) == ("True", "True")  # normalize: True
    assert flags["recurrent_size"] == policy["lstm_hidden_size"] == 64
    assert flags["hidden"] == tuple(policy["net_arch"]["pi"]) == tuple(policy["net_arch"]["vf"])
    # minibatches of whole env sequences: the rollout's 8 envs split evenly among them
    minibatches, left = divmod(sb3.ZOO_PPO_ENVS * s["n_steps"], s["batch_size"])
    assert (minibatches, left) == (1, 0)
    assert sb3.ZOO_PPO_ENVS % minibatches == 0
    assert recurrent.recurrent_flags(False) == {
        k: v for k, v in flags.items() if not k.startswith("recurrent")
    }


def _command(system: str, env: str, tmp_path: Path, **options: Any) -> list[str]:
    """The command of `system` on ENV seed 1, with the benchmark's `options`."""
    c = recurrent.benchmark("recurrent").resolve(recurrent.Config(**options))
    row = compare.with_options(recurrent.RECURRENT, c)
    s, out = row.system(system), tmp_path / system
    if s.anchor:
        return compare.anchor_command(row, c, s, env, 1, out)
    return compare.pararl_command(row, c, s, env, 1, out)


def test_pararls_flags_parse_and_the_lstm_adds_only_its_own(tmp_path: Path) -> None:
    """`pararl train ppo` reads the feed-forward system's command as it is; the LSTM
    system's is the same with the three recurrent flags added (which the parser of
    `--recurrent` reads)."""
    ff = _command("pararl-ff", recurrent.CARTPOLE, tmp_path)
    lstm = _command("pararl-lstm", recurrent.CARTPOLE, tmp_path)
    assert ff[3:5] == lstm[3:5] == ["train", "ppo"]
    at = lstm.index("--recurrent")
    assert lstm[at : at + 6] == RECURRENT_FLAGS
    assert "--recurrent" not in ff
    config = tyro.cli(PPOConfig, args=ff[5:])
    without = tyro.cli(PPOConfig, args=lstm[5:at] + lstm[at + 6 :])
    assert dataclasses.replace(without, run_dir=config.run_dir) == config
    with_core = tyro.cli(PPOConfig, args=lstm[5:])
    assert (with_core.recurrent, with_core.recurrent_size, with_core.recurrent_layers) == (
        "lstm", 64, 1,
    )  # fmt: skip
    with_core.validate()
    assert (config.num_envs, config.num_steps, config.minibatch_size) == (8, 32, 256)
    assert (config.update_epochs, config.lr, config.clip_coef) == (20, 1e-3, 0.2)
    assert (config.anneal_lr, config.anneal_clip) == (True, True)
    assert (config.gamma, config.gae_lambda, config.ent_coef) == (0.98, 0.8, 0.0)
    assert (config.vf_coef, config.max_grad_norm, config.clip_vloss) == (0.5, 0.5, False)
    assert (config.norm_obs, config.norm_reward) == (True, True)
    assert (config.hidden, config.shared_body) == ((64,), False)
    assert (config.env, config.seed, config.total_steps) == (recurrent.CARTPOLE, 1, 100_000)


def test_each_env_runs_at_its_own_budget(tmp_path: Path) -> None:
    def budgets(**options: Any) -> dict[str, int]:
        out = {}
        for env in recurrent.ENVS:
            anchor = _command("sb3", env, tmp_path, **options)
            out[env] = int(anchor[anchor.index("--budget") + 1])
            for system in ("pararl-ff", "pararl-lstm"):
                mine = _command(system, env, tmp_path, **options)
                assert int(mine[mine.index("--total-steps") + 1]) == out[env]
        return out

    popgym = dict.fromkeys(recurrent.POPGYM, 100_000)
    assert budgets() == {recurrent.CARTPOLE: 100_000, recurrent.MEMORY: 20_000, **popgym}
    assert set(budgets(budget=5_000).values()) == {5_000}
    assert set(budgets(quick=True).values()) == {2_048}
    c = recurrent.benchmark("recurrent").resolve(recurrent.Config())
    assert compare.settings(recurrent.RECURRENT, c)["budgets"] == {recurrent.MEMORY: 20_000}
    assert "budget 100,000, pararl/RepeatPrevious-v0 20,000;" in compare.describe(
        recurrent.RECURRENT
    )


def test_the_anchor_is_the_zoos_recurrent_ppo() -> None:
    """RecurrentPPO's MlpLstmPolicy as the zoo gives it, on 8 envs under VecNormalize with
    the algorithm's gamma, on the 2 values StatelessCartPole shows."""
    import torch
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.vec_env import VecNormalize

    anchor = sb3.ANCHORS["recurrent"]
    assert sb3.model_class("ppo", anchor) is RecurrentPPO
    assert not anchor.masked
    envs, evals = sb3.make_envs(anchor, "ppo", recurrent.CARTPOLE, 0)
    assert isinstance(envs, VecNormalize)
    assert isinstance(evals, VecNormalize)
    assert (envs.num_envs, envs.gamma, envs.norm_reward) == (8, 0.98, True)
    assert (evals.training, evals.norm_reward) == (False, False)
    assert envs.observation_space.shape == (2,)
    settings = anchor.settings("ppo", envs, 100_000)
    model = RecurrentPPO(anchor.policy, envs, device="cpu", **settings)
    policy: Any = model.policy
    assert policy.lstm_actor.hidden_size == 64
    assert policy.lstm_critic is not None
    assert policy.lstm_critic.hidden_size == 64
    assert policy.lstm_actor.num_layers == 1
    assert policy.ortho_init is False
    assert policy.activation_fn is torch.nn.ReLU
    widths = [m.out_features for m in policy.mlp_extractor.policy_net if hasattr(m, "out_features")]
    assert widths == [64]
    assert (model.n_steps, model.batch_size, model.n_epochs) == (32, 256, 20)
    assert (model.gamma, model.gae_lambda, model.ent_coef) == (0.98, 0.8, 0.0)
    assert model.lr_schedule(1.0) == pytest.approx(1e-3)
    assert model.lr_schedule(0.5) == pytest.approx(5e-4)
    assert model.clip_range(1.0) == pytest.approx(0.2)  # type: ignore[operator]
    assert (model.vf_coef, model.max_grad_norm, model.clip_range_vf) == (0.5, 0.5, None)
    envs.close()
    evals.close()


def test_the_anchors_threads_go_to_it_alone(tmp_path: Path) -> None:
    c = recurrent.benchmark("recurrent").resolve(recurrent.Config(sb3_threads=1))
    row = compare.with_options(recurrent.RECURRENT, c)
    assert row.system("sb3").flags == {}
    assert row.system("pararl-lstm").flags == recurrent.recurrent_flags()
    assert row.system("pararl-ff").flags == recurrent.recurrent_flags(False)
    cmd = _command("sb3", recurrent.MEMORY, tmp_path, sb3_threads=1)
    assert cmd[2:5] == ["benchmarks.lib.sb3", "ppo", "learn"]
    assert cmd[cmd.index("--anchor") + 1] == "recurrent"
    assert cmd[cmd.index("--threads") + 1] == "1"
    assert "--set" not in cmd  # the zoo's settings as they are


@pytest.mark.slow
def test_quick_runs_the_lstm_and_recurrentppo(
    bench: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    """The feed-forward system is the LSTM one's `pararl train ppo` without the recurrent
    flags (test_pararls_flags_parse_and_the_lstm_adds_only_its_own)."""
    data = bench("recurrent", "--quick", "--systems", "pararl-lstm", "sb3", "--budget", "512",
                 "--eval-every", "256", figure=False)  # fmt: skip
    runs = data["results"]["runs"]
    assert [r["system"] for r in runs] == ["pararl-lstm", "sb3"]
    for run in runs:
        assert run["ok"], run["note"]
        assert run["env"] == recurrent.MEMORY
        assert run["env_steps"] >= 512
        assert run["curve"], "no evaluation"
        # two rollouts of 8 x 32, each 20 epochs of one minibatch
        assert run["updates"] == 2 * 20, run["system"]
        assert all(-1.0 <= p["eval_return"] <= 1.0 for p in run["curve"])
    assert "RepeatPrevious pararl PPO (LSTM): final" in data["key_ratios"]
