"""pararl: fast deep RL on every core.

`train` and the configs are imported lazily, so that importing `pararl.vector` (as
every env worker does) does not pay for PyTorch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["DQNConfig", "PPOConfig", "SACConfig", "train"]

if TYPE_CHECKING:
    from pararl.api import train
    from pararl.config import DQNConfig, PPOConfig, SACConfig


def __getattr__(name: str) -> Any:
    if name in ("DQNConfig", "PPOConfig", "SACConfig"):
        import pararl.config

        return getattr(pararl.config, name)
    if name == "train":
        from pararl.api import train

        return train
    raise AttributeError(f"module 'pararl' has no attribute {name!r}")
