"""FlatAdam against torch.optim.Adam, and its flat-vector bookkeeping; FlatRMSprop
against torch.optim.RMSprop(centered=True), and its checkpoint; RowAdam and
RowRMSprop, row by row, against them."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch

from pararl.errors import UsageError
from pararl.models import ActorCritic, QNetwork
from pararl.optim import FlatAdam, FlatRMSprop, RowAdam, RowRMSprop, is_transposed


def _loss(model: torch.nn.Module, seed: int) -> torch.Tensor:
    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(seed))
    return (model(x) ** 2).mean()


@pytest.mark.parametrize(("lr", "eps", "clip"), [(1e-3, 1e-8, None), (2.5e-2, 1e-5, 0.1)])
def test_matches_torch_adam(lr: float, eps: float, clip: float | None) -> None:
    torch.manual_seed(0)
    ours = QNetwork(4, 3, (16, 16))
    theirs = copy.deepcopy(ours)
    opt_ours = FlatAdam(ours.parameters(), lr=lr, eps=eps)
    opt_theirs = torch.optim.Adam(theirs.parameters(), lr=lr, eps=eps)
    for step in range(25):
        for model, opt in ((ours, opt_ours), (theirs, opt_theirs)):
            opt.zero_grad(set_to_none=True)
            _loss(model.net, step).backward()
            if clip is not None and isinstance(opt, FlatAdam):
                opt.clip_grad_norm_(clip)
            elif clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_clip_grad_norm_matches_torch() -> None:
    torch.manual_seed(1)
    ours = ActorCritic(4, 2, True, (16, 16))
    theirs = copy.deepcopy(ours)
    opt = FlatAdam(ours.parameters())
    for max_norm in (1e-3, 1e3):  # clipped, then left alone
        for model in (ours, theirs):
            model.zero_grad()
            model.value(
                torch.randn(8, 4, generator=torch.Generator().manual_seed(2))
            ).sum().backward()
        expected = torch.nn.utils.clip_grad_norm_(theirs.parameters(), max_norm)
        torch.testing.assert_close(opt.clip_grad_norm_(max_norm), expected)
        for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
            if b.grad is not None:
                torch.testing.assert_close(a.grad, b.grad, rtol=1e-6, atol=1e-9)


def test_parameters_and_grads_are_views_of_the_flat_vectors() -> None:
    model = ActorCritic(4, 2, True, (8,))
    opt = FlatAdam(model.parameters())
    before = opt.flat.clone()
    opt.zero_grad()
    model.value(torch.ones(5, 4)).sum().backward()
    assert opt.flat_grad.abs().sum() > 0  # backward accumulated into the flat gradient
    opt.step()
    assert not torch.equal(before, opt.flat)
    trained = [p for p in model.parameters() if p.requires_grad]
    flat_from_params = torch.cat([p.detach().flatten() for p in trained])
    assert torch.equal(flat_from_params, opt.flat)  # the step moved the modules' weights


def test_state_round_trip_and_mismatch_error() -> None:
    model = QNetwork(4, 2, (8,))
    opt = FlatAdam(model.parameters(), lr=0.1)
    opt.zero_grad()
    _loss(model.net, 0).backward()
    opt.step()
    clone = FlatAdam(QNetwork(4, 2, (8,)).parameters())
    clone.load_state_dict(opt.state_dict())
    assert clone.steps == 1
    assert clone.param_groups[0]["lr"] == 0.1
    torch.testing.assert_close(clone.exp_avg_sq, opt.exp_avg_sq)
    with pytest.raises(UsageError, match="does not match"):
        FlatAdam(QNetwork(4, 2, (16,)).parameters()).load_state_dict(opt.state_dict())


def test_constructing_does_not_import_the_compiler() -> None:
    import subprocess
    import sys

    code = (
        "import sys, torch; from pararl.optim import FlatAdam; "
        "FlatAdam(torch.nn.Linear(2, 2).parameters()); "
        "print('torch._dynamo' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_matches_torch_centred_rmsprop() -> None:
    torch.manual_seed(0)
    ours = QNetwork(4, 3, (16, 16))
    theirs = copy.deepcopy(ours)
    opt_ours = FlatRMSprop(ours.parameters(), lr=2.5e-4, alpha=0.95, eps=0.01)
    opt_theirs = torch.optim.RMSprop(
        theirs.parameters(), lr=2.5e-4, alpha=0.95, eps=0.01, centered=True
    )
    for step in range(25):
        x = torch.randn(32, 4, generator=torch.Generator().manual_seed(step))
        for model, opt in ((ours, opt_ours), (theirs, opt_theirs)):
            opt.zero_grad(set_to_none=True)
            (model(x) ** 2).mean().backward()
            opt.step()
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_state_round_trips_and_is_not_taken_for_adam_state() -> None:
    q = QNetwork(4, 3, (8,))
    opt = FlatRMSprop(q.parameters(), lr=1e-3, alpha=0.95, eps=0.01)
    (q(torch.ones(2, 4)) ** 2).sum().backward()
    opt.step()
    again = FlatRMSprop(QNetwork(4, 3, (8,)).parameters(), lr=1e-3, alpha=0.95, eps=0.01)
    again.load_state_dict(opt.state_dict())
    torch.testing.assert_close(again.exp_avg_sq, opt.exp_avg_sq)
    assert again.param_groups[0]["alpha"] == 0.95
    with pytest.raises(UsageError):
        FlatAdam(QNetwork(4, 3, (8,)).parameters()).load_state_dict(opt.state_dict())


def test_a_weight_stored_in_out_keeps_its_layout_and_steps_as_a_row_major_one() -> None:
    """A weight stored transposed in memory (`weights_in_out`) stays so as a view of
    the flat vectors, its gradient too, and the steps give what the same network
    laid out row-major gets, whatever the order of the flat vectors."""
    from pararl.models.networks import weights_in_out

    torch.manual_seed(3)
    row_major = QNetwork(4, 3, (16, 16))
    in_out = weights_in_out(copy.deepcopy(row_major))
    first = in_out.net[0].weight
    assert first.stride() == (1, 16)
    assert first.t().is_contiguous()
    opts = [FlatRMSprop(m.parameters(), lr=1e-2, alpha=0.95, eps=0.01) for m in (row_major, in_out)]
    for step in range(10):
        for model, opt in zip((row_major, in_out), opts, strict=True):
            opt.zero_grad()
            _loss(model.net, step).backward()
            opt.clip_grad_norm_(0.5)
            opt.step()
    assert in_out.net[0].weight.stride() == (1, 16)
    assert in_out.net[0].weight.grad is not None
    assert in_out.net[0].weight.grad.stride() == (1, 16)
    flat = opts[1].flat
    assert in_out.net[0].weight.data_ptr() == flat.data_ptr()  # still a view of the vector
    for a, b in zip(row_major.parameters(), in_out.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_moments_saved_row_major_load_into_a_weight_stored_in_out() -> None:
    """A checkpoint's optimizer state from a network whose weights were all stored
    row-major (runs saved before `weights_in_out`) resumes into the same network with
    a weight stored (in, out): each moment lands on its own weight, and the next
    steps are the row-major network's."""
    from pararl.models.networks import weights_in_out

    torch.manual_seed(4)
    row_major = QNetwork(4, 3, (16, 16))
    opt = FlatRMSprop(row_major.parameters(), lr=1e-2, alpha=0.95, eps=0.01)
    for step in range(3):
        opt.zero_grad()
        _loss(row_major.net, step).backward()
        opt.step()
    state = opt.state_dict()
    del state["transposed"]  # as saved before the layout was recorded
    in_out = weights_in_out(copy.deepcopy(row_major))
    resumed = FlatRMSprop(in_out.parameters(), lr=1e-2, alpha=0.95, eps=0.01)
    resumed.load_state_dict(state)
    for step in range(3, 6):
        for model, o in ((row_major, opt), (in_out, resumed)):
            o.zero_grad()
            _loss(model.net, step).backward()
            o.step()
    for a, b in zip(row_major.parameters(), in_out.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    again = FlatRMSprop(weights_in_out(copy.deepcopy(row_major)).parameters(), lr=1e-2)
    again.load_state_dict(resumed.state_dict())  # saved with its layout: loads as it is
    torch.testing.assert_close(again.exp_avg_sq, resumed.exp_avg_sq)


@pytest.mark.parametrize(
    ("rows", "flat", "settings"),
    [
        (RowAdam, FlatAdam, {"lr": 2.5e-3}),
        (RowRMSprop, FlatRMSprop, {"lr": 2.5e-4, "alpha": 0.95, "eps": 0.01}),
    ],
)
@pytest.mark.parametrize("hidden", [(16, 16), (400, 400)])
def test_each_row_steps_as_its_network_alone_bit_for_bit(
    rows: type[RowAdam], flat: type[FlatAdam], settings: dict[str, Any], hidden: tuple[int, int]
) -> None:
    """A population's optimizer (`--seeds`): row i, clipped and stepped with the others
    or left out of a step, is network i's FlatAdam (FlatRMSprop) exactly, and saves
    as its state; all rows in one block, and (400 x 400: 163k parameters a row) a row
    a block."""
    torch.manual_seed(5)
    nets = [QNetwork(4, 3, hidden) for _ in range(3)]
    alone = [copy.deepcopy(n) for n in nets]
    names = [name for name, _ in nets[0].named_parameters()]
    stacked = [
        torch.nn.Parameter(torch.stack([n.get_parameter(k).detach() for n in nets])) for k in names
    ]
    together = rows(stacked, **settings)
    assert together._block == (3 if hidden == (16, 16) else 1)
    optimizers = [flat(a.parameters(), **settings) for a in alone]
    draws = torch.Generator().manual_seed(6)
    for step in range(30):
        grads = [torch.randn(p.shape, generator=draws) for p in stacked]
        stepped = np.array([True, step % 3 != 0, step % 2 == 0])
        for p, g in zip(stacked, grads, strict=True):
            p.grad = g.clone()
        together.clip_grad_norm_(1.0)
        together.step(stepped)
        for i in np.flatnonzero(stepped):
            optimizers[i].zero_grad()
            for p, g in zip(alone[i].parameters(), grads, strict=True):
                p.grad.copy_(g[i])
            optimizers[i].clip_grad_norm_(1.0)
            optimizers[i].step()
    for i, one in enumerate(optimizers):
        assert torch.equal(together.flat[i], one.flat)
        saved, theirs = together.row_state(i), one.state_dict()
        assert saved["steps"] == theirs["steps"] == int(together.row_steps[i])
        assert saved["kind"] == theirs["kind"]
        assert saved["param_groups"] == theirs["param_groups"]
        for moment in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(saved[moment], theirs[moment])


def test_a_populations_rows_keep_its_weights_in_out_and_save_and_load_either_layout() -> None:
    """A population of networks whose weights lie (in, out) in memory keeps them so
    (`StackedLinear`), as views of the optimizer's rows; `backward` gathers the
    gradients autograd gives as `.grad` would; a row steps as its network alone
    (row-major, FlatRMSprop) does, bit for bit, saves with its layout named (a
    network alone loads it), and a state saved row-major loads onto its own weights."""
    from pararl.models.networks import weights_in_out
    from pararl.models.population import bind, stacked

    torch.manual_seed(7)
    alone = [QNetwork(4, 3, (16, 16)) for _ in range(2)]
    nets = [weights_in_out(copy.deepcopy(n)) for n in alone]
    twin = stacked(nets)
    settings: dict[str, Any] = {"lr": 1e-2, "alpha": 0.95, "eps": 0.01}
    together = RowRMSprop(twin.parameters(), **settings)
    bind(nets, twin)  # each network's weights: views of its row
    weights = [p for p in together.params if p.dim() == 3]
    assert len(weights) == 3
    assert all(is_transposed(p[i]) for p in weights for i in range(2))
    assert all(is_transposed(net.get_parameter(n)) for net in nets for n in ("net.0.weight",))
    x = torch.randn(2 * 32, 4, generator=torch.Generator().manual_seed(1))
    together.backward((twin(x) ** 2).mean())
    assert all(p.grad is None for p in together.params)
    by_autograd = together.flat_grad.clone()
    (twin(x) ** 2).mean().backward()
    together.zero_grad()  # drops what `backward` gathered: `.grad` is read again
    (twin(x) ** 2).mean().backward()
    together._gather_grads()
    assert torch.equal(together.flat_grad, by_autograd)
    together.zero_grad()
    optimizers = [FlatRMSprop(a.parameters(), **settings) for a in alone]
    draws = torch.Generator().manual_seed(8)
    for _ in range(5):  # row-major gradients, as a network alone's come
        grads = [torch.randn(p.shape, generator=draws) for p in together.params]
        for p, g in zip(together.params, grads, strict=True):
            p.grad = g.clone()
        together.step()
        for i, one in enumerate(optimizers):
            for p, g in zip(alone[i].parameters(), grads, strict=True):
                p.grad = g[i].clone()
            one.step()
    for i, (net, one) in enumerate(zip(alone, optimizers, strict=True)):
        for a, b in zip(nets[i].parameters(), net.parameters(), strict=True):
            assert torch.equal(a, b)
        saved = together.row_state(i)
        assert saved["transposed"] == [p.dim() == 3 for p in together.params]
        loaded = FlatRMSprop(copy.deepcopy(net).parameters(), **settings)
        loaded.load_state_dict(saved)
        theirs = one.state_dict()
        assert not any(theirs["transposed"])
        fresh = RowRMSprop(stacked([copy.deepcopy(n) for n in nets]).parameters(), **settings)
        fresh.load_row_state(i, theirs)
        for moment in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(getattr(loaded, moment), getattr(one, moment))
            assert torch.equal(getattr(fresh, moment)[i], getattr(together, moment)[i])


def test_backward_steps_the_latest_gradients_and_a_bad_layout_list_is_refused() -> None:
    """`RowAdam.backward` gathers its loss's gradients in place of `.grad`; a
    `loss.backward()` after it, before the step, is the one stepped (nothing stale);
    a saved row state whose layout list does not fit the network is refused in one
    line before anything changes."""
    from pararl.models.population import stacked

    torch.manual_seed(9)
    twin = stacked([QNetwork(4, 3, (8, 8)) for _ in range(2)])
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(2))
    opt = RowAdam(twin.parameters(), lr=0.1)
    before = [p.detach().clone() for p in opt.params]
    latest = torch.autograd.grad(-twin(x).sum(), opt.params)
    opt.backward(twin(x).sum())  # then, before the step, another loss through .grad
    (-twin(x).sum()).backward()
    opt.step()
    # Adam's first step moves each weight by lr against its gradient's sign: the
    # latest loss's, not the first's (its opposite)
    for p, b, g in zip(opt.params, before, latest, strict=True):
        some = g.abs() > 1e-6
        assert torch.equal(torch.sign((p.detach() - b)[some]), -torch.sign(g[some]))
    state = opt.row_state(0)
    steps = opt.row_steps.copy()
    with pytest.raises(UsageError, match="does not match this model"):
        opt.load_row_state(1, {**state, "transposed": state["transposed"][:-1]})
    assert (opt.row_steps == steps).all()
