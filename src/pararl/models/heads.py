"""Action heads: how an actor-critic's outputs become actions, one head per kind of
action space (`head_for`):

- `Categorical` (Discrete): a softmax over n logits;
- `MultiCategorical` (MultiDiscrete): one softmax per dimension over its own slice of
  the logits; an action's log-probability and the entropy are the dimensions' sums;
- `Bernoulli` (MultiBinary): one logit per dimension, 1 where it is drawn (greedy:
  where its probability is above 1/2);
- `Gaussian` (Box): the outputs are the mean of a diagonal Gaussian whose log
  standard deviation the actor-critic holds (`log_std`, passed in).

A head knows how many outputs the actor gives (`logits`), one action's shape and
dtype (as the rollout stores it and the env takes it), the size of an action mask
(`mask_size`; 0: none), and, on a batch of outputs: sampling (from a given
`torch.Generator`, or torch's global stream when None), the greedy action, the
log-probability of given actions and the entropy. Heads hold no weights, so a
network's parameters and checkpoints are the same whatever its head.

Action masks (Discrete and MultiDiscrete): `mask` is `[B, mask_size]` bools, True
where an action is legal (a MultiDiscrete mask is the dimensions' masks one after
another, as sb3-contrib's MaskablePPO reads them). An illegal action's logit is
replaced by `MASKED` before the softmax, in acting and in the loss alike, as Huang &
Ontanon 2020 ("A Closer Look at Invalid Action Masking in Policy Gradient
Algorithms") do: its probability is 0 (exactly, in float32), no gradient reaches its
logit, and the entropy is the legal actions'. Without a mask every head computes
what it computed before masks existed, op for op.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - the usual name

# the logit of an illegal action: far below any real one, yet finite, so that
# 0 * MASKED is 0 where -inf would give NaN
MASKED = -1e8

Tensor = torch.Tensor


def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype)).dtype


class ActionHead(ABC):
    """See the module docstring."""

    logits: int  # the actor's outputs
    action_shape: tuple[int, ...]  # one action's shape (() for an index)
    action_dtype: np.dtype  # as the rollout stores it and the env takes it
    mask_size: int = 0  # the size of an action mask (0: this head takes none)
    discrete: bool = True  # False: the Gaussian (its log_std is learned)

    @abstractmethod
    def sample(
        self, out: Tensor, log_std: Tensor, generator: torch.Generator | None, mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """Sampled actions and their log-probabilities."""

    @abstractmethod
    def greedy(self, out: Tensor, mask: Tensor | None) -> Tensor:
        """The most likely actions (argmax, the Gaussian's mean)."""

    @abstractmethod
    def evaluate(
        self, out: Tensor, log_std: Tensor, actions: Tensor, mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """The log-probabilities of `actions` and the entropies."""

    def distribution(self, out: Tensor, log_std: Tensor) -> torch.distributions.Distribution:
        """The policy as a torch distribution (tests and benchmarks compare with it)."""
        raise NotImplementedError(f"{type(self).__name__} has no single torch distribution")

    def describe(self) -> dict[str, Any]:
        """What a checkpoint keeps to build the head again (`head_from`)."""
        return {"kind": type(self).__name__}


def _masked(out: Tensor, mask: Tensor | None) -> Tensor:
    return out if mask is None else out.masked_fill(~mask, MASKED)


class Categorical(ActionHead):
    """Discrete(n). Sampling and the loss skip `torch.distributions.Categorical`: a
    log-softmax, a gather and one product give the same numbers in a few ops instead
    of ~15 (the distribution's bookkeeping was ~10% of a minibatch step)."""

    def __init__(self, n: int) -> None:
        self.logits = self.mask_size = n
        self.action_shape, self.action_dtype = (), np.dtype(np.int64)

    def sample(
        self, out: Tensor, log_std: Tensor, generator: torch.Generator | None, mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        log_probs = torch.log_softmax(_masked(out, mask), -1)
        # with replacement: for one draw the same law, and the same draws as
        # torch.distributions.Categorical (and SB3) from the same generator state
        action = torch.multinomial(log_probs.exp(), 1, True, generator=generator)
        return action.squeeze(-1), log_probs.gather(-1, action).squeeze(-1)

    def greedy(self, out: Tensor, mask: Tensor | None) -> Tensor:
        return _masked(out, mask).argmax(-1)

    def evaluate(
        self, out: Tensor, log_std: Tensor, actions: Tensor, mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        log_probs = torch.log_softmax(_masked(out, mask), -1)
        log_prob = log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
        p_log_p = log_probs.exp() * log_probs
        if mask is not None:  # the legal actions' entropy (an illegal one's term is 0)
            p_log_p = p_log_p.masked_fill(~mask, 0.0)
        return log_prob, -p_log_p.sum(-1)

    def distribution(self, out: Tensor, log_std: Tensor) -> torch.distributions.Distribution:
        # no argument validation: it checks every batch and costs ~10% of an update
        return torch.distributions.Categorical(logits=out, validate_args=False)

    def describe(self) -> dict[str, Any]:
        return {"kind": "Categorical", "n": self.logits}


class MultiCategorical(ActionHead):
    """MultiDiscrete(nvec): a `Categorical` per dimension (drawn in order from the
    same stream), its log-probability and entropy the sum of theirs; actions are
    shaped as `nvec` and offset by the space's `start`."""

    def __init__(self, nvec: np.ndarray, start: np.ndarray, dtype: np.dtype) -> None:
        nvec = np.asarray(nvec, np.int64)
        self.action_shape, self.action_dtype = tuple(nvec.shape), np.dtype(dtype)
        self.sizes = [int(n) for n in nvec.ravel()]
        self.logits = self.mask_size = sum(self.sizes)
        self.start = [int(s) for s in np.asarray(start, np.int64).ravel()]
        self.dims = [Categorical(n) for n in self.sizes]
        self._torch_dtype = _torch_dtype(self.action_dtype)

    def _parts(self, out: Tensor, mask: Tensor | None) -> list[tuple[Tensor, Tensor | None]]:
        outs = out.split(self.sizes, -1)
        masks = [None] * len(outs) if mask is None else mask.split(self.sizes, -1)
        return list(zip(outs, masks, strict=True))

    def _action(self, indices: list[Tensor]) -> Tensor:
        action = torch.stack(indices, -1)
        if any(self.start):
            action = action + torch.as_tensor(self.start, device=action.device)
        return action.reshape(*action.shape[:-1], *self.action_shape).to(self._torch_dtype)

    def sample(
        self, out: Tensor, log_std: Tensor, generator: torch.Generator | None, mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        drawn = [
            dim.sample(o, log_std, generator, m)
            for dim, (o, m) in zip(self.dims, self._parts(out, mask), strict=True)
        ]
        action = self._action([a for a, _ in drawn])
        return action, torch.stack([lp for _, lp in drawn], -1).sum(-1)

    def greedy(self, out: Tensor, mask: Tensor | None) -> Tensor:
        return self._action([_masked(o, m).argmax(-1) for o, m in self._parts(out, mask)])

    def evaluate(
        self, out: Tensor, log_std: Tensor, actions: Tensor, mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        indices = actions.reshape(len(actions), -1).long()
        if any(self.start):
            indices = indices - torch.as_tensor(self.start, device=indices.device)
        parts = [
            dim.evaluate(o, log_std, indices[:, i], m)
            for i, (dim, (o, m)) in enumerate(zip(self.dims, self._parts(out, mask), strict=True))
        ]
        log_prob = torch.stack([lp for lp, _ in parts], -1).sum(-1)
        return log_prob, torch.stack([h for _, h in parts], -1).sum(-1)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "MultiCategorical",
            "shape": list(self.action_shape),
            "nvec": self.sizes,
            "start": self.start,
            "dtype": self.action_dtype.str,
        }


class Bernoulli(ActionHead):
    """MultiBinary(n): a Bernoulli per dimension (1 with probability sigmoid(logit));
    its log-probability and entropy are the dimensions' sums. Takes no mask."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.action_shape, self.action_dtype = tuple(shape), np.dtype(dtype)
        self.logits = math.prod(shape)
        self._torch_dtype = _torch_dtype(self.action_dtype)

    def _action(self, bits: Tensor) -> Tensor:
        return bits.reshape(*bits.shape[:-1], *self.action_shape).to(self._torch_dtype)

    def sample(
        self, out: Tensor, log_std: Tensor, generator: torch.Generator | None, mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        bits = torch.bernoulli(torch.sigmoid(out), generator=generator)
        return self._action(bits), self._log_prob(out, bits)

    @staticmethod
    def _log_prob(out: Tensor, bits: Tensor) -> Tensor:
        # log p(b) = b log sigmoid(x) + (1 - b) log sigmoid(-x), summed over dimensions
        return (bits * F.logsigmoid(out) + (1 - bits) * F.logsigmoid(-out)).sum(-1)

    def greedy(self, out: Tensor, mask: Tensor | None) -> Tensor:
        return self._action((out > 0).float())  # probability above 1/2

    def evaluate(
        self, out: Tensor, log_std: Tensor, actions: Tensor, mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        bits = actions.reshape(len(actions), -1).float()
        p = torch.sigmoid(out)
        entropy = -(p * F.logsigmoid(out) + (1 - p) * F.logsigmoid(-out)).sum(-1)
        return self._log_prob(out, bits), entropy

    def distribution(self, out: Tensor, log_std: Tensor) -> torch.distributions.Distribution:
        bernoulli = torch.distributions.Bernoulli(logits=out, validate_args=False)
        return torch.distributions.Independent(bernoulli, 1, validate_args=False)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "Bernoulli",
            "shape": list(self.action_shape),
            "dtype": self.action_dtype.str,
        }


class Gaussian(ActionHead):
    """Box: a diagonal Gaussian with a state-independent learned log standard
    deviation (the env factory clips what the env gets to its bounds; the loss sees
    the sample itself)."""

    discrete = False

    def __init__(self, dim: int) -> None:
        self.logits, self.action_shape = dim, (dim,)
        self.action_dtype = np.dtype(np.float32)

    def distribution(self, out: Tensor, log_std: Tensor) -> torch.distributions.Normal:
        # no argument validation: it checks every batch and costs ~10% of an update
        return torch.distributions.Normal(out, log_std.exp().expand_as(out), validate_args=False)

    def sample(
        self, out: Tensor, log_std: Tensor, generator: torch.Generator | None, mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        if generator is None:  # torch's global stream, drawn as SB3 draws
            dist = self.distribution(out, log_std)
            action = dist.sample()
            return action, dist.log_prob(action).sum(-1)
        std = log_std.exp()
        noise = torch.randn(out.shape, generator=generator)
        action = out + std * noise
        return action, torch.distributions.Normal(out, std).log_prob(action).sum(-1)

    def greedy(self, out: Tensor, mask: Tensor | None) -> Tensor:
        return out

    def evaluate(
        self, out: Tensor, log_std: Tensor, actions: Tensor, mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        dist = self.distribution(out, log_std)
        return dist.log_prob(actions).sum(-1), dist.entropy().sum(-1)

    def describe(self) -> dict[str, Any]:
        return {"kind": "Gaussian", "dim": self.logits}


ACTION_SPACES = (
    gym.spaces.Discrete,
    gym.spaces.MultiDiscrete,
    gym.spaces.MultiBinary,
    gym.spaces.Box,
)


def head_for(space: gym.Space) -> ActionHead:
    """The head of an action space (one of `ACTION_SPACES`). A Box's actions are
    its flattened vector."""
    if isinstance(space, gym.spaces.Discrete):
        return Categorical(int(space.n))
    if isinstance(space, gym.spaces.MultiDiscrete):
        return MultiCategorical(space.nvec, space.start, space.dtype)
    if isinstance(space, gym.spaces.MultiBinary):
        return Bernoulli(tuple(space.shape), space.dtype)
    if isinstance(space, gym.spaces.Box):
        return Gaussian(int(np.prod(space.shape or (1,))))
    raise ValueError(f"no action head for {space}")


def default_head(action_dim: int, discrete: bool) -> ActionHead:
    """The head of a network described only by its outputs (a checkpoint from
    before heads were saved): a Categorical or a Gaussian."""
    return Categorical(action_dim) if discrete else Gaussian(action_dim)


def head_from(described: dict[str, Any]) -> ActionHead:
    """The head a checkpoint describes (`ActionHead.describe`)."""
    kind = described["kind"]
    if kind == "Categorical":
        return Categorical(int(described["n"]))
    if kind == "MultiCategorical":
        nvec = np.asarray(described["nvec"], np.int64).reshape(described["shape"])
        start = np.asarray(described["start"], np.int64).reshape(described["shape"])
        return MultiCategorical(nvec, start, np.dtype(described["dtype"]))
    if kind == "Bernoulli":
        return Bernoulli(tuple(described["shape"]), np.dtype(described["dtype"]))
    if kind == "Gaussian":
        return Gaussian(int(described["dim"]))
    raise ValueError(f"unknown action head {kind!r}")


def acting_mask(mask: np.ndarray | None, device: torch.device) -> Tensor | None:
    """A batch of masks (numpy bools `[B, mask_size]`) as a tensor on `device`."""
    if mask is None:
        return None
    return torch.as_tensor(np.asarray(mask, np.bool_), device=device)


__all__ = [
    "ACTION_SPACES",
    "MASKED",
    "ActionHead",
    "Bernoulli",
    "Categorical",
    "Gaussian",
    "MultiCategorical",
    "acting_mask",
    "default_head",
    "head_for",
    "head_from",
]
