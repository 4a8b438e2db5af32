"""The recurrent core: replaying a sequence gives the outputs that stepping it gave,
whichever way episode starts cut it; states reset exactly where an episode starts;
an actor-critic with a core acts through the one acting call, carrying its state."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pararl.models import ActorCritic
from pararl.models.acting import Draws
from pararl.models.normalize import NormSettings
from pararl.models.recurrent import CoreSettings, Pieces, RecurrentCore, Sequences

REPLAYS = ("padded", "packed", "loop")


def _stepped(core: RecurrentCore, x: torch.Tensor, s0: torch.Tensor, first: torch.Tensor):
    """The reference: one step at a time, as acting runs the core."""
    state, outs = s0, []
    for t in range(len(x)):
        out, state = core.step(x[t], state, first[t])
        outs.append(out)
    return torch.stack(outs)


@settings(max_examples=15, deadline=None)
@given(
    kind=st.sampled_from(["lstm", "gru"]),
    layers=st.integers(1, 2),
    steps=st.integers(1, 9),
    envs=st.integers(1, 4),
    seed=st.integers(0, 2**16),
    rate=st.sampled_from([0.0, 0.2, 0.6, 1.0]),
)
def test_every_replay_gives_the_stepped_outputs(
    kind: str, layers: int, steps: int, envs: int, seed: int, rate: float
) -> None:
    torch.manual_seed(seed)
    core = RecurrentCore(3, CoreSettings(kind, 5, layers))  # type: ignore[arg-type]
    x, s0 = torch.randn(steps, envs, 3), torch.randn(envs, core.rows, 5)
    first = torch.rand(steps, envs) < rate
    want = _stepped(core, x, s0, first)
    for replay in REPLAYS:
        core.replay = replay  # type: ignore[assignment]
        torch.testing.assert_close(core.sequence(x, s0, first), want, atol=1e-6, rtol=1e-5)


def test_a_replay_carries_gradients_to_every_step() -> None:
    torch.manual_seed(0)
    core = RecurrentCore(3, CoreSettings("lstm", 4))
    x = torch.randn(6, 2, 3, requires_grad=True)
    first = torch.zeros(6, 2, dtype=torch.bool)
    first[3, 0] = True
    core.sequence(x, torch.zeros(2, core.rows, 4), first).sum().backward()
    assert x.grad is not None
    assert (x.grad.abs().sum(-1) > 0).all()


def test_an_episode_start_resets_the_state_and_nothing_else_does() -> None:
    torch.manual_seed(0)
    core = RecurrentCore(2, CoreSettings("gru", 4))
    x, state = torch.randn(3, 2), torch.randn(3, core.rows, 4)
    first = torch.tensor([True, False, True])
    out, _ = core.step(x, state, first)
    fresh, _ = core.step(x, torch.zeros_like(state), torch.zeros(3, dtype=torch.bool))
    torch.testing.assert_close(out[first], fresh[first])
    assert not torch.allclose(out[~first], fresh[~first])


def test_pieces_cut_each_env_at_its_episode_starts() -> None:
    first = np.array([[True, False], [False, False], [True, False], [False, True]])
    pieces = Pieces.of(first)
    # env 0: steps 0-1 (fresh: it starts an episode), 2-3; env 1: steps 0-2 (carried), 3
    assert pieces.env.tolist() == [0, 0, 1, 1]
    assert pieces.length.tolist() == [2, 2, 3, 1]
    assert pieces.carried.tolist() == [False, False, True, False]
    rows = [pieces.index[:n, p].tolist() for p, n in enumerate(pieces.length)]
    assert rows == [[0, 2], [4, 6], [1, 3, 5], [7]]  # row t * 2 + env


def _actor_critic(core: CoreSettings, **kw: object) -> ActorCritic:
    torch.manual_seed(0)
    return ActorCritic(4, 2, True, (8,), core=core, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("shared", "critic"), [(False, False), (True, False), (False, True)])
def test_evaluating_sequences_gives_what_acting_gave(shared: bool, critic: bool) -> None:
    model = _actor_critic(CoreSettings("lstm", 6, critic=critic), shared=shared)
    steps, envs = 7, 3
    obs = torch.randn(steps, envs, 4)
    first = torch.rand(steps, envs) < 0.3
    state = start = model.initial_state(envs) + 0.1
    logprobs, values, actions = [], [], []
    gen = torch.Generator().manual_seed(1)
    for t in range(steps):
        acted = model.act(obs[t].numpy(), state, first[t].numpy(), "sampled", Draws(generator=gen))
        state = acted.state
        logprobs.append(acted.logprob)
        values.append(acted.value)
        actions.append(acted.action)
    sequences = Sequences(start, first.reshape(-1))
    logprob, _, value = model.evaluate(
        obs.reshape(steps * envs, 4),
        torch.as_tensor(np.stack(actions)).reshape(-1),
        None,
        sequences,
    )
    np.testing.assert_allclose(logprob.detach().numpy(), np.stack(logprobs).reshape(-1), atol=1e-5)
    np.testing.assert_allclose(value.detach().numpy(), np.stack(values).reshape(-1), atol=1e-5)


def test_a_recurrent_model_carries_its_state_through_the_acting_call() -> None:
    model = _actor_critic(CoreSettings("gru", 6))
    obs = np.random.default_rng(0).normal(size=(2, 4)).astype(np.float32)
    state = model.initial_state(2)
    assert state.shape == (2, 1, 6)
    assert not state.any()
    first = np.ones(2, bool)
    acted = model.act(obs, state, first, "greedy", Draws())
    assert acted.state.shape == (2, 1, 6)
    assert acted.state.abs().sum() > 0
    # the same observation again, carried on, is another step of the sequence
    again = model.act(obs, acted.state, np.zeros(2, bool), "greedy", Draws())
    assert not torch.equal(again.state, acted.state)
    # an episode start forgets what came before
    restart = model.act(obs, again.state, first, "greedy", Draws())
    torch.testing.assert_close(restart.state, acted.state)


def test_a_critic_core_of_its_own_keeps_the_value_loss_off_the_actors_memory() -> None:
    model = _actor_critic(CoreSettings("lstm", 6, critic=True))
    assert model.initial_state(3).shape == (3, 4, 6)  # the actor's 2 rows, then the critic's
    steps, envs = 5, 3
    obs = torch.randn(steps * envs, 4)
    first = torch.zeros(steps * envs, dtype=torch.bool)
    sequences = Sequences(model.initial_state(envs) + 0.1, first)
    _, _, value = model.evaluate(obs, torch.zeros(steps * envs, dtype=torch.long), None, sequences)
    value.sum().backward()
    assert model.core is not None
    assert model.critic_core is not None
    assert all(p.grad is None for p in model.core.parameters())
    assert all(p.grad is not None and p.grad.abs().sum() > 0
               for p in model.critic_core.parameters())  # fmt: skip
    # acting steps both cores: the critic's rows carry on as the actor's do
    acted = model.act(obs[:envs].numpy(), None, np.ones(envs, bool), "sampled", Draws())
    assert acted.state[:, 2:].abs().sum() > 0
    assert not torch.equal(acted.state[:, :2], acted.state[:, 2:])


def test_observations_are_normalised_before_the_core() -> None:
    """The statistics are the observations' (4 floats), not the core's width."""
    norm = NormSettings(obs=True, reward=False, clip_obs=10.0, clip_reward=10.0)
    model = _actor_critic(CoreSettings("lstm", 6), norm=norm)
    obs = np.random.default_rng(0).normal(5.0, 3.0, size=(64, 4)).astype(np.float32)
    model.update_norm(obs, np.zeros(64))
    acted = model.act(obs[:2], None, np.ones(2, bool), "greedy", Draws())
    assert acted.state.shape == (2, 2, 6)
    x = model._core_input(torch.as_tensor(obs))
    assert abs(float(x.mean())) < 0.1  # normalised: about zero mean


def test_a_feed_forward_model_has_no_state() -> None:
    torch.manual_seed(0)
    model = ActorCritic(4, 2, True, (8,))
    assert model.initial_state(3) is None
    assert not model.recurrent
    acted = model.act(np.zeros((3, 4), np.float32), None, np.ones(3, bool), "greedy", Draws())
    assert acted.state is None


def test_evaluating_a_recurrent_model_needs_its_sequences() -> None:
    model = _actor_critic(CoreSettings("lstm", 4))
    with pytest.raises(ValueError, match="sequences"):
        model.evaluate(torch.zeros(2, 4), torch.zeros(2, dtype=torch.long))
