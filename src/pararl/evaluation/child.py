"""The evaluation child process: spawned early, told what to evaluate later.

A spawned interpreter needs ~1.3 s here to import torch. Started when the trainer
builds its evaluator, the child answered the first evaluation about a second late,
and the evaluations that came due meanwhile were skipped: a run that was solved at
its second evaluation went on training until the answer came. So the child is
started with no work: it imports what it needs, then waits for its set-up (env
factory, episodes, seed, model constructor) as the first message on its pipe.

`pararl train` starts an `EvalChild` before it imports torch itself, so the two
imports run side by side on two cores, and hands it to `pararl.train(...,
eval_child=...)`; a `BackgroundEvaluator` given none starts its own. This module
stays light (no torch) for that reason.

The child runs at a lower priority (`NICENESS`): the evaluations are there to watch
the run, not to slow it. On 2 cores a greedy Pong evaluation of 20 episodes grew to
~170k env steps once the agent held its rallies (episodes of ~8.6k steps, some at the
27k cap), more than the 50k training steps between evaluations, so the child never
rested and training had one core. Pong PPO resumed at 822k steps with an evaluation
always due: 97.7 agent steps/s at equal priority (2 evaluations done in 283 s), 160.6
niced (none done in 280 s). Evaluations get the cycles training leaves (a PPO
rollout is one thread), and on a busy machine they are what gives way.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import sys
from collections.abc import Iterator
from multiprocessing.connection import Connection

from pararl.mp.procs import ProcessGroup


def evaluates_in_process(eval_in: str) -> bool:
    """Whether `--eval-in` puts the evaluations in a child process: `process`, or
    `auto` when there is a core to spare for it."""
    from pararl.mp.topology import physical_cores

    return eval_in == "process" or (eval_in == "auto" and physical_cores() > 1)


NICENESS = 10  # added to the trainer's: the child's CPU weight is ~1/10 of training's


def _serve_when_set_up(conn: Connection) -> None:
    if hasattr(os, "nice"):  # POSIX; elsewhere the child runs at the trainer's priority
        os.nice(NICENESS)
    from pararl.evaluation.serve import serve  # the slow import, overlapped with the trainer's

    command, setup = conn.recv()  # EOFError if the parent is gone: we exit
    if command == "setup":
        serve(conn, *setup)


@contextlib.contextmanager
def _main_not_reimported() -> Iterator[None]:
    """Start a spawned child without re-running the caller's `__main__`.

    `spawn` normally imports the parent's main script in the child, so a script that
    calls `pararl.train(...)` without an `if __name__ == "__main__":` guard would
    train again in there. The child needs nothing from `__main__` (its env factory
    and model constructor are importable pararl functions and ids), so the main
    module's location is hidden while the child is launched.
    """
    main = sys.modules["__main__"]
    names = ("__file__", "__spec__")
    saved = {name: main.__dict__[name] for name in names if name in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__dict__["__spec__"] = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


class EvalChild:
    """An evaluation process, started with no work and set up later by its first
    message. Spawned, not forked: by the time a trainer needs one it is
    multi-threaded (torch's pools), and a forked child can inherit a lock no thread
    will ever release. Whoever starts one hands it on or closes it (idempotent)."""

    def __init__(self) -> None:
        with _main_not_reimported():
            self.group = ProcessGroup(
                _serve_when_set_up, [()], mp.get_context("spawn"), name="pararl-eval"
            )

    @property
    def alive(self) -> bool:
        return all(proc.is_alive() for proc in self.group.processes)

    def close(self, grace: float | None = None) -> None:
        if grace is None:
            self.group.close()
        else:
            self.group.close(grace=grace)


__all__ = ["NICENESS", "EvalChild", "evaluates_in_process"]
