"""A population's batched DQN update (`algos.population.PopulationDQNLearner`) takes,
for each agent, the steps that agent's own `DQNLearner` takes on its own batches,
agents left out of an update included; its acting draws each agent's exploration
from that agent's stream."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from pararl.algos.dqn import DQNLearner
from pararl.algos.population import PopulationDQNLearner
from pararl.config import DQNConfig
from pararl.models.acting import Draws, PopulationDraws
from pararl.models.build import q_network
from pararl.models.population import QPopulation
from pararl.observations import encoded
from pararl.optim import flat_view
from pararl.replay.nstep import Transitions

N, BATCH, UPDATES, ACTIONS = 3, 16, 24, 3


def config(**changes: Any) -> DQNConfig:
    base = dict(env="CartPole-v1", hidden=(32, 32), target_update=5, max_grad_norm=1.0)
    return DQNConfig(**{**base, **changes}).for_env("discrete").config  # type: ignore[arg-type]


def q(seed: int, cfg: DQNConfig, model: str = "mlp", shape=(4,), dtype="<f4"):
    torch.manual_seed(seed)
    return q_network(model, shape, np.dtype(dtype), ACTIONS, cfg.hidden, cfg.dueling)


def transitions(rng: np.random.Generator, shape=(4,), dtype="<f4", masked=False) -> Transitions:
    def obs() -> np.ndarray:
        if np.dtype(dtype) == np.bool_:
            return rng.random((BATCH, *shape)) < 0.3
        return rng.normal(size=(BATCH, *shape)).astype(np.float32)

    mask = None
    if masked:  # one legal action or more per row
        mask = rng.random((BATCH, ACTIONS)) < 0.6
        mask[np.arange(BATCH), rng.integers(0, ACTIONS, BATCH)] = True
    return Transitions(
        obs(),
        rng.integers(0, ACTIONS, BATCH),
        rng.normal(size=BATCH).astype(np.float32),
        obs(),
        ((rng.random(BATCH) < 0.9) * 0.97).astype(np.float32),
        next_mask=mask,
    )


def agreement(cfg: DQNConfig, model: str = "mlp", shape=(4,), dtype="<f4", masked=False) -> float:
    """Agents alone and in a population, `UPDATES` updates on the same batches (agent
    2 left out of every third): the largest difference of their weights, target
    weights and optimizer moments (update and step counts must be equal)."""
    cpu = torch.device("cpu")
    alone = [DQNLearner(q(seed, cfg, model, shape, dtype), cfg, cpu) for seed in range(N)]
    population = PopulationDQNLearner(
        QPopulation([copy.deepcopy(one.q) for one in alone]),
        QPopulation([copy.deepcopy(one.q_target) for one in alone]),
        cfg,
        cpu,
    )
    rng = np.random.default_rng(0)
    for t in range(UPDATES):
        batches = [
            None if i == 2 and t % 3 == 0 else transitions(rng, shape, dtype, masked)
            for i in range(N)
        ]
        stats = population.update(batches)
        for i, batch in enumerate(batches):
            if batch is not None:
                expected, _ = alone[i].update(batch)
                assert float(stats["loss"][i]) == pytest.approx(float(expected["loss"]), rel=1e-5)
    worst = 0.0
    for i, one in enumerate(alone):
        ours, theirs = population.agent_state(i), one.state_dict()
        assert ours["updates"] == theirs["updates"] == (UPDATES * 2 // 3 if i == 2 else UPDATES)
        assert ours["optimizer"]["steps"] == theirs["optimizer"]["steps"]
        assert ours["optimizer"]["kind"] == theirs["optimizer"]["kind"]
        pairs = [(ours[k][n], theirs[k][n]) for k in ("q", "q_target") for n in theirs[k]]
        for moment in ("exp_avg", "exp_avg_sq"):
            pairs.append(
                (
                    row_major(ours["optimizer"], moment, one.q),
                    row_major(theirs["optimizer"], moment, one.q),
                )
            )
        worst = max([worst, *(float((a - b).abs().max()) for a, b in pairs)])
    return worst


def row_major(state: dict[str, Any], moment: str, net: torch.nn.Module) -> torch.Tensor:
    """A FlatAdam's saved moment (or a population's row of one) with every weight
    laid out row-major: each names the weights it holds stored (in, out) (a
    population's linear weights, an image trunk's wide layers alone:
    `models.networks.weights_in_out`)."""
    parts, offset = [], 0
    for p, transposed in zip(net.parameters(), state["transposed"], strict=True):
        parts.append(flat_view(state[moment], offset, p, transposed).reshape(-1))
        offset += p.numel()
    return torch.cat(parts)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"optimizer": "rmsprop", "lr": 1e-3},
        {"double_dqn": False, "tau": 0.05},
        {"dueling": True},
    ],
    ids=["adam-hard-targets", "rmsprop", "polyak-no-double", "dueling"],
)
def test_each_agent_takes_the_steps_it_takes_alone(changes: dict[str, Any]) -> None:
    # measured: within 1e-7 (the optimizer is exact: tests/test_optim.py)
    assert agreement(config(**changes)) < 1e-6


def test_masked_targets_take_the_best_legal_next_action() -> None:
    assert agreement(config(), masked=True) < 1e-6


def test_images_go_through_the_stacked_convolutions() -> None:
    cfg = config(hidden=(32,))
    # measured: 7e-6. Alone, the trunk's wide linear layer is stored (in, out)
    # (`models.networks.weights_in_out`) and multiplied in another order; where a
    # gradient is near 0, Adam's step (lr * g / (|g| + eps)) magnifies the difference
    assert agreement(cfg, "minatar-cnn", (10, 10, 4), "|b1") < 1e-4


def test_acting_draws_each_agents_exploration_from_its_own_stream() -> None:
    cfg = config()
    agents = [q(seed, cfg) for seed in range(N)]
    population = QPopulation(agents)
    envs = 16
    rng = np.random.default_rng(2)
    obs = rng.normal(size=(N * envs, 4)).astype(np.float32)
    mask = rng.random((N * envs, ACTIONS)) < 0.5
    mask[:, 0] = True
    first = np.ones(N * envs, bool)
    epsilons = [0.0, 0.5, 1.0]

    def draws(i: int) -> Draws:
        return Draws(np.random.default_rng(10 + i), epsilon=epsilons[i])

    for given in (None, mask):
        acted = population.act(
            obs, None, first, "sampled", PopulationDraws([draws(i) for i in range(N)]), given
        )
        for i, agent in enumerate(agents):
            rows = slice(i * envs, (i + 1) * envs)
            alone = agent.act(
                obs[rows],
                None,
                first[rows],
                "sampled",
                draws(i),
                None if given is None else given[rows],
            )
            np.testing.assert_array_equal(acted.action[rows], alone.action)
    greedy = population.act(obs, None, first, "greedy", Draws())
    expected = np.concatenate(
        [a.greedy(obs[i * envs : (i + 1) * envs]) for i, a in enumerate(agents)]
    )
    np.testing.assert_array_equal(greedy.action, expected)


def test_the_multi_input_encoder_is_refused() -> None:
    space = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (3,)), "b": gym.spaces.Discrete(4)})
    leaves = encoded(space)
    torch.manual_seed(0)
    net = q_network("multi-input", (), np.dtype("<f4"), 2, (8,), False, leaves)
    with pytest.raises(ValueError, match="multi-input encoder"):
        QPopulation([net, copy.deepcopy(net)])
