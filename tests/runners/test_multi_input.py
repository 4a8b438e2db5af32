"""Dict and Tuple observations end to end (`pararl/DictCue-v0`, `pararl/TupleCue-v0`:
the answer lies in one leaf, the others are noise): PPO, DQN and SAC learn from the
leaf that holds it, in this process and with worker or actor processes; the rollout
keeps one array per leaf and bootstraps from a truncated episode's last observation;
a run loads, acts on what the env gives and evaluates (in process, in the evaluation
child and from the command line); observation normalisation sees the vector leaves
alone; an env that also gives action masks has them kept, beside the leaves, through
worker and actor processes, rollouts and replay; the algorithms that cannot take such
observations say which can, in one line."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from pararl import DQNConfig, PPOConfig, SACConfig, checkpoint, load, train
from pararl.config.saved import saved_facts
from pararl.envs.fake import CueEnv, IllegalActionError
from pararl.envs.make import env_factory
from pararl.errors import UsageError
from pararl.models.build import actor_critic
from pararl.observations import leaves
from pararl.samplers.rollout.collect import EnvStream, Rollout, RolloutSpec, collect
from pararl.vector import SerialVectorEnv

RANDOM_RETURN = 8.0  # half of the 16 steps of an episode; reading the cue earns 16
# the cue read: the runs that learn stop at the first evaluation there; the untrained
# networks (seed 0) score 4-12 greedily (8-12 evaluations of 4 episodes, the optimizer's
# step taken out: a cue of 255 in the image sways even a random network)
READ = 14.0
# a small image (channels last) for a fast CNN, where the image's size is not what a
# test is about (the SAC runs with a 10x10x2 one took 1.6-1.8x as long); the env's
# own 3x16x16 (channels first) in the others
SMALL_IMAGE = {"image_shape": [5, 5, 1]}
# the kind's defaults (discrete actions: 8 envs x 32 steps, 20 epochs), a small MLP,
# an evaluation after every rollout
CUE = PPOConfig(
    total_steps=2_048,
    eval_every=256,
    eval_episodes=4,
    hidden=(32,),
    workers=2,
    envs_per_worker=4,
    target_return=READ,
    tensorboard=False,
    progress="none",
    eval_in="inline",
)


@pytest.mark.parametrize(
    ("env", "cue_in", "mode"),
    [
        ("pararl/DictCue-v0", "image", "serial"),
        ("pararl/DictCue-v0", "vector", "sync"),
        ("pararl/DictCue-v0", "vector", "async"),
        ("pararl/TupleCue-v0", "count", "serial"),
    ],
)
def test_ppo_learns_from_the_leaf_that_holds_the_answer(
    env: str, cue_in: str, mode: str, tmp_path: Path
) -> None:
    config = dataclasses.replace(
        CUE, env=env, env_kwargs={"cue_in": cue_in}, mode=mode, run_dir=tmp_path / "run"
    )
    session = train(config)
    assert session.last_eval is not None
    assert session.last_eval >= READ
    facts = saved_facts(tmp_path / "run")
    assert facts["mode"] == mode
    assert facts["env_kind"] == "discrete"


def test_a_dict_run_loads_acts_and_evaluates_in_the_child_and_from_the_command_line(
    tmp_path: Path, pararl: Any
) -> None:
    run = tmp_path / "run"
    config = dataclasses.replace(
        CUE, env="pararl/DictCue-v0", mode="serial", total_steps=256, eval_every=256,
        eval_in="process",
    )  # fmt: skip
    session = train(dataclasses.replace(config, run_dir=run))
    assert session.last_eval is not None  # from the evaluation child
    assert saved_facts(run)["eval_in"] == "process"

    agent = load(run, "final")
    env = agent.make_env()
    obs, _ = env.reset(seed=3)
    assert isinstance(obs, dict)
    action = agent.act(obs)
    assert isinstance(action, int)
    batch = {k: np.stack([v, v]) for k, v in obs.items()}
    assert agent.act(batch).tolist() == [action, action]
    assert agent.act(obs, deterministic=False) in (0, 1)

    evaluated = pararl("evaluate", str(run), "--episodes", "2")
    assert evaluated.returncode == 0, evaluated.stderr
    assert "pararl/DictCue-v0: mean return" in evaluated.stdout
    gif = tmp_path / "cue.gif"
    video = pararl("evaluate", str(run), "--episodes", "1", "--video", str(gif))
    assert video.returncode == 0, video.stderr
    assert gif.is_file()


def test_the_start_says_which_network_reads_each_leaf(tmp_path: Path, pararl: Any) -> None:
    done = pararl(
        "train", "ppo", "--env", "pararl/DictCue-v0", "--total-steps", "256",
        "--mode", "serial", "--progress", "plain", "--no-tensorboard",
        "--run-dir", str(tmp_path / "run"), "--eval-every", "256", "--eval-episodes", "1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (
        "multi-input encoder: count 3 values -> one-hot (3); image 3x16x16 uint8 -> " in done.stderr
    )
    assert "model multi-input" in done.stderr


def test_normalisation_of_a_dict_run_sees_its_vector_leaf_alone(tmp_path: Path) -> None:
    config = dataclasses.replace(
        CUE,
        env="pararl/DictCue-v0",
        env_kwargs={"cue_in": "vector", "continuous": True, **SMALL_IMAGE},
        mode="serial",
        total_steps=512,
        num_steps=32,
        minibatch_size=64,
        update_epochs=1,
        eval_every=512,
        eval_episodes=1,
        run_dir=tmp_path / "run",
    )
    train(config)  # continuous actions: normalised observations and rewards by default
    norm = load(tmp_path / "run", "final").network.norm
    assert norm.settings.obs
    assert norm.obs_mean.shape == (4,)  # the vector leaf: no image pixels, no one-hot
    assert float(norm.obs_count) == 512
    assert float(norm.obs_var.min()) > 0.0


def test_the_rollout_keeps_each_leaf_and_bootstraps_from_the_truncated_last_obs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """16-step episodes in rollouts of 20 steps: every env is cut by its time limit
    at step 16 (index 15), where the return bootstraps from the value of the true
    last observation, not from the reset observation that replaced it."""
    env = "pararl/DictCue-v0"
    space = env_factory(env)().observation_space
    torch.manual_seed(0)
    specs = leaves(space)
    actor = actor_critic("multi-input", (), np.float32, 2, True, (8,), leaves=specs)  # type: ignore[arg-type]
    spec = RolloutSpec((), (), np.dtype(np.int64), 20, 0.99, 0.95, leaves=specs)
    finals: list[Any] = []
    real_record = Rollout.record

    def record(self: Rollout, t: int, *args: Any) -> None:
        finals.append(args[-1])
        real_record(self, t, *args)

    monkeypatch.setattr(Rollout, "record", record)
    envs = SerialVectorEnv([env_factory(env, training=True)] * 3, autoreset_mode="SameStep")
    try:
        stream = EnvStream.start(envs.reset(seed=[1, 2, 3])[0], 0.99)
        batch = collect(actor, spec, envs, stream, lambda infos: None)
    finally:
        envs.close()
    obs = batch["obs"]
    assert {k: (v.shape, v.dtype) for k, v in obs.items()} == {
        "count": ((60,), np.dtype(np.int64)),
        "image": ((60, 3, 16, 16), np.dtype(np.uint8)),
        "vector": ((60, 4), np.dtype(np.float32)),
    }
    assert [len(f) for f in finals] == [0] * 15 + [3] + [0] * 4
    last = {k: torch.as_tensor(np.stack([f[k] for f in finals[15]])) for k in obs}
    bootstrap = 0.99 * actor.value(last).detach().numpy()
    rewards = batch["returns"].reshape(20, 3)[15] - bootstrap  # r + gamma V(last obs)
    assert np.all(np.isclose(rewards, 0.0, atol=1e-5) | np.isclose(rewards, 1.0, atol=1e-5))


# DQN: a small memory and MLP, learning from the 500th step
DQN_CUE = DQNConfig(
    total_steps=2_000,
    learning_starts=500,
    buffer_size=5_000,
    hidden=(64,),
    eval_every=250,
    eval_episodes=4,
    workers=1,
    envs_per_worker=4,
    target_return=READ,
    tensorboard=False,
    progress="none",
    eval_in="inline",
)
# SAC: the sign of its action is the answer; a short horizon (gamma 0.5: the cue of
# one step says nothing of the next)
SAC_CUE = SACConfig(
    env="pararl/DictCue-v0",
    total_steps=1_500,
    learning_starts=256,
    buffer_size=5_000,
    batch_size=64,
    replay_ratio=0.5,
    gamma=0.5,
    lr=1e-3,
    hidden=(64, 64),
    eval_every=128,
    eval_episodes=4,
    workers=1,
    envs_per_worker=2,
    target_return=READ,
    tensorboard=False,
    progress="none",
    eval_in="inline",
)


@pytest.mark.parametrize(("cue_in", "mode"), [("image", "serial"), ("count", "async")])
def test_dqn_learns_from_the_leaf_that_holds_the_answer(
    cue_in: str, mode: str, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    config = dataclasses.replace(
        DQN_CUE,
        env="pararl/DictCue-v0",
        env_kwargs={"cue_in": cue_in, **SMALL_IMAGE},
        mode=mode,
        run_dir=run,
    )
    session = train(config)
    assert session.last_eval is not None
    assert session.last_eval >= READ
    agent = load(run, "final")
    obs, _ = agent.make_env().reset(seed=1)
    assert agent.act(obs) in (0, 1)
    replay = checkpoint.load(run / "checkpoints" / "replay.pt")["replay"]
    assert replay["obs"]["image"].dtype == np.uint8  # stored leaf by leaf, as they come


@pytest.mark.parametrize(
    ("cue_in", "mode"), [("vector", "serial"), ("image", "sync"), ("vector", "async")]
)
def test_sac_learns_from_the_leaf_that_holds_the_answer(
    cue_in: str, mode: str, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    kwargs = {"cue_in": cue_in, "continuous": True, **SMALL_IMAGE}
    session = train(dataclasses.replace(SAC_CUE, env_kwargs=kwargs, mode=mode, run_dir=run))
    assert session.last_eval is not None
    assert session.last_eval >= READ
    agent = load(run, "final")
    obs, _ = agent.make_env().reset(seed=1)
    assert agent.act(obs).shape == (1,)


def test_a_tuple_env_trains_with_dqn(tmp_path: Path) -> None:
    config = dataclasses.replace(
        DQN_CUE,
        env="pararl/TupleCue-v0",
        env_kwargs={"cue_in": "vector", **SMALL_IMAGE},
        mode="serial",
        total_steps=1_000,
        run_dir=tmp_path / "run",
    )
    session = train(config)
    assert session.last_eval is not None


class MaskedCueEnv(CueEnv):
    """`CueEnv` whose info says which of its two actions are legal (`action_mask`): a
    random subset, the cue's action always among them; an illegal action raises."""

    def _observe(self) -> Any:
        self._legal = self.np_random.random(2) < 0.5
        self._legal[self._cue] = True
        return super()._observe()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        return obs, {**info, "action_mask": self._legal.copy()}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if not self._legal[int(action)]:
            raise IllegalActionError(f"action {action} is outside the mask")
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {**info, "action_mask": self._legal.copy()}


def masked_cue(**kwargs: Any) -> gym.Env:
    """Dict observations and action masks, in 16-step episodes."""
    return gym.wrappers.TimeLimit(MaskedCueEnv(**kwargs), max_episode_steps=16)


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_masks_and_dict_observations_travel_together(algo: str, tmp_path: Path) -> None:
    """PPO with worker processes (the masks in shared memory beside the leaves' rows)
    and DQN with an actor process (outboxes of leaves and next masks) finish a run
    on an env that raises on an illegal action; DQN's replay.pt holds both; the
    loaded agent acts on the env's dicts within the masks, and asks for them."""
    run = tmp_path / "run"
    config: PPOConfig | DQNConfig
    if algo == "ppo":
        config = dataclasses.replace(
            CUE, total_steps=512, num_steps=32, eval_every=512, eval_episodes=2, mode="sync"
        )
    else:
        config = dataclasses.replace(
            DQN_CUE,
            total_steps=800,
            learning_starts=200,
            eval_every=800,
            eval_episodes=2,
            mode="async",
        )
    config = dataclasses.replace(
        config, env=masked_cue, env_kwargs={"cue_in": "vector", **SMALL_IMAGE}, run_dir=run
    )
    session = train(config)
    assert session.last_eval is not None
    if algo == "dqn":
        replay = checkpoint.load(run / "checkpoints" / "replay.pt")["replay"]
        assert sorted(replay["obs"]) == ["count", "image", "vector"]
        assert replay["next_mask"].shape[1:] == (2,)
        assert len(replay["next_mask"]) == len(replay["obs"]["count"]) > 0
    agent = load(run, "final", env=masked_cue)
    env = agent.make_env()
    try:
        obs, info = env.reset(seed=0)
        with pytest.raises(UsageError, match="action_mask=info"):
            agent.act(obs)
        for step in range(32):
            action = agent.act(obs, step % 2 == 0, action_mask=info["action_mask"])
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                obs, info = env.reset()
    finally:
        env.close()


def test_algorithms_without_dict_observations_say_which_have_them(pararl: Any) -> None:
    result = pararl("train", "maml", "--env", "pararl/DictCue-v0")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "PPO takes Dict" in result.stderr
    td3 = pararl("train", "td3", "--env", "pararl/DictCue-v0", "--env-kwargs", "continuous=true")
    assert td3.returncode == 2
    assert len(td3.stderr.strip().splitlines()) == 1, td3.stderr
    assert "which SAC and PPO take" in td3.stderr
    model = pararl("train", "ppo", "--env", "pararl/DictCue-v0", "--model", "mlp")
    assert model.returncode == 2
    assert "use --model multi-input (or auto)" in model.stderr
