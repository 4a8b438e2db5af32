"""A population's batched PPO update (`algos.population`) takes, for each agent, the
steps that agent's own `PPOLearner` takes on its share of the rollout."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from pararl.algos import fused
from pararl.algos.population import PopulationPPOLearner, agent_major
from pararl.algos.ppo import PPOHyper, PPOLearner
from pararl.models.acting import Draws
from pararl.models.build import actor_critic
from pararl.models.heads import head_for
from pararl.models.normalize import NormSettings
from pararl.models.population import Population, PopulationDraws, StackedConv2d

N, ENVS, STEPS = 3, 4, 16


def model(seed: int, action_space: gym.Space, obs_shape=(4,), kind="mlp", dtype="<f4"):
    torch.manual_seed(seed)
    head = head_for(action_space)
    return actor_critic(
        kind, obs_shape, np.dtype(dtype), head.logits, head.discrete, (32, 32), False,
        NormSettings(), head, (), None,
    )  # fmt: skip


def rollout(rng: np.random.Generator, action_space: gym.Space, obs_shape=(4,), dtype="<f4"):
    rows = STEPS * N * ENVS
    if np.dtype(dtype) == np.bool_:
        obs = rng.random((rows, *obs_shape)) < 0.3
    else:
        obs = rng.normal(size=(rows, *obs_shape)).astype(np.float32)
    actions = np.stack([action_space.sample() for _ in range(rows)])
    return {
        "obs": obs,
        "actions": actions,
        "logprobs": (rng.normal(size=rows) * 0.1 - 0.7).astype(np.float32),
        "advantages": rng.normal(size=rows).astype(np.float32),
        "returns": rng.normal(size=rows).astype(np.float32),
        "values": rng.normal(size=rows).astype(np.float32),
    }


def agents_slice(batch, i):
    """Agent i's rollout, laid out as its run alone lays it out."""
    return {k: agent_major(v, N, STEPS).reshape(N, -1, *v.shape[1:])[i] for k, v in batch.items()}


SPACES = {
    "discrete": gym.spaces.Discrete(3),
    "box": gym.spaces.Box(-1, 1, (2,)),
    "multidiscrete": gym.spaces.MultiDiscrete([2, 3]),
}


@pytest.mark.parametrize("space", SPACES)
@pytest.mark.parametrize("minibatches", [1, 4])
def test_each_agent_takes_the_steps_it_takes_alone(space: str, minibatches: int) -> None:
    action_space = SPACES[space]
    action_space.seed(0)
    batch = rollout(np.random.default_rng(0), action_space)
    hyper = PPOHyper(num_minibatches=minibatches, update_epochs=2, ent_coef=0.01)
    agents = [model(seed, action_space) for seed in range(N)]
    alone = [copy.deepcopy(a) for a in agents]
    learner = PopulationPPOLearner(Population(agents), hyper, 3e-3, torch.device("cpu"))
    learner.set_lr_fraction(0.5)
    stats = learner.update(batch, STEPS, [np.random.default_rng(10 + i) for i in range(N)])
    for i, single in enumerate(alone):
        one = PPOLearner(single, hyper, 3e-3, torch.device("cpu"))
        one.set_lr_fraction(0.5)
        expected = one.update(agents_slice(batch, i), np.random.default_rng(10 + i))
        for (name, p), q in zip(single.named_parameters(), agents[i].parameters(), strict=True):
            torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5, msg=name)
        for k, v in expected.items():
            assert stats[k][i] == pytest.approx(v, rel=1e-3, abs=1e-5), k
        assert learner.agent_state(i)["optimizer"]["steps"] == one.optimizer.steps


@pytest.mark.parametrize("space", ["discrete", "box"])
def test_a_compiled_loss_takes_the_steps_the_written_one_takes(
    space: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`step_mode="compile"`: the loss traced (with "aot_eager", which captures and
    differentiates the graph as inductor does, without generating kernels) steps
    every agent as the loss as written does, the annealed clip range read from a
    tensor and a per-agent setting (`--sweep`) from its row."""
    monkeypatch.setattr(fused, "BACKEND", "aot_eager")
    action_space = SPACES[space]
    action_space.seed(0)
    batch = rollout(np.random.default_rng(4), action_space)
    hypers = [PPOHyper(num_minibatches=2, update_epochs=2, clip_coef=c) for c in (0.1, 0.2, 0.3)]
    agents = [model(seed, action_space) for seed in range(N)]
    twins = [copy.deepcopy(a) for a in agents]
    learners = [
        PopulationPPOLearner(Population(nets), hypers, 3e-3, torch.device("cpu"), mode)
        for nets, mode in ((agents, "eager"), (twins, "compile"))
    ]
    stats = []
    for learner in learners:
        learner.set_clip_fraction(0.7)
        rngs = [np.random.default_rng(20 + i) for i in range(N)]
        stats.append(learner.update(batch, STEPS, rngs))
    assert learners[1].steps.setup_s > 0  # (the first call traced the loss)
    for ours, theirs in zip(agents, twins, strict=True):
        for (name, p), q in zip(ours.named_parameters(), theirs.parameters(), strict=True):
            torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-6, msg=name)
    for k, v in stats[0].items():
        np.testing.assert_allclose(stats[1][k], v, rtol=1e-4, atol=1e-6, err_msg=k)


def test_images_go_through_the_stacked_convolutions() -> None:
    action_space = gym.spaces.Discrete(3)
    shape = (10, 10, 4)
    batch = rollout(np.random.default_rng(1), action_space, shape, "|b1")
    hyper = PPOHyper(num_minibatches=2, update_epochs=1)
    agents = [model(s, action_space, shape, "minatar-cnn", "|b1") for s in range(N)]
    alone = [copy.deepcopy(a) for a in agents]
    learner = PopulationPPOLearner(Population(agents), hyper, 1e-3, torch.device("cpu"))
    learner.update(batch, STEPS, [np.random.default_rng(i) for i in range(N)])
    for i, single in enumerate(alone):
        one = PPOLearner(single, hyper, 1e-3, torch.device("cpu"))
        one.update(agents_slice(batch, i), np.random.default_rng(i))
        for p, q in zip(single.parameters(), agents[i].parameters(), strict=True):
            torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("stride", "padding"), [(1, 0), (2, 1)])
def test_the_grouped_convolution_is_each_agents_own(stride: int, padding: int) -> None:
    """`StackedConv2d` runs one grouped convolution, or on one CPU thread each agent's
    own: the same outputs, each agent's its own layer's, and the same gradients."""
    torch.manual_seed(3)
    layers = [torch.nn.Conv2d(4, 6, 3, stride=stride, padding=padding) for _ in range(N)]
    conv = StackedConv2d(layers)
    x = torch.rand(N * 5, 4, 10, 10)
    grads = []
    for path in (conv.each, conv.grouped):
        out = path(x)
        grads.append(torch.autograd.grad((out * out.detach()).sum(), (conv.weight, conv.bias)))
        for i, layer in enumerate(layers):  # agent i's rows: its own layer's output
            rows = slice(i * 5, (i + 1) * 5)
            torch.testing.assert_close(out[rows], layer(x[rows]), rtol=1e-5, atol=1e-5)
    for each, grouped in zip(*grads, strict=True):
        torch.testing.assert_close(each, grouped, rtol=1e-4, atol=1e-4)


def test_acting_draws_each_agents_actions_from_its_own_stream() -> None:
    action_space = gym.spaces.Discrete(3)
    agents = [model(s, action_space) for s in range(N)]
    population = Population(agents)
    obs = np.random.default_rng(2).normal(size=(N * ENVS, 4)).astype(np.float32)
    first = np.ones(N * ENVS, bool)

    def draws(i: int) -> Draws:
        return Draws(generator=torch.Generator().manual_seed(i))

    acted = population.act(
        obs, None, first, "sampled", PopulationDraws([draws(i) for i in range(N)])
    )
    for i, agent in enumerate(agents):
        rows = slice(i * ENVS, (i + 1) * ENVS)
        alone = agent.act(obs[rows], None, first[rows], "sampled", draws(i))
        np.testing.assert_array_equal(acted.action[rows], alone.action)
        np.testing.assert_allclose(acted.logprob[rows], alone.logprob, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(acted.value[rows], alone.value, rtol=1e-5, atol=1e-6)


def test_each_agent_normalises_its_rows_by_its_own_statistics() -> None:
    """The twin's normaliser applies agent i's statistics to agent i's rows, and scales
    its envs' rewards by its scale, as agent i's own would; the agents' statistics are
    views of the twin's rows, so an update of each moves its row."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    head = head_for(gym.spaces.Discrete(2))
    settings = NormSettings(obs=True, reward=True)
    agents = [
        actor_critic("mlp", (4,), np.dtype("<f4"), 2, True, (8,), False, settings, head, (), None)
        for _ in range(N)
    ]
    for i, agent in enumerate(agents):  # each its own statistics before they are stacked
        agent.update_norm(rng.normal(i, i + 1, (50, 4)), rng.normal(0, i + 1, 50))
    before = [copy.deepcopy(a.norm) for a in agents]
    population = Population(agents)
    obs = rng.normal(size=(N * 5, 4)).astype(np.float32)
    rewards = rng.normal(size=N * 5).astype(np.float32)
    observed = population.norm.observe(torch.as_tensor(obs))
    scaled = population.norm.scale_rewards(rewards)
    for i, own in enumerate(before):
        rows = slice(i * 5, (i + 1) * 5)
        torch.testing.assert_close(observed[rows], own.observe(torch.as_tensor(obs[rows])))
        np.testing.assert_array_equal(scaled[rows], own.scale_rewards(rewards[rows]))
    steps = 3  # a rollout of 3 steps of each agent's 5 envs, agents side by side
    seen = rng.normal(size=(steps * N * 5, 4))
    population.update_norm(seen, rng.normal(size=steps * N * 5), steps)
    twin = population.norm
    for i, agent in enumerate(agents):
        assert float(agent.norm.obs_count) == 50 + steps * 5
        torch.testing.assert_close(twin.obs_scale[i], agent.norm.obs_scale, rtol=0, atol=0)
        torch.testing.assert_close(twin.reward_scale[i], agent.norm.reward_scale, rtol=0, atol=0)
        share = seen.reshape(steps, N, 5, 4)[:, i].reshape(-1, 4)
        alone = copy.deepcopy(before[i])
        alone.update(share, np.zeros(0))  # (the returns' moments: checked by the run tests)
        torch.testing.assert_close(agent.norm.obs_mean, alone.obs_mean)


def test_agents_with_their_own_settings_take_their_own_steps() -> None:
    """A sweep: each agent's entropy and value weights, clip range, gradient norm and
    learning rate are its own, and it steps as its own learner would."""
    action_space = gym.spaces.Discrete(3)
    action_space.seed(1)
    batch = rollout(np.random.default_rng(3), action_space)
    hypers = [
        PPOHyper(num_minibatches=2, update_epochs=2, ent_coef=e, vf_coef=v, clip_coef=c,
                 max_grad_norm=g, clip_vloss=True)
        for e, v, c, g in ((0.0, 0.5, 0.2, 0.5), (0.05, 1.0, 0.1, 0.05), (0.01, 0.25, 0.3, 10.0))
    ]  # fmt: skip
    lrs = [1e-3, 3e-3, 1e-2]
    agents = [model(seed, action_space) for seed in range(N)]
    alone = [copy.deepcopy(a) for a in agents]
    learner = PopulationPPOLearner(Population(agents), hypers, lrs, torch.device("cpu"))
    learner.set_clip_fraction(0.5)
    stats = learner.update(batch, STEPS, [np.random.default_rng(i) for i in range(N)])
    for i, single in enumerate(alone):
        one = PPOLearner(single, hypers[i], lrs[i], torch.device("cpu"))
        one.set_clip_fraction(0.5)
        expected = one.update(agents_slice(batch, i), np.random.default_rng(i))
        for p, q in zip(single.parameters(), agents[i].parameters(), strict=True):
            torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)
        for k, v in expected.items():
            assert stats[k][i] == pytest.approx(v, rel=1e-3, abs=1e-5), k


def test_settings_that_shape_the_update_are_shared() -> None:
    action_space = gym.spaces.Discrete(2)
    agents = [model(seed, action_space) for seed in range(2)]
    with pytest.raises(ValueError, match="differ only in"):
        PopulationPPOLearner(
            Population(agents),
            [PPOHyper(update_epochs=1), PPOHyper(update_epochs=2)],
            1e-3,
            torch.device("cpu"),
        )
