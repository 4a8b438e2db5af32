"""`ParallelVectorEnv` as a drop-in `gymnasium.vector.AsyncVectorEnv`, part 2: the
actions envs receive, autoreset modes, constructor keywords and calls (part 1:
tests/vector/test_conformance.py; the harness: tests/vector/conformance.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, AutoresetMode

from tests.vector.conformance import (
    SELF_CHECK,
    MakeVec,
    Raised,
    assert_conforms,
    capture,
    rollout,
    run_both,
    run_on,
    run_pararl,
)
from tests.vector.conformance_envs import (
    CallEnv,
    batched_actions,
    doubling_worker,
    kind_fns,
    probe_fns,
)
from tests.vector.conftest import space_env_fn

pytestmark = [
    pytest.mark.timeout(60),
    # Gymnasium logs a worker's exception as warnings; the records compare the raise.
    pytest.mark.filterwarnings(r"ignore:\x1b\[31mERROR:UserWarning"),
]


# --- 7. the types of actions envs receive --------------------------------------------


ACTIONS: dict[str, tuple[str, Any]] = {
    "discrete": ("discrete", np.array([0, 2])),
    "discrete_list": ("discrete", [1, 2]),
    "box": ("box", np.array([[0.5, -0.5], [0.25, 1.0]], np.float32)),
    "multidiscrete": ("multidiscrete", np.array([[1, 2], [0, 1]])),
    "sleep": ("sleep", np.array([0.01, 0.02])),
}


@pytest.mark.parametrize("case", list(ACTIONS))
def test_action_types(case: str) -> None:
    """Each env receives its action with the same python type, dtype and shape."""
    kind, actions = ACTIONS[case]

    def scenario(make: MakeVec) -> Any:
        vec = make(probe_fns(kind))
        vec.reset(seed=0)
        vec.step(actions)
        vec.step(actions)
        return vec.get_attr("seen")

    run_both(scenario)


# --- 8. autoreset modes -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["box", "discrete"])
@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda m: m.name)
def test_autoreset_modes(mode: AutoresetMode, kind: str) -> None:
    """Short episodes in NEXT_STEP, SAME_STEP (final_obs / final_info) and DISABLED
    (masked resets): identical steps, infos and their types."""

    def scenario(make: MakeVec) -> Any:
        vec = make([space_env_fn(kind, 3, 0.2) for _ in range(3)], autoreset_mode=mode)
        record: list[Any] = [vec.metadata["autoreset_mode"], vec.reset(seed=1)]
        for i, actions in enumerate(batched_actions(kind, 3, 10, seed=2)):
            step = vec.step(actions)
            record.append(step)
            done = step[2] | step[3]
            if mode is AutoresetMode.DISABLED and done.any():
                record.append(vec.reset(seed=50 + i, options={"reset_mask": done}))
        return record

    run_both(scenario)


# --- 9. constructor keywords -------------------------------------------------------------


KEYWORDS: dict[str, dict[str, Any]] = {
    "shared_memory_true": {"shared_memory": True},
    "shared_memory_false": {"shared_memory": False},
    "spawn": {"context": "spawn"},
    "daemon_false": {"daemon": False},
    "max_concurrency_1": {"max_concurrency": 1},
    "max_concurrency_0": {"max_concurrency": 0},
    "max_concurrency_str": {"max_concurrency": "2"},
}


@pytest.mark.parametrize("case", list(KEYWORDS))
def test_constructor_keywords(case: str) -> None:
    """Gymnasium's keywords are accepted with the same results, or refused alike."""
    run_both(lambda make: rollout(make, kind_fns("dict"), "dict", **KEYWORDS[case]))


@pytest.mark.parametrize("shared_memory", [True, False])
def test_copy_false_returns_live_buffers(shared_memory: bool) -> None:
    """copy=False: the arrays a reset returned are overwritten by later steps."""

    def scenario(make: MakeVec) -> Any:
        memory = {} if shared_memory else {"shared_memory": False}  # True: the default
        vec = make(kind_fns("box"), copy=False, **memory)
        first, _ = vec.reset(seed=0)
        before = first.copy()
        obs = vec.step(batched_actions("box", 2, 1)[0])[0]
        return {
            "shares": np.shares_memory(first, obs),
            "overwritten": not np.array_equal(first, before),
            "first_now": first.copy(),
        }

    want, _ = run_both(scenario)
    assert want["shares"]
    assert want["overwritten"]


def test_custom_worker(record_property: Callable[[str, object], None]) -> None:
    """Gymnasium's `worker=` keyword: the same results (the custom worker doubles the
    rewards), or a clear ValueError/TypeError naming `worker` (the accepted refusal;
    property custom_worker=refused); a bare "unexpected keyword argument" fails."""
    fns = kind_fns("box")
    want = run_on(lambda make: rollout(make, fns, worker=doubling_worker), AsyncVectorEnv)
    got = run_pararl(lambda make: rollout(make, fns, worker=doubling_worker))
    if isinstance(got, Raised) and not SELF_CHECK:
        record_property("custom_worker", "refused")
        assert issubclass(got.kind, (ValueError, TypeError)), got.kind
        text = str(got.exc)
        assert re.search(r"\bworker\b", text), text
        assert "unexpected keyword argument" not in text, f"a bare signature error: {text}"
        return
    record_property("custom_worker", "identical")
    assert_conforms(got, want)


# --- 10. call, get_attr, set_attr, render --------------------------------------------------


def calls(make: MakeVec) -> dict[str, Any]:
    vec = make([CallEnv for _ in range(3)])
    vec.reset(seed=4)
    vec.step(np.zeros((3, 3), np.float32))
    record: dict[str, Any] = {"render_mode": vec.render_mode, "metadata": vec.metadata}
    record["get_attr"] = [vec.get_attr("episode_len"), vec.get_attr("kind")]
    record["seeds_via_call"] = vec.call("np_random_seed")
    record["set_one"] = vec.set_attr("label", "same")
    record["label_one"] = vec.get_attr("label")
    record["set_each"] = vec.set_attr("label", ["a", "b", "c"])
    record["label_each"] = vec.get_attr("label")
    record["scaled"] = vec.call("scaled", 3, offset=1)
    record["probe"] = vec.call("probe", np.arange(2, dtype=np.int16), scale=2)
    vec.call_async("probe", 1.5)
    record["probe_async"] = vec.call_wait(timeout=10.0)
    record["render"] = vec.render()
    return record


def test_call_get_attr_set_attr_render() -> None:
    """Results of call/get_attr/set_attr/render, their container and element types."""
    run_both(calls)


@pytest.mark.parametrize("name", ["reset", "step", "close", "no_such_attribute"])
def test_call_refusals(name: str) -> None:
    """call() of reserved names (Gymnasium: ValueError) and get_attr of a missing
    attribute (AttributeError): same class and message; close() then works."""

    def scenario(make: MakeVec) -> Any:
        vec = make(kind_fns("box"))
        vec.reset(seed=0)
        return {"error": capture(vec.get_attr, name), "close": capture(vec.close)}

    run_both(scenario)
