"""The actor's side of a shared-memory outbox: which of its slots the learner has
taken, and the learner's messages on the pipe. Off-policy actors
(`samplers.chunks.actor`) and asynchronous PPO's (`samplers.rollout.actors`) both
fill a slot, send its number, and wait for an `("ack", slot)` before filling it
again; `("close", None)` stops them; any other message only wakes them (PPO's
`("version", v)`: new weights are in the ring)."""

from __future__ import annotations

from multiprocessing.connection import Connection

from pararl.mp.procs import ParentWatch


def handle_messages(conn: Connection, free: list[bool], watch: ParentWatch) -> bool:
    """Wait (bounded: `watch.interval`) for the learner's messages and mark the acked
    slots free; False when the actor should stop (told to, or orphaned)."""
    if not conn.poll(watch.interval):
        return not watch.orphaned()
    while conn.poll(0):
        command, data = conn.recv()
        if command == "close":
            return False
        if command == "ack":
            free[data] = True
    return True


__all__ = ["handle_messages"]
