"""Off-policy actor processes (DQN, SAC, TD3) as a `ChunkSource`: each actor
(`samplers.chunks.actor`) steps its envs with its own CPU copy of the acting network
and hands chunks of transitions over through a two-slot shared-memory outbox;
weights come back through shared memory (`weights.shared`). Only slot numbers,
counts and acks travel on the pipes."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Generator
from typing import Any

from torch import nn

from pararl.mp.errors import WorkerError
from pararl.mp.procs import ProcessGroup
from pararl.mp.shared import SharedArrays
from pararl.samplers.chunks.actor import actor_main, outbox_specs, read_slot
from pararl.samplers.chunks.due import CHUNK_TIMEOUT_S, ChunksDue
from pararl.samplers.chunks.sampler import ActorSpec, Payload
from pararl.samplers.chunks.source import Chunk
from pararl.weights.shared import WeightPublisher, weight_specs

READY_TIMEOUT_S = 120.0  # an actor builds its envs and net before it says ready


class ActorPool:
    """The actor processes and their shared memory (outboxes + published weights).

    Actor i's random streams are named `(i, restarts of i, start_steps)` under the
    run's seed (`pararl.seeding`): a restarted actor, or a resumed run, never
    replays the envs or exploration of an earlier one."""

    def __init__(
        self,
        specs: list[ActorSpec],
        net: nn.Module,
        version: int,
        seed: int,
        start_steps: int,
        restart_actors: bool = False,
        report: Callable[[str], None] = print,
        chunk_timeout_s: float = CHUNK_TIMEOUT_S,
    ) -> None:
        self.specs, self.report, self.restart_actors = specs, report, restart_actors
        self.seed, self.start_steps = seed, start_steps
        self.restarts = [0] * len(specs)
        arrays = weight_specs(net)
        for i, spec in enumerate(specs):
            arrays.update(outbox_specs(i, spec))
        ctx = mp.get_context()
        self.shared = SharedArrays(arrays, ctx)
        self.arrays = self.shared.arrays
        self.publisher = WeightPublisher(self.arrays)
        self.publisher.publish(net, version)
        # the run's env steps before the first chunk is taken: a resumed run's actors
        # explore by its schedule where it is (epsilon, uniform first actions), not at 0
        self.arrays["env_steps"][0] = start_steps
        self.group = ProcessGroup(
            actor_main, [self._args(i) for i in range(len(specs))], ctx, name="pararl-actor"
        )
        self.group.await_ready(READY_TIMEOUT_S)
        self._next = 0  # the actor whose chunk is taken first next time (round robin)
        self.due = ChunksDue(self.group, chunk_timeout_s)

    def _args(self, index: int) -> tuple[Any, ...]:
        path = (index, self.restarts[index], self.start_steps)
        return (index, self.specs[index], self.shared, self.seed, path)

    def restart(self, index: int) -> None:
        self.restarts[index] += 1
        self.group.restart(index, self._args(index))
        # only its "ready": the others' next replies are chunks, for `chunks`
        self.group.await_ready(READY_TIMEOUT_S, [index])
        self.due.started(index)

    @property
    def num_actors(self) -> int:
        return len(self.specs)

    @property
    def version(self) -> int:
        return self.publisher.version

    def publish(self, net: nn.Module, version: int) -> None:
        self.publisher.publish(net, version)

    def set_env_steps(self, env_steps: int) -> None:
        self.arrays["env_steps"][0] = env_steps

    def chunks(self, wait: float) -> Generator[tuple[int, Payload, Chunk], None, None]:
        """Arrived chunks as views of their outbox slots, round robin from the actor
        after the last taken (a caller that takes one at a time starves none); a slot
        is acked (freed) once the caller asks for the next chunk, or stops asking
        (closes this generator). A failed actor is replaced if `restart_actors`, else
        raised."""
        try:
            ready = self.group.ready(range(len(self.group)), wait)
            self.due.check(ready)  # an actor silent too long: restarted, or raised
            first = next((k for k, index in enumerate(ready) if index >= self._next), 0)
            for index in ready[first:] + ready[:first]:
                chunk: Chunk = self.group.receive(index)
                self._next = (index + 1) % len(self.group)
                self.due.received(index)
                try:
                    yield index, read_slot(self.arrays, index, chunk.slot, chunk), chunk
                finally:
                    self.group.send(index, ("ack", chunk.slot))
                    self.due.acked(index)
        except WorkerError as exc:
            if not self.restart_actors:
                raise
            first_line = str(exc).splitlines()[0]
            self.report(
                f"pararl: actor {exc.worker} failed ({first_line}); restarting it, replay data kept"
            )
            self.restart(exc.worker)

    def close(self) -> None:
        self.group.close()


__all__ = ["ActorPool"]
