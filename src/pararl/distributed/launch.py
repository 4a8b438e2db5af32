"""Forming the process group of the replicas: spawned here, or started by torchrun;
and the group's own messages (`share_object`: rank 0's start state for all;
`agree`: rank 0's flag, e.g. "stop now").

Locally, this process is rank 0 and starts ranks 1..N-1 as children under
`ProcessGroup` (ignored SIGINT, forwarded tracebacks, death noticed through the
process sentinels, nothing left behind by `close`). They meet on a free loopback
port. Under `torchrun` (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set), every rank
is already running and joins through the `env://` rendezvous instead.

A collective never waits forever: the group is created with a timeout, and a rank
that dies closes its sockets, which fails the others' collective at once. Locally,
`LocalReplicas.explain` then turns that failure into the dead replica's own error.
"""

from __future__ import annotations

import contextlib
import datetime
import multiprocessing as mp
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from pararl.errors import UsageError
from pararl.mp.procs import ProcessGroup
from pararl.vector.errors import WorkerError

COLLECTIVE_TIMEOUT_S = 300.0  # longest wait in one collective (rank 0 may be evaluating)
START_TIMEOUT_S = 120.0  # children report ready within this
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


class CollectiveError(RuntimeError):
    """A collective failed on this rank: another rank died, or the timeout passed."""


@dataclass(frozen=True)
class Rendezvous:
    """Where and as whom a replica joins the group."""

    rank: int
    world_size: int
    init_method: str
    local_rank: int = 0
    local_world_size: int = 1


def from_environment(env: dict[str, str] | None = None) -> Rendezvous | None:
    """The rendezvous `torchrun` describes in the environment, or None outside it."""
    env = dict(os.environ) if env is None else env
    present = [name for name in TORCHRUN_VARS if name in env]
    if not present:
        return None
    missing = [name for name in TORCHRUN_VARS if name not in env]
    if missing:
        raise UsageError(
            f"{', '.join(present)} set but not {', '.join(missing)}; launch with torchrun "
            "or set all of RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT"
        )
    try:
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
        local_rank = int(env.get("LOCAL_RANK", "0"))
        local_world = int(env.get("LOCAL_WORLD_SIZE", str(world)))
    except ValueError as exc:
        raise UsageError(f"torchrun variables must be integers: {exc}") from None
    if not 0 <= rank < world:
        raise UsageError(f"RANK {rank} is not in [0, WORLD_SIZE {world})")
    return Rendezvous(rank, world, "env://", local_rank, local_world)


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def local_rendezvous(world_size: int) -> list[Rendezvous]:
    """One rendezvous per rank of a group on this machine (rank 0 hosts the store)."""
    url = f"tcp://127.0.0.1:{free_loopback_port()}"
    return [Rendezvous(r, world_size, url, r, world_size) for r in range(world_size)]


def replica_device(device: torch.device, rdv: Rendezvous) -> torch.device:
    """CUDA replicas on one machine take its GPUs in turn (by local rank)."""
    if device.type != "cuda":
        return device
    return torch.device("cuda", rdv.local_rank % torch.cuda.device_count())


def backend_for(device: torch.device, rdv: Rendezvous) -> str:
    """NCCL when every local replica has a GPU of its own (NCCL refuses two ranks on
    one GPU); gloo otherwise, which reduces CUDA tensors too, through the host."""
    if device.type == "cuda" and rdv.local_world_size <= torch.cuda.device_count():
        return "nccl"
    return "gloo"


def join(rdv: Rendezvous, device: torch.device) -> None:
    """Join the group (blocks until every rank has joined, at most the timeout)."""
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend_for(device, rdv),
        init_method=rdv.init_method,
        rank=rdv.rank,
        world_size=rdv.world_size,
        timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_S),
    )


def leave() -> None:
    """Leave the group if in one (idempotent; never raises)."""
    if dist.is_available() and dist.is_initialized():
        with contextlib.suppress(Exception):
            dist.destroy_process_group()


def agree(flag: bool, device: torch.device, src: int = 0) -> bool:
    """Rank `src`'s `flag`, on every rank (e.g. "stop now")."""
    value = torch.tensor([int(flag)], dtype=torch.int32, device=device)
    dist.broadcast(value, src=src)
    return bool(value.item())


def share_object(obj: Any, device: torch.device, src: int = 0) -> Any:
    """Rank `src`'s picklable `obj`, on every rank (what the others pass is ignored)."""
    box = [obj]
    dist.broadcast_object_list(box, src=src, device=device)
    return box[0]


class LocalReplicas:
    """Ranks 1..N-1 as child processes of this one (rank 0).

    `target(conn, rdv, *args)` runs in each child; it must send one message once it
    has started (before joining the group), so that a child that cannot even start
    is reported at once instead of after the rendezvous timeout.
    """

    def __init__(
        self,
        target: Callable[..., None],
        rendezvous: list[Rendezvous],
        args: tuple[Any, ...],
    ) -> None:
        children = [(rdv, *args) for rdv in rendezvous[1:]]
        self.group = ProcessGroup(target, children, mp.get_context(), name="pararl-replica")
        try:
            self.group.await_ready(START_TIMEOUT_S)
        except WorkerError as exc:
            self.close()
            raise self._as_rank(exc) from None

    @staticmethod
    def _as_rank(exc: WorkerError) -> WorkerError:
        """Child i of the group is rank i + 1."""
        rank = exc.worker + 1
        message = str(exc).split("\n\n--- traceback", 1)[0].split(": ", 1)[-1]
        return WorkerError(
            rank,
            f"replica rank {rank} failed: {message}",
            exitcode=exc.exitcode,
            remote_traceback=exc.remote_traceback,
        )

    def explain(self, failure: BaseException, wait_s: float = 5.0) -> BaseException:
        """The error to raise for a failed collective: the child that failed first,
        with its rank and traceback, rather than the ranks whose collective merely
        broke because of it (`CollectiveError`); `failure` itself if no child failed."""
        deadline = time.monotonic() + wait_s
        pending = set(range(len(self.group)))
        errors: list[WorkerError] = []
        while pending and (left := deadline - time.monotonic()) > 0:
            try:
                for i in self.group.ready(sorted(pending), left):
                    pending.discard(i)
                    self.group.receive(i)  # a failure report raises
            except WorkerError as exc:
                pending.discard(exc.worker)
                errors.append(exc)
                deadline = min(deadline, time.monotonic() + 0.5)  # the others follow at once
        causes = [e for e in errors if CollectiveError.__name__ not in str(e)] or errors
        return self._as_rank(causes[0]) if causes else failure

    def close(self) -> None:
        """Let the children finish (they leave on the stop flag), then take them down."""
        self.group.close()
