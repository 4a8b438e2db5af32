"""MAML for reinforcement learning (Finn et al. 2017) with a TRPO outer step.

    inner step, per task i:  theta'_i = theta - alpha grad_theta L_i^train(theta)
                             (L: the REINFORCE loss on the task's "train" episodes)
    outer step:              TRPO on sum_i L_i^valid(theta'_i(theta)), the surrogate
                             of the "valid" episodes sampled with theta'_i, its KL and
                             Fisher-vector products taken through the inner step

Everything is functional: parameters are passed in, one set per task stacked along
a first axis (`GaussianMLP.forward_tasks`: a batched matrix product per layer, all
tasks at once), so the same network runs theta and every theta'_i, and the outer
gradient flows through the inner one (second order) unless `first_order`
(theta'_i's gradient is then treated as a constant: first-order MAML).
pytorch-maml-rl's `MAMLTRPO` is the reference for the objective's details
(per-episode means over the real steps).

The Fisher-vector products of the outer step use the KL's Gauss-Newton form, exact
at theta_old where TRPO takes them: there the KL's gradient in the policy's outputs
(mean, log-std) is zero, so its Hessian in theta is J^T H J, J the Jacobian of the
adapted policy's outputs in theta and H the Gaussian's Fisher in its outputs
(1/var for the mean, 2 for the log-std). A product J v (the derivative of a kept
J^T u graph in u) and a product J^T u (a backward pass through the kept forward
graph) replace the reference's differentiation of the KL's gradient, which goes
through the inner step a third time (`fisher="autograd"` keeps that way, the
reference's).

The outer step runs over the tasks a few at a time (`task_chunks`): every term is a
sum over tasks, so the objective, its gradient and each Fisher-vector product are
sums of the chunks' terms, each chunk with its own graph. The result is the same to
float rounding; on a CPU the chunk's tensors stay in the core's cache between the
operators of a product, where whole-batch tensors (tens of MB) go to memory each time.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import torch
from torch.nn.utils import parameters_to_vector

from pararl.algos.baseline import TaskBatch
from pararl.algos.offpolicy import who_takes
from pararl.algos.trpo import Product, TRPOHyper, trpo_step
from pararl.config import MAMLConfig
from pararl.errors import UsageError
from pararl.images import is_multi_input
from pararl.models.gaussian import GaussianMLP, Params, gaussian_log_likelihood
from pararl.mp.threads import torch_threads


def episode_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the real steps of each episode (last axis), then over the episodes
    of each task (the axis before): one value per task [tasks]."""
    return ((x * mask).sum(-1) / mask.sum(-1).clamp(min=1)).mean(-1)


def reinforce_loss(model: GaussianMLP, stacked: Params, batch: TaskBatch) -> torch.Tensor:
    """-E[log pi(a|s) A] of every task [tasks]: the inner step's policy-gradient loss."""
    mean, log_std = model.forward_tasks(stacked, batch.obs)
    log_prob = gaussian_log_likelihood(batch.actions, mean, log_std)
    return -episode_mean(log_prob * batch.advantages, batch.mask)


def stack(params: Params, tasks: int) -> Params:
    """`params` repeated for `tasks` tasks (a view: gradients flow back to `params`)."""
    return {n: p.unsqueeze(0).expand(tasks, *p.shape) for n, p in params.items()}


def adapt(
    model: GaussianMLP,
    params: Params,
    train: Sequence[TaskBatch],
    lr: float,
    first_order: bool = False,
) -> Params:
    """Every task's adapted parameters [tasks, ...]: one gradient step on the REINFORCE
    loss per batch of `train`, all tasks at once. Differentiable in `params` (second
    order) when they require grad and not `first_order`; parameters that do not
    require grad are taken as constants."""
    tasks = train[0].num_tasks
    create_graph = not first_order and any(p.requires_grad for p in params.values())
    if any(p.requires_grad for p in params.values()):
        current = stack(params, tasks)
    else:  # constants: each task's copy is a leaf to differentiate the inner loss by
        current = {n: p.contiguous().requires_grad_() for n, p in stack(params, tasks).items()}
    for batch in train:
        # task i's loss depends on its own slice only: the gradient of the sum is per task
        loss = reinforce_loss(model, current, batch).sum()
        grads = torch.autograd.grad(loss, list(current.values()), create_graph=create_graph)
        # theta'_i = theta_i - alpha grad L_i(theta_i)
        current = {n: p - lr * g for (n, p), g in zip(current.items(), grads, strict=True)}
    return current


def adapted_outputs(
    model: GaussianMLP,
    train: Sequence[TaskBatch],
    obs: torch.Tensor,
    lr: float,
    first_order: bool = False,
) -> Callable[[Params], tuple[torch.Tensor, torch.Tensor]]:
    """params -> the adapted policy's (mean, log-std broadcast to the mean) on `obs`,
    differentiable in `params` through the inner steps (`adapt`)."""

    def outputs(params: Params) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = model.forward_tasks(adapt(model, params, train, lr, first_order), obs)
        return mean, log_std.expand_as(mean)

    return outputs


def gauss_newton_fisher(
    outputs: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
    theta_old: torch.Tensor,
    mask: torch.Tensor,
    tasks: int | None = None,
) -> Callable[[torch.Tensor], torch.Tensor]:
    """v -> the Hessian at theta_old of the valid episodes' mean KL(pi_old || pi_theta)
    times v, as J^T H J v (see the module docstring). `outputs` maps the flat theta
    to (mean, log-std) [tasks, episodes, steps, action]; `mask` marks the real steps;
    the KL's weights are `episode_mean`'s then the mean over `tasks` (default: the
    tasks of `mask`; more when `outputs` covers a chunk of them, whose products add up).

    One forward pass through the inner step is kept for the whole CG solve. J^T u is
    built once as a graph in a dummy u (it is linear in u); its derivative in u along
    v is J v (the double-backward trick for forward-mode products, Townsend 2017), and
    J^T of the result is a backward pass through the kept forward graph."""
    theta = theta_old.detach().clone().requires_grad_()
    mean, log_std = outputs(theta)
    tasks = mask.shape[0] if tasks is None else tasks
    weight = mask / mask.sum(-1, keepdim=True).clamp(min=1) / mask.shape[-2] / tasks
    h_mean = (weight.unsqueeze(-1) * torch.exp(-2 * log_std)).detach()
    h_log_std = 2 * weight.unsqueeze(-1).expand_as(log_std)
    dummy = tuple(torch.zeros_like(x, requires_grad=True) for x in (mean, log_std))
    (jt_dummy,) = torch.autograd.grad((mean, log_std), theta, dummy, create_graph=True)

    def product(v: torch.Tensor) -> torch.Tensor:
        j_mean, j_log_std = torch.autograd.grad(jt_dummy, dummy, v, retain_graph=True)
        (hv,) = torch.autograd.grad(
            (mean, log_std), theta, (h_mean * j_mean, h_log_std * j_log_std), retain_graph=True
        )
        return hv

    return product


def gaussian_kl(
    mean_p: torch.Tensor, log_std_p: torch.Tensor, mean_q: torch.Tensor, log_std_q: torch.Tensor
) -> torch.Tensor:
    """KL(p || q) of diagonal Gaussians, summed over the action dimensions."""
    var_p, var_q = torch.exp(2 * log_std_p), torch.exp(2 * log_std_q)
    kl = log_std_q - log_std_p + (var_p + (mean_p - mean_q).square()) / (2 * var_q) - 0.5
    return kl.sum(-1)


def summed(products: Sequence[Product]) -> Product:
    """v -> the sum of every product at v."""

    def product(v: torch.Tensor) -> torch.Tensor:
        return functools.reduce(torch.add, (p(v) for p in products))

    return product


# Bytes of one layer's activations per chunk of tasks on a CPU. The outer step at
# HalfCheetahDir's size (40 tasks x 2,000 steps, 64 wide: 512 KiB per task), one
# thread, took 0.93x, 0.78x, 0.71x and 0.72x the whole batch's time in chunks of 1,
# 2, 4 and 8 tasks (a 2 MiB L2 per core): per task, the operator calls add up;
# whole, every elementwise operator streams tens of MB from memory.
CHUNK_BYTES = 2 << 20


def chunk_size(tasks: int, per_task_bytes: int, device: torch.device) -> int:
    """Tasks the outer step takes at a time: as many as fit in `CHUNK_BYTES` of one
    layer's activations on a CPU (at least one); on a GPU, all of them."""
    return tasks if device.type != "cpu" else max(1, CHUNK_BYTES // max(1, per_task_bytes))


def task_chunks(tasks: int, size: int) -> list[slice]:
    """`tasks` in consecutive chunks of `size` (the last one shorter)."""
    return [slice(a, min(tasks, a + size)) for a in range(0, tasks, size)]


@dataclass
class MetaBatch:
    """One meta-iteration's data: per inner step the "train" episodes of every task,
    and the "valid" episodes sampled with the adapted parameters."""

    train: list[TaskBatch]  # one TaskBatch (all tasks) per inner step
    valid: TaskBatch


class MAMLLearner:
    """The meta-parameters theta and their TRPO update."""

    def __init__(
        self,
        model: GaussianMLP,
        cfg: MAMLConfig,
        device: torch.device,
        fisher: Literal["gauss-newton", "autograd"] = "gauss-newton",
    ) -> None:
        self.model = model.to(device)
        self.fisher = fisher
        self.threads: int | None = None  # torch's intra-op threads for the step (None: as set)
        self.device = device
        self.task_chunk: int | None = None  # tasks per chunk of the outer step (None: by size)
        self.lr, self.first_order = cfg.fast_lr, cfg.first_order
        self.hyper = TRPOHyper(
            cfg.max_kl, cfg.cg_iters, cfg.cg_damping, cfg.ls_max_steps, cfg.ls_backtrack_ratio
        )
        self.updates = 0

    def adapted(self, train: Sequence[TaskBatch]) -> Params:
        """Every task's adapted parameters [tasks, ...] from theta, detached."""
        params = adapt(self.model, self.model.params(), train, self.lr, first_order=True)
        return {n: p.detach() for n, p in params.items()}

    def unflatten(self, theta: torch.Tensor) -> Params:
        out, offset = {}, 0
        for name, p in self.model.named_parameters():
            out[name] = theta[offset : offset + p.numel()].view_as(p)
            offset += p.numel()
        return out

    def _on_flat(
        self, outputs: Callable[[Params], tuple[torch.Tensor, torch.Tensor]], theta: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return outputs(self.unflatten(theta))

    def step(self, batch: MetaBatch) -> dict[str, float]:
        """The TRPO outer step on the post-adaptation surrogate; returns its statistics."""
        with torch_threads(self.threads):
            return self._step(batch)

    def chunks(self, batch: MetaBatch) -> list[slice]:
        """The chunks of tasks of this batch's outer step (`task_chunk`, or by size)."""
        valid, tasks = batch.valid, batch.valid.num_tasks
        size = self.task_chunk
        if size is None:
            params = self.model.named_parameters()
            widest = max(p.shape[0] for n, p in params if n.endswith("weight"))
            per_task = valid.mask[0].numel() * widest * valid.obs.element_size()
            size = chunk_size(tasks, per_task, self.device)
        return task_chunks(tasks, size)

    def _step(self, batch: MetaBatch) -> dict[str, float]:
        tasks = batch.valid.num_tasks
        parts = [
            ([train.tasks(s) for train in batch.train], batch.valid.tasks(s))
            for s in self.chunks(batch)
        ]
        old: list[tuple[torch.Tensor, torch.Tensor]] = []  # pi_theta'_i(old) on valid, per chunk

        def objective(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            params = self.unflatten(theta)
            loss, kl = theta.new_zeros(()), theta.new_zeros(())
            for j, (train, valid) in enumerate(parts):
                fast = adapt(self.model, params, train, self.lr, self.first_order)
                mean, log_std = self.model.forward_tasks(fast, valid.obs)
                if len(old) == j:  # the first call is at theta_old: keep its policy
                    old.append((mean.detach(), log_std.detach()))
                old_mean, old_log_std = old[j]
                # importance ratio pi_new / pi_old of the valid episodes' actions
                log_ratio = gaussian_log_likelihood(
                    valid.actions, mean, log_std
                ) - gaussian_log_likelihood(valid.actions, old_mean, old_log_std)
                # surrogate loss and KL(old || new), each a mean over all tasks
                ratio = torch.exp(log_ratio)
                loss = loss - episode_mean(ratio * valid.advantages, valid.mask).sum() / tasks
                chunk_kl = gaussian_kl(old_mean, old_log_std.expand_as(old_mean), mean, log_std)
                kl = kl + episode_mean(chunk_kl, valid.mask).sum() / tasks
            return loss, kl

        theta_old = parameters_to_vector(self.model.parameters()).detach()
        fisher = None
        if self.fisher == "gauss-newton":
            products = []
            for train, valid in parts:
                outputs = adapted_outputs(self.model, train, valid.obs, self.lr, self.first_order)
                flat = functools.partial(self._on_flat, outputs)
                products.append(gauss_newton_fisher(flat, theta_old, valid.mask, tasks))
            fisher = summed(products)
        result = trpo_step(objective, theta_old, self.hyper, fisher)
        with torch.no_grad():
            for p, new in zip(
                self.model.parameters(), self.unflatten(result.theta).values(), strict=True
            ):
                p.copy_(new)
        self.updates += 1
        return {
            "kl": result.kl,
            "ls_steps": float(result.ls_steps),
            "step_accepted": float(result.accepted),
            "surrogate_before": result.loss_before,
            "surrogate_after": result.loss_after,
        }

    def state_dict(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.updates = int(state["updates"])


def check_spaces(config: MAMLConfig, observation_space: gym.Space, action_space: gym.Space) -> None:
    if is_multi_input(observation_space):
        kind = type(observation_space).__name__
        raise UsageError(
            f"MAML here needs Box observations; {config.env} gives {kind} observations "
            f"(PPO takes {kind} observations: pararl train ppo)"
        )
    if not isinstance(action_space, gym.spaces.Box) or not isinstance(
        observation_space, gym.spaces.Box
    ):
        raise UsageError(
            f"MAML here needs Box observations and actions (a Gaussian policy); {config.env} "
            f"has {observation_space} and {action_space}" + who_takes(action_space, config.env)
        )


def make_model(config: MAMLConfig, obs_dim: int, action_dim: int) -> GaussianMLP:
    return GaussianMLP(obs_dim, action_dim, config.hidden, config.init_std)


def load_model(config: MAMLConfig, state: dict[str, Any]) -> GaussianMLP:
    model = make_model(config, int(math.prod(state["obs_shape"])), int(state["action_dim"]))
    model.load_state_dict(state["learner"]["model"])
    return model


__all__ = [
    "MAMLLearner",
    "MetaBatch",
    "adapt",
    "adapted_outputs",
    "check_spaces",
    "chunk_size",
    "episode_mean",
    "gauss_newton_fisher",
    "gaussian_kl",
    "load_model",
    "make_model",
    "reinforce_loss",
    "stack",
    "summed",
    "task_chunks",
]
