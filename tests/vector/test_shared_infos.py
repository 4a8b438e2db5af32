"""Info keys carried in shared memory (`shared_infos`, the path of action masks): the
caller sees what the pickled path gives, in every autoreset mode and with partial
stepping, and an env that leaves the key out is named."""

from __future__ import annotations

import numpy as np
import pytest

from pararl.envs.make import env_factory
from pararl.vector import ParallelVectorEnv, SerialVectorEnv

MASKED = "pararl/MaskedChoiceInfo-v0"  # its info carries "action_mask" at every reset and step
MASKS = {"action_mask": np.ones(4, np.bool_)}  # an example value: 4 bools per env


def legal(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One legal action per row of `mask`."""
    return np.array([rng.choice(np.flatnonzero(row)) for row in mask])


def assert_same_infos(got: dict, want: dict) -> None:
    """The same keys and values (an episode's wall time `t` aside)."""
    assert set(got) == set(want)
    for key, value in want.items():
        if key == "t":
            continue
        if key == "final_info":
            assert_same_infos(got[key], value)
        elif key == "final_obs":
            for a, b in zip(got[key], value, strict=True):
                assert (a is None and b is None) or np.array_equal(a, b)
        elif isinstance(value, dict):
            assert_same_infos(got[key], value)
        else:
            np.testing.assert_array_equal(got[key], value, err_msg=key)


@pytest.mark.parametrize("autoreset", ["NextStep", "SameStep"])
def test_shared_infos_are_what_the_pickled_path_gives(autoreset: str) -> None:
    fns = [env_factory(MASKED)] * 4
    pickled = SerialVectorEnv(fns, autoreset_mode=autoreset)
    shared = ParallelVectorEnv(fns, num_workers=2, autoreset_mode=autoreset, shared_infos=MASKS)
    rng = np.random.default_rng(0)
    try:
        (obs_a, infos_a), (obs_b, infos_b) = pickled.reset(seed=1), shared.reset(seed=1)
        np.testing.assert_array_equal(obs_a, obs_b)
        assert_same_infos(infos_b, infos_a)
        ended = 0
        for _ in range(40):  # episodes of 10 steps: four ends per env
            actions = legal(infos_a["action_mask"], rng)
            out_a, out_b = pickled.step(actions), shared.step(actions)
            for a, b in zip(out_a[:4], out_b[:4], strict=True):
                np.testing.assert_array_equal(a, b)
            infos_a, infos_b = out_a[4], out_b[4]
            assert_same_infos(infos_b, infos_a)
            assert infos_b["action_mask"].dtype == np.bool_
            assert infos_b["_action_mask"].all()
            ended += int(out_b[3].sum())
        assert ended >= 4
    finally:
        pickled.close()
        shared.close()


def test_partial_steps_return_the_masks_of_the_envs_returned() -> None:
    fns = [env_factory(MASKED)] * 4
    envs = ParallelVectorEnv(fns, num_workers=2, shared_infos=MASKS)
    twin = SerialVectorEnv(fns)
    rng = np.random.default_rng(0)
    try:
        _, infos = envs.reset(seed=3)
        twin.reset(seed=3)
        ids = np.array([3, 0])
        actions = legal(infos["action_mask"][ids], rng)
        envs.send(actions, ids)
        twin.send(actions, ids)
        *_, got, got_ids = envs.recv()
        *_, want, want_ids = twin.recv()
        np.testing.assert_array_equal(got_ids, want_ids)
        np.testing.assert_array_equal(got["action_mask"], want["action_mask"])
        assert got["action_mask"].shape == (2, 4)
    finally:
        envs.close()
        twin.close()


def test_an_env_that_leaves_the_key_out_is_named() -> None:
    envs = SerialVectorEnv([env_factory("CartPole-v1")] * 2, shared_infos=MASKS)
    try:
        with pytest.raises(RuntimeError, match=r"env 0 returned no info\['action_mask'\]"):
            envs.reset(seed=0)
    finally:
        envs.close()
