"""`ParallelVectorEnv` as a drop-in `gymnasium.vector.AsyncVectorEnv`: every scenario
runs on both with the same env factories and Gymnasium keywords, and the records
(values, types, dtypes, infos, raised exceptions) must conform; see
tests/vector/conformance.py (and its `CONFORMANCE_SELF_CHECK=1` knob)."""

from __future__ import annotations

import functools
import multiprocessing as mp
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AsyncVectorEnv, VectorEnv

from pararl.vector import WorkerError
from tests.vector.conformance import (
    SELF_CHECK,
    MakeVec,
    assert_conforms,
    capture,
    differences,
    rollout,
    run_both,
    run_on,
    run_pararl,
)
from tests.vector.conformance_envs import (
    SHAREABLE_KINDS,
    UNSHAREABLE_KINDS,
    FaultyEnv,
    bounds_fn,
    kind_fns,
    probe_fns,
)
from tests.vector.conftest import EnvFn, space_env_fn

pytestmark = [
    pytest.mark.timeout(60),
    # Gymnasium logs a worker's exception as warnings; the records compare the raise.
    pytest.mark.filterwarnings(r"ignore:\x1b\[31mERROR:UserWarning"),
]


# --- 1. spaces of every kind -----------------------------------------------------------


@pytest.mark.parametrize("kind", SHAREABLE_KINDS + UNSHAREABLE_KINDS)
def test_spaces_without_shared_memory(kind: str) -> None:
    """With shared_memory=False every space kind (observations and actions) works
    and gives equal batches."""
    run_both(lambda make: rollout(make, kind_fns(kind), kind, shared_memory=False))


# Gymnasium bug: AsyncVectorEnv decodes Text/OneOf shared memory once, at construction,
# so with shared_memory=True their observations stay the initial placeholder ("0000").
# The reference for these kinds is Gymnasium without shared memory (the envs' values).
STALE_IN_GYM_SHM = ("text", "oneof", "dict_text")


@pytest.mark.parametrize("kind", SHAREABLE_KINDS + UNSHAREABLE_KINDS)
def test_spaces_with_default_shared_memory(kind: str) -> None:
    """With the default shared_memory=True: the same batches where Gymnasium copes
    (for Text/OneOf: the values, not Gymnasium's stale ones), the same error class
    where it refuses the space (Graph, Sequence, custom)."""
    stale = kind in STALE_IN_GYM_SHM
    reference = {"shared_memory": False} if stale else {}
    want = run_on(lambda make: rollout(make, kind_fns(kind), kind, **reference), AsyncVectorEnv)
    got = run_pararl(lambda make: rollout(make, kind_fns(kind), kind))
    if SELF_CHECK and stale:  # the bug is still there: the substitution is needed
        assert differences(got, want)
        return
    assert_conforms(got, want)


# --- 2. differing observation and action spaces -------------------------------------


DIFFERING: dict[str, tuple[list[EnvFn], dict[str, Any]]] = {
    "different_bounds": ([bounds_fn(1.0), bounds_fn(2.0)], {"observation_mode": "different"}),
    "same_mode_refuses_bounds": ([bounds_fn(1.0), bounds_fn(2.0)], {}),
    "different_shapes": (
        [bounds_fn(1.0), bounds_fn(1.0, (3,))],
        {"observation_mode": "different"},
    ),
    "user_spaces": (
        [bounds_fn(1.0), bounds_fn(2.0)],
        {
            "observation_mode": (
                spaces.Box(-2.0, 2.0, (2, 2), np.float32),
                spaces.Box(-2.0, 2.0, (2,), np.float32),
            )
        },
    ),
    "different_actions": ([bounds_fn(1.0), bounds_fn(1.0, actions=4)], {}),
}


@pytest.mark.parametrize("case", list(DIFFERING))
def test_differing_spaces(case: str) -> None:
    """observation_mode "same"/"different"/(batched, single): equal spaces (==) and
    observations, or the same error class for spaces that cannot be batched."""
    fns, kwargs = DIFFERING[case]
    run_both(lambda make: rollout(make, fns, "discrete", **kwargs))


# --- 3. seeding ---------------------------------------------------------------------


def draws(vec: VectorEnv) -> list[Any]:
    """Three draws from each generator of `vec.np_random` (a tuple, one per env)."""
    return [(type(g).__name__, g.integers(0, 2**31, size=3)) for g in vec.np_random]


def seeding(make: MakeVec) -> dict[str, Any]:
    vec = make([space_env_fn("box") for _ in range(3)])
    seeds = functools.partial(getattr, vec, "np_random_seed")
    record: dict[str, Any] = {"int": vec.reset(seed=5), "int_seeds": capture(seeds)}
    record["list"] = vec.reset(seed=[7, None, 9])
    record["none"] = vec.reset(seed=None)
    record["list_seeds"] = capture(seeds)
    record["short_list"] = capture(vec.reset, seed=[1, 2])
    record["long_list"] = capture(vec.reset, seed=[1, 2, 3, 4])
    record["generators"] = capture(draws, vec)
    record["step_after"] = vec.step(np.zeros((3, 3), np.float32))
    return record


def test_seeding() -> None:
    """reset(seed=int / list with None / None), seed-list length errors (message
    included), np_random_seed (a tuple of the envs' seeds) and np_random draws."""
    run_both(seeding)


# --- 4. misuse ----------------------------------------------------------------------


BAD_MASKS: dict[str, Any] = {
    "list": [True, False, True],
    "shape": np.ones(2, np.bool_),
    "dtype": np.ones(3, np.int64),
    "all_false": np.zeros(3, np.bool_),
}
WAITS = ("step_wait", "reset_wait", "call_wait")


def misuse(make: MakeVec) -> dict[str, Any]:
    vec = make([space_env_fn("box") for _ in range(3)])
    actions = np.zeros((3, 3), np.float32)
    record = {f"{name}_unsent": capture(getattr(vec, name), vec=vec) for name in WAITS}
    vec.reset(seed=0)
    vec.step_async(actions)
    record["step_async_twice"] = capture(vec.step_async, actions, vec=vec)
    record["reset_async_in_step"] = capture(vec.reset_async, seed=0, vec=vec)
    record["call_async_in_step"] = capture(vec.call_async, "kind", vec=vec)
    record["reset_wait_in_step"] = capture(vec.reset_wait, vec=vec)
    record["call_wait_in_step"] = capture(vec.call_wait, vec=vec)
    record["set_attr_in_step"] = capture(vec.set_attr, "label", "x", vec=vec)
    record["pending_step"] = vec.step_wait()
    for name, mask in BAD_MASKS.items():
        record[f"mask_{name}"] = capture(vec.reset, options={"reset_mask": mask}, vec=vec)
    record["set_attr_count"] = capture(vec.set_attr, "label", ["a"], vec=vec)
    record["usable"] = vec.step(actions)
    vec.close()
    record["closed"] = vec.closed
    for name, call in {
        "reset": lambda: vec.reset(seed=0),
        "reset_async": vec.reset_async,
        "step": lambda: vec.step(actions),
        "step_async": lambda: vec.step_async(actions),
        **{name: getattr(vec, name) for name in WAITS},
        "call": lambda: vec.call("kind"),
        "get_attr": lambda: vec.get_attr("kind"),
        "set_attr": lambda: vec.set_attr("label", "x"),
        "render": vec.render,
    }.items():
        record[f"closed_{name}"] = capture(call, vec=vec)
    record["close_again"] = capture(vec.close)
    return record


def test_misuse_errors() -> None:
    """Waits without a call, calls while one is pending, malformed reset masks, a
    wrong set_attr count and calls after close: Gymnasium's class and message."""
    run_both(misuse)


@pytest.mark.parametrize("count", [1, 3])
def test_wrong_number_of_actions(count: int) -> None:
    """A batch of 1 or 3 actions for 2 envs raises the same error class (no broadcast)."""

    def scenario(make: MakeVec) -> Any:
        vec = make(kind_fns("box"))
        vec.reset(seed=0)
        return capture(vec.step, np.zeros((count, 3), np.float32), message=False)

    run_both(scenario)


# --- 5. timeouts --------------------------------------------------------------------


@pytest.mark.parametrize("call", ["step", "call"])
def test_wait_timeout(call: str) -> None:
    """step_wait/call_wait(timeout) on a slow env raise multiprocessing.TimeoutError;
    close() then succeeds."""

    def scenario(make: MakeVec) -> Any:
        vec = make(probe_fns("sleep"))
        vec.reset(seed=0)
        if call == "step":
            vec.step_async(np.full(2, 0.3))
        else:
            vec.call_async("nap", 0.3)
        wait = vec.step_wait if call == "step" else vec.call_wait
        raised = capture(wait, timeout=0.02, message=False)
        return {"raised": raised, "close": capture(vec.close), "closed": vec.closed}

    want, _ = run_both(scenario)
    assert want["raised"].kind is mp.TimeoutError


# --- 6. errors raised inside an env ---------------------------------------------------


@pytest.mark.parametrize("exc", ["ValueError", "EnvFaultError"])
@pytest.mark.parametrize("where", ["step", "reset", "call"])
def test_env_errors(where: str, exc: str) -> None:
    """An env's exception comes back as its own class (pararl: also a WorkerError with
    the env index and remote traceback), with its message; close() then works."""

    def scenario(make: MakeVec) -> Any:
        fns = [functools.partial(FaultyEnv, i == 1, where, exc) for i in range(2)]
        vec = make(fns)
        record: dict[str, Any] = {}
        if where != "reset":
            record["reset"] = vec.reset(seed=0)
        trigger = {
            "step": lambda: vec.step(np.zeros(2, np.int64)),
            "reset": lambda: vec.reset(seed=0),
            "call": lambda: vec.call("explode"),
        }[where]
        record["error"] = capture(trigger)
        record["close"] = capture(vec.close)
        record["closed"] = vec.closed
        return record

    want, got = run_both(scenario)
    assert want["error"].message == f"env exploded in {where}"
    if not SELF_CHECK:
        err = got["error"].exc
        assert isinstance(err, WorkerError), f"{type(err).__mro__} lacks WorkerError"
        assert err.env_index == 1
        assert err.remote_traceback
        assert f"env exploded in {where}" in err.remote_traceback
