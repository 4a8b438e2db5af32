"""The serial twin: the same vector env, every env stepped in this process.

It runs exactly the code the workers run (`EnvBatch` through `worker.execute`),
so it is the reference the tests hold the parallel env to, and the right choice
on one core or for debugging (exceptions surface with their own traceback).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import gymnasium as gym

from pararl.mp.shared import ArraySpec
from pararl.vector.core import BatchVectorEnv
from pararl.vector.transport import InlineTransport, Transport
from pararl.vector.worker import BatchLayout


class SerialVectorEnv(BatchVectorEnv):
    """All envs in the calling process; same API and results as `ParallelVectorEnv`.

    `recv` always returns every env sent (they are all done by then).
    """

    def _make_transport(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        specs: dict[str, ArraySpec],
        layout: BatchLayout,
    ) -> Transport:
        return InlineTransport(env_fns, specs, layout)
