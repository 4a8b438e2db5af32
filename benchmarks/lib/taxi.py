"""`TaxiOneHot-v0`: Gymnasium's Taxi-v4 with its `Discrete(500)` state given one-hot
(`FlattenObservation`: a `Box(0, 1, (500,))`), its `info["action_mask"]` as Taxi gives
it. Both sides of `benchmarks masks` run it as `benchmarks.lib.taxi:TaxiOneHot-v0`
(`gym.make` and pararl import the module, which registers the id), so that both learn
from the same input, made by the same code. (Both would also read Taxi-v4's bare
Discrete state one-hot themselves; the wrapper is what this benchmark's measurements
were made with.)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

ENV_ID = "TaxiOneHot-v0"
ENV = f"benchmarks.lib.taxi:{ENV_ID}"


def taxi_one_hot(**kwargs: Any) -> gym.Env[Any, Any]:
    """Taxi-v4 (its own 200-step limit), its state one-hot."""
    return gym.wrappers.FlattenObservation(gym.make("Taxi-v4", **kwargs))


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=taxi_one_hot)
