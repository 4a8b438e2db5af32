"""Weights to an acting copy in this process: copied into it unless the learner's
own network acts; the version follows each publication."""

from __future__ import annotations

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
