"""Adam (and centred RMSProp) over one flat parameter vector.

Why not `torch.optim.Adam`: its constructor imports `torch._dynamo` (through
`Optimizer.add_param_group`, which is wrapped to be skipped by the compiler), and that
import costs ~1.3 s of start-up in every process that builds an optimizer — a large
share of the time to solve CartPole. Our networks are small MLPs, so keeping all
parameters and gradients as views into two contiguous vectors also makes the update a
handful of whole-vector ops instead of a loop over tensors, and gives averaging and
weight publishing one buffer to work on.

The arithmetic is the same, op for op, as PyTorch's single-tensor Adam (no weight
decay, no amsgrad) and centred RMSprop (no momentum), so results match them (tested).

`capturable=True` keeps the step count and the learning rate in tensors on the
parameters' device, as PyTorch's own `capturable` option does: the step then reads no
Python number, so one compiled program or one recorded CUDA graph serves every step
(`pararl.algos.fused`), and changing the learning rate (`param_groups[0]["lr"]`, then
`sync_hyper()`) needs no recompile.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

from pararl.errors import UsageError


def is_transposed(t: torch.Tensor) -> bool:
    """A 2-D tensor stored as its transpose, column by column
    (`models.networks.weights_in_out`)."""
    return t.dim() == 2 and not t.is_contiguous() and t.t().is_contiguous()


def flat_view(
    flat: torch.Tensor, offset: int, like: torch.Tensor, transposed: bool | None = None
) -> torch.Tensor:
    """`like.numel()` elements of the vector `flat` from `offset`, as a tensor of
    `like`'s shape laid out in memory as `like` is (`transposed`: as given instead):
    row-major, or a transposed 2-D matrix. Other layouts get row-major."""
    n = like.numel()
    if is_transposed(like) if transposed is None else transposed:
        return flat[offset : offset + n].view(like.shape[1], like.shape[0]).t()
    return flat[offset : offset + n].view(like.shape)


def views_into(module: torch.nn.Module, flat: torch.Tensor) -> None:
    """Make `module`'s parameters views of `flat` (laid out as FlatAdam lays out a
    module's parameters), so that one op on `flat` updates all of them (a target
    network's Polyak update)."""
    offset = 0
    for p in module.parameters():
        p.data = flat_view(flat, offset, p)
        offset += p.numel()


class FlatAdam:
    """Adam whose parameters are views into one vector (and gradients into another).

    Build it after the model is on its device: moving the model later would detach
    its parameters from the flat vector.
    """

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        capturable: bool = False,
    ) -> None:
        self.params = [p for p in params if p.requires_grad]
        if not self.params:
            raise ValueError("FlatAdam got no parameters that require grad")
        first = self.params[0]
        if any(p.device != first.device or p.dtype != first.dtype for p in self.params):
            raise ValueError("FlatAdam needs all parameters on one device with one dtype")
        total = sum(p.numel() for p in self.params)
        self.flat = torch.empty(total, device=first.device, dtype=first.dtype)
        self.flat_grad = torch.zeros_like(self.flat)
        self._grad_views: list[torch.Tensor] = []
        offset = 0
        with torch.no_grad():
            for p in self.params:
                view = flat_view(self.flat, offset, p)
                view.copy_(p)
                p.data = view
                self._grad_views.append(flat_view(self.flat_grad, offset, p))
                offset += p.numel()
        self._attach_grads()
        self.param_groups: list[dict[str, Any]] = [{"lr": lr, "betas": betas, "eps": eps}]
        self.exp_avg = torch.zeros_like(self.flat)
        self.exp_avg_sq = torch.zeros_like(self.flat)
        self.capturable = capturable
        self._steps = 0
        # capturable: the step count and lr the step reads, on the parameters' device
        self.step_t = torch.zeros((), device=first.device, dtype=first.dtype)
        self.lr_t = torch.full((), lr, device=first.device, dtype=first.dtype)
        self.kind = "flat_adam"  # what its saved state is (checked on load)

    @property
    def steps(self) -> int:
        """Steps taken (reads the device counter when capturable: a sync, so only for
        checkpoints and tests)."""
        return int(self.step_t.item()) if self.capturable else self._steps

    def sync_hyper(self) -> None:
        """Capturable: copy `param_groups[0]["lr"]` into the tensor the step reads (call
        it outside a recorded graph, after changing the learning rate)."""
        self.lr_t.fill_(self.param_groups[0]["lr"])

    def _tick(self) -> tuple[float | torch.Tensor, torch.Tensor | float]:
        """Count the step; the learning rate and the step count for its arithmetic, as
        Python numbers, or as device tensors when capturable."""
        if self.capturable:
            self.step_t.add_(1)
            return self.lr_t, self.step_t
        self._steps += 1
        return self.param_groups[0]["lr"], float(self._steps)

    def _attach_grads(self) -> None:
        """Make every `p.grad` a view of `flat_grad` again (autograd accumulates into
        an existing `.grad` in place, so once attached they stay attached)."""
        for p, view in zip(self.params, self._grad_views, strict=True):
            if p.grad is None:
                p.grad = view
            elif p.grad.data_ptr() != view.data_ptr():
                view.copy_(p.grad)
                p.grad = view

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero the flat gradient (`set_to_none` is accepted for API compatibility;
        gradients stay allocated, as views of the flat vector)."""
        del set_to_none
        self._attach_grads()
        self.flat_grad.zero_()

    @torch.no_grad()
    def clip_grad_norm_(self, max_norm: float) -> torch.Tensor:
        """Scale the gradients so that their global 2-norm is at most `max_norm`;
        returns the norm before clipping. The same rule as
        `torch.nn.utils.clip_grad_norm_`, as two ops on the flat gradient instead of
        a norm per tensor (which cost ~10% of a PPO minibatch step here)."""
        self._attach_grads()
        norm = torch.linalg.vector_norm(self.flat_grad)
        self.flat_grad.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
        return norm

    @torch.no_grad()
    def step(self) -> None:
        self._attach_grads()
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        lr, step = self._tick()
        grad = self.flat_grad
        self.exp_avg.lerp_(grad, 1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        if isinstance(step, torch.Tensor):  # capturable: the same arithmetic on tensors
            step_size = lr / (1 - beta1**step)
            denom = (self.exp_avg_sq.sqrt() / (1 - beta2**step).sqrt()).add_(group["eps"])
            self.flat.sub_(step_size * self.exp_avg / denom)
            return
        step_size = lr / (1 - beta1**step)
        bias_correction2_sqrt = math.sqrt(1 - beta2**step)
        denom = (self.exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(group["eps"])
        self.flat.addcdiv_(self.exp_avg, denom, value=-step_size)

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "steps": self.steps,
            "exp_avg": self.exp_avg.detach().cpu().clone(),
            "exp_avg_sq": self.exp_avg_sq.detach().cpu().clone(),
            "param_groups": [dict(g) for g in self.param_groups],
            # which parameters the vectors hold transposed (`flat_view`)
            "transposed": [is_transposed(p) for p in self.params],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("kind") != self.kind or state["exp_avg"].numel() != self.flat.numel():
            raise UsageError(
                "optimizer state does not match this model (saved by another pararl "
                "version or for another network); start a new run instead of resuming"
            )
        self._steps = int(state["steps"])
        self.step_t.fill_(self._steps)
        # state saved before weights were stored (in, out) holds them all row-major
        saved = state.get("transposed", [False] * len(self.params))
        for name in ("exp_avg", "exp_avg_sq"):
            ours, theirs, offset = getattr(self, name), state[name].to(self.flat.device), 0
            for p, was in zip(self.params, saved, strict=True):
                view = flat_view(ours, offset, p)
                view.copy_(flat_view(theirs, offset, p, transposed=was))
                offset += p.numel()
        self.param_groups = [dict(g) for g in state["param_groups"]]
        self.sync_hyper()


class FlatRMSprop(FlatAdam):
    """Centred RMSProp over the same flat vectors (Graves 2013; the optimiser of the
    Nature DQN and of MinAtar's DQN, there with decay 0.95 and eps 0.01). `exp_avg`
    holds the running mean of the gradient, `exp_avg_sq` that of its square, so
    parameter averaging and checkpoints treat it as they treat Adam. The arithmetic
    is PyTorch's `RMSprop(centered=True)` without momentum or weight decay, op for op."""

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        capturable: bool = False,
    ) -> None:
        super().__init__(params, lr=lr, eps=eps, capturable=capturable)
        self.param_groups[0]["alpha"] = alpha
        self.kind = "flat_rmsprop"

    @torch.no_grad()
    def step(self) -> None:
        self._attach_grads()
        group = self.param_groups[0]
        alpha, grad = group["alpha"], self.flat_grad
        lr, _ = self._tick()
        # running means of g^2 and of g; the step divides by their standard deviation
        self.exp_avg_sq.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        self.exp_avg.lerp_(grad, 1 - alpha)
        avg = self.exp_avg_sq.addcmul(self.exp_avg, self.exp_avg, value=-1).sqrt_()
        if isinstance(lr, torch.Tensor):
            self.flat.sub_(lr * grad / avg.add_(group["eps"]))
        else:
            self.flat.addcdiv_(grad, avg.add_(group["eps"]), value=-lr)


__all__ = ["FlatAdam", "FlatRMSprop", "flat_view", "views_into"]
