"""Samplers: how experience is collected, one sub-package per family.

- `chunks`: DQN's actors, in this process, in actor processes or on Ray, handing
  the learner chunks of n-step transitions (`ChunkSource`);
- `rollout`: PPO's on-policy rollouts [T, B] with their advantages, from a vector
  env in this process's lock-step, or from Ray actors;
- `meta`: the multi-task (meta-RL) sampler, `MultiTaskSampler`, with its recv
  policies (wait for all, timeout, min_envs, auto);
- `ray`: the Ray backend the chunk and rollout families run on.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    # Lazy: importing pararl.samplers must not pull in torch and Gymnasium's envs.
    if name in ("MultiTaskSampler", "SampleResult", "SampleStats", "TaskEpisodes"):
        from pararl.samplers.meta import sampler

        return getattr(sampler, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
