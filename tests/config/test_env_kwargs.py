"""`--env-kwargs`: KEY=VALUE pairs with JSON values where they parse, or one JSON
object; anything else is a one-line error, and only JSON values are taken."""

from __future__ import annotations

import pytest

from pararl.config import DQNConfig
from pararl.config.env_kwargs import parse_env_kwargs
from pararl.errors import UsageError


def test_pairs_and_json() -> None:
    assert parse_env_kwargs(["size=5", "walls=[1, 2]", "name=maze", "hard=true"]) == {
        "size": 5,
        "walls": [1, 2],
        "name": "maze",
        "hard": True,
    }
    assert parse_env_kwargs(['{"size": 5, "goal": {"x": 1}}']) == {"size": 5, "goal": {"x": 1}}
    assert parse_env_kwargs([]) == {}


@pytest.mark.parametrize("bad", ["{size: 5}", "size", "=5"])
def test_bad_values_say_what_to_give(bad: str) -> None:
    with pytest.raises(ValueError, match=r"JSON object|KEY=VALUE"):
        parse_env_kwargs([bad])


def test_only_json_values_are_taken() -> None:
    DQNConfig(env_kwargs={"size": 5}).validate()
    with pytest.raises(UsageError, match="JSON values"):
        DQNConfig(env_kwargs={"size": object()}).validate()
    with pytest.raises(UsageError, match="JSON values"):
        DQNConfig(env_kwargs={"size": float("nan")}).validate()
