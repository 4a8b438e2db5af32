"""How many torch threads each part of a run uses: the one home of the rules.

N processes with N intra-op threads each would fight for N cores, so every child
process (env workers, actors, Ray actors, the evaluation process) runs one thread
(`one_thread`). The learner's count follows what else runs beside it
(`learner_threads`, `takes_every_core`), and a learner on several threads drops to
one while something else takes the cores (`AdaptiveThreads`); an update the env
workers wait for takes every core (`every_core_threads`: PPO's, `ppo_threads`;
MAML's, `maml_threads`); `torch_threads` (from `pararl.intraop`) holds a count for
one block of code. Like the rest of `mp`, this module never imports torch itself
(the vector envs run without it): each function imports it when called.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pararl.intraop import torch_threads
from pararl.mp.topology import physical_cores

if TYPE_CHECKING:
    from torch import nn

SMALL_MODEL_PARAMS = 1_000_000
WIDE_BATCH = 256  # rows from which an MLP's update gains from more threads


def one_thread() -> None:
    """A child process's setting: one intra-op thread, for torch if it is loaded and for
    any native library loaded after this (torch, OpenMP and MKL read the variables)."""
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


def every_core_threads(given: int = 0) -> int:
    """Threads for an update that every other process waits for (PPO's update of a
    large network in serial or sync mode, MAML's outer step): `given`
    (`--learner-threads`) if not 0, else every physical core."""
    return given or physical_cores()


def takes_every_core(mode: str, convolutional: bool, batch_size: int) -> bool:
    """Whether an off-policy learner in `mode` takes every core: beside actor
    processes, a convolutional network or a batch of `WIDE_BATCH` rows or more.
    Actors held to the replay ratio leave most of their cores idle, and such updates
    have enough work per operation to gain from a second thread (measured on 2 cores:
    docs/guides/cores-and-threads.md); a small MLP's step on a small batch gains
    nothing, so it keeps one."""
    return mode in ("async", "ray") and (convolutional or batch_size >= WIDE_BATCH)


def is_convolutional(net: nn.Module) -> bool:
    """Whether `net` has a 2-d convolution (the learner's thread rule reads it)."""
    import torch

    return any(isinstance(m, torch.nn.Conv2d) for m in net.modules())


def learner_threads(
    num_params: int, busy_processes: int, given: int = 0, every_core: bool = False
) -> int:
    """The learner's intra-op threads: `given` (`--learner-threads`) if not 0; every
    physical core if `every_core`; else one for small models (thread start-up and
    barriers cost more than they save, and spinning threads fight the actors for
    cores); otherwise the physical cores not taken by actors or env workers."""
    if given or every_core:
        return every_core_threads(given)
    if num_params < SMALL_MODEL_PARAMS:
        return 1
    return max(1, physical_cores() - busy_processes)


def ppo_threads(num_params: int, mode: str, workers: int, given: int = 0) -> tuple[int, int]:
    """PPO's torch threads to act and to update a network of `num_params` with, in
    `mode` beside `workers` env workers: both the learner's count
    (`learner_threads`), except that the update of a network of `SMALL_MODEL_PARAMS`
    or more in serial or sync mode, which the env workers wait for, takes every core;
    acting then keeps the learner's count, not to fight the workers for the cores."""
    threads = learner_threads(num_params, 0 if mode == "serial" else workers, given)
    waited_for = mode in ("serial", "sync")
    if num_params >= SMALL_MODEL_PARAMS and not given and waited_for:
        return threads, every_core_threads()
    return threads, threads


def maml_threads(given: int = 0) -> tuple[int, int]:
    """MAML's torch threads to act and for its outer step. The small policy's size says
    little there: the outer step works on every valid step of every task while the
    env workers wait, so it takes every core (`every_core_threads`); acting's small
    forward passes stay on one, not to fight the workers."""
    return 1, every_core_threads(given)


def held(learns_on: str, given: int) -> bool:
    """Whether a learner's torch threads stay as they are for the whole run: a count
    given with `--learner-threads`, or a learner on an accelerator (`learns_on`, a
    device type), whose host threads only launch its kernels. pararl's own count on
    a CPU is re-decided while the run goes (`AdaptiveThreads`)."""
    return learns_on != "cpu" or bool(given)


def set_learner_threads(
    num_params: int, busy_processes: int, given: int = 0, every_core: bool = False
) -> int:
    """Sets torch's intra-op threads to `learner_threads(...)` and returns the count."""
    import torch

    threads = learner_threads(num_params, busy_processes, given, every_core)
    torch.set_num_threads(threads)
    return threads


def _set_torch_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


@dataclass(frozen=True)
class Probing:
    """How `AdaptiveThreads` times the updates and probes the other count."""

    window_s: float = 2.0
    """Seconds of updating timed as one window (waiting for data is not counted)."""
    first_probe_s: float = 4.0
    """The first probe comes this long after the start (a machine busy from the start is
    found within seconds)."""
    probe_s: float = 30.0
    """The wait for the next probe after a switch, and after the first probe."""
    max_probe_s: float = 600.0
    """A later probe that changed nothing doubles the wait for the next, up to this."""
    slowdown: float = 3.0
    """A window on `wide` threads this many times slower than the fastest so far
    probes at once."""
    margin: float = 0.9
    """The probed count is kept when its time per update is at most this fraction of
    the count in use."""
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)
    """Seconds, for when the next probe is due (tests give a simulated one)."""


class AdaptiveThreads:
    """A learner's intra-op threads while it runs (an off-policy learner's, PPO's
    update's, MAML's outer step's): `wide` (its count on idle cores) or one, whichever
    makes updates faster now, measured.

    Why: every parallel region of an update on several threads ends at a barrier, and
    waits there for any of its threads that the scheduler has given to another
    process. With a busy process beside it on a small machine, a learner on several
    threads can fall to a small fraction of its rate, while on one thread sharing
    slows an update only in proportion. So the governor times the updates (`record`)
    in windows, and runs one window on the other count now and then (a probe), first
    within seconds of the start, then ever less often while probes change nothing, and
    at once when a window on `wide` threads collapses against the fastest one so far
    (`Probing`). It switches when the probe was clearly faster than the latest window
    on the count in use. A quiet machine pays an occasional window on one thread; a busy one, an
    occasional window on `wide` threads.

    `wide` 1, or `hold` (`held`): nothing to decide, `threads` stays `wide`. `report`
    gets a line at each switch, which calls the learner `name`; `set_threads` applies
    a new count (torch's, by default)."""

    def __init__(
        self,
        wide: int,
        report: Callable[[str], None] = lambda text: None,
        hold: bool = False,
        *,
        name: str = "learner",
        set_threads: Callable[[int], None] = _set_torch_threads,
        settings: Probing = Probing(),
    ) -> None:
        self.wide, self.threads, self.hold = wide, wide, hold
        self.report, self.set_threads, self.name = report, set_threads, name
        self.settings = p = settings
        self.every = p.first_probe_s  # seconds between probes now
        self.next_probe = p.clock() + p.first_probe_s
        self.per_update: dict[int, float] = {}  # seconds per update, latest window
        self.best_wide = math.inf
        self.probing = False
        self.switches = 0
        self._updates, self._seconds = 0, 0.0

    def record(self, updates: int, seconds: float) -> None:
        """`updates` gradient updates took `seconds` (of updating only: waiting for
        data is not counted)."""
        if self.hold or self.wide <= 1 or updates <= 0:
            return
        self._updates += updates
        self._seconds += seconds
        p = self.settings
        if self._seconds < p.window_s:
            return
        per = self._seconds / self._updates
        self._updates, self._seconds = 0, 0.0
        if self.probing:
            self._decide(per)
            return
        self.per_update[self.threads] = per
        if self.threads == self.wide:
            self.best_wide = min(self.best_wide, per)
        collapsed = self.threads == self.wide and per > p.slowdown * self.best_wide
        if collapsed or p.clock() >= self.next_probe:
            self.probing = True
            self._use(self._other())

    def _other(self) -> int:
        return 1 if self.threads == self.wide else self.wide

    def _decide(self, per: float) -> None:
        """The probe's window ended: keep its count if it was clearly faster."""
        p = self.settings
        self.probing = False
        probed, before = self.threads, self._other()
        self.per_update[probed] = per
        if per <= p.margin * self.per_update[before]:
            self.switches += 1
            self.every = p.probe_s
            self.report(self._switch_line(probed, before))
        else:
            self.every = min(max(2 * self.every, p.probe_s), p.max_probe_s)
            self._use(before)
        if self.threads == self.wide:  # the newest normal on `wide` threads
            self.best_wide = self.per_update[self.wide]
        self.next_probe = p.clock() + self.every

    def _switch_line(self, now: int, before: int) -> str:
        rate_now, rate_before = 1 / self.per_update[now], 1 / self.per_update[before]
        why = "something else is using the cores" if now == 1 else "the cores are free again"
        return (
            f"pararl: {self.name} on {now} thread(s) from here ({rate_now:,.1f} updates/s "
            f"against {rate_before:,.1f} on {before}): {why}"
        )

    def _use(self, threads: int) -> None:
        self.threads = threads
        self.set_threads(threads)


class LentCores:
    """The actors' cores lent to an asynchronous update while the actors wait.

    An async PPO update runs on the learner's threads beside actors that act the next
    rollout. Once every actor has delivered its segment (`idle`), nothing acts until
    the update publishes new weights, and their cores would stand idle for the rest
    of the update (the actors' busy fraction, about 0.5 on MinAtar). Called before
    each minibatch step (`PPOLearner.update`'s `between`), this widens the update to
    `wide` threads for its remaining steps; the caller's `torch_threads` restores the
    count after the update. The steps are timed (each but an update's last, which
    its epilogue would lengthen): once at least `judge_steps` lent steps are in, their
    median is set against the median of the latest own-thread steps, and where it is
    not `margin` times as short (another run holds the cores, so a wider update waits
    at its barriers), lending stops for the next `pause` updates, then is tried
    again. Where no own-thread step was timed in the last `pause` updates (the actors
    waited from every update's first step, or from the run's), one update runs on the
    learner's own threads first, for a comparison with the machine as it is now.

    The step at which it widens is timing's, and a count of threads can change the
    order of a product's sums: MinAtar Asterix's update gives other weights on 2
    threads than on 1 (Breakout's and CartPole's the same bits), so a seeded async run
    on pararl's own thread count may end elsewhere than its rerun. `--learner-threads
    N` holds the count (`held`, no lending): the run is then reproducible."""

    OWN_KEPT = 256  # the latest own-thread steps the lent ones are set against

    def __init__(
        self,
        idle: Callable[[], bool],
        wide: int,
        *,
        judge_steps: int = 64,
        margin: float = 0.9,
        pause: int = 100,
        set_threads: Callable[[int], None] = _set_torch_threads,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.idle, self.wide, self.set_threads, self.clock = idle, wide, set_threads, clock
        self.judge_steps, self.margin, self.pause = judge_steps, margin, pause
        self.paused = 0  # updates left without lending
        self.threads = self._own = wide
        self._lends = True  # this update may widen
        self._steps = self._thread_steps = 0
        self._last: float | None = None
        self._own_s: deque[float] = deque(maxlen=self.OWN_KEPT)
        self._lent_s: list[float] = []
        self._updates = 0  # updates finished
        self._own_at = 0  # the update an own-thread step was last timed in

    def start(self, threads: int) -> None:
        """An update begins on the learner's `threads`."""
        self.threads = self._own = threads
        self._lends = not self.paused
        self._steps = self._thread_steps = 0
        self._last = None

    def __call__(self) -> None:
        """Before a minibatch step: time the step before it; widen if the actors wait."""
        if self._last is not None:
            lent = self.threads > self._own
            (self._lent_s if lent else self._own_s).append(self.clock() - self._last)
            if not lent:
                self._own_at = self._updates
        if self._lends and self.threads < self.wide and self.idle():
            self.set_threads(self.wide)
            self.threads = self.wide
        self._steps += 1
        self._thread_steps += self.threads
        self._last = self.clock()

    def finish(self) -> float:
        """The update has ended: its mean threads over its steps; lending judged."""
        if not self._lends:
            self.paused -= 1
        self._updates += 1
        if len(self._lent_s) >= self.judge_steps:
            if not self._own_s or self._updates - self._own_at > self.pause:
                self._own_s.clear()  # none, or stale: one update on its own threads
                self.paused = 1
            else:
                own, lent = statistics.median(self._own_s), statistics.median(self._lent_s)
                if lent > self.margin * own:
                    self.paused = self.pause
                self._lent_s = []
        return self._thread_steps / self._steps if self._steps else float(self._own)


__all__ = [
    "SMALL_MODEL_PARAMS",
    "WIDE_BATCH",
    "AdaptiveThreads",
    "LentCores",
    "Probing",
    "every_core_threads",
    "held",
    "is_convolutional",
    "learner_threads",
    "maml_threads",
    "one_thread",
    "ppo_threads",
    "set_learner_threads",
    "takes_every_core",
    "torch_threads",
]
