"""FlatRMSprop against torch.optim.RMSprop(centered=True), and its checkpoint."""

from __future__ import annotations

import copy

import pytest
import torch

from pararl.errors import UsageError
from pararl.models import QNetwork
from pararl.optim import FlatAdam, FlatRMSprop


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
