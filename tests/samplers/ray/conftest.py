"""One Ray instance for all the Ray tests of this package (start-up takes seconds here),
shut down after the last of them: its daemons poll, and left running they slowed the
rest of the suite (the vector conformance tests ran 3.5x slower beside them). A simulated
cluster of two nodes with one CPU each (`ray.cluster_utils.Cluster`), which is what
placement, actor deaths and a driver joining an address need; a one-node
`ray.init` would add start-up time and test nothing more. The finalizer shuts Ray
down and checks that none of its processes outlive it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import psutil
import pytest


def _children() -> list[psutil.Process]:
    """This process's descendants that belong to Ray (daemons, workers, actors);
    other tests' processes (a forkserver, say) live on their own terms."""
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            # Ray's daemons are binaries or scripts in its package directory; its
            # workers rename themselves `ray::...`
            args = p.cmdline()
            ours = args and (args[0].startswith("ray::") or "/ray/" in args[0])
            script = any(a.endswith(".py") and "/ray/" in a for a in args)
            if p.is_running() and (ours or script):
                found.append(p)
        except psutil.Error:
            continue
    return found


def _assert_no_ray_processes(before: set[int], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        left = [p for p in _children() if p.pid not in before]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    names = []
    for p in left:
        try:
            names.append(f"{p.pid} {' '.join(p.cmdline())[:200]}")
        except psutil.NoSuchProcess:
            continue
    assert not names, f"Ray processes left after shutdown: {names}"


@pytest.fixture(scope="package")
def ray_kind() -> Iterator[str]:
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    before = {p.pid for p in _children()}
    # no dashboard (as pararl starts Ray): nothing here uses it, and its processes
    # were the slowest to start and to go; no log monitor on either node (it forwards
    # the workers' output to the driver, which no test reads) and no autoscaler monitor
    # (a fixed cluster): ~6 s of CPU the tests spent on daemons
    quiet = {"num_cpus": 1, "include_log_monitor": False}
    cluster = Cluster(
        initialize_head=True,
        head_node_args={**quiet, "include_dashboard": False, "no_monitor": True},
    )
    cluster.add_node(**quiet)
    ray.init(address=cluster.address)
    cluster.wait_for_nodes()
    # the leak check below sees Ray's processes (it would catch them if they stayed)
    assert any(p.pid not in before for p in _children())
    try:
        yield "two_nodes"
    finally:
        ray.shutdown()
        cluster.shutdown()
        _assert_no_ray_processes(before)


@pytest.fixture
def two_nodes(ray_kind: str) -> str:
    """The simulated two-node cluster (tests of placement and actor deaths)."""
    return ray_kind
