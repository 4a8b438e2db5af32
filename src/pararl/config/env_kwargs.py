"""`--env-kwargs`: keyword arguments for the env's constructor, as `gym.make` takes
them. On the command line either one JSON object or KEY=VALUE pairs, whose values
are read as JSON when they parse (`size=5`, `walls=[1,2]`, `hard=true`) and as
strings otherwise (`map=maze`); from Python a dict. They are saved in config.json,
so they must be JSON values."""

from __future__ import annotations

import json
from typing import Annotated, Any

from tyro.constructors import PrimitiveConstructorSpec


def parse_env_kwargs(args: list[str]) -> dict[str, Any]:
    """`['{"a": 1}']` or `['a=1', 'b=x']` -> `{"a": 1, ...}`; a ValueError that says
    what is wrong (the command line turns it into one line)."""
    kwargs: dict[str, Any] = {}
    for arg in args:
        if arg.lstrip().startswith("{"):
            try:
                value = json.loads(arg)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{arg!r} is not a JSON object ({exc.msg})") from None
            kwargs.update(value)
            continue
        key, sep, text = arg.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{arg!r}: give KEY=VALUE pairs or one JSON object")
        try:
            kwargs[key.strip()] = json.loads(text)
        except json.JSONDecodeError:
            kwargs[key.strip()] = text
    return kwargs


def check_env_kwargs(kwargs: object) -> str | None:
    """What is wrong with `kwargs` as env keyword arguments (None: nothing)."""
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        return "env_kwargs must be a dict with str keys"
    try:
        json.dumps(kwargs, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return f"env_kwargs must be JSON values (they are saved in config.json): {exc}"
    return None


EnvKwargs = Annotated[
    dict[str, Any],
    PrimitiveConstructorSpec(
        nargs="*",
        metavar="KEY=VALUE|JSON",
        instance_from_str=parse_env_kwargs,
        is_instance=lambda value: isinstance(value, dict),
        str_from_instance=lambda value: [json.dumps(value)] if value else [],
    ),
]

__all__ = ["EnvKwargs", "check_env_kwargs", "parse_env_kwargs"]
