"""What the off-policy configs (`DQNConfig`, `SACConfig`) check alike: a replay
memory, its batches and the update-to-data ratio, n-step returns, actors' weight
syncs, prioritized replay's exponents, the networks' widths."""

from __future__ import annotations

from typing import Any

from pararl.config.run import Check, unset_or


def replay_checks(cfg: Any) -> list[Check]:
    """The checks of the fields every off-policy config has (None: the kind's default)."""
    both = cfg.buffer_size is not None and cfg.batch_size is not None
    return [
        (unset_or(cfg.lr, lambda v: v > 0), "--lr must be > 0"),
        (unset_or(cfg.gamma, lambda v: 0 < v <= 1), "--gamma must be in (0, 1]"),
        (
            not both or cfg.buffer_size >= cfg.batch_size,
            "--buffer-size must be >= --batch-size",
        ),
        (unset_or(cfg.batch_size, lambda v: v >= 1), "--batch-size must be >= 1"),
        (unset_or(cfg.buffer_size, lambda v: v >= 1), "--buffer-size must be >= 1"),
        (unset_or(cfg.learning_starts, lambda v: v >= 0), "--learning-starts must be >= 0"),
        (unset_or(cfg.replay_ratio, lambda v: v >= 0), "--replay-ratio must be >= 0"),
        (
            cfg.replay_ratio != 0 or cfg.mode in ("auto", "async"),
            f"--replay-ratio 0 (learn without a ratio) needs --mode async, not {cfg.mode}",
        ),
        (unset_or(cfg.n_step, lambda v: v >= 1), "--n-step must be >= 1"),
        (cfg.sync_every >= 1, "--sync-every must be >= 1"),
        (cfg.acting_lag >= 0, "--acting-lag must be >= 0"),
        (cfg.priority_alpha >= 0, "--priority-alpha must be >= 0"),
        (0 <= cfg.priority_beta <= 1, "--priority-beta must be in [0, 1]"),
        (len(cfg.hidden) >= 1, "--hidden needs at least one width"),
        (all(h >= 1 for h in cfg.hidden), "--hidden widths must be >= 1"),
    ]


__all__ = ["replay_checks"]
