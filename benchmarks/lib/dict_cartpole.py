"""`DictCartPole-v0`: Gymnasium's CartPole-v1 (its 500-step limit) whose state comes as
a Dict of two keys, `cart` (position, velocity) and `pole` (angle, angular velocity),
each a `Box(2)` with CartPole's own bounds. Both sides of `benchmarks dictobs` run it as
`benchmarks.lib.dict_cartpole:DictCartPole-v0` (`gym.make` and pararl import the
module, which registers the id): pararl reads it with its multi-input encoder, SB3 with
`MultiInputPolicy`'s `CombinedExtractor`, each flattening the two keys side by side.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

ENV_ID = "DictCartPole-v0"
ENV = f"benchmarks.lib.dict_cartpole:{ENV_ID}"
KEYS = {"cart": slice(0, 2), "pole": slice(2, 4)}


class DictState(gym.ObservationWrapper[dict[str, Any], Any, np.ndarray]):
    """A Box state split into the Dict of `KEYS`, each key its slice of the state."""

    def __init__(self, env: gym.Env[np.ndarray, Any]) -> None:
        super().__init__(env)
        box = env.observation_space
        assert isinstance(box, gym.spaces.Box)
        self.observation_space = gym.spaces.Dict(
            {
                key: gym.spaces.Box(box.low[part], box.high[part], dtype=box.dtype)
                for key, part in KEYS.items()
            }
        )

    def observation(self, observation: np.ndarray) -> dict[str, np.ndarray]:
        return {key: observation[part] for key, part in KEYS.items()}


def dict_cartpole(**kwargs: Any) -> gym.Env[Any, Any]:
    """CartPole-v1 (its own 500-step limit), its state as two keys."""
    return DictState(gym.make("CartPole-v1", **kwargs))


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=dict_cartpole)
