"""A pytest plugin that makes `gymnasium.vector.AsyncVectorEnv` pararl's
`ParallelVectorEnv`, so Gymnasium's own vector tests run against it
(`compat/gymnasium-vector-tests.sh`). Loaded with `-p`, before any test module
imports the name."""

from __future__ import annotations

from typing import Any

import gymnasium.vector
import gymnasium.vector.async_vector_env as async_module

from pararl.vector import ParallelVectorEnv

gymnasium.vector.AsyncVectorEnv = ParallelVectorEnv  # type: ignore[misc]
async_module.AsyncVectorEnv = ParallelVectorEnv  # type: ignore[misc]  # make_vec's


def pytest_report_header() -> str:
    return "gymnasium.vector.AsyncVectorEnv is pararl.vector.ParallelVectorEnv"


def pytest_collection_modifyitems(items: list[Any]) -> None:
    """Any test module that bound the name some other way gets pararl's too."""
    for module in {item.module for item in items if getattr(item, "module", None)}:
        if getattr(module, "AsyncVectorEnv", None) is not None:
            module.AsyncVectorEnv = ParallelVectorEnv
