"""A run's networks from `--model` and the observation space: the one constructor of
every Q-network and actor-critic (the learner, actors, the evaluation child and
`pararl evaluate` build theirs here). `mlp`: MLPs on the flattened observations;
`nature-cnn` / `minatar-cnn`: an image trunk (`models.cnn`) under the heads;
`multi-input`: Dict and Tuple observations, given as their `leaves`, read by the
multi-input encoder (`models.multi`) under MLP heads."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from pararl.images import ModelName
from pararl.models.cnn import image_trunk
from pararl.models.heads import ActionHead
from pararl.models.multi import MultiInputEncoder
from pararl.models.networks import ActorCritic, QNetwork, Trunk, mlp
from pararl.models.normalize import OFF, NormSettings
from pararl.models.recurrent import CoreSettings
from pararl.observations import Leaf


def q_network(
    model: ModelName,
    obs_shape: tuple[int, ...],
    obs_dtype: npt.DTypeLike,
    num_actions: int,
    hidden: Sequence[int],
    dueling: bool = False,
    leaves: Sequence[Leaf] = (),
) -> QNetwork:
    """DQN's Q-network: an MLP (`hidden` widths) or an image trunk, with its head;
    `multi-input`: the encoder of `leaves` and an MLP of `hidden` under the head."""
    obs_dim = int(np.prod(obs_shape))
    trunk = None
    if model == "multi-input":
        if not hidden:
            raise ValueError("a multi-input Q-network needs at least one hidden layer")
        encoder = MultiInputEncoder(_given(leaves))
        trunk = Trunk(encoder, mlp(encoder.features, hidden[:-1], hidden[-1]), hidden[-1])
    elif model != "mlp":
        trunk = image_trunk(model, obs_shape, obs_dtype)
    return QNetwork(obs_dim, num_actions, hidden, trunk=trunk, dueling=dueling)


def actor_critic(
    model: ModelName,
    obs_shape: tuple[int, ...],
    obs_dtype: npt.DTypeLike,
    action_dim: int,
    discrete: bool,
    hidden: Sequence[int],
    shared: bool = False,
    norm: NormSettings = OFF,
    head: ActionHead | None = None,
    leaves: Sequence[Leaf] = (),
    core: CoreSettings | None = None,
) -> ActorCritic:
    """PPO's actor-critic: MLPs (`hidden`, `shared`, `norm` apply) or one image trunk
    shared by the policy and value heads (observations never normalised); or the
    multi-input encoder of `leaves`, shared, under the MLPs (`norm` applies to its
    vector leaves). `head`: its action head (`models.heads`; default: `action_dim`
    logits of a Categorical when `discrete`, else a Gaussian's means). `core`: a
    recurrent core (`models.recurrent`) between what reads the observations and the
    heads."""
    obs_dim = int(np.prod(obs_shape))
    if model == "multi-input":
        encoder = MultiInputEncoder(_given(leaves))
        if encoder.normalized == 0:  # no vector leaves: nothing to normalise
            norm = NormSettings(False, norm.reward, norm.clip_obs, norm.clip_reward)
        return ActorCritic(
            0,
            action_dim,
            discrete,
            hidden,
            shared,
            norm=norm,
            encoder=encoder,
            head=head,
            core=core,
        )
    if model == "mlp":
        return ActorCritic(
            obs_dim, action_dim, discrete, hidden, shared, norm=norm, head=head, core=core
        )
    trunk = image_trunk(model, obs_shape, obs_dtype)
    norm = NormSettings(False, norm.reward, norm.clip_obs, norm.clip_reward)
    return ActorCritic(
        obs_dim, action_dim, discrete, hidden, True, norm=norm, trunk=trunk, head=head, core=core
    )


def _given(leaves: Sequence[Leaf]) -> tuple[Leaf, ...]:
    if not leaves:
        raise ValueError("--model multi-input needs the observation's leaves")
    return tuple(leaves)


__all__ = ["actor_critic", "q_network"]
