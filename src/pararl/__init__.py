"""pararl: fast deep RL on every core.

`train`, `load`, `evaluate` and the configs are imported lazily, so that importing
`pararl.vector` (as every env worker does) does not pay for PyTorch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["DQNConfig", "MAMLConfig", "PPOConfig", "SACConfig", "evaluate", "load", "train"]

if TYPE_CHECKING:
    from pararl.api import evaluate, load, train
    from pararl.config import DQNConfig, MAMLConfig, PPOConfig, SACConfig


def __getattr__(name: str) -> Any:
    if name in ("DQNConfig", "PPOConfig", "MAMLConfig", "SACConfig"):
        import pararl.config

        return getattr(pararl.config, name)
    if name in ("train", "load", "evaluate"):
        import pararl.api

        return getattr(pararl.api, name)
    raise AttributeError(f"module 'pararl' has no attribute {name!r}")
