"""Weights published through shared memory with a seqlock: a reader loads the newest
consistent weights, reports their version, and never loads a half-written vector."""

from __future__ import annotations

import multiprocessing as mp

import numpy as np
import torch

from pararl.models import QNetwork
from pararl.mp.shared import SharedArrays
from pararl.weights.shared import WeightPublisher, WeightReader, params_to_flat, weight_specs


def _pair(seed: int) -> tuple[QNetwork, QNetwork, WeightPublisher, WeightReader]:
    torch.manual_seed(seed)
    learner, actor = QNetwork(4, 2, (8,)), QNetwork(4, 2, (8,))
    arrays = SharedArrays(weight_specs(learner), mp.get_context()).arrays
    return learner, actor, WeightPublisher(arrays), WeightReader(arrays)


def _flat(model: QNetwork) -> np.ndarray:
    out = np.empty(sum(p.numel() for p in model.parameters()), np.float32)
    params_to_flat(model, out)
    return out


def test_reader_takes_the_newest_weights_and_their_version() -> None:
    learner, actor, publisher, reader = _pair(0)
    assert reader.version == -1
    publisher.publish(learner, 7)
    assert reader.refresh(actor)
    assert reader.version == 7
    np.testing.assert_array_equal(_flat(actor), _flat(learner))
    assert not reader.refresh(actor)  # nothing new: no reload
    with torch.no_grad():
        for p in learner.parameters():
            p.add_(1.0)
    publisher.publish(learner, 11)
    assert reader.refresh(actor)
    assert reader.version == publisher.version == 11
    np.testing.assert_array_equal(_flat(actor), _flat(learner))


def test_a_write_in_progress_is_never_loaded() -> None:
    learner, actor, publisher, reader = _pair(1)
    publisher.publish(learner, 1)
    reader.refresh(actor)
    before = _flat(actor)
    publisher.counter[0] += 1  # odd: the learner is writing
    publisher.flat[:] = 123.0  # half-written garbage
    assert not reader.refresh(actor)
    np.testing.assert_array_equal(_flat(actor), before)
    publisher.counter[0] += 1  # even again: written
    assert reader.refresh(actor)
    assert (_flat(actor) == 123.0).all()


def test_a_write_during_the_copy_is_not_loaded() -> None:
    learner, actor, publisher, reader = _pair(2)
    publisher.publish(learner, 1)
    reader.refresh(actor)
    before = _flat(actor)
    publisher.publish(learner, 2)
    copy = np.copyto

    def copy_then_overwritten(dst: np.ndarray, src: np.ndarray) -> None:
        copy(dst, src)
        publisher.counter[0] += 2  # the learner published again meanwhile

    np.copyto = copy_then_overwritten  # type: ignore[assignment]
    try:
        assert not reader.refresh(actor)
    finally:
        np.copyto = copy
    np.testing.assert_array_equal(_flat(actor), before)
    assert reader.refresh(actor)  # the next try gets it
