"""What the off-policy learners (DQN, SAC) share between their replay memory and
their gradient step: when a batch may be learned from, how many updates the replay
ratio allows, and one update on a batch drawn uniformly or in proportion to
priority (importance-weighted, its priorities then set to its new TD errors)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from pararl.replay.make import Replay
from pararl.replay.nstep import Transitions
from pararl.replay.prioritized import PrioritizedReplay

# a learner's update: (batch, importance weights or None) -> (its statistics, TD errors)
Learn = Callable[[Transitions, np.ndarray | None], tuple[dict[str, torch.Tensor], torch.Tensor]]


def can_learn(replay: Replay, batch_size: int, learning_starts: int) -> bool:
    """A batch is there, and `learning_starts` transitions went into this memory
    (counted as added, not as held: a frame memory as large as `learning_starts`,
    rl-zoo's Atari setting, never holds that many, its episode ends taking slots)."""
    return len(replay) >= batch_size and replay.added >= learning_starts


def updates_due(
    replay_ratio: float, learning_starts: int, env_steps: int, updates: int, ready: bool
) -> int:
    """Gradient updates the replay ratio allows now, beyond the `updates` done; the
    ratio counts env steps after `learning_starts`. Ratio 0 (async only): one at a
    time, always (the learner learns all the time)."""
    if not ready:
        return 0
    if replay_ratio == 0:
        return 1
    allowed = int(replay_ratio * (env_steps - learning_starts))
    return max(0, allowed - updates)


def importance_beta(start: float, env_steps: int, budget: int) -> float:
    """Prioritized replay's importance-sampling exponent: `start` annealed linearly
    to 1 over the step budget."""
    frac = min(1.0, env_steps / budget)
    return start + frac * (1.0 - start)


def replay_update(
    replay: Replay, batch_size: int, rng: np.random.Generator, beta: float, learn: Learn
) -> dict[str, torch.Tensor]:
    """One update on a replay batch: uniform, or prioritized (weighted by importance,
    and the batch's priorities set to its new TD errors)."""
    if not isinstance(replay, PrioritizedReplay):
        stats, _ = learn(replay.sample(batch_size, rng), None)
        return stats
    sample = replay.sample_prioritized(batch_size, rng, beta)
    stats, td_error = learn(sample.batch, sample.weights)
    replay.update_priorities(sample.slots, td_error.cpu().numpy())
    return stats


__all__ = ["Learn", "can_learn", "importance_beta", "replay_update", "updates_due"]
