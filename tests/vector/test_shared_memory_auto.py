"""`shared_memory="auto"` (pararl's): any space works, with the values Gymnasium's
`AsyncVectorEnv(shared_memory=False)` gives, while every array leaf stays in shared
memory and only the others travel pickled."""

from __future__ import annotations

from typing import Any

import pytest
from gymnasium.vector import AsyncVectorEnv

from pararl.vector import ParallelVectorEnv
from pararl.vector.spaces import ARRAY_SPACES, Pickled, leaf_spaces
from tests.vector.conformance import assert_conforms, rollout, run_on
from tests.vector.conformance_envs import SHAREABLE_KINDS, UNSHAREABLE_KINDS, any_space, kind_fns

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("kind", ["dict", "text", "graph", "dict_text", "tuple_mixed", "custom"])
def test_auto_gives_gymnasiums_values(kind: str) -> None:
    want = run_on(
        lambda make: rollout(make, kind_fns(kind), kind, shared_memory=False), AsyncVectorEnv
    )
    vec = ParallelVectorEnv(kind_fns(kind), shared_memory="auto", num_workers=2, context="fork")
    try:
        assert_conforms(rollout(lambda fns, **kw: vec, kind_fns(kind), kind), want)
    finally:
        vec.close()


@pytest.mark.parametrize("kind", SHAREABLE_KINDS + UNSHAREABLE_KINDS)
def test_auto_pickles_only_what_cannot_be_shared(kind: str) -> None:
    leaves = leaf_spaces(any_space(kind), "obs").values()
    unshareable = sum(not isinstance(leaf, ARRAY_SPACES) for leaf in leaves)
    vec = ParallelVectorEnv(kind_fns(kind), shared_memory="auto", num_workers=1)
    try:
        held: list[Any] = vec._obs_unshared
        assert len(held) == unshareable
        assert all(isinstance(h, Pickled) for h in held)
    finally:
        vec.close()
