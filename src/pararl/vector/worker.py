"""The worker side: commands executed on an `EnvBatch`, in a process or inline.

`execute` is shared by the process worker loop and the serial twin's inline
transport, so both run literally the same code for every command.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, NamedTuple

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from pararl.mp.errors import RemoteError
from pararl.mp.listen import SPIN_S, CommandWait
from pararl.mp.procs import ParentWatch
from pararl.mp.shared import SharedArrays
from pararl.vector.batch import BatchArrays, EnvBatch, InfoRows
from pararl.vector.frame_ring import FrameRing, StackSpec
from pararl.vector.infos import Packed, pack_infos
from pararl.vector.spaces import Pickled, Tree, collect, space_tree, unshared_leaves


@dataclass(frozen=True)
class BatchLayout:
    """What a worker needs to view the shared arrays as its batch."""

    observation_space: gym.Space
    action_space: gym.Space
    autoreset_mode: AutoresetMode
    size: int  # envs in the whole vector env
    stack: StackSpec | None = None  # frame stacks kept in rings (see `frames`)
    info_keys: tuple[str, ...] = ()  # info keys whose values travel in shared memory


def batch_arrays(arrays: dict[str, Any], layout: BatchLayout) -> BatchArrays:
    """A worker's view of the batch: the shared arrays, and a `Pickled` holder for
    each observation leaf that is not among them."""
    holders = unshared_leaves(layout.observation_space, layout.size, "obs", arrays, local=False)
    return BatchArrays(
        obs=observation_tree(layout, {**arrays, **holders}),
        actions=arrays.get("act"),
        rewards=arrays["rew"],
        terminations=arrays["term"],
        truncations=arrays["trunc"],
        final_obs=arrays.get("final"),
        pickled=[h for h in holders.values() if isinstance(h, Pickled)],
        infos={key: arrays[f"info.{key}"] for key in layout.info_keys},
    )


def observation_tree(layout: BatchLayout, arrays: dict[str, Any]) -> Tree:
    """The observations of the batch, by leaf: a `FrameRing` for stacked frames."""
    if layout.stack is not None:
        return FrameRing(arrays["obs"], arrays["obs.head"], layout.stack.padding)
    return space_tree(layout.observation_space, arrays, "obs")


class WithActions(NamedTuple):
    """A step command's data when the actions travel with it (not in shared memory)."""

    local_ids: list[int] | None
    actions: list[Any]


class WithObservations(NamedTuple):
    """A step or reset reply when observation leaves travel with it (pickled)."""

    infos: Packed | None
    observations: list[list[Any]]


def execute(batch: EnvBatch, command: str, data: Any) -> Any:
    """Run one command on `batch`; returns the reply payload (for step and reset:
    the infos, packed by position in the command's envs, in the order it named them,
    and the values of the observation leaves that travel pickled)."""
    if command == "step":
        if type(data) is WithActions:
            return _batched(batch, batch.step(data.local_ids, data.actions), data.local_ids)
        return _batched(batch, batch.step(data), data)
    if command == "reset":
        local_ids, seeds, options = data
        return _batched(batch, batch.reset(local_ids, seeds, options), local_ids)
    if command == "call":
        name, args, kwargs = data
        return batch.call(name, args, kwargs)
    if command == "call_each":
        name, local_ids, args = data
        return batch.call_each(name, local_ids, args)
    if command == "set_attr":
        name, values = data
        return batch.set_attr(name, values)
    if command == "check_spaces":
        return batch.check_spaces(*data)
    raise ValueError(f"unknown worker command {command!r}")


def _batched(
    batch: EnvBatch, rows: InfoRows, local_ids: Sequence[int] | None
) -> Packed | WithObservations | None:
    infos = _packed(batch, rows, local_ids)
    pickled = batch.arrays.pickled
    if not pickled:
        return infos  # the hot path: every observation is in shared memory
    return WithObservations(infos, collect(pickled, batch.rows_of(local_ids)))


def _packed(batch: EnvBatch, rows: InfoRows, local_ids: Sequence[int] | None) -> Packed | None:
    if not rows:
        return None
    if local_ids is None:
        return pack_infos((row - batch.offset, info) for row, info in rows)
    position = {batch.offset + local: j for j, local in enumerate(local_ids)}
    return pack_infos((position[row], info) for row, info in rows)


def make_envs(env_fns: Sequence[Callable[[], gym.Env]], offset: int) -> list[gym.Env]:
    envs = []
    for i, fn in enumerate(env_fns):
        try:
            envs.append(fn())
        except Exception as exc:
            raise EnvCreationError(offset + i) from exc
    return envs


class EnvCreationError(RuntimeError):
    def __init__(self, env_index: int) -> None:
        super().__init__(f"creating env {env_index} failed")
        self.env_index = env_index


def env_worker(
    conn: Connection,
    env_fns: Sequence[Callable[[], gym.Env]],
    offset: int,
    shared: SharedArrays,
    layout: BatchLayout,
    spin_s: float = SPIN_S,
) -> None:
    """Main loop of a worker process: build its envs, then serve commands until
    told to close, the parent goes away, or an env raises (reported, then exit)."""
    watch, listen = ParentWatch(), CommandWait(conn, spin_s)
    batch: EnvBatch | None = None
    try:
        batch = EnvBatch(
            make_envs(env_fns, offset),
            offset,
            batch_arrays(shared.arrays, layout),
            layout.autoreset_mode,
        )
        conn.send((True, None))  # ready
        while True:
            if not listen.wait(watch.interval):
                if watch.orphaned():
                    return
                continue
            command, data = conn.recv()
            if command == "close":
                return
            conn.send((True, execute(batch, command, data)))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        return  # the parent is gone or shutting us down
    except Exception as exc:
        env_index = getattr(exc, "env_index", None)
        if env_index is None and batch is not None:
            env_index = batch.failed_env
        report = RemoteError.of(exc, env_index)
        with contextlib.suppress(OSError, ValueError):
            conn.send((False, report))
    finally:
        if batch is not None:
            with contextlib.suppress(Exception):
                batch.close()
