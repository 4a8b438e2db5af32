"""What `env=` takes: a registered env id (the command line's only kind), or, from
Python, what builds one: a factory (any callable that returns a `gymnasium.Env`,
called with `env_kwargs`), an env class, or an `EnvSpec`.

A config holds either an id (`str`) or an `EnvFactory`; `env_source` turns what the
user gave into one of them when the config is made, and refuses anything else there,
in one line. A built env is refused too: a run needs one env per worker and per
evaluation, and a copy of a running env is not in general a faithful one.

A factory travels to the processes that build envs (workers, the evaluation
process, Ray actors) pickled by value where it must be (cloudpickle: lambdas,
closures, functions and classes of the user's script), as Gymnasium's
`AsyncVectorEnv` sends its factories. `config.json` cannot hold code: a factory is
saved as its name (`my_envs.make_maze()`, `<lambda>()`), which reads back as an env
no id names (`is_factory_name`); such a run is evaluated, loaded or resumed only
from Python, given the factory again.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from pararl.errors import UsageError

# what `env=` may be given from Python (a run holds a str or an `EnvFactory`)
EnvArg = str | Callable[..., gym.Env] | EnvSpec


class EnvFactory:
    """An env the user's code builds: `factory(**kwargs)` returns a new one. `name`:
    how the run names it (messages, config.json), its qualified name and `()`."""

    __slots__ = ("make", "name")

    def __init__(self, make: Callable[..., Any], name: str) -> None:
        self.make, self.name = make, name

    def __call__(self, **kwargs: Any) -> gym.Env:
        env = self.make(**kwargs)
        if not isinstance(env, gym.Env):
            raise UsageError(
                f"env factory {self.name} returned a {type(env).__name__}, not a gymnasium.Env"
            )
        return env

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"EnvFactory({self.name})"

    def __deepcopy__(self, memo: dict[int, Any]) -> EnvFactory:
        return self  # code, not data: copies of a config share it

    def __getstate__(self) -> tuple[bytes, str]:
        import cloudpickle

        return cloudpickle.dumps(self.make), self.name

    def __setstate__(self, state: tuple[bytes, str]) -> None:
        make, self.name = state
        self.make = pickle.loads(make)


def factory_name(fn: Callable[..., Any]) -> str:
    """`module.qualname()` (the module left out for the user's script, `__main__`); a
    partial by the function it wraps."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    named = fn if hasattr(fn, "__qualname__") else type(fn)
    module = getattr(named, "__module__", None)
    qualname = getattr(named, "__qualname__", type(fn).__name__)
    return f"{qualname}()" if module in (None, "__main__") else f"{module}.{qualname}()"


def source_of(env: EnvArg) -> str | EnvFactory:
    """A config's env (an id or an `EnvFactory` once the config is made) as one of
    those two."""
    return env_source(env)[0]


def is_factory_name(env: str) -> bool:
    """Whether `env` is a factory's name as config.json saves it (no env id has
    parentheses)."""
    return env.endswith(")")


def env_source(value: object, kwargs: Any = None) -> tuple[str | EnvFactory, Any]:
    """`value` as a run holds it, with the env keyword arguments `kwargs` (an
    `EnvSpec`'s own that its registration lacks are added under them; otherwise
    as given, checked by the config's `validate`): an id, or an `EnvFactory`; a
    one-line UsageError for anything else."""
    if isinstance(value, (str, EnvFactory)):
        return value, kwargs
    if isinstance(value, EnvSpec):
        source, own = _from_spec(value)
        return source, {**own, **kwargs} if isinstance(kwargs, dict) and own else kwargs
    if isinstance(value, gym.Env):
        spec = value.unwrapped.spec
        named = f"env='{spec.id}' or " if spec is not None else ""
        raise UsageError(
            f"env= is a built env ({type(value.unwrapped).__name__}); a run builds one per "
            f"worker and per evaluation: pass {named}a factory, e.g. env=lambda: "
            f"{type(value.unwrapped).__name__}(...)"
        )
    if isinstance(value, type) and not issubclass(value, gym.Env):
        raise UsageError(
            f"env= is the class {value.__name__}, which is not a gymnasium.Env; pass an env "
            "class, a factory that returns an env, or a registered env id"
        )
    if callable(value):
        return EnvFactory(value, factory_name(value)), kwargs
    raise UsageError(
        f"env= must be a registered env id, a factory that returns a gymnasium.Env, an env "
        f"class or an EnvSpec; got {_short(value)} ({type(value).__name__})"
    )


def _from_spec(spec: EnvSpec) -> tuple[str | EnvFactory, dict[str, Any]]:
    """A registered spec (or one that differs from its registration only in keyword
    arguments) is its id, with the keyword arguments that differ; any other is built
    by `gym.make(spec)`, as a factory."""
    registered = gym.registry.get(spec.id)
    if registered is not None:
        same = {name: getattr(spec, name) for name in ("entry_point", "max_episode_steps")}
        if same == {name: getattr(registered, name) for name in same}:
            own = {k: v for k, v in spec.kwargs.items() if registered.kwargs.get(k, _NONE) != v}
            return spec.id, own
    return EnvFactory(functools.partial(gym.make, spec), f"gymnasium.make({spec.id!r})"), {}


_NONE = object()


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


__all__ = ["EnvArg", "EnvFactory", "env_source", "factory_name", "is_factory_name", "source_of"]
