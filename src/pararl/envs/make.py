"""Env factories: validated ids, picklable constructors, episode statistics."""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib

import gymnasium as gym

from pararl.envs.atari import AtariOptions, is_atari, make_atari, register_atari
from pararl.envs.minatar import is_minatar, make_minatar, register_minatar
from pararl.envs.wrappers import CartPoleShapedReward
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


def probe_env(env_id: str, wrapper: str = "none") -> tuple[gym.Space, gym.Space]:
    """Build the env once for its spaces; a missing optional package is a UsageError
    that names what to install. A Box action space comes with the bounds the env acts
    within (`bounded_action_space`)."""
    try:
        env = make_env(env_id, wrapper)
    except (gym.error.DependencyNotInstalled, ImportError) as exc:
        hint = install_hint(env_id.rpartition(":")[2]) or "install the package it names"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(
            f"env '{env_id}' needs a package that is missing ({first}); {hint}"
        ) from exc
    try:
        return env.observation_space, bounded_action_space(env)
    finally:
        env.close()


def bounded_action_space(env: gym.Env) -> gym.Space:
    """`env`'s action space with the bounds the env acts within: Gymnasium's
    `ClipAction`, which `make_env` adds, declares unbounded actions (it clips any),
    while SAC squashes its actions into the bounds inside it."""
    inner: gym.Env = env
    while isinstance(inner, gym.Wrapper):
        if isinstance(inner, gym.wrappers.ClipAction):
            return inner.env.action_space
        inner = inner.env
    return env.action_space


def check_env_id(env_id: str) -> gym.envs.registration.EnvSpec:
    """The env's spec, or a UsageError that says what to do."""
    if ":" in env_id:  # "package.module:EnvId" registers envs on import
        module, _, env_id = env_id.partition(":")
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise UsageError(f"cannot import module '{module}' for env '{env_id}': {exc}") from exc
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
    env_id: str, wrapper: str = "none", render_mode: str | None = None, training: bool = False
) -> gym.Env:
    """Build one env with episode statistics (and the optional reward wrapper);
    Atari games get their standard preprocessing (`training`: episodic lives and
    clipped rewards too), MinAtar games their sticky actions (`envs.minatar`)."""
    if ":" in env_id:
        module, _, env_id = env_id.partition(":")
        importlib.import_module(module)
    import pararl.envs  # noqa: F401 - registers the pararl/ ids in worker processes

    if env_id not in gym.registry:
        register_atari()
    if is_atari(env_id):
        env = make_atari(env_id, AtariOptions.for_training(training), render_mode)
    elif is_minatar(env_id):
        env = make_minatar(env_id, render_mode)
    else:
        env = gym.make(env_id, render_mode=render_mode)
        if isinstance(env.action_space, gym.spaces.Box):
            env = gym.wrappers.ClipAction(env)  # Gaussian policies sample beyond the bounds
        env = gym.wrappers.RecordEpisodeStatistics(env)  # true return, before shaping
    wrapper_cls = WRAPPERS[wrapper]
    if wrapper_cls is not None:
        env = wrapper_cls(env)
    return env


def env_factory(
    env_id: str, wrapper: str = "none", render_mode: str | None = None, training: bool = False
) -> functools.partial[gym.Env]:
    """A picklable zero-argument constructor (works under every start method);
    `training`: the env a learner gets its data from (not the evaluation's)."""
    if wrapper not in WRAPPERS:
        raise UsageError(f"unknown wrapper '{wrapper}'; choose one of {', '.join(WRAPPERS)}")
    return functools.partial(make_env, env_id, wrapper, render_mode, training)
