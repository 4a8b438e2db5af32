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
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
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


def copy_moments(
    ours: torch.Tensor, theirs: torch.Tensor, likes: Sequence[torch.Tensor], saved: Sequence[bool]
) -> None:
    """Copy a saved moment vector `theirs` into `ours` parameter by parameter, each
    laid out in `theirs` as `saved` says (transposed or row-major) and in `ours` as
    its match in `likes` lies."""
    offset = 0
    for like, was in zip(likes, saved, strict=True):
        flat_view(ours, offset, like).copy_(flat_view(theirs, offset, like, transposed=was))
        offset += like.numel()


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
            copy_moments(getattr(self, name), state[name].to(self.flat.device), self.params, saved)
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


def row_views(
    params: Iterable[torch.Tensor],
    flat: torch.Tensor,
    layouts: Sequence[torch.Tensor] | None = None,
) -> None:
    """Copy stacked parameters `[N, ...]` into the matrix `flat` [N, P] and make them
    views of it: along each row, one after another in the order given, each laid
    out as its rows are (`row_view`), or as the rows of its match in `layouts` (a
    target network's population laid out as the optimizer's rows of its online
    one), as `RowAdam` lays out the networks it steps (so a second population of
    the same architecture is one more matrix of that layout: one op copies or
    averages every row)."""
    params = list(params)
    like = params if layouts is None else list(layouts)
    offset = 0
    with torch.no_grad():
        for p, layout in zip(params, like, strict=True):
            view = row_view(flat, offset, layout)
            view.copy_(p)
            p.data = view
            offset += p[0].numel()


def row_view(flat: torch.Tensor, offset: int, like: torch.Tensor) -> torch.Tensor:
    """Columns `offset`... of the matrix `flat` [N, P] as a tensor of the stacked
    `like`'s shape [N, ...], each row laid out as `like`'s rows are (`flat_view`):
    row-major, or a matrix stored as its transpose (`models.population`'s linear
    weights)."""
    n = like[0].numel()
    block = flat[:, offset : offset + n]
    if is_transposed(like[0]):
        return block.view(len(flat), like.shape[2], like.shape[1]).transpose(1, 2)
    return block.view(like.shape)


def _rows(stacked: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A stacked tensor [N, ...] as [N, P], each row laid out as the rows of `like`
    (a parameter) are (`row_view`): a view where it lies so already, as autograd
    leaves a transposed weight's gradient, else a copy."""
    if is_transposed(like[0]):
        return stacked.transpose(1, 2).reshape(len(stacked), -1)
    return stacked.reshape(len(stacked), -1)


CACHE_FLOATS = 1 << 18  # floats of a block of rows one optimizer step goes through at once


class RowAdam:
    """Adam for N networks of one architecture at once (`models.population`): the
    parameters given are stacked `[N, ...]`, and become views into one matrix
    `flat` [N, P] whose row i holds network i's parameters in the order and layout
    FlatAdam gives one network (gradients likewise in `flat_grad`). Each row has its
    own learning rate (`lr`: one, or one per row), its own gradient-norm clipping
    and its own step count: `step(rows)` may step some rows only (the others keep
    their parameters, moments and count), so row i is updated as FlatAdam would
    update network i alone, with FlatAdam's arithmetic in the same order (the step
    size and bias corrections a column of per-row values, computed in double
    precision as FlatAdam computes its Python numbers). `row_state(i)` and
    `load_row_state(i, ...)` read and write row i as a FlatAdam's saved state."""

    kind = "flat_adam"  # the FlatAdam state a row is saved as

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        lr: float | Iterable[float] = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.params = [p for p in params if p.requires_grad]
        if not self.params:
            raise ValueError(f"{type(self).__name__} got no parameters that require grad")
        first = self.params[0]
        self.rows = rows = first.shape[0]
        if any(p.shape[0] != rows or p.device != first.device for p in self.params):
            raise ValueError(
                f"{type(self).__name__} needs parameters stacked [N, ...] over one N, on one device"
            )
        total = sum(p[0].numel() for p in self.params)
        self.flat = torch.empty(rows, total, device=first.device, dtype=first.dtype)
        self.flat_grad = torch.zeros_like(self.flat)
        row_views(self.params, self.flat)
        rates = [float(lr)] * rows if isinstance(lr, (int, float)) else [float(x) for x in lr]
        if len(rates) != rows:
            raise ValueError(f"{type(self).__name__}: {len(rates)} learning rates for {rows} rows")
        # in double precision, as FlatAdam's Python numbers: a step size is rounded once
        self.base_lr = torch.tensor(rates, dtype=torch.float64)[:, None]
        self.lr = self.base_lr.clone()
        self.betas, self.eps = betas, eps
        self.exp_avg = torch.zeros_like(self.flat)
        self.exp_avg_sq = torch.zeros_like(self.flat)
        self.row_steps = np.zeros(rows, np.int64)  # steps each row took
        # what `flat_grad` holds for this step: nothing yet, `backward`'s gradients
        # ("autograd"), or those of `.grad` ("grad")
        self._source: str | None = None
        # a block of rows at a time on a CPU, each block's tensors small enough to stay
        # in cache through the update's passes (a network of 100k+ parameters: a row at
        # a time); on an accelerator, all at once
        cpu = self.flat.device.type == "cpu"
        self._block = min(rows, max(1, CACHE_FLOATS // total)) if cpu else rows
        # the step's two temporaries of a block's size, made once and reused by every
        # block: made anew each step, [8, 17k] of them took 3-6x the time of the
        # arithmetic in a training loop (fresh pages from the allocator each time)
        self._scratch = tuple(torch.empty_like(self.flat[: self._block]) for _ in range(2))

    @property
    def steps(self) -> int:
        """Steps of the row that took the most."""
        return int(self.row_steps.max())

    def backward(self, loss: torch.Tensor) -> None:
        """The gradients of `loss` (a scalar) into `flat_grad`, for `clip_grad_norm_`
        and `step`, in place of the parameters' `.grad` (set to None: a later
        `loss.backward()` before the step is the one stepped). `loss.backward()` does
        the same through `.grad`, where autograd first copies each gradient into
        the row-major layout it keeps for a view's (the rows are views of `flat`):
        of a linear weight stored (in, out), a transpose of the whole stack, one
        copy more for `flat_grad` to undo (4 agents' MinAtar DQN update with such
        weights: 10.9 ms through `.grad` against 7.3 here, one thread)."""
        grads = torch.autograd.grad(loss, self.params, allow_unused=True)
        for p in self.params:
            p.grad = None
        self._gather(grads)
        self._source = "autograd"

    def _gather_grads(self) -> None:
        """The parameters' gradients (`.grad`, after `loss.backward()`) into
        `flat_grad`, unless this step's are there already: `backward`'s, with no
        `.grad` set since, or `.grad`'s, gathered (and perhaps clipped) before."""
        if self._source == "grad":
            return
        if self._source == "autograd" and all(p.grad is None for p in self.params):
            return
        self._gather([p.grad for p in self.params])
        self._source = "grad"

    def _gather(self, grads: Sequence[torch.Tensor | None]) -> None:
        """`grads`, one per parameter, into `flat_grad`, one copy (a view of each
        where it lies in its row's layout already); a parameter without one
        contributes zeros."""
        rows = [
            _rows(g if g is not None else torch.zeros_like(p), p)
            for p, g in zip(self.params, grads, strict=True)
        ]
        torch.cat(rows, dim=1, out=self.flat_grad)

    def set_lr_fraction(self, fraction: float) -> None:
        """Every row's learning rate times `fraction` (annealing)."""
        torch.mul(self.base_lr, fraction, out=self.lr)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None
        self._source = None

    @torch.no_grad()
    def clip_grad_norm_(self, max_norm: float | torch.Tensor) -> torch.Tensor:
        """Each row's gradient scaled to a 2-norm of at most `max_norm` (FlatAdam's
        rule, per row; a tensor [N, 1]: each row's own); the rows' norms before
        clipping, [N]."""
        self._gather_grads()
        norm = torch.linalg.vector_norm(self.flat_grad, dim=1, keepdim=True)
        self.flat_grad.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
        return norm.squeeze(1)

    @torch.no_grad()
    def step(self, rows: np.ndarray | None = None) -> None:
        """A step of every row, or of the `rows` given (`[N]` bools); the gradients
        are `flat_grad` as `clip_grad_norm_` left it (gathered now if it did not run)."""
        self._gather_grads()
        self._source = None
        chosen = None if rows is None or bool(np.all(rows)) else np.flatnonzero(rows)
        if chosen is None:
            self.row_steps += 1
            # block by block (`_block`): the same arithmetic, element by element
            for a in range(0, self.rows, self._block):
                b = slice(a, a + self._block)
                state = (self.flat[b], self.exp_avg[b], self.exp_avg_sq[b])
                k = len(state[0])
                scratch = (self._scratch[0][:k], self._scratch[1][:k])
                self._update(*state, self.flat_grad[b], self.lr[b], self.row_steps[b], scratch)
            return
        if chosen.size == 0:
            return
        self.row_steps[chosen] += 1
        index = torch.as_tensor(chosen, device=self.flat.device)
        full = (self.flat, self.exp_avg, self.exp_avg_sq)
        flat, exp_avg, exp_avg_sq = part = [t.index_select(0, index) for t in full]
        grad = self.flat_grad.index_select(0, index)
        # the rows chosen at once (a step of some agents only): temporaries of their own
        scratch = (torch.empty_like(flat), torch.empty_like(flat))
        steps = self.row_steps[chosen]
        self._update(flat, exp_avg, exp_avg_sq, grad, self.lr[chosen], steps, scratch)
        for whole, rows_of in zip(full, part, strict=True):
            whole.index_copy_(0, index, rows_of)

    def _column(self, values: np.ndarray | torch.Tensor) -> torch.Tensor:
        """Per-row numbers computed in double precision as a column of the rows' dtype
        (rounded once, as FlatAdam's Python numbers are where a kernel reads them)."""
        column = torch.as_tensor(values, dtype=torch.float64).reshape(-1, 1)
        return column.to(self.flat.device, self.flat.dtype)

    def _update(
        self,
        flat: torch.Tensor,
        exp_avg: torch.Tensor,
        exp_avg_sq: torch.Tensor,
        grad: torch.Tensor,
        lr: torch.Tensor,
        steps: np.ndarray,
        scratch: tuple[torch.Tensor, torch.Tensor],
    ) -> None:
        """Adam's step on these rows (in place), FlatAdam's arithmetic op for op;
        `scratch`: two tensors of the rows' shape for its temporaries."""
        beta1, beta2 = self.betas
        denom, step = scratch
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step_size = self._column(lr.reshape(-1).numpy() / (1 - beta1**steps))
        torch.sqrt(exp_avg_sq, out=denom)
        denom.div_(self._column(np.sqrt(1 - beta2**steps))).add_(self.eps)
        # addcdiv_'s order, (value * t1) / t2
        flat.sub_(torch.mul(exp_avg, step_size, out=step).div_(denom))

    def _groups(self, i: int) -> list[dict[str, Any]]:
        return [{"lr": float(self.lr[i, 0]), "betas": self.betas, "eps": self.eps}]

    def row_state(self, i: int) -> dict[str, Any]:
        """Row i as `FlatAdam.state_dict` saves one network's optimizer."""
        return {
            "kind": self.kind,
            "steps": int(self.row_steps[i]),
            "exp_avg": self.exp_avg[i].detach().cpu().clone(),
            "exp_avg_sq": self.exp_avg_sq[i].detach().cpu().clone(),
            "param_groups": self._groups(i),
            "transposed": [is_transposed(p[0]) for p in self.params],
        }

    def load_row_state(self, i: int, state: dict[str, Any]) -> None:
        """Row i from a FlatAdam's saved state of a network of this architecture,
        whatever layout it names for each parameter (`transposed`; row-major in
        states saved before populations stored linear weights transposed)."""
        # saved row-major, or with the layout of its time (FlatAdam's `transposed`)
        saved = state.get("transposed", [False] * len(self.params))
        if (
            state.get("kind") != self.kind
            or state["exp_avg"].numel() != self.flat.shape[1]
            or len(saved) != len(self.params)
        ):
            raise UsageError(
                "optimizer state does not match this model (saved by another pararl "
                "version or for another network); start a new run instead of resuming"
            )
        self.row_steps[i] = int(state["steps"])
        rows = [p[0] for p in self.params]  # one network's parameters, as row i lays them out
        for name in ("exp_avg", "exp_avg_sq"):
            copy_moments(getattr(self, name)[i], state[name], rows, saved)


class RowRMSprop(RowAdam):
    """Centred RMSProp for N networks at once: `RowAdam`'s rows with `FlatRMSprop`'s
    arithmetic (`exp_avg` the running mean of the gradient, `exp_avg_sq` that of its
    square); a row saves as a FlatRMSprop's state."""

    kind = "flat_rmsprop"

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        lr: float | Iterable[float] = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
    ) -> None:
        super().__init__(params, lr=lr, eps=eps)
        self.alpha = alpha

    def _update(
        self,
        flat: torch.Tensor,
        exp_avg: torch.Tensor,
        exp_avg_sq: torch.Tensor,
        grad: torch.Tensor,
        lr: torch.Tensor,
        steps: np.ndarray,
        scratch: tuple[torch.Tensor, torch.Tensor],
    ) -> None:
        del steps  # RMSProp has no bias correction
        alpha = self.alpha
        avg, step = scratch
        exp_avg_sq.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        exp_avg.lerp_(grad, 1 - alpha)
        torch.addcmul(exp_avg_sq, exp_avg, exp_avg, value=-1, out=avg).sqrt_()
        torch.mul(grad, self._column(lr.reshape(-1).numpy()), out=step)
        flat.sub_(step.div_(avg.add_(self.eps)))  # FlatRMSprop's addcdiv_, as RowAdam's

    def _groups(self, i: int) -> list[dict[str, Any]]:
        return [{**super()._groups(i)[0], "alpha": self.alpha}]


__all__ = [
    "FlatAdam",
    "FlatRMSprop",
    "RowAdam",
    "RowRMSprop",
    "flat_view",
    "row_views",
    "views_into",
]
