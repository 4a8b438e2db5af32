"""Recurrent PPO (`--recurrent`): rollouts store where episodes start and every env's
state at the rollout's start; the update replays them into the rollout's own
log-probabilities and values; runs go end to end in each mode, and what they save
acts again with its state (evaluate, `load().act`, resume)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import pararl
from pararl import PPOConfig, checkpoint, evaluate, train
from pararl.config import env_kind
from pararl.envs.make import env_factory
from pararl.errors import UsageError
from pararl.evaluation.episodes import Evaluator
from pararl.models.acting import Acted, Draws, Observations, State
from pararl.models.recurrent import Sequences
from pararl.runners.ppo_state import PPOState
from pararl.samplers.rollout.collect import EnvStream, collect, rollout_draws
from pararl.vector import ParallelVectorEnv, SerialVectorEnv
from tests.runners.test_ppo import SMALL, final_model

ENV = "CartPole-v1"
RECURRENT = dict(SMALL, recurrent="lstm", recurrent_size=8)


def _state(kind: str = "lstm") -> PPOState:
    with gym.make(ENV) as env:
        spaces = env.observation_space, env.action_space
    cfg = PPOConfig(
        env=ENV, num_steps=40, hidden=(8,), recurrent=kind, recurrent_size=6,  # type: ignore[arg-type]
        act_device="cpu", learn_device="cpu", num_envs=4, minibatch_size=80,
    )  # fmt: skip
    torch.manual_seed(0)
    return PPOState(cfg.for_env(env_kind(*spaces)), *spaces, 4)


def _rollouts(mode: str, kind: str = "lstm", count: int = 2) -> tuple[PPOState, list[dict]]:
    """Two rollouts of 40 steps of 4 envs (CartPole's episodes end inside them)."""
    state = _state(kind)
    fns = [env_factory(ENV, training=True)] * 4
    envs = (
        SerialVectorEnv(fns, autoreset_mode="SameStep")
        if mode == "serial"
        else ParallelVectorEnv(fns, num_workers=2, autoreset_mode="SameStep")
    )
    try:
        obs, _ = envs.reset(seed=[0, 1, 2, 3])
        stream = EnvStream.start(obs, 0.99, state.actor.initial_state(4))
        draws = rollout_draws(0, 0)
        batches = [
            collect(state.actor, state.rollout_spec, envs, stream, lambda _: None, draws)
            for _ in range(count)
        ]
    finally:
        envs.close()
    return state, batches


@pytest.mark.parametrize("mode", ["serial", "sync"])
def test_states_reset_exactly_where_episodes_start(mode: str) -> None:
    """`first` is set on the step after an episode ends (and on the run's first step);
    there, and only there, the stored value is the value from a zero state."""
    state, (one, two) = _rollouts(mode)
    model = state.actor
    for batch, opening in ((one, True), (two, False)):
        first = batch["first"].reshape(40, 4)
        ended = np.zeros((40, 4), bool)
        for t in range(1, 40):
            ended[t] = first[t]
        assert first[0].all() == opening  # the run starts every episode; rollout 2 none
        assert first[1:].any(), "no episode ended inside the rollout: nothing was tested"
        obs = torch.as_tensor(batch["obs"]).reshape(40, 4, -1)
        with torch.no_grad():
            fresh = model.value(obs.reshape(160, -1), None, torch.ones(160, dtype=torch.bool))
        fresh = fresh.numpy().reshape(40, 4)
        values = batch["values"].reshape(40, 4)
        np.testing.assert_allclose(values[first], fresh[first], atol=1e-6)
        assert not np.isclose(values[~first], fresh[~first], atol=1e-6).any()


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("mode", ["serial", "sync"])
def test_replaying_a_rollout_gives_its_own_logprobs_and_values(kind: str, mode: str) -> None:
    """At the first epoch (the learner's weights are the acting ones), the update's
    sequences give back what acting stored: the whole rollout, and a minibatch of
    some of its envs, time-major."""
    state, (_, batch) = _rollouts(mode, kind)
    learner = state.learner
    b = {k: torch.as_tensor(v) for k, v in batch.items() if k != "discounted"}
    with torch.no_grad():
        whole = Sequences(b["start_state"], b["first"])
        logprob, _, value = learner.model.evaluate(b["obs"], b["actions"], None, whole)
    np.testing.assert_allclose(logprob.numpy(), batch["logprobs"], atol=1e-5)
    np.testing.assert_allclose(value.numpy(), batch["values"], atol=1e-5)
    rng = np.random.default_rng(0)
    size = len(b["advantages"])
    minibatches = list(learner._sequences(b, size, size // 2, rng))
    assert len(minibatches) == 2
    for mb in minibatches:
        with torch.no_grad():
            sequences = Sequences(mb["start_state"], mb["first"])
            logprob, _, value = learner.model.evaluate(mb["obs"], mb["actions"], None, sequences)
        np.testing.assert_allclose(logprob.numpy(), mb["logprobs"].numpy(), atol=1e-5)
        np.testing.assert_allclose(value.numpy(), mb["values"].numpy(), atol=1e-5)


def assert_trained(run: Path, critic: bool = False) -> None:
    state = checkpoint.load(run / "checkpoints" / "final.pt")
    # 16 rollouts of 16 steps x 4 envs, each 2 epochs of one minibatch (all 4 envs)
    assert (state["env_steps"], state["learner"]["updates"]) == (1_024, 32)
    assert "core.rnn.weight_hh_l0" in state["learner"]["model"]  # the LSTM, trained, saved
    assert ("critic_core.rnn.weight_hh_l0" in state["learner"]["model"]) == critic
    assert evaluate(run, episodes=2)["episodes"] == 2


def flat(state: State) -> torch.Tensor:
    """A recurrent state (the GRU's tensor, the LSTM's pair) as one vector."""
    parts = state if isinstance(state, tuple | list) else (state,)
    return torch.cat([torch.as_tensor(part).flatten() for part in parts])


def assert_acts_again(run: Path, video: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What a recurrent run saved acts again with its state: `load().act(obs, state)`
    carries the caller's state, a video plays an episode, and a resume starts fresh
    states and says so."""
    agent = pararl.load(run)
    obs, _ = agent.make_env().reset(seed=0)
    _, state = agent.act(obs[None], state=None)
    assert state is not None
    _, carried = agent.act(obs[None], state=state)
    assert not torch.equal(flat(carried), flat(state))  # carried on from the given state
    evaluate(run, episodes=1, video=video)
    assert video.stat().st_size > 0
    capsys.readouterr()
    resumed = train(PPOConfig(resume=run, total_steps=1_280, progress="plain"))
    assert checkpoint.load(resumed.run.checkpoint("final"))["env_steps"] == 1_280
    assert "recurrent states start at zeros" in capsys.readouterr().err


# serial: the reproducible runs below; async with a critic core of its own, whose
# state rows travel with the actor's through every caller
@pytest.mark.parametrize(("mode", "critic"), [("sync", False), ("async", True)])
def test_recurrent_ppo_trains_in_each_mode_and_acts_again(
    tmp_path: Path, mode: str, critic: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / mode
    cfg = dict(RECURRENT, tensorboard=True, recurrent_critic=critic)
    train(PPOConfig(mode=mode, seed=1, run_dir=run, **cfg))  # type: ignore[arg-type]
    assert_trained(run, critic)
    assert list((run / "tb").glob("events.out.tfevents.*"))
    assert_acts_again(run, tmp_path / "episode.gif", capsys)


def test_a_recurrent_run_evaluates_in_its_child_and_logs_to_tensorboard(tmp_path: Path) -> None:
    """The evaluation child builds the recurrent model from the run's constructor and
    carries each episode's state; the run's TensorBoard events are written."""
    run = tmp_path / "run"
    cfg = dict(RECURRENT, eval_in="process", tensorboard=True, total_steps=512, eval_every=256)
    session = train(PPOConfig(mode="serial", seed=1, run_dir=run, **cfg))  # type: ignore[arg-type]
    assert session.last_eval is not None
    with (run / "eval.csv").open() as f:
        assert len(f.read().splitlines()) >= 3  # a header and at least two evaluations
    assert list((run / "tb").glob("events.out.tfevents.*"))


def test_a_serial_recurrent_run_trains_and_is_reproducible(tmp_path: Path) -> None:
    for name in ("a", "b"):
        train(PPOConfig(mode="serial", seed=2, run_dir=tmp_path / name, **RECURRENT))  # type: ignore[arg-type]
    a, b = final_model(tmp_path / "a"), final_model(tmp_path / "b")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert_trained(tmp_path / "a")


class _Recorded:
    """A policy that records the actions another gives."""

    def __init__(self, policy: Any) -> None:
        self.policy, self.actions = policy, []

    def initial_state(self, batch: int) -> State:
        return self.policy.initial_state(batch)

    def act(self, obs: Observations, state: State, first: np.ndarray, mode: Any, draws: Draws,
            mask: Any = None) -> Acted:  # fmt: skip
        acted = self.policy.act(obs, state, first, mode, draws, mask)
        self.actions.append(acted.action.copy())
        return acted


def test_load_act_with_state_reproduces_the_evaluations_actions(tmp_path: Path) -> None:
    run = tmp_path / "run"
    train(PPOConfig(mode="serial", seed=3, run_dir=run, **RECURRENT))  # type: ignore[arg-type]
    agent = pararl.load(run)
    recorded = _Recorded(agent.policy)
    evaluator = Evaluator(env_factory(ENV), episodes=1, seed=11, max_steps=60)
    evaluator.run(recorded)  # type: ignore[arg-type]
    video = tmp_path / "episode.mp4"
    evaluate(run, episodes=1, video=video)  # playback acts through the agent, with state
    assert video.stat().st_size > 0
    env = gym.make(ENV)
    obs, _ = env.reset(seed=int(evaluator_seed(evaluator)))
    recorded_obs = obs[None].copy()
    agent.reset()
    state = None  # the caller's own state, carried beside the agent's (SB3's predict)
    for want in recorded.actions:
        action = agent.act(obs[None])
        assert action.tolist() == want.tolist()
        assert agent.policy_state is not None
        carried, state = agent.act(obs[None], state=state)
        assert carried.tolist() == want.tolist()
        torch.testing.assert_close(state, agent.policy_state)
        obs, _, term, trunc, _ = env.step(int(action[0]))
        if term or trunc:
            break
    # an episode start given with the state forgets it: the first action again
    first, _ = agent.act(recorded_obs, state=state, episode_start=[True])
    assert first.tolist() == recorded.actions[0].tolist()
    # so does the state the agent carries
    assert agent.act(recorded_obs, episode_start=[True]).tolist() == recorded.actions[0].tolist()
    # a state of another batch size is one line
    _, four = agent.act(np.repeat(recorded_obs, 4, axis=0), state=None)
    with pytest.raises(UsageError, match=r"state= is not the state of 1 observation"):
        agent.act(recorded_obs, state=four)


def evaluator_seed(evaluator: Evaluator) -> int:
    from pararl.evaluation.episodes import eval_seeds

    return eval_seeds(evaluator.seed, 1, evaluator.stream, 0)[0]


def test_a_resume_starts_fresh_states_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    cfg = dict(RECURRENT, total_steps=512)
    train(PPOConfig(mode="serial", seed=4, run_dir=run, **cfg))  # type: ignore[arg-type]
    capsys.readouterr()
    resumed = train(PPOConfig(resume=run, total_steps=1_024, progress="plain"))
    state = checkpoint.load(resumed.run.checkpoint("final"))
    assert state["env_steps"] == 1_024
    assert "recurrent states start at zeros" in capsys.readouterr().err


def test_recurrent_options_refused_with_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="do not split 4 envs evenly"):
        train(
            PPOConfig(
                mode="serial", run_dir=tmp_path / "a", **dict(RECURRENT, minibatch_size=16 * 4 // 3)
            )
        )  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="--recurrent-size must be >= 1"):
        PPOConfig(env=ENV, recurrent="gru", recurrent_size=0).validate()
    with pytest.raises(UsageError, match="add --recurrent lstm"):
        PPOConfig(env=ENV, recurrent_critic=True).validate()
    with pytest.raises(UsageError, match="drop --compile"):
        PPOConfig(env=ENV, recurrent="gru", compile="on").validate()
    with pytest.raises(UsageError, match="drop --vtrace"):
        PPOConfig(env=ENV, recurrent="lstm", mode="async", vtrace=True).validate()
    # a core's size without a core: refused where a command line typed it; a config
    # from Python whose size differs from the default (a saved run's, reused: its
    # env's kind filled one in) is not
    for given in ("recurrent_size", "recurrent_layers"):
        flag = "--" + given.replace("_", "-")
        config = PPOConfig(env=ENV, **{given: 64})  # type: ignore[arg-type]
        with pytest.raises(UsageError, match=f"{flag} 64 .* add --recurrent .* or drop {flag}"):
            config.check_given({given})
        config.check_given({given}, typed=False)
    reused = {**SMALL, "recurrent_size": 64, "total_steps": 64, "mode": "serial"}
    train(PPOConfig(run_dir=tmp_path / "reused", **reused))  # type: ignore[arg-type]
    assert (tmp_path / "reused" / "config.json").is_file()


def test_a_core_size_without_a_core_is_one_line_on_the_command_line(
    tmp_path: Path, pararl: Any
) -> None:
    result = pararl("train", "ppo", "--env", ENV, "--recurrent-size", "32",
                    "--run-dir", str(tmp_path / "r"))  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "pararl: error: --recurrent-size 32 sizes a recurrent core, and this run has none: "
        "add --recurrent lstm (or gru), or drop --recurrent-size"
    )
    assert not (tmp_path / "r").exists()


def test_the_defaults_line_names_a_core_size_only_for_a_run_with_a_core(
    tmp_path: Path, pararl: Any
) -> None:
    base = ("train", "ppo", "--env", ENV, "--mode", "serial", "--total-steps", "256")
    quiet = ("--num-steps", "32", "--eval-every", "100000", "--progress", "plain")
    for core, shown in (("none", False), ("gru", True)):
        result = pararl(*base, *quiet, "--recurrent", core, "--run-dir", str(tmp_path / core))
        assert result.returncode == 0, result.stderr
        [line] = [x for x in result.stderr.splitlines() if "pararl: defaults for" in x]
        assert ("recurrent_size 64" in line) is shown, line
