"""How every pararl policy acts: one call, for every network, wherever it acts.

    acted = policy.act(obs, state, first, mode, draws, mask)

- `obs`: a batch of observations `[B, *obs_shape]` (numpy); for Dict and Tuple
  observations, the batch as the env gives it (a dict or tuple of such arrays, one
  per leaf) or as a dict of leaves by name (`pararl.observations`);
- `state`: what the policy carries from one step to the next, per env (None for a
  feed-forward policy; `initial_state(B)` gives a new one);
- `first`: `[B]` bools, True where an env's episode starts with `obs` (a policy with
  state resets those rows; a feed-forward one ignores it);
- `mode`: `greedy` (the most likely action: argmax, the Gaussian's mean) or `sampled`
  (drawn from the policy; a Q-network's is epsilon-greedy);
- `draws`: where a sampled action's randomness comes from (`Draws`);
- `mask`: `[B, mask_size]` bools, True where an action is legal (an env's action
  masks, `pararl.envs.masks`), or None: every action is. The policies of discrete
  actions keep to the legal ones (`models.heads`, `QNetwork`); those of continuous
  actions take none.

It returns an `Acted`: the actions `[B, ...]` (numpy) and the next state, and, from an
actor-critic, the log-probabilities and values its training needs.

The callers are training's actors (off-policy chunks, PPO's rollouts), evaluations (in
the training process and in the evaluation child), `pararl.load(run).act(...)` and
playback. SB3's `predict(obs, state, episode_start, deterministic)` is the same idea.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
import torch

from pararl.observations import map_leaves

Mode = Literal["greedy", "sampled"]
State = Any  # None for feed-forward policies
# a batch of observations: one array, or a Dict or Tuple observation's leaves
Observations = np.ndarray | Mapping[str, np.ndarray] | tuple[Any, ...]


@dataclass
class Draws:
    """The random streams a `sampled` action draws from, and a Q-policy's epsilon.

    - `rng`: numpy's stream (Gaussian noise of SAC's and MAML's policies, TD3's
      exploration noise, epsilon-greedy's coin and uniform actions);
    - `generator`: torch's stream (an actor-critic's categorical or Gaussian draws);
      None: torch's global stream, as a training rollout seeded with `torch.manual_seed`
      draws (and SB3 does), so the two can be compared draw for draw;
    - `epsilon`: the probability of a uniform action of a `sampled` Q-policy.
    """

    rng: np.random.Generator | None = None
    generator: torch.Generator | None = None
    epsilon: float = 0.0

    @property
    def numpy(self) -> np.random.Generator:
        """`rng`, which a policy that draws with numpy needs."""
        if self.rng is None:
            raise ValueError("this policy samples with numpy: give Draws an rng")
        return self.rng


class PopulationDraws(Draws):
    """A population's streams (`models.population`, `--seeds`): one `Draws` per agent,
    in the agents' order, each the one its run alone would draw from."""

    def __init__(self, agents: Sequence[Draws]) -> None:
        super().__init__()
        self.agents = list(agents)


@dataclass(frozen=True)
class Acted:
    """What one `act` call gives: actions and the next state; an actor-critic's
    sampled actions also carry their log-probabilities and the state values."""

    action: np.ndarray
    state: State = None
    logprob: np.ndarray | None = None
    value: np.ndarray | None = None


@runtime_checkable
class Policy(Protocol):
    """Anything that acts: every network pararl trains acts through this one call."""

    def initial_state(self, batch: int) -> State:
        """The state of `batch` envs at their episodes' starts (None: feed-forward)."""

    def act(
        self,
        obs: Observations,
        state: State,
        first: np.ndarray,
        mode: Mode,
        draws: Draws,
        mask: np.ndarray | None = None,
    ) -> Acted:
        """Actions for the batch `obs` (see the module docstring)."""


class FeedForward:
    """The part of `Policy` every policy without memory shares: no state to carry."""

    def initial_state(self, batch: int) -> State:
        del batch
        return None


class Stateless(FeedForward):
    """A function of a batch of observations as a `Policy` (the same actions in
    either mode): a scripted or random policy to evaluate, a baseline. It sees no
    action mask: a function for a masked env keeps to its legal actions itself."""

    def __init__(self, fn: Callable[[np.ndarray], np.ndarray]) -> None:
        self.fn = fn

    def act(
        self,
        obs: np.ndarray,
        state: State,
        first: np.ndarray,
        mode: Mode,
        draws: Draws,
        mask: np.ndarray | None = None,
    ) -> Acted:
        del first, mode, draws, mask
        return Acted(np.asarray(self.fn(obs)), state)


def no_mask(mask: np.ndarray | None, policy: str) -> None:
    """Refuse an action mask where a policy of continuous actions is given one."""
    if mask is not None:
        raise ValueError(f"{policy} acts in a continuous space: it takes no action mask")


def uniform_within(
    scale: torch.Tensor, bias: torch.Tensor, count: int, rng: np.random.Generator
) -> np.ndarray:
    """`count` actions drawn uniformly within the bounds `bias ± scale` (a bounded
    actor's first env steps, before it has learned anything)."""
    u = rng.uniform(-1.0, 1.0, (count, scale.numel())).astype(np.float32)
    return (scale.cpu().numpy() * u + bias.cpu().numpy()).astype(np.float32)


def starts(batch: int) -> np.ndarray:
    """`first` for `batch` envs whose episodes all start now."""
    return np.ones(batch, bool)


def obs_tensor(obs: Any, device: torch.device | None = None) -> Any:
    """A batch of observations as tensors on `device`: one tensor, or for Dict and
    Tuple observations a dict of them by leaf name (`pararl.observations`)."""
    return map_leaves(lambda a: torch.as_tensor(a, device=device), obs)


def device_of(module: torch.nn.Module) -> torch.device:
    """Where a network's parameters are (its acting device)."""
    return next(module.parameters()).device


__all__ = [
    "Acted",
    "Draws",
    "FeedForward",
    "Mode",
    "Observations",
    "Policy",
    "PopulationDraws",
    "State",
    "Stateless",
    "device_of",
    "no_mask",
    "obs_tensor",
    "starts",
    "uniform_within",
]
