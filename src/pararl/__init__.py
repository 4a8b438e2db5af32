"""pararl: fast deep RL on every core."""

from pararl.config import DQNConfig
from pararl.train import train

__version__ = "0.1.0"
__all__ = ["DQNConfig", "train"]
