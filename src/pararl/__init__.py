"""pararl: fast deep RL on every core.

`train`, `load`, `evaluate` and every algorithm's config (`pararl.PPOConfig`,
`pararl.TD3Config`, ...: each one `pararl.config` knows) are imported lazily, so that
importing `pararl.vector` (as every env worker does) does not pay for PyTorch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["DQNConfig", "MAMLConfig", "PPOConfig", "SACConfig", "evaluate", "load", "train"]

if TYPE_CHECKING:
    from pararl.api import evaluate, load, train
    from pararl.config import DQNConfig, MAMLConfig, PPOConfig, SACConfig


def __dir__() -> list[str]:
    import pararl.config

    return sorted({*globals(), *__all__, *pararl.config.configs()})


def __getattr__(name: str) -> Any:
    if name in ("train", "load", "evaluate"):
        import pararl.api

        return getattr(pararl.api, name)
    if name.endswith("Config"):
        import pararl.config

        found = pararl.config.configs().get(name)
        if found is not None:
            return found
    raise AttributeError(f"module 'pararl' has no attribute {name!r}")
