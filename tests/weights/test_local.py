"""Weights to an acting copy in this process: copied into it unless the learner's
own network acts; the version follows each publication."""

from __future__ import annotations

import pytest
import torch

from pararl.models import QNetwork
from pararl.weights.local import LocalCopy


def test_a_copy_gets_the_weights_and_the_same_module_is_left_alone() -> None:
    learner, copy = QNetwork(4, 2, (8,)), QNetwork(4, 2, (8,))
    weights = LocalCopy(copy)
    assert weights.version == -1
    weights.publish(learner, 7)
    assert weights.version == 7
    for a, b in zip(learner.parameters(), copy.parameters(), strict=True):
        assert torch.equal(a, b)
    same = LocalCopy(learner, version=3)
    same.publish(learner, 4)  # acting with the learner's own net: nothing to copy
    assert same.version == 4


def test_a_delayed_copy_acts_with_the_weights_of_delay_updates_ago() -> None:
    learner, acting = QNetwork(4, 2, (8,)), QNetwork(4, 2, (8,))
    weights = LocalCopy(acting, version=0, delay=3)
    published = {}
    for version in range(8):
        with torch.no_grad():
            for p in learner.parameters():
                p.add_(1.0)
        published[version] = [p.clone() for p in learner.parameters()]
        weights.publish(learner, version)
        # the first weights until 3 updates have passed, then those 3 updates old
        acted = max(0, version - 3)
        assert (weights.version, weights.newest) == (acted, version)
        for a, b in zip(published[acted], acting.parameters(), strict=True):
            assert torch.equal(a, b)
    assert len(weights._waiting) <= 3  # only the publications still to come are kept


def test_a_delayed_copy_refuses_the_learners_own_network() -> None:
    learner = QNetwork(4, 2, (8,))
    with pytest.raises(ValueError, match="own network"):
        LocalCopy(learner, delay=2).publish(learner, 0)
