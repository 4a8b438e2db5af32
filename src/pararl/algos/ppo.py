"""PPO: the clipped surrogate loss and its learner (minibatch epochs over a rollout
whose GAE(lambda) advantages the sampler computed, or, for a rollout acted by weights
that trail the learner's, that `PPOLearner.vtrace` relabelled under the current ones).
A run's state around it (the devices, the acting copy, the checkpoint) is
`pararl.runners.ppo_state`.

References: Schulman et al. 2016 (GAE), Schulman et al. 2017 (PPO); implementation
details as catalogued by Huang et al. 2022 ("The 37 implementation details of PPO");
Espeholt et al. 2018 (IMPALA's V-trace).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch

from pararl.algos.fused import FusedSteps, StepMode
from pararl.checkpoint import Header
from pararl.config import PPOConfig
from pararl.errors import UsageError
from pararl.images import check_model, is_image, is_multi_input
from pararl.models import ActorCritic
from pararl.models.build import actor_critic
from pararl.models.heads import ACTION_SPACES, head_from
from pararl.models.normalize import NormSettings
from pararl.models.recurrent import CoreSettings, Sequences
from pararl.observations import Leaf, encoded, map_leaves
from pararl.optim import FlatAdam
from pararl.vtrace import vtrace

# rows the current model evaluates at once when relabelling a rollout (`vtrace`): a
# large rollout of images in one forward pass would hold every activation at once
EVAL_ROWS = 2048
# what the loss reads from a rollout (and "masks" when the env gives them): the rest
# (the reward scale's returns, V-trace's inputs, the observations after the last
# step, whose rows are not the rollout's) never goes to the device
DEFAULT_CORE_SIZE = 64  # `--recurrent-size` of vector observations (`PPOConfig.BY_KIND`)
LOSS_KEYS = ("obs", "actions", "logprobs", "advantages", "returns", "values")


def _normalized(advantages: torch.Tensor) -> torch.Tensor:
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)


def _take(values: Any, rows: torch.Tensor | slice) -> Any:
    """Rows of a tensor, or of each leaf of Dict or Tuple observations."""
    return map_leaves(lambda v: v[rows], values)


@dataclass(frozen=True)
class PPOHyper:
    clip_coef: float = 0.2
    clip_vloss: bool = False
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    norm_adv: bool = True
    update_epochs: int = 4
    num_minibatches: int = 4


class PPOLearner:
    """Owns the model being trained and its optimizer, on the learning device. Each
    minibatch step (`_step`) runs as written, compiled or as a recorded CUDA graph
    (`step_mode`, `pararl.algos.fused`): the same math either way."""

    def __init__(
        self,
        model: ActorCritic,
        hyper: PPOHyper,
        lr: float,
        device: torch.device,
        step_mode: StepMode = "eager",
    ) -> None:
        self.model = model.to(device)
        self.hyper, self.device, self.lr = hyper, device, lr
        self.step_mode = step_mode
        self.optimizer = FlatAdam(
            self.model.parameters(), lr=lr, eps=1e-5, capturable=step_mode != "eager"
        )
        self.updates = 0
        self.clip = hyper.clip_coef  # the surrogate's clip range now (may be annealed)
        # ... and on the device, for compiled or recorded steps (one program for all)
        self.clip_t = torch.tensor(self.clip, dtype=torch.float32, device=device)
        # one program per kind of step: advantages normalised before or not, statistics
        # of the policy's move (approx_kl, clipfrac) or not
        self.steps: FusedSteps[tuple[bool, bool]] = FusedSteps(self.step_mode, self.device)

    def set_lr_fraction(self, fraction: float) -> None:
        """Learning-rate annealing: lr * fraction (1 at the start, towards 0 at the end)."""
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr * fraction
        if self.optimizer.capturable:
            self.optimizer.sync_hyper()

    def set_clip_fraction(self, fraction: float) -> None:
        """Clip-range annealing for the surrogate: clip_coef * fraction."""
        self.clip = self.hyper.clip_coef * fraction
        self.clip_t.fill_(self.clip)

    def update(
        self,
        batch: dict[str, Any],
        rng: np.random.Generator,
        between: Callable[[], None] | None = None,
    ) -> dict[str, float]:
        """Epochs of minibatch steps on one flattened rollout (Dict and Tuple
        observations: a dict of leaves under "obs"), each epoch's minibatches
        in an order drawn from `rng` (the run's own stream: nothing here draws from a
        global one). Returns the losses and entropy averaged over every step, and
        approx_kl and clipfrac averaged over the last epoch (how far the whole update
        moved the policy; computing them at every step cost more than it told).
        `between`: the caller's, before each step (the async loop widens the update's
        threads there, `LentCores`)."""
        hp = self.hyper
        keys = (*LOSS_KEYS, *(k for k in ("masks", "first", "start_state") if k in batch))
        b = {k: map_leaves(self._on_device, batch[k]) for k in keys}
        size = len(b["advantages"])
        mb_size = max(1, size // hp.num_minibatches)
        if "start_state" in b:  # whole env sequences: a minibatch is a share of the envs
            envs = len(b["start_state"])
            mb_size = max(1, envs // hp.num_minibatches) * (size // envs)
        normalized = hp.norm_adv and mb_size >= size  # one minibatch: normalise once
        if normalized:
            b["advantages"] = _normalized(b["advantages"])
        totals: dict[str, torch.Tensor] = {}
        for epoch in range(hp.update_epochs):
            last = epoch == hp.update_epochs - 1
            for mb in self._minibatches(b, size, mb_size, rng):
                if between is not None:
                    between()
                stats = self._minibatch_step(mb, normalized, last)
                for k, v in stats.items():  # summed on the device: no sync per step
                    totals[k] = totals[k] + v if k in totals else v
                self.updates += 1
        per_epoch = size // mb_size
        counts = {"approx_kl": per_epoch, "clipfrac": per_epoch}
        return {
            k: float(v) / counts.get(k, hp.update_epochs * per_epoch) for k, v in totals.items()
        }

    @torch.no_grad()
    def vtrace(
        self,
        batch: dict[str, Any],
        num_steps: int,
        gamma: float,
        rho_bar: float = 1.0,
        c_bar: float = 1.0,
    ) -> dict[str, float]:
        """Relabel a flattened rollout acted by an older policy (the behaviour, whose
        log-probabilities are `batch["logprobs"]`) with V-trace (`pararl.vtrace`) under
        the current model, in place, before `update`: "advantages" become V-trace's
        policy-gradient advantages, "returns" its value targets `vs`, and "values" the
        current values (so that a clipped value loss clips around them).

        The rollout is `num_steps` steps of B envs, row t*B + b. Step t bootstraps from
        the current value of the next row's observation, of `batch["last_obs"]` (the
        observations after the last step, [B, ...] or leaves) at t = T-1, 0 where
        `batch["terminated"]`, and `batch["final_values"]` where `batch["truncated"]`:
        the behaviour's value of the true last observation, as the rollout stored it
        (that observation is not in the batch to evaluate again). It reads "obs",
        "actions", "masks" (when the env gives action masks: the current policy is
        evaluated within them, as the loss does), "rewards" (as learned from),
        "terminated", "truncated", "final_values" and "last_obs". Returns the mean
        importance ratio pi/mu before clipping and the fraction clipped by `rho_bar`."""
        size = len(batch["logprobs"])
        if size % num_steps:
            raise ValueError(f"a batch of {size} rows is not {num_steps} steps of envs")
        shape = (num_steps, size // num_steps)
        logprobs, values = self._evaluated(batch)
        last = self.model.value(map_leaves(self._on_device, batch["last_obs"]))

        def steps(key: str) -> np.ndarray:
            return np.asarray(batch[key]).reshape(shape)

        values = values.reshape(shape)
        terminated, truncated = steps("terminated"), steps("truncated")
        following = np.concatenate([values[1:], last.cpu().numpy()[None]])
        # the value to bootstrap from: the next state's, the truncated state's, or 0
        # (a step both terminated and truncated is terminal: nothing follows it)
        bootstrap = np.where(truncated, steps("final_values"), following)
        next_values = np.where(terminated, 0.0, bootstrap)
        log_rhos = logprobs.reshape(shape) - steps("logprobs")
        vs, advantages = vtrace(
            log_rhos.astype(np.float64),
            steps("rewards").astype(np.float64),
            values.astype(np.float64),
            next_values.astype(np.float64),
            terminated | truncated,
            gamma,
            rho_bar,
            c_bar,
        )
        batch["advantages"] = advantages.reshape(size).astype(np.float32)
        batch["returns"] = vs.reshape(size).astype(np.float32)
        batch["values"] = values.reshape(size).astype(np.float32)
        ratios = np.exp(log_rhos)
        return {
            "vtrace_rho": float(ratios.mean()),
            "vtrace_clipped": float((ratios > rho_bar).mean()),
        }

    def _evaluated(self, batch: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """The current model's log-probabilities of the batch's actions (within its
        action masks, when it has them) and its values, `EVAL_ROWS` rows at a time."""
        size, masks = len(batch["logprobs"]), batch.get("masks")
        logprobs, values = [], []
        for start in range(0, size, EVAL_ROWS):
            rows = slice(start, start + EVAL_ROWS)
            obs = map_leaves(self._on_device, _take(batch["obs"], rows))
            mask = None if masks is None else self._on_device(masks[rows])
            actions = self._on_device(batch["actions"][rows])
            logprob, _, value = self.model.evaluate(obs, actions, mask)
            logprobs.append(logprob)
            values.append(value)
        return torch.cat(logprobs).cpu().numpy(), torch.cat(values).cpu().numpy()

    def _on_device(self, array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(array).to(self.device)

    def _minibatches(
        self, b: dict[str, Any], size: int, mb_size: int, rng: np.random.Generator
    ) -> Iterator[dict[str, Any]]:
        """One epoch's minibatches, in a fresh random order. A single minibatch is the
        whole rollout: its loss is a mean, so the order does not matter and the
        shuffle (one gather per array) is skipped. A recurrent model's rollout
        (`start_state`: one per env) is cut by envs, each minibatch their whole
        sequences, time-major."""
        if mb_size >= size:
            yield b
            return
        if "start_state" in b:
            yield from self._sequences(b, size, mb_size, rng)
            return
        order = torch.as_tensor(rng.permutation(size), device=self.device)
        for start in range(0, size - mb_size + 1, mb_size):
            rows = order[start : start + mb_size]
            yield {k: _take(v, rows) for k, v in b.items()}

    def _sequences(
        self, b: dict[str, Any], size: int, mb_size: int, rng: np.random.Generator
    ) -> Iterator[dict[str, Any]]:
        """Minibatches of whole env sequences: the rollout's rows are t * B + env; each
        minibatch takes M envs (in an order drawn from `rng`) and their rows time-major
        (t * M + m), with their states at the rollout's start."""
        envs = len(b["start_state"])
        steps, per = size // envs, mb_size // (size // envs)
        order = rng.permutation(envs)
        for start in range(0, envs - per + 1, per):
            chosen = order[start : start + per]
            rows = (np.arange(steps)[:, None] * envs + chosen[None, :]).reshape(-1)
            rows_t = torch.as_tensor(rows, device=self.device)
            mb = {k: _take(v, rows_t) for k, v in b.items() if k != "start_state"}
            mb["start_state"] = b["start_state"][torch.as_tensor(chosen, device=self.device)]
            yield mb

    def _minibatch_step(
        self, mb: dict[str, Any], normalized: bool, with_kl: bool
    ) -> dict[str, torch.Tensor]:
        """One gradient step; `normalized`: the advantages are normalised already;
        `with_kl`: also return approx_kl and clipfrac. The rollout's action masks,
        when it has them, come last: the loss evaluates the masked policy that acted."""
        step = self.steps.get(
            (normalized, with_kl),
            lambda: functools.partial(self._step, normalized=normalized, with_kl=with_kl),
        )
        # an annealed clip range changes every update: a compiled or recorded step reads
        # it from a tensor, so that one program serves all of them
        clip = self.clip if self.step_mode == "eager" else self.clip_t
        # what follows the loss's keys: the action masks, a recurrent model's sequences
        tail: tuple[Any, ...] = (mb["masks"],) if "masks" in mb else ()
        if "start_state" in mb:
            tail = (mb.get("masks"), mb["first"], mb["start_state"])
        out = step(*(mb[k] for k in LOSS_KEYS), clip, *tail)
        names = ("pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac")
        return dict(zip(names, out, strict=False))

    def _step(
        self,
        obs: Any,
        actions: torch.Tensor,
        logprobs: torch.Tensor,
        advantages: torch.Tensor,
        returns: torch.Tensor,
        values: torch.Tensor,
        clip: float | torch.Tensor,
        masks: torch.Tensor | None = None,
        first: torch.Tensor | None = None,
        start_state: torch.Tensor | None = None,
        *,
        normalized: bool,
        with_kl: bool,
    ) -> tuple[torch.Tensor, ...]:
        """The loss, its gradient and the optimizer's step on one minibatch; the losses
        and entropy (and approx_kl and clipfrac when `with_kl`). A recurrent model's
        minibatch is whole sequences (`first`, `start_state`: `models.recurrent`)."""
        hp = self.hyper
        if hp.norm_adv and not normalized:
            advantages = _normalized(advantages)
        mb = {"obs": obs, "actions": actions, "logprobs": logprobs, "returns": returns}
        mb["values"] = values
        if masks is not None:
            mb["masks"] = masks
        if start_state is not None:
            mb["first"], mb["start_state"] = first, start_state
        self.optimizer.zero_grad(set_to_none=True)
        out = self._loss(mb, advantages, clip)
        out["loss"].backward()
        self.optimizer.clip_grad_norm_(hp.max_grad_norm)
        self.optimizer.step()
        stats = tuple(out[k].detach() for k in ("pg_loss", "v_loss", "entropy"))
        if not with_kl:
            return stats
        with torch.no_grad():
            ratio, log_ratio = out["ratio"], out["log_ratio"]
            approx_kl = ((ratio - 1) - log_ratio).mean()  # low-variance estimator
            clipfrac = ((ratio - 1.0).abs() > clip).float().mean()
        return (*stats, approx_kl, clipfrac)

    def _loss(
        self, mb: dict[str, torch.Tensor], mb_adv: torch.Tensor, clip: float | torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """The PPO loss of one minibatch (`ppo_loss`) under the model being trained;
        with masks: illegal actions' logits masked, the entropy the legal actions'."""
        sequences = None
        if "start_state" in mb:
            sequences = Sequences(mb["start_state"], mb["first"])
        evaluated = self.model.evaluate(mb["obs"], mb["actions"], mb.get("masks"), sequences)
        return ppo_loss(self.hyper, evaluated, mb, mb_adv, clip)

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])


Evaluated = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # log-probs, entropies, values


class LossSettings(Protocol):
    """What the loss reads of its settings: `PPOHyper`, or a population's, whose
    coefficients may be one per agent (`algos.population`)."""

    @property
    def clip_vloss(self) -> bool: ...

    @property
    def clip_coef(self) -> float | torch.Tensor: ...

    @property
    def ent_coef(self) -> float | torch.Tensor: ...

    @property
    def vf_coef(self) -> float | torch.Tensor: ...


def ppo_loss(
    hp: LossSettings,
    evaluated: Evaluated,
    mb: dict[str, torch.Tensor],
    mb_adv: torch.Tensor,
    clip: float | torch.Tensor,
    mean: Callable[[torch.Tensor], torch.Tensor] = torch.mean,
) -> dict[str, torch.Tensor]:
    """The PPO loss of one minibatch (`loss`, for autograd), its parts, and the
    importance ratios (detached), from the current policy's log-probabilities,
    entropies and values of the minibatch's rows (`evaluated`). `mean`: how rows are
    averaged (a population's learner averages each agent's rows apart, and its
    losses are then one per agent)."""
    new_logprob, entropy, new_value = evaluated
    log_ratio = new_logprob - mb["logprobs"]
    ratio = log_ratio.exp()

    # clipped surrogate objective (as a loss: the max of the two negatives)
    pg_loss1 = -mb_adv * ratio
    pg_loss2 = -mb_adv * ratio.clamp(1 - clip, 1 + clip)  # type: ignore[arg-type]
    pg_loss = mean(torch.max(pg_loss1, pg_loss2))

    # value loss: the mean squared error (SB3's scale; CleanRL halves it), optionally
    # clipped around the rollout's value estimates
    if hp.clip_vloss:
        v_clipped = mb["values"] + torch.clamp(
            new_value - mb["values"],
            -hp.clip_coef,  # type: ignore[arg-type]
            hp.clip_coef,  # type: ignore[arg-type]
        )
        v_loss_unclipped = (new_value - mb["returns"]) ** 2
        v_loss_clipped = (v_clipped - mb["returns"]) ** 2
        v_loss = mean(torch.max(v_loss_unclipped, v_loss_clipped))
    else:
        v_loss = mean((new_value - mb["returns"]) ** 2)

    entropy_loss = mean(entropy)
    loss = pg_loss - hp.ent_coef * entropy_loss + hp.vf_coef * v_loss
    return {
        "loss": loss,
        "pg_loss": pg_loss,
        "v_loss": v_loss,
        "entropy": entropy_loss,
        "ratio": ratio.detach(),
        "log_ratio": log_ratio.detach(),
    }


def check_spaces(config: PPOConfig, observation_space: gym.Space, action_space: gym.Space) -> None:
    if not isinstance(action_space, ACTION_SPACES):
        raise UsageError(
            f"PPO here takes Discrete, MultiDiscrete, MultiBinary or Box actions; "
            f"{config.env} has {action_space}; wrap it into one of them"
        )
    if not isinstance(observation_space, gym.spaces.Box) and not is_multi_input(observation_space):
        raise UsageError(
            f"PPO here takes Box, Discrete, MultiDiscrete, Dict and Tuple observation spaces; "
            f"{config.env} has {observation_space}; wrap it into one of them"
        )
    check_model(config.model, config.env_name, observation_space)
    encoded(observation_space)  # a leaf the encoder cannot read is refused now
    if config.norm_obs and is_image(observation_space) and config.model != "mlp":
        raise UsageError(
            f"--norm-obs: {config.env} gives images, which the CNN scales instead of "
            "normalising; drop --norm-obs"
        )


def norm_settings(cfg: PPOConfig) -> NormSettings:
    return NormSettings(bool(cfg.norm_obs), bool(cfg.norm_reward), cfg.clip_obs, cfg.clip_reward)


def core_settings(cfg: PPOConfig) -> CoreSettings | None:
    """The recurrent core of `--recurrent` (None: a feed-forward model); runs saved
    before `--recurrent-size` had one take the vector observations' default."""
    if cfg.recurrent == "none":
        return None
    size = cfg.recurrent_size if cfg.recurrent_size is not None else DEFAULT_CORE_SIZE
    return CoreSettings(cfg.recurrent, size, cfg.recurrent_layers, cfg.recurrent_critic)


def saved_leaves(state: dict[str, Any]) -> tuple[Leaf, ...]:
    """What a checkpoint's encoder reads: the leaves of Dict or Tuple observations,
    the one of a bare discrete observation (none: a Box)."""
    return tuple(Leaf.from_dict(d) for d in state.get("obs_leaves", ()))


def load_policy(config: PPOConfig, state: dict[str, Any]) -> ActorCritic:
    """The greedy actor-critic of a checkpoint (`pararl evaluate`), with the run's
    normalisation statistics, frozen; its action head as saved (runs from before
    heads were saved: a Categorical or a Gaussian)."""
    described = state.get("action_head")
    model = actor_critic(
        "mlp" if config.model == "auto" else config.model,  # runs from before --model
        tuple(state["obs_shape"]),
        np.dtype(state.get("obs_dtype", "<f4")),
        state["action_dim"],
        state["discrete"],
        config.hidden,
        config.shared_body,
        norm_settings(config),
        None if described is None else head_from(described),
        saved_leaves(state),
        core_settings(config),
    )
    # format 1 (no statistics) loads into the identity
    model.load_state_dict(state["learner"]["model"], strict=Header.of(state).format >= 2)
    return model
