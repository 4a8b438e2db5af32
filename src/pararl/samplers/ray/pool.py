"""A group of Ray actors working for the learner in the driver.

- Actors are created with `max_restarts` (Ray restarts a dead one) and the `SPREAD`
  scheduling strategy (one actor per node before a second on any node), each
  asking for one CPU: `--workers` actors, `--envs-per-worker` envs in each.
- Weights: `publish` hands them to `weights.ray.RayWeights`, and every request
  carries its newest version (one `ray.put` per version sent, however many
  actors; an actor fetches a version only when it is new to it).
- Requests: `submit` sends one call to one actor; `results` waits (bounded) for
  whatever has finished. A failed call (the actor died) goes to `faults`, and the
  same request is sent again to the restarted actor with the current weights.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

from pararl.samplers.ray.cluster import import_ray
from pararl.samplers.ray.faults import FaultBook
from pararl.weights.ray import RayWeights

MAX_RESTARTS = 10  # per actor; Ray restarts it this often, then it stays dead


def streams_path(path: tuple[int, ...]) -> tuple[int, ...]:
    """The streams path an actor made from `path` (`(index, restarts, start steps)`)
    uses: Ray rebuilds an actor it restarts from the same constructor arguments, so
    a rebuilt one draws a new second element, never replaying the envs and
    exploration of its first life (the local actors count restarts there instead)."""
    import secrets

    ray = import_ray()
    if not ray.get_runtime_context().was_current_actor_reconstructed:
        return path
    index, _, *rest = path
    return (index, 1 + secrets.randbelow(2**31), *rest)


POLL_S = 0.25  # longest single ray.wait, so that deadlines and re-sends are checked
RETRY_S = 0.2  # back-off before a failed request is sent again


@dataclass
class _Request:
    index: int
    method: str
    args: tuple[Any, ...]
    sent_at: float


class RayActorGroup:
    """`num_actors` Ray actors of class `cls`, made with `args_fn(index)`; calls to
    their `method(weights_ref_list, version, *args)` and the results."""

    def __init__(
        self,
        cls: type,
        args_fn: Callable[[int], tuple[Any, ...]],
        num_actors: int,
        report: Callable[[str], None],
        timeout_s: float,
    ) -> None:
        ray = self.ray = import_ray()
        remote_cls = ray.remote(num_cpus=1, max_restarts=MAX_RESTARTS, max_task_retries=0)(cls)
        self.actors = [
            remote_cls.options(scheduling_strategy="SPREAD").remote(*args_fn(i))
            for i in range(num_actors)
        ]
        self.faults = FaultBook(report, MAX_RESTARTS, timeout_s)
        self.pending: dict[Any, _Request] = {}  # ObjectRef -> its request
        self._retry: list[tuple[float, _Request]] = []  # (when, failed request to resend)
        self.weights = RayWeights(ray.put)

    def __len__(self) -> int:
        return len(self.actors)

    @property
    def version(self) -> int:
        return self.weights.version

    def publish(self, model: nn.Module, version: int) -> None:
        """Requests sent from now on carry `model`'s weights as version `version`
        (snapshot when the next request goes out)."""
        self.weights.publish(model, version)

    def submit(self, index: int, method: str, *args: Any) -> None:
        """Call `method` on actor `index` with the current weights and `args`."""
        handle = getattr(self.actors[index], method)
        ref = handle.remote(self.weights.refs(), self.version, *args)
        self.pending[ref] = _Request(index, method, args, time.monotonic())

    def results(self, wait: float) -> list[tuple[int, Any]]:
        """(actor index, result) of the calls finished within `wait` s (all finished
        ones, not only the first). A call whose actor died is sent again."""
        ray = self.ray
        end = time.monotonic() + wait
        while True:
            self._resend_due()
            if not self.pending:
                time.sleep(max(0.0, min(RETRY_S, end - time.monotonic())))
                if time.monotonic() >= end:
                    return []
                continue
            refs = list(self.pending)
            ready, _ = ray.wait(refs, num_returns=1, timeout=max(0.0, min(POLL_S, wait)))
            if ready:
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
                return self._collect(ready)
            for request in self.pending.values():
                self.faults.check_deadline(request.index, request.sent_at)
            wait = end - time.monotonic()
            if wait <= 0:
                return []

    def _collect(self, ready: list[Any]) -> list[tuple[int, Any]]:
        from ray.exceptions import RayActorError

        out: list[tuple[int, Any]] = []
        for ref in ready:
            request = self.pending.pop(ref)
            try:
                out.append((request.index, self.ray.get(ref)))
                self.faults.answered(request.index)
            except RayActorError as exc:
                self.faults.died(request.index, exc)
                self._retry.append((time.monotonic() + RETRY_S, request))
        return out

    def _resend_due(self) -> None:
        """Send again the requests that failed, once their short back-off is over
        (a restarting actor fails requests at once; no busy loop on it)."""
        now, waiting = time.monotonic(), []
        for due, request in self._retry:
            if due <= now:
                self.submit(request.index, request.method, *request.args)
            else:
                waiting.append((due, request))
        self._retry = waiting

    def close(self) -> None:
        """Kill the actors (idempotent); results still in flight are dropped."""
        actors, self.actors, self.pending, self._retry = self.actors, [], {}, []
        for actor in actors:
            # an actor already gone, or Ray already shut down: nothing left to stop
            with contextlib.suppress(Exception):
                self.ray.kill(actor, no_restart=True)
