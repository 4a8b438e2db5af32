"""A config's fields read from JSON by their annotated types (`config.saved` reads a
run's config.json with them): a value of another type is refused by name, before it
can reach a learner as something else (`"5"` for 5, `true` for 1, a list for a
string)."""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

from pararl.config.env_kwargs import check_env_kwargs
from pararl.config.env_source import EnvArg

# the largest size of an int field: counts, widths and seeds end up in numpy and
# torch, whose integers have 64 bits
INT_LIMIT = 2**63

# float fields whose infinity reads as "no limit", so that a run started with one
# (`--target-return inf`) reads back; any other float must be finite (JSON's 1e400
# reads as infinity)
NO_LIMIT: dict[str, str] = {
    "target_return": "never reached: the run trains its whole budget",
    "checkpoint_every_s": "no timed `latest` checkpoint",
    "log_every_s": "no log lines between evaluations",
    "ray_timeout_s": "actors are waited for without end",
    "max_grad_norm": "gradients are not clipped",
    "clip_obs": "observations are not clipped",
    "clip_reward": "rewards are not clipped",
    "target_noise_clip": "the smoothing noise is not clipped",
}


class WrongValue(Exception):  # noqa: N818 - a value, not a failure of the code
    """A value that is not of its field's type: the message names the field, what it
    must be, and the value given."""


_FIELD_TYPES: dict[type, dict[str, Any]] = {}

# types that take more from Python than config.json holds, as what it holds: `env`
# (a factory is saved as its name, `config.env_source`)
SAVED_AS: dict[Any, Any] = {EnvArg: str}


def field_types(cls: type) -> dict[str, Any]:
    """The annotated type of each field of the dataclass `cls`, in field order, as
    config.json holds it (`SAVED_AS`; `Annotated` extras, such as the command line's,
    dropped; found once per class)."""
    if cls not in _FIELD_TYPES:
        hints = typing.get_type_hints(cls)
        _FIELD_TYPES[cls] = {
            f.name: SAVED_AS.get(hints[f.name], hints[f.name]) for f in dataclasses.fields(cls)
        }
    return _FIELD_TYPES[cls]


def shown(value: Any, limit: int = 60) -> str:
    """`value` as JSON writes it, on one line (a string's newlines escaped), cut to
    `limit` characters."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(hint: Any) -> str:
    """What a JSON value of the type `hint` is, for messages; a TypeError for a type
    config.json cannot hold."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return f"{describe(_arm(hint))} or null"
    if origin is Literal:
        return "one of " + ", ".join(shown(choice) for choice in args)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return "a list of integers" if args[0] is int else f"a list, each {describe(args[0])}"
    if origin is dict:
        return "a JSON object"
    simple = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    if hint in simple:
        return simple[hint]
    if hint is Path:
        return "a path (a string)"
    raise TypeError(f"config.json cannot hold a {hint}")


def read(value: Any, hint: Any, name: str, expected: str | None = None) -> Any:
    """`value`, as JSON gave it, as the field `name` of type `hint` holds it (an int
    as a float where a float is due, a list as a tuple, a string as a Path); a
    WrongValue when it is no such value. `expected`: what to call the type in it."""
    expected = expected or describe(hint)

    def wrong(what: str = expected) -> WrongValue:
        return WrongValue(f"{name} must be {what}, not {shown(value)}")

    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return None if value is None else read(value, _arm(hint), name, expected)
    if origin is Literal:
        if any(type(value) is type(choice) and value == choice for choice in args):
            return value
        raise wrong()
    if origin is tuple:  # tuple[X, ...] (`describe` has refused any other)
        if not isinstance(value, list):
            raise wrong()
        return tuple(read(item, args[0], f"{name}[{i}]") for i, item in enumerate(value))
    if origin is dict:  # the env's keyword arguments
        if not isinstance(value, dict):
            raise wrong()
        problem = check_env_kwargs(value)
        if problem is not None:
            raise WrongValue(problem)
        return value
    if hint is bool or hint is str:
        if type(value) is not hint:
            raise wrong()
        return value
    if hint is int:  # JSON's true and false are not 1 and 0 here
        if type(value) is not int:
            raise wrong()
        if abs(value) >= INT_LIMIT:
            raise wrong("an integer of at most 64 bits")
        return value
    if hint is float:  # a hand edit writes 1 for 1.0
        if type(value) not in (int, float):
            raise wrong()
        try:
            number = float(value)
        except OverflowError:  # an int beyond any float
            number = math.inf if value > 0 else -math.inf  # copysign overflows too
        if math.isnan(number) or (math.isinf(number) and name not in NO_LIMIT):
            raise wrong("a finite number")
        return number
    if hint is Path:
        if type(value) is not str or not value:
            raise wrong()
        return Path(value)
    raise TypeError(f"config.json cannot hold a {hint}")


def _arm(hint: Any) -> Any:
    """The type of `X | None` besides None (one in every config)."""
    arms = [arm for arm in typing.get_args(hint) if arm is not type(None)]
    if len(arms) != 1 or len(typing.get_args(hint)) != 2:
        raise TypeError(f"config.json cannot hold a {hint}")
    return arms[0]


__all__ = ["INT_LIMIT", "NO_LIMIT", "WrongValue", "describe", "field_types", "read", "shown"]
