"""Conformance harness: one scenario, run against `gymnasium.vector.AsyncVectorEnv`
and against `pararl.vector.ParallelVectorEnv`, must give identical records.

A scenario is `scenario(make_vec) -> record`; `make_vec(env_fns, **gym_kwargs)`
builds the backend under test (closed afterwards) and the record is any nesting of
observations, infos, spaces, returned values and `Raised` (what a call raised).

Knob: `CONFORMANCE_SELF_CHECK=1` makes the "pararl" side an `AsyncVectorEnv` too,
and skips the pararl-only checks; every conformance test must then pass (it proves
that a failure is a difference of ParallelVectorEnv, not a bug of the test).

Env classes and factories are module-level so that they pickle (spawn).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium.vector import AsyncVectorEnv, VectorEnv

from pararl.vector import ParallelVectorEnv
from tests.vector.conformance_envs import batched_actions
from tests.vector.conftest import EnvFn

SELF_CHECK = os.environ.get("CONFORMANCE_SELF_CHECK") == "1"
PARARL = "AsyncVectorEnv (self-check)" if SELF_CHECK else "ParallelVectorEnv"

MakeVec = Callable[..., VectorEnv]
Scenario = Callable[[MakeVec], Any]

# --- records ---------------------------------------------------------------------


@dataclass(frozen=True)
class Raised:
    """What a call raised: its class, its text (None: only the class is compared)
    and the exception itself, for backend-specific checks."""

    kind: type[BaseException]
    message: str | None
    exc: BaseException = field(compare=False, repr=False)


def capture(
    fn: Callable[..., Any],
    *args: Any,
    message: bool = True,
    vec: VectorEnv | None = None,
    **kwargs: Any,
) -> Any:
    """`fn(*args, **kwargs)`, or a `Raised` record of its exception; `vec`'s class
    name in the message reads `<vec>` (messages name the class that raised)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        text = str(exc)
        if vec is not None:
            text = text.replace(type(vec).__name__, "<vec>")
        cause: BaseException | None = exc
        while cause is not None:  # no frames kept alive: a half-built env is freed
            cause.__traceback__ = None
            cause = cause.__cause__ or cause.__context__
        return Raised(type(exc), text if message else None, exc)


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 240 else text[:240] + "..."


def _exc(raised: Raised) -> str:
    return f"{raised.kind.__name__}({_brief(str(raised.exc))})"


def differences(got: Any, want: Any, path: str = "") -> list[str]:
    """Where `got` (pararl's record) departs from `want` (AsyncVectorEnv's): structure,
    dict keys (not their order), python and numpy types, dtypes, shapes, values (NaN ==
    NaN); a raised exception must be catchable as Gymnasium's class and contain its
    text. Key order is free because Gymnasium itself is not consistent: SyncVectorEnv
    puts `final_obs` before `final_info`, AsyncVectorEnv after (tests/vector/test_api.py
    holds pararl to SyncVectorEnv's order)."""
    where = path or "<root>"
    if isinstance(want, Raised) or isinstance(got, Raised):
        if not isinstance(got, Raised):
            return [f"{where}: AsyncVectorEnv raised {_exc(want)}; {PARARL} returned {_brief(got)}"]
        if not isinstance(want, Raised):
            return [f"{where}: {PARARL} raised {_exc(got)}; AsyncVectorEnv returned {_brief(want)}"]
        if not isinstance(got.exc, want.kind):
            return [f"{where}: {PARARL} raised {_exc(got)}, AsyncVectorEnv {_exc(want)}"]
        if want.message is not None and want.message not in (got.message or ""):
            return [f"{where}: message {got.message!r} lacks Gymnasium's {want.message!r}"]
        return []
    if type(got) is not type(want):
        return [f"{where}: type {type(got).__name__} != {type(want).__name__} ({_brief(got)})"]
    out: list[str] = []
    if isinstance(want, dict):
        if set(got) != set(want):  # not their order: Gymnasium's Sync and Async
            out.append(f"{where}: keys {list(got)} != {list(want)}")  # envs differ there
        for key in (k for k in want if k in got):
            out += differences(got[key], want[key], f"{path}/{key}")
    elif isinstance(want, (tuple, list)):
        if len(got) != len(want):
            return [f"{where}: length {len(got)} != {len(want)}"]
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            out += differences(g, w, f"{path}/{i}")
    elif isinstance(want, np.ndarray):
        if (got.dtype, got.shape) != (want.dtype, want.shape):
            return [f"{where}: {got.dtype}{list(got.shape)} != {want.dtype}{list(want.shape)}"]
        if want.dtype == object:
            for i, (g, w) in enumerate(zip(got.ravel(), want.ravel(), strict=True)):
                out += differences(g, w, f"{path}[{i}]")
        elif not np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"):
            out.append(f"{where}: {_brief(got)} != {_brief(want)}")
    elif isinstance(want, (float, np.floating)) and np.isnan(want):
        if not np.isnan(got):
            out.append(f"{where}: {got!r} is not NaN")
    elif not bool(got == want):
        out.append(f"{where}: {_brief(got)} != {_brief(want)}")
    return out


def assert_conforms(got: Any, want: Any) -> None:
    """No `differences` (all of them listed, at most 12)."""
    diffs = differences(got, want)
    more = f"\n... and {len(diffs) - 12} more" if len(diffs) > 12 else ""
    assert not diffs, f"{PARARL} departs from AsyncVectorEnv:\n" + "\n".join(diffs[:12]) + more


# --- running a scenario on both backends -------------------------------------------


def pararl_vec(env_fns: Sequence[EnvFn], **kwargs: Any) -> VectorEnv:
    """ParallelVectorEnv with Gymnasium's keywords, 2 workers when there are >= 2
    envs (cross-worker paths); an AsyncVectorEnv under the self-check."""
    if SELF_CHECK:
        return AsyncVectorEnv(env_fns, **kwargs)
    return ParallelVectorEnv(env_fns, num_workers=min(2, len(env_fns)), **kwargs)


def run_on(scenario: Scenario, factory: MakeVec) -> Any:
    """The record of `scenario` on `factory`'s backend (fork unless it says); every
    env it built is closed."""
    made: list[VectorEnv] = []
    raised = False

    def make(env_fns: Sequence[EnvFn], **kwargs: Any) -> VectorEnv:
        nonlocal raised
        kwargs.setdefault("context", "fork")
        try:
            env = factory(list(env_fns), **kwargs)
        except BaseException:
            raised = True
            raise
        made.append(env)
        return env

    try:
        return scenario(make)
    finally:
        for env in made:
            env.close()
        made.clear()
        if raised:  # an env whose constructor raised stops its workers in __del__
            gc.collect()  # (only then; tests/vector/conftest.py keeps it to the test's objects)


def run_pararl(scenario: Scenario) -> Any:
    try:
        return run_on(scenario, pararl_vec)
    except Exception as exc:
        raise AssertionError(
            f"{PARARL} raised {type(exc).__name__}: {exc} where AsyncVectorEnv "
            "ran the scenario to the end"
        ) from exc


def run_both(scenario: Scenario) -> tuple[Any, Any]:
    """(AsyncVectorEnv's record, pararl's record), asserted to conform."""
    want = run_on(scenario, AsyncVectorEnv)
    got = run_pararl(scenario)
    assert_conforms(got, want)
    return want, got


def rollout(make: MakeVec, fns: list[EnvFn], kind: str = "box", steps: int = 4, **kw: Any) -> Any:
    """Spaces, a seeded reset and `steps` steps with fixed actions (a `Raised` when the
    constructor raises)."""
    vec = capture(make, fns, message=False, **kw)
    if isinstance(vec, Raised):
        return vec
    names = ("single_observation_space", "observation_space", "single_action_space")
    record = {name: getattr(vec, name) for name in (*names, "action_space")}
    record["reset"] = vec.reset(seed=3)
    record["steps"] = [vec.step(a) for a in batched_actions(kind, len(fns), steps)]
    return record
