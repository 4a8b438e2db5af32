"""Samplers: how experience is collected (actor processes with their own CPU
policy copies; weights shared through memory), and the multi-task (meta-RL)
sampler with its recv policies: `pararl.samplers.multitask.MultiTaskSampler`."""

from typing import Any


def __getattr__(name: str) -> Any:
    # Lazy: importing pararl.samplers must not pull in torch and Gymnasium's envs.
    if name in ("MultiTaskSampler", "SampleResult", "SampleStats", "TaskEpisodes"):
        from pararl.samplers import multitask

        return getattr(multitask, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
