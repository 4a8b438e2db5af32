"""Env factories, wrappers and pararl's own registered envs (`pararl/...` ids)."""

from __future__ import annotations

import gymnasium as gym


def _register(env_id: str, entry_point: str, **kwargs: object) -> None:
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=entry_point, **kwargs)  # type: ignore[arg-type]


_register("pararl/StepCost-v0", "pararl.envs.fake:StepCostEnv")
# every step takes 1 ms, slept: requests long enough to interrupt, with the cores left
# to the rest of the machine (Ray actor-death tests)
_register(
    "pararl/SlowStep-v0", "pararl.envs.fake:StepCostEnv", kwargs={"cost_us": 1000.0, "sleeps": True}
)
# records the reset seeds it gets (`$PARARL_SEED_LOG`); episodes never end by time
_register("pararl/SeedLog-v0", "pararl.envs.fake:SeedLogEnv", kwargs={"episode_length": 10**9})
# fails on its 300th step: late enough that a training run has stored data first
_register("pararl/Faulty-v0", "pararl.envs.fake:FaultyEnv", kwargs={"at": 300})
# episodes that never end (no termination, no time limit): evaluations must cap them
_register("pararl/NeverEnds-v0", "pararl.envs.fake:NeverEndsEnv")
# many-dimensional discrete actions, and action masks (`envs.fake`; the own-env
# guide, docs/guides/your-own-env.md, trains on them)
_register("pararl/MultiDiscreteTarget-v0", "pararl.envs.fake:TargetEnv", kwargs={"nvec": (3, 4)})
_register("pararl/MultiBinaryTarget-v0", "pararl.envs.fake:TargetEnv", kwargs={"bits": 4})
_register("pararl/MaskedMultiDiscrete-v0", "pararl.envs.fake:MaskedTargetEnv")
_register("pararl/MaskedChoice-v0", "pararl.envs.fake:MaskedChoiceEnv")
_register("pararl/MaskedChoiceInfo-v0", "pararl.envs.fake:MaskedChoiceInfoEnv")
# Dict and Tuple observations whose answer is in one leaf (the multi-input encoder's)
_register("pararl/DictCue-v0", "pararl.envs.fake:CueEnv", max_episode_steps=16)
_register(
    "pararl/TupleCue-v0",
    "pararl.envs.fake:CueEnv",
    max_episode_steps=16,
    kwargs={"tuple_obs": True},
)
# Tasks that need memory (`envs.memory`): CartPole-v1 with its velocities hidden (its
# time limit and reward threshold), and naming the symbol shown a step before
_register(
    "pararl/StatelessCartPole-v0",
    "pararl.envs.memory:StatelessCartPole",
    max_episode_steps=500,
    reward_threshold=475.0,
)
_register("pararl/RepeatPrevious-v0", "pararl.envs.memory:RepeatPrevious")
# Meta-RL task envs (sample_tasks / reset_task); episode lengths as in MAML's experiments.
_register("pararl/HalfCheetahDir-v0", "pararl.envs.meta:HalfCheetahDir", max_episode_steps=200)
_register("pararl/HalfCheetahVel-v0", "pararl.envs.meta:HalfCheetahVel", max_episode_steps=200)
_register("pararl/Navigation2D-v0", "pararl.envs.navigation:Navigation2D", max_episode_steps=100)
