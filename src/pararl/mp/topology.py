"""How many worker processes this machine can really run in parallel, and how to
split envs among them."""

from __future__ import annotations

import os
from pathlib import Path


def available_cpus() -> list[int]:
    """Logical CPUs this process may run on (its affinity mask)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def physical_cores() -> int:
    """Physical cores among the CPUs this process may run on.

    `os.cpu_count()` counts hyper-threads and ignores the affinity mask (and so
    containers' CPU sets); trusting it oversubscribes the machine. Reads Linux's
    topology files; elsewhere falls back to psutil, then to the logical count.
    """
    cpus = available_cpus()
    cores: set[tuple[str, str]] = set()
    for cpu in cpus:
        topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            package = (topo / "physical_package_id").read_text().strip()
            core = (topo / "core_id").read_text().strip()
        except OSError:
            return _fallback_physical(len(cpus))
        cores.add((package, core))
    return max(1, len(cores))


def _fallback_physical(logical: int) -> int:
    try:
        import psutil

        count = psutil.cpu_count(logical=False)
    except ImportError:  # pragma: no cover - psutil is a dependency
        count = None
    return max(1, min(count or logical, logical))


def split_evenly(num_items: int, num_parts: int) -> list[range]:
    """Contiguous ranges covering `range(num_items)`; sizes differ by at most one."""
    if num_parts < 1:
        raise ValueError(f"num_parts must be >= 1, got {num_parts}")
    base, extra = divmod(num_items, num_parts)
    ranges, start = [], 0
    for part in range(num_parts):
        stop = start + base + (1 if part < extra else 0)
        ranges.append(range(start, stop))
        start = stop
    return ranges
