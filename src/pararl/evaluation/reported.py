"""An evaluator whose returns the training loop measures itself.

MAML's measure of a meta-policy is the return after adaptation, which every
meta-iteration samples anyway (its "valid" episodes); the loop reports those
returns here and the session records them as its evaluation (metrics, best
checkpoint, `--target-return`) on its usual schedule, with no episodes of its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pararl.evaluation.episodes import Episodes


class ReportedReturns:
    """`submit` takes the returns last given to `report`; answers as `Evaluator` does."""

    deferred = False  # the returns are ready as soon as `submit` returns

    def __init__(self) -> None:
        self._latest: Episodes | None = None
        self._result: Episodes | None = None

    def report(self, returns: np.ndarray) -> None:
        self._latest = Episodes.of_returns(returns)

    @property
    def busy(self) -> bool:
        return False

    def submit(self, policy: Any) -> None:
        del policy  # the returns were measured with it already
        self._result = self._latest

    def poll(self, timeout: float = 0.0) -> Episodes | None:
        """The returns of the last `submit`, once (None if already taken)."""
        del timeout
        result, self._result = self._result, None
        return result

    def close(self) -> None:
        pass
