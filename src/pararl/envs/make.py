"""Env factories: validated ids, picklable constructors, episode statistics.

An env is built as `gym.make` builds it from the same id and keyword arguments
(`--env-kwargs`): `render_mode` is passed only when a frame is asked for (an env
whose constructor does not take it trains all the same), and a `module:EnvId`
imports its module as `pararl.envs.modules` says. An env a user's factory builds
(`config.env_source`) is taken as it comes, called with the same keyword arguments,
and gets the wrappers every env gets (bounded Box actions, episode statistics); the
preprocessing pararl gives Atari and MinAtar ids is the factory's to choose.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from pararl.config.env_source import EnvArg, EnvFactory, is_factory_name, source_of
from pararl.envs.atari import AtariOptions, is_atari, make_atari, register_atari
from pararl.envs.masks import ActionMasksInInfo, gives_masks, has_mask_method
from pararl.envs.minatar import is_minatar, make_minatar, register_minatar
from pararl.envs.modules import added_paths, import_env_module, split_env_id
from pararl.envs.quiet import compiles_mujoco, quiet_mujoco
from pararl.envs.wrappers import CartPoleShapedReward, ClipToBounds
from pararl.errors import UsageError

WRAPPERS = {"none": None, "cartpole-shaped": CartPoleShapedReward}

# what to install for the env families whose packages are optional, by the module
# their entry point lives in
INSTALL = {
    "gymnasium.envs.box2d": "pip install 'gymnasium[box2d]'",
    "gymnasium.envs.mujoco": "pip install 'pararl[mujoco]'",
    "ale_py": "pip install 'pararl[atari]'",  # ale-py and OpenCV
    "minatar": "pip install 'pararl[minatar]'",
}


def install_hint(env_id: str) -> str | None:
    """What to install for `env_id`'s family, if pararl knows it."""
    if env_id.startswith("ALE/"):
        return INSTALL["ale_py"]
    if is_minatar(env_id):
        return INSTALL["minatar"]
    try:
        entry = str(gym.spec(env_id).entry_point)
    except gym.error.Error:
        return None
    return next((hint for module, hint in INSTALL.items() if entry.startswith(module)), None)


@dataclass(frozen=True)
class Probed:
    """What building the env once tells: its spaces, the registration it was made
    from (`env.unwrapped.spec`: None for an env a factory built without `gym.make`),
    and its time limit (its `TimeLimit`'s, if it has one)."""

    observation_space: gym.Space
    action_space: gym.Space
    spec: EnvSpec | None
    time_limit: int | None


def probe(env: EnvArg, wrapper: str = "none", kwargs: Mapping[str, Any] | None = None) -> Probed:
    """Build the env once (Box actions with the env's own bounds: `ClipToBounds`); a
    missing optional package is a UsageError that names what to install, keyword
    arguments the env does not take one that names them."""
    source = source_of(env)
    try:
        built = make_env(source, wrapper, kwargs=kwargs)
    except (gym.error.DependencyNotInstalled, ImportError) as exc:
        hint = None if isinstance(source, EnvFactory) else install_hint(split_env_id(source)[1])
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(
            f"env '{source}' needs a package that is missing ({first}); "
            f"{hint or 'install the package it names'}"
        ) from exc
    except TypeError as exc:
        if "argument" not in str(exc):
            raise
        flag = "env_kwargs" if isinstance(source, EnvFactory) else "--env-kwargs"
        given = f" with {flag} {dict(kwargs)}" if kwargs else ""
        raise UsageError(
            f"env '{source}' cannot be built{given}: {exc}; pass the keyword arguments "
            f"its constructor takes ({flag} KEY=VALUE ...)"
        ) from exc
    try:
        spec = built.unwrapped.spec
        return Probed(built.observation_space, built.action_space, spec, time_limit(built))
    finally:
        built.close()


def probe_env(
    env: EnvArg, wrapper: str = "none", kwargs: Mapping[str, Any] | None = None
) -> tuple[gym.Space, gym.Space]:
    """The env's spaces (`probe`)."""
    probed = probe(env, wrapper, kwargs)
    return probed.observation_space, probed.action_space


def time_limit(env: gym.Env) -> int | None:
    """The `max_episode_steps` of the outermost `TimeLimit` around `env`, if any."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.TimeLimit):
            return int(env._max_episode_steps)
        env = env.env
    return None


def probe_masks(
    env: EnvArg,
    action_space: gym.Space,
    wrapper: str = "none",
    kwargs: Mapping[str, Any] | None = None,
) -> bool:
    """Whether the env (whose actions `probe_env` read) gives action masks
    (`envs.masks`): Box actions take none; an env of other actions is built and reset
    once to see. Masks pararl cannot take are a UsageError that says why."""
    if isinstance(action_space, gym.spaces.Box):
        return False
    built = make_env(env, wrapper, kwargs=kwargs)
    try:
        return gives_masks(built)
    except ValueError as exc:
        raise UsageError(f"env '{source_of(env)}': {exc}") from exc
    finally:
        built.close()


def check_env_id(
    env: EnvArg,
    module_dirs: Sequence[str | Path] = (),
    named_by: Path | None = None,
    trusted: bool = False,
) -> EnvSpec | None:
    """The env's spec, or a UsageError that says what to do (None: an env a factory
    builds, which has none to look up: `probe` builds it). A `module:EnvId`
    imports its module (which registers its envs), also from the working directory
    and then from `module_dirs` (where a saved run found it); `named_by`: the run
    directory that names it, said with the module's file before the import, which
    looks in the directories the run names only when `trusted` (`import_env_module`). A
    factory's name, read back from a run's config.json without the factory, is a
    UsageError that says how to give it."""
    source = source_of(env)
    if isinstance(source, EnvFactory):
        return None
    if is_factory_name(source):
        raise UsageError(factory_needed(source, named_by))
    module, env_id = split_env_id(source)
    if module is not None:
        import_env_module(module, f"{module}:{env_id}", module_dirs, named_by, trusted)
    if env_id.startswith("ALE/"):  # Atari ids are registered by importing ale_py
        try:
            importlib.import_module("ale_py")
        except ImportError as exc:
            raise UsageError(
                f"env '{env_id}' is an Atari game, which needs ale-py: {INSTALL['ale_py']}"
            ) from exc
    if is_minatar(env_id) and not register_minatar():  # MinAtar registers on request
        raise UsageError(
            f"env '{env_id}' is a MinAtar game, which needs minatar: {INSTALL['minatar']}"
        )
    try:
        return gym.spec(env_id)
    except gym.error.Error as exc:
        if register_atari():  # NoFrameskip-v4 and the like appear once ale-py is in
            with contextlib.suppress(gym.error.Error):
                return gym.spec(env_id)
        if named_by is not None and module is None:
            # a saved run's env that no package registers: registered at run time
            raise UsageError(
                f"unknown env id '{env_id}': {named_by} was trained where it was "
                "registered (gymnasium.register in that program); register it again "
                "first (from Python, then pararl.evaluate or pararl.load), or train "
                f"with --env MODULE:{env_id} so that pararl imports the module that "
                "registers it"
            ) from exc
        close = difflib.get_close_matches(env_id, list(gym.registry), n=3)
        hint = (
            f"; did you mean {', '.join(close)}?"
            if close
            else ("; see gymnasium.pprint_registry() for the ids available")
        )
        raise UsageError(f"unknown env id '{env_id}'{hint}") from exc
    except ImportError as exc:  # e.g. MuJoCo envs without the mujoco package
        hint = install_hint(env_id) or "install the package it names"
        raise UsageError(
            f"env '{env_id}' needs a package that is not installed ({exc}); {hint}"
        ) from exc


def factory_needed(name: str, run: Path | None) -> str:
    """What to do for a run whose env a factory made, saved by the factory's name."""
    if run is None:
        return (
            f"env '{name}' is the name of an env factory, which only Python can pass: "
            "pararl.train(...Config(env=factory))"
        )
    return (
        f"{run}: its env was made in Python by {name}, which config.json cannot hold; "
        "give the factory again from Python: pararl.load(RUN, env=factory), "
        "pararl.evaluate(RUN, env=factory), or pararl.train(...Config(resume=RUN, env=factory))"
    )


def make_env(
    env: EnvArg,
    wrapper: str = "none",
    render_mode: str | None = None,
    training: bool = False,
    kwargs: Mapping[str, Any] | None = None,
    module_dirs: Sequence[str] = (),
) -> gym.Env:
    """Build one env with episode statistics (and the optional reward wrapper);
    Atari games get their standard preprocessing (`training`: episodic lives and
    clipped rewards too), MinAtar games their sticky actions (`envs.minatar`).
    `kwargs` go to `gym.make` (or the factory) as given; `render_mode` only when it
    is set."""
    source = source_of(env)
    made = dict(kwargs or {})
    if render_mode is not None:
        made["render_mode"] = render_mode
    if isinstance(source, EnvFactory):
        built = with_statistics(source(**made))
    else:
        built = _make_by_id(source, made, training, module_dirs)
    if has_mask_method(built):
        built = ActionMasksInInfo(built)  # masks travel in the info (`envs.masks`)
    wrapper_cls = WRAPPERS[wrapper]
    return built if wrapper_cls is None else wrapper_cls(built)


def _make_by_id(
    source: str, made: dict[str, Any], training: bool, module_dirs: Sequence[str]
) -> gym.Env:
    module, env_id = split_env_id(source)
    if module is not None:
        import_env_module(module, f"{module}:{env_id}", module_dirs)
    import pararl.envs  # noqa: F401 - registers the pararl/ ids in worker processes

    if env_id not in gym.registry:
        register_atari()
    if is_atari(env_id):
        return make_atari(env_id, AtariOptions.for_training(training), made)
    if is_minatar(env_id):
        return make_minatar(env_id, made)
    spec = gym.registry.get(env_id)
    if spec is not None and compiles_mujoco(spec.entry_point):
        quiet_mujoco()
    env = gym.make(env_id, **made)
    if isinstance(env.action_space, gym.spaces.Box):
        env = ClipToBounds(env)  # Gaussian policies sample beyond the bounds
    return gym.wrappers.RecordEpisodeStatistics(env)  # true return, before shaping


def with_statistics(env: gym.Env) -> gym.Env:
    """A factory's env with what pararl needs of every env: Box actions clipped to
    their bounds, and episode statistics (unless it records them already)."""
    if isinstance(env.action_space, gym.spaces.Box):
        env = ClipToBounds(env)
    inner: Any = env
    while isinstance(inner, gym.Wrapper):
        if isinstance(inner, gym.wrappers.RecordEpisodeStatistics):
            return env
        inner = inner.env
    return gym.wrappers.RecordEpisodeStatistics(env)


def env_factory(
    env: EnvArg,
    wrapper: str = "none",
    render_mode: str | None = None,
    training: bool = False,
    kwargs: Mapping[str, Any] | None = None,
) -> functools.partial[gym.Env]:
    """A picklable zero-argument constructor (works under every start method);
    `training`: the env a learner gets its data from (not the evaluation's). It
    carries the directories this process added to `sys.path` for env modules, so a
    process that did not inherit them imports the module from there too."""
    if wrapper not in WRAPPERS:
        raise UsageError(f"unknown wrapper '{wrapper}'; choose one of {', '.join(WRAPPERS)}")
    return functools.partial(
        make_env, source_of(env), wrapper, render_mode, training, dict(kwargs or {}), added_paths()
    )
