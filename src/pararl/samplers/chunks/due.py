"""When an actor process owes the learner a chunk, and how long it may take.

An actor fills the two slots of its outbox (`samplers.chunks.actor`) and waits for an
ack when both are full: that wait is the back-pressure that holds it to the learner.
With a slot free it is stepping its envs, and its next chunk is due. `ChunksDue`
keeps, per actor, its free slots and since when a chunk has been due; one due for
longer than the timeout (an env stuck in a native call) is a `WorkerTimeoutError`
with the actor's stack, so that a run never waits for ever on a silent actor."""

from __future__ import annotations

import time
from collections.abc import Collection

from pararl.mp.procs import ProcessGroup
from pararl.samplers.chunks.actor import SLOTS

# the longest an actor with a free slot may take to send its next chunk (a compile or
# a slow env step is seconds; an env stuck in a native call, for ever)
CHUNK_TIMEOUT_S = 600.0


class ChunksDue:
    """The free slots of each of `group`'s actors and since when a chunk is due."""

    def __init__(self, group: ProcessGroup, timeout_s: float = CHUNK_TIMEOUT_S) -> None:
        self.group, self.timeout_s = group, timeout_s
        self._free = [SLOTS] * len(group)
        self._since: list[float | None] = [time.monotonic()] * len(group)

    def started(self, index: int) -> None:
        """Actor `index` (re)started: both slots free."""
        self._free[index], self._since[index] = SLOTS, time.monotonic()

    def received(self, index: int) -> None:
        """A chunk came from actor `index`: a slot taken; the next is due if one is free."""
        self._free[index] -= 1
        self._since[index] = time.monotonic() if self._free[index] else None

    def acked(self, index: int) -> None:
        """A slot of actor `index` given back: a chunk is due, if none was."""
        self._free[index] += 1
        if self._since[index] is None:
            self._since[index] = time.monotonic()

    def check(self, ready: Collection[int]) -> None:
        """Raise for an actor (not among `ready`) whose chunk is overdue."""
        now = time.monotonic()
        for index, since in enumerate(self._since):
            if since is not None and now - since > self.timeout_s and index not in ready:
                raise self.group.timeout_error(
                    index, f"actor sent no chunk in {self.timeout_s:g} s with a free slot"
                )


__all__ = ["CHUNK_TIMEOUT_S", "ChunksDue"]
