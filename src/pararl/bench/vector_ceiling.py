"""The machine's own parallel ceiling for `pararl bench vector`: one single-env
loop per worker, each in its own process, stepped at the same time and never
talking while they step.

`workers × the single-env rate` assumes the cores add up perfectly and that the
caller costs nothing. On a shared virtual machine neither holds: neighbours take
cycles, and two busy cores do not run quite like one. This backend measures, in
the same interleaved rotation as the others, what the cores actually give the
reference workload, so that a vector env's efficiency can also be read against
what was physically there in that run.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
from multiprocessing.connection import Connection

from pararl.bench.vector_backends import EnvCase, SingleEnvRunner, deferred_sigint
from pararl.mp.procs import ProcessGroup

START_TIMEOUT_S = 120.0
BLOCK_TIMEOUT_S = 300.0  # one timed block takes about a second; this is a hang


def _loop_child(conn: Connection, case: EnvCase) -> None:
    """Serve `("reset", None)` and `("run", steps)` on one env until `("close", _)`."""
    runner = SingleEnvRunner(case)
    try:
        conn.send((True, None))  # ready
        while True:
            command, steps = conn.recv()
            if command == "close":
                return
            if command == "reset":
                runner.reset()
                conn.send((True, 0))
            else:
                conn.send((True, runner.run(steps)))
    finally:
        runner.env.close()


class LoopsRunner:
    """`case.workers` single-env loops in as many processes, run together; one
    message each way per timed block, so the loops run as they would alone."""

    def __init__(self, case: EnvCase) -> None:
        self.unit = case.workers
        ctx = mp.get_context(case.context)
        args = [(dataclasses.replace(case, seed=case.seed + i),) for i in range(case.workers)]
        with deferred_sigint():
            self.group = ProcessGroup(_loop_child, args, ctx, name="pararl-bench-loop")
        try:
            self.group.await_ready(START_TIMEOUT_S)
        except BaseException:
            self.group.kill()
            raise

    def _all(self, command: str, value: int) -> int:
        for i in range(self.unit):
            self.group.send(i, (command, value))
        late = "no reply within {timeout} s"
        return sum(self.group.gather(range(self.unit), BLOCK_TIMEOUT_S, late))

    def reset(self) -> None:
        self._all("reset", 0)

    def run(self, steps: int) -> int:
        return self._all("run", -(-steps // self.unit))

    def close(self) -> None:
        self.group.close()
