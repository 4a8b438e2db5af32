"""How a vector env lays out its batch from the envs' spaces, the way Gymnasium's
`AsyncVectorEnv` reads its keywords: the observation spaces of each
`observation_mode`, what goes into shared memory under each `shared_memory`
setting (and Gymnasium's errors where it refuses), the shared arrays, and the
check of every env's spaces against the batch's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from pararl.mp.shared import ArraySpec
from pararl.vector.frame_ring import StackSpec
from pararl.vector.spaces import ARRAY_SPACES, shared_memory_refusal, space_specs

SharedMemory = bool | Literal["auto"]
ObservationMode = str | tuple[gym.Space, gym.Space]


def observation_spaces(
    mode: ObservationMode, first: gym.Space, n: int
) -> tuple[gym.Space, gym.Space]:
    """(single, batched) observation spaces: the first env's for "same" and
    "different" (whose batched space the caller replaces by
    `batch_differing_spaces` of every env's), or the user's `(batched, single)`."""
    if isinstance(mode, tuple) and len(mode) == 2:
        if not isinstance(mode[0], gym.Space) or not isinstance(mode[1], gym.Space):
            raise TypeError(
                "Expected both elements of observation_mode to be Spaces, got "
                f"{type(mode[0])} and {type(mode[1])}"
            )
        return mode[1], mode[0]
    if mode in ("same", "different"):
        return first, batch_space(first, n)
    raise ValueError(
        "Invalid `observation_mode`, expected: 'same' or 'different' or tuple of "
        f"single and batch observation space, actual got {mode}"
    )


def uses_shared_memory(shared_memory: SharedMemory, space: gym.Space, name: str) -> bool:
    """Whether observations go through shared memory; Gymnasium's error where
    `shared_memory=True` meets a space it cannot put there."""
    if shared_memory not in (True, False, "auto"):
        raise ValueError(f"shared_memory must be True, False or 'auto', got {shared_memory!r}")
    refusal = shared_memory_refusal(space) if shared_memory is True else None
    hint = (
        f"({name}: shared_memory='auto' keeps the leaves of {space} that fit in shared "
        "memory there and sends the others pickled.)"
    )
    if refusal is TypeError:
        raise TypeError(
            f"As {space} has a dynamic shape so its not possible to make a static shared "
            f"memory. For `AsyncVectorEnv`, disable `shared_memory`. {hint}"
        )
    if refusal is ValueError:
        raise ValueError(
            "Using `AsyncVector(..., shared_memory=True)` caused an error, you can disable "
            f"this feature with `shared_memory=False` however this is slower. {hint}"
        )
    return shared_memory is not False


def batch_specs(
    obs_space: gym.Space,
    act_space: gym.Space,
    n: int,
    share: bool,
    mode: AutoresetMode,
    stack: StackSpec | None = None,
    infos: Mapping[str, np.ndarray] | None = None,
) -> dict[str, ArraySpec]:
    """The shared arrays of a batch of `n` envs: observation leaves (when `share`;
    with `stack`, the observations are frame rings with their heads), actions of a
    plain array space, rewards, terminations, truncations, in SAME_STEP mode the
    final observations of one array observation space, and a row per env of each
    info key in `infos` (`info.KEY`, shaped and typed as the example `infos[KEY]`)."""
    specs = {
        **space_specs(obs_space, n, "obs", share),
        **space_specs(act_space, n, "act", isinstance(act_space, ARRAY_SPACES)),
        "rew": ArraySpec((n,), np.dtype(np.float64)),
        "term": ArraySpec((n,), np.dtype(np.bool_)),
        "trunc": ArraySpec((n,), np.dtype(np.bool_)),
    }
    if stack is not None:
        specs["obs.head"] = ArraySpec((n,), np.dtype(np.int64))
    if mode is AutoresetMode.SAME_STEP and "obs" in specs:
        specs["final"] = specs["obs"]
    for key, row in (infos or {}).items():
        specs[f"info.{key}"] = ArraySpec((n, *row.shape), np.dtype(row.dtype))
    return specs


def space_check_error(
    results: Sequence[tuple[bool, bool]], mode: ObservationMode, action_space: gym.Space, name: str
) -> RuntimeError | None:
    """Gymnasium's error for envs whose spaces do not fit the batch's (per env: its
    observation space fits, its action space is equal), or None."""
    if not all(same_obs for same_obs, _ in results):
        if mode == "same":
            return RuntimeError(
                f"{name}(..., observation_mode='same') however some of the sub-environments "
                "observation spaces are not equivalent. If this is intentional, use "
                "`observation_mode='different'` instead."
            )
        return RuntimeError(
            f"{name}(..., observation_mode='different' or custom space) however the "
            "sub-environment's observation spaces do not share a common shape and dtype."
        )
    if not all(same_act for _, same_act in results):
        return RuntimeError(
            f"Some environments have an action space different from `{action_space}`. In "
            "order to batch actions, the action spaces from all environments must be equal."
        )
    return None
