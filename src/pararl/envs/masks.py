"""Action masks: which actions an env allows now, and how that reaches the policy.

An env says it in one of two ways:
- an `action_masks()` method, as sb3-contrib's MaskablePPO reads it; the env factory
  (`envs.make`) wraps such an env in `ActionMasksInInfo`, which puts the mask in the
  info of every reset and step;
- `info["action_mask"]` at every reset and step, as Gymnasium's own envs with masks
  give it (Taxi, for one).

So a mask always travels as `info["action_mask"]`, with the observation it belongs
to (the info of the reset or step that returned that observation): True (or
nonzero) where an action is legal, `mask_size(space)` values (Discrete(n): n;
MultiDiscrete: each dimension's n, one dimension after another).

Through the worker processes it travels in shared memory: a run whose env gives
masks builds its vector envs with `shared_infos=mask_info(space)`, and each worker
writes each env's mask to that env's row of one shared array of bools, taken out of
the info, so the reply on the pipe stays as small as without masks (usually empty);
the caller gets `infos["action_mask"]` batched, `[B, mask_size]`, as Gymnasium's
vector envs batch any info (`pararl.vector.BatchVectorEnv`). The mask of an
episode's final observation, which nobody acts on, stays in its `final_info`. A mask
in the info needs no change of the observation: the rollout, the replay memory and
the networks keep their observations as they are, and a run without masks is the
run it always was. (Putting the mask in a Dict observation would also reach shared
memory, but every reader of observations would then take it apart again.)

`batch_mask` reads a batch's masks for the policy: in training (the PPO rollout,
DQN's actors, which store the next observation's mask with each transition for the
bootstrap target), in evaluation and in playback. A row that allows no action at
all (the final observation of a game with no move left, which NEXT_STEP autoreset
returns and nobody's action reaches) is read as allowing every action, so that a
policy never has to choose among none.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

MASK_KEY = "action_mask"
MASKABLE = (gym.spaces.Discrete, gym.spaces.MultiDiscrete)  # spaces whose actions take masks


def mask_size(space: gym.Space) -> int:
    """How many values an action mask of `space` has (0: its actions take none)."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    return 0


def mask_info(space: gym.Space) -> dict[str, np.ndarray]:
    """The vector envs' `shared_infos` of a run whose env gives masks: an example
    mask of `space`, which the shared array of the masks is laid out from."""
    return {MASK_KEY: np.ones(mask_size(space), np.bool_)}


class ActionMasksInInfo(gym.Wrapper[Any, Any, Any, Any]):
    """The env's `action_masks()` as `info["action_mask"]` of every reset and step
    (flat bools), where the rest of pararl reads masks."""

    def _with_mask(self, info: dict[str, Any]) -> dict[str, Any]:
        mask = np.asarray(self.env.get_wrapper_attr("action_masks")(), np.bool_).ravel()
        return {**info, MASK_KEY: mask}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, self._with_mask(info)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self._with_mask(info)


def has_mask_method(env: gym.Env) -> bool:
    """Whether `env` (or an env it wraps) has an `action_masks()` method."""
    return env.has_wrapper_attr("action_masks") and callable(env.get_wrapper_attr("action_masks"))


def gives_masks(env: gym.Env) -> bool:
    """Whether `env`, as `envs.make` builds it, gives action masks (read from the info
    of one reset; Box actions take none, and the env is not reset). A mask of the
    wrong size, or one on MultiBinary actions, is a ValueError that says why."""
    space = env.action_space
    if not isinstance(space, (*MASKABLE, gym.spaces.MultiBinary)):
        return False
    _, info = env.reset()
    if MASK_KEY not in info:
        return False
    size, given = mask_size(space), np.asarray(info[MASK_KEY]).size
    if size == 0:
        raise ValueError(
            f"the env gives action masks, and pararl masks Discrete and MultiDiscrete "
            f"actions, not its {space}"
        )
    if given != size:
        raise ValueError(
            f"the env's action mask has {given} values, and its actions {space} take "
            f"{size}: one per action (MultiDiscrete: each dimension's, one after another)"
        )
    return True


def random_action(space: gym.Space, info: dict[str, Any]) -> Any:
    """A uniform random action, within the mask of the observation whose `info` is
    given when it has one (Discrete or MultiDiscrete actions, each dimension's
    uniform among its legal values), from the space's own stream."""
    if MASK_KEY not in info:
        return space.sample()
    mask, rng = np.asarray(info[MASK_KEY], np.bool_).ravel(), space.np_random
    if isinstance(space, gym.spaces.Discrete):
        return space.start + rng.choice(np.flatnonzero(mask))
    assert isinstance(space, gym.spaces.MultiDiscrete)
    nvec = space.nvec.ravel()
    parts = np.split(mask, np.cumsum(nvec)[:-1])
    index = [rng.choice(np.flatnonzero(p) if p.any() else np.arange(p.size)) for p in parts]
    return (np.asarray(index) + space.start.ravel()).astype(space.dtype).reshape(space.shape)


def batch_mask(infos: dict[str, Any]) -> np.ndarray | None:
    """The action masks of a vector env's batch (`[B, mask_size]` bools) from its
    infos, or None when its envs give none. An env that did not report one, and a
    row that allows nothing, allow every action (see the module docstring)."""
    given = infos.get(MASK_KEY)
    if given is None:
        return None
    mask = np.asarray(given).astype(np.bool_, copy=True).reshape(len(given), -1)
    reported = infos.get(f"_{MASK_KEY}")
    if reported is not None:
        mask[~np.asarray(reported, np.bool_)] = True
    mask[~mask.any(axis=1)] = True
    return mask


__all__ = [
    "MASKABLE",
    "MASK_KEY",
    "ActionMasksInInfo",
    "batch_mask",
    "gives_masks",
    "has_mask_method",
    "mask_info",
    "mask_size",
    "random_action",
]
