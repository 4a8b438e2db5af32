"""Actor processes of the off-policy learners (DQN, SAC, TD3): each steps a batch of envs
with its own CPU copy of the acting network, builds n-step transitions, and hands
them to the learner in chunks through a two-slot shared-memory outbox. Only slot
numbers and counts travel on the pipe. It samples through a `ChunkSampler`
(`samplers.chunks.sampler`); how it acts is its `ActingPolicy` (`samplers.chunks.explore`:
DQN's epsilon-greedy Q copy, SAC's squashed Gaussian).
A chunk holds whole-observation transitions (`replay.nstep`) or, when the env
stacks image frames, each new frame once (`replay.frame_steps`); Ape-X actors add
each transition's first priority, its TD error under their own Q copy; an env with
action masks, each transition's next mask (`envs.masks`).

Protocol (actor -> learner): `(True, Chunk)` when a slot is filled; the learner
answers `("ack", slot)` once it has copied the slot, and `("close", None)` to stop.
An actor with both slots full waits for an ack: that is the back-pressure that
keeps sampling in step with learning.
"""

from __future__ import annotations

import dataclasses
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from pararl import seeding
from pararl.mp.errors import envs_from
from pararl.mp.outbox import handle_messages
from pararl.mp.procs import ParentWatch
from pararl.mp.shared import ArraySpec, SharedArrays
from pararl.replay.frame_steps import FRAME_FIELDS, FrameSteps, frame_count
from pararl.replay.nstep import Transitions
from pararl.samplers.chunks.sampler import ActorSpec, ChunkSampler, Payload
from pararl.samplers.chunks.source import Chunk
from pararl.weights.shared import WeightReader

SLOTS = 2  # an outbox's: the actor fills one while the learner copies the other


def outbox_specs(index: int, spec: ActorSpec) -> dict[str, ArraySpec]:
    """Two slots of each payload field; frame fields have `frame_capacity` rows."""
    cap, f32, i64 = spec.capacity, np.dtype(np.float32), np.dtype(np.int64)
    policy = spec.policy
    fields: dict[str, tuple[tuple[int, ...], np.dtype]] = {
        "action": ((cap, *policy.action_shape), policy.action_dtype),
        "ret": ((cap,), f32),
        "discount": ((cap,), f32),
    }
    if spec.frame_stack:
        frames = spec.frame_capacity
        fields |= {
            "frames": ((frames, *spec.obs_shape[1:]), np.dtype(np.uint8)),
            "stream": ((frames,), i64),
            "prev": ((frames,), i64),
            "next": ((cap,), i64),
            "steps": ((cap,), i64),
        }
    elif spec.leaves:  # Dict and Tuple observations: a field per leaf
        for leaf in spec.leaves:
            obs = ((cap, *leaf.shape), leaf.dtype)
            fields |= {f"obs.{leaf.name}": obs, f"next_obs.{leaf.name}": obs}
    else:
        obs = ((cap, *spec.obs_shape), spec.obs_dtype)
        fields |= {"obs": obs, "next_obs": obs}
    if spec.priorities:
        fields["priority"] = ((cap,), f32)
    if spec.mask_size:
        fields["next_mask"] = ((cap, spec.mask_size), np.dtype(np.bool_))
    specs = {
        f"a{index}.{k}": ArraySpec((SLOTS, *shape), dtype) for k, (shape, dtype) in fields.items()
    }
    return specs | {"env_steps": ArraySpec((1,), i64)}


def read_slot(arrays: dict[str, np.ndarray], index: int, slot: int, chunk: Chunk) -> Payload:
    """A view of the payload in an outbox slot (copy before acking)."""
    p = f"a{index}."

    def rows(name: str) -> Any:
        if p + name not in arrays:  # Dict and Tuple observations: a field per leaf
            leaves = [k.removeprefix(f"{p}{name}.") for k in arrays if k.startswith(f"{p}{name}.")]
            return {leaf: rows(f"{name}.{leaf}") for leaf in leaves}
        count = chunk.frames if name in FRAME_FIELDS else chunk.count
        return arrays[p + name][slot, :count]

    priority = rows("priority") if p + "priority" in arrays else None
    if p + "frames" in arrays:
        return FrameSteps(
            frames=rows("frames"),
            stream=rows("stream"),
            prev=rows("prev"),
            next=rows("next"),
            steps=rows("steps"),
            action=rows("action"),
            ret=rows("ret"),
            discount=rows("discount"),
            priority=priority,
        )
    next_mask = rows("next_mask") if p + "next_mask" in arrays else None
    return Transitions(
        rows("obs"),
        rows("action"),
        rows("ret"),
        rows("next_obs"),
        rows("discount"),
        priority,
        next_mask,
    )


def write_slot(arrays: dict[str, np.ndarray], index: int, slot: int, batch: Payload) -> None:
    for f in dataclasses.fields(batch):
        value = getattr(batch, f.name)
        if isinstance(value, dict):  # a Dict or Tuple observation's leaves
            for leaf, rows in value.items():
                arrays[f"a{index}.{f.name}.{leaf}"][slot, : len(rows)] = rows
        elif value is not None:
            arrays[f"a{index}.{f.name}"][slot, : len(value)] = value


def actor_main(
    conn: Connection,
    index: int,
    spec: ActorSpec,
    shared: SharedArrays,
    seed: int,
    path: tuple[int, ...],
) -> None:
    """Act, chunk, send, repeat; until the learner says close or goes away (an env's
    failure names the run's env: this actor's first is `spec.stream_base`)."""
    with envs_from(spec.stream_base):
        seeding.seed_torch(seed, *path)
        arrays = shared.arrays
        sampler = ChunkSampler(spec, seed, path)
        weights = WeightReader(arrays)
        weights.refresh(sampler.net)

        def refresh(steps: int) -> None:
            if steps % spec.sync_every == 0:
                weights.refresh(sampler.net)

        watch, free, slot = ParentWatch(), [True] * SLOTS, 0
        conn.send((True, None))  # ready
        try:
            while True:
                batch, returns, busy = sampler.sample(lambda: int(arrays["env_steps"][0]), refresh)
                while not free[slot]:  # wait for the learner to take the older chunk
                    if not handle_messages(conn, free, watch):
                        return
                write_slot(arrays, index, slot, batch)
                free[slot] = False
                chunk = Chunk(
                    slot,
                    len(batch),
                    sampler.env_steps_per_chunk,
                    weights.version,
                    returns,
                    busy,
                    frame_count(batch),
                )
                conn.send((True, chunk))
                slot = (slot + 1) % SLOTS
                if conn.poll(0) and not handle_messages(conn, free, watch):
                    return
        finally:
            sampler.close()
