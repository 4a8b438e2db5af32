"""Importing Ray and joining a cluster.

Ray is an optional dependency: it is imported here, lazily, so that pararl without
it installed works, and `--backend ray` without it says how to get it. pararl
shuts down only a Ray instance it started itself; a cluster it joined, or one the
caller had already initialised (tests, notebooks), is left running.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from pararl import extras
from pararl.errors import UsageError
from pararl.mp.topology import physical_cores

_started = False  # whether `connect` started the Ray instance this process uses


def import_ray() -> ModuleType:
    """The `ray` module, or a UsageError that says how to install it."""
    return extras.require("ray", "ray", "--backend ray")


def connect(address: str | None, min_cpus: int = 1) -> ModuleType:
    """Join the cluster at `address` (`auto` or HOST:PORT), or with None start Ray on
    this machine with at least `min_cpus` logical CPUs (so that asking for more actors
    than cores oversubscribes, as local workers do, instead of waiting forever).
    Reuses a Ray instance already initialised in this process."""
    global _started
    ray = import_ray()
    if ray.is_initialized():
        return ray
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}
    if address is None:
        kwargs["num_cpus"] = max(physical_cores(), min_cpus)
    else:
        kwargs["address"] = address
    try:
        ray.init(**kwargs)
    except ConnectionError as exc:
        raise UsageError(
            f"--ray-address {address}: cannot join a Ray cluster there ({exc}); start one "
            "with `ray start --head` or leave --ray-address out to run Ray locally"
        ) from None
    _started = True
    return ray


def cluster_cpus() -> int:
    """Logical CPUs of the cluster this process is connected to."""
    return int(import_ray().cluster_resources().get("CPU", 1))


def ray_actors(workers: int | None, address: str | None, keep_for_learner: int) -> int:
    """Join (or start) the cluster; then `--workers`, or every CPU of the cluster but
    `keep_for_learner`, at least one."""
    connect(address, workers or 1)
    return workers or max(1, cluster_cpus() - keep_for_learner)


def disconnect() -> None:
    """Shut Ray down if `connect` started it (idempotent)."""
    global _started
    if _started:
        _started = False
        import_ray().shutdown()
