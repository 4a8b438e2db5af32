"""Env factories: validated ids, picklable constructors, episode statistics.

An env is built as `gym.make` builds it from the same id and keyword arguments
(`--env-kwargs`): `render_mode` is passed only when a frame is asked for (an env
whose constructor does not take it trains all the same), and a `module:EnvId`
imports its module as `pararl.envs.modules` says.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

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


def probe_env(
    env_id: str, wrapper: str = "none", kwargs: Mapping[str, Any] | None = None
) -> tuple[gym.Space, gym.Space]:
    """Build the env once for its spaces (Box actions with the env's own bounds:
    `ClipToBounds`); a missing optional package is a UsageError that names
    what to install, keyword arguments the env does not take one that names them."""
    try:
        env = make_env(env_id, wrapper, kwargs=kwargs)
    except (gym.error.DependencyNotInstalled, ImportError) as exc:
        hint = install_hint(split_env_id(env_id)[1]) or "install the package it names"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(
            f"env '{env_id}' needs a package that is missing ({first}); {hint}"
        ) from exc
    except TypeError as exc:
        if "argument" not in str(exc):
            raise
        given = f" with --env-kwargs {dict(kwargs)}" if kwargs else ""
        raise UsageError(
            f"env '{env_id}' cannot be built{given}: {exc}; pass the keyword arguments "
            "its constructor takes (--env-kwargs KEY=VALUE ...)"
        ) from exc
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


def probe_masks(
    env_id: str,
    action_space: gym.Space,
    wrapper: str = "none",
    kwargs: Mapping[str, Any] | None = None,
) -> bool:
    """Whether the env (whose actions `probe_env` read) gives action masks
    (`envs.masks`): Box actions take none; an env of other actions is built and reset
    once to see. Masks pararl cannot take are a UsageError that says why."""
    if isinstance(action_space, gym.spaces.Box):
        return False
    env = make_env(env_id, wrapper, kwargs=kwargs)
    try:
        return gives_masks(env)
    except ValueError as exc:
        raise UsageError(f"env '{env_id}': {exc}") from exc
    finally:
        env.close()


def check_env_id(
    env_id: str, module_dirs: Sequence[str | Path] = (), named_by: Path | None = None
) -> gym.envs.registration.EnvSpec:
    """The env's spec, or a UsageError that says what to do. A `module:EnvId`
    imports its module (which registers its envs), also from the working directory
    and then from `module_dirs` (where a saved run found it); `named_by`: the run
    directory that names it, said with the module's file before the import."""
    module, env_id = split_env_id(env_id)
    if module is not None:
        import_env_module(module, f"{module}:{env_id}", module_dirs, named_by)
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


def make_env(
    env_id: str,
    wrapper: str = "none",
    render_mode: str | None = None,
    training: bool = False,
    kwargs: Mapping[str, Any] | None = None,
    module_dirs: Sequence[str] = (),
) -> gym.Env:
    """Build one env with episode statistics (and the optional reward wrapper);
    Atari games get their standard preprocessing (`training`: episodic lives and
    clipped rewards too), MinAtar games their sticky actions (`envs.minatar`).
    `kwargs` go to `gym.make` as given; `render_mode` only when it is set."""
    module, env_id = split_env_id(env_id)
    if module is not None:
        import_env_module(module, f"{module}:{env_id}", module_dirs)
    import pararl.envs  # noqa: F401 - registers the pararl/ ids in worker processes

    if env_id not in gym.registry:
        register_atari()
    made = dict(kwargs or {})
    if render_mode is not None:
        made["render_mode"] = render_mode
    if is_atari(env_id):
        env = make_atari(env_id, AtariOptions.for_training(training), made)
    elif is_minatar(env_id):
        env = make_minatar(env_id, made)
    else:
        spec = gym.registry.get(env_id)
        if spec is not None and compiles_mujoco(spec.entry_point):
            quiet_mujoco()
        env = gym.make(env_id, **made)
        if isinstance(env.action_space, gym.spaces.Box):
            env = ClipToBounds(env)  # Gaussian policies sample beyond the bounds
        env = gym.wrappers.RecordEpisodeStatistics(env)  # true return, before shaping
    if has_mask_method(env):
        env = ActionMasksInInfo(env)  # masks travel in the info (`envs.masks`)
    wrapper_cls = WRAPPERS[wrapper]
    if wrapper_cls is not None:
        env = wrapper_cls(env)
    return env


def env_factory(
    env_id: str,
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
        make_env, env_id, wrapper, render_mode, training, dict(kwargs or {}), added_paths()
    )
