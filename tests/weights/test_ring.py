"""The weight ring: a version is read back exactly, buffers and 0-d tensors too; a
version not yet written, overwritten, or being written is refused."""

from __future__ import annotations

import torch
from torch import nn

from pararl.mp.shared import local_arrays
from pararl.weights.ring import WeightRing, ring_specs


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 2)
        self.register_buffer("count", torch.tensor(0.0))  # 0-d, as running statistics are


def _set(net: Net, version: int) -> Net:
    with torch.no_grad():
        net.linear.weight.fill_(version)
        net.count.fill_(10 * version)
    return net


def test_each_version_reads_back_exactly_until_it_is_overwritten() -> None:
    net = Net()
    ring = WeightRing.holding(local_arrays(ring_specs(net, 2)), _set(net, 0))
    reader = Net()
    assert not ring.holds(1)
    assert not ring.load(reader, 1)
    ring.publish(_set(net, 1), 1)
    for version in (0, 1):  # two slots: both held
        assert ring.load(reader, version)
        assert torch.all(reader.linear.weight == version)
        assert reader.count.item() == 10 * version
    ring.publish(_set(net, 2), 2)  # into version 0's slot
    assert not ring.holds(0)
    assert not ring.load(reader, 0)
    assert ring.load(reader, 2)
    assert reader.count.item() == 20


def test_a_slot_being_written_is_not_read() -> None:
    net = Net()
    ring = WeightRing.holding(local_arrays(ring_specs(net, 1)), _set(net, 3))
    ring.versions[0] = -1  # as `publish` leaves it while it copies
    reader = _set(Net(), 7)
    assert not ring.load(reader, 0)
    assert torch.all(reader.linear.weight == 7)  # left as it was
