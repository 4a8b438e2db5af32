"""pararl: fast deep RL on every core."""

__version__ = "0.1.0"
