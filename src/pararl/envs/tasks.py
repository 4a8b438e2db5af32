"""What every meta-RL task env shares: the check of `sample_tasks(n)`'s count."""

from __future__ import annotations

import numpy as np

from pararl.errors import UsageError


def task_count(n: object) -> int:
    """`n` as an int, or UsageError if it is not a whole number >= 1."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise UsageError(f"sample_tasks: n must be an int >= 1, got {n!r}")
    return int(n)
