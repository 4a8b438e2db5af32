"""The module of a `module:EnvId` env id, imported as `gym.make` would import it,
and also from where a user keeps it.

`gym.make("myenv:MyEnv-v0")` imports `myenv` from `sys.path`. A script run with
`python` has its own directory there, but the `pararl` console script has the
directory of its executable instead, so a module next to the user was not found.
Here the working directory is tried next, then the directory the run found the
module in when it trained (saved in its config.json, so that `pararl evaluate` and
`--resume` work from elsewhere too). A directory added is appended to `sys.path`
(it never shadows an installed package) and remembered: env factories carry the
list to processes that did not inherit it.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from pararl.errors import UsageError

_ADDED: list[str] = []  # directories this process appended to sys.path, in order


def split_env_id(env_id: str) -> tuple[str | None, str]:
    """`"pkg.mod:Env-v0"` -> `("pkg.mod", "Env-v0")`; an id without a module -> `(None, id)`."""
    if ":" not in env_id:
        return None, env_id
    module, _, name = env_id.partition(":")
    return module, name


def added_paths() -> tuple[str, ...]:
    """The directories pararl appended to `sys.path` in this process."""
    return tuple(_ADDED)


def _not_found(exc: ModuleNotFoundError, module: str) -> bool:
    """Whether `exc` says `module` itself (or a package above it) is missing, not
    something the module imports."""
    parts = module.split(".")
    return exc.name in {".".join(parts[: i + 1]) for i in range(len(parts))}


def _failed(module: str, env_id: str, exc: BaseException) -> UsageError:
    """The module was found but raised while it was imported: one line with where."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return UsageError(
        f"importing module '{module}' for env '{env_id}' failed{where}: {type(exc).__name__}: {exc}"
    )


def _try_import(module: str, env_id: str) -> bool:
    """Import `module`; False when it is not on `sys.path`."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if _not_found(exc, module):
            return False
        raise _failed(module, env_id, exc) from exc
    except Exception as exc:
        raise _failed(module, env_id, exc) from exc
    return True


def import_env_module(module: str, env_id: str, also: Sequence[str | Path] = ()) -> None:
    """Import `module` from `sys.path`, else from the working directory, else from
    each directory of `also` (the first that has it stays on `sys.path`). A
    UsageError that says what to put on PYTHONPATH when none has it."""
    if _try_import(module, env_id):
        return
    tried: list[str] = []
    for directory in (os.getcwd(), *(str(d) for d in also)):
        directory = os.path.abspath(directory)
        if directory in sys.path or directory in tried:
            continue
        tried.append(directory)
        sys.path.append(directory)
        importlib.invalidate_caches()
        if _try_import(module, env_id):
            _ADDED.append(directory)
            return
        sys.path.remove(directory)
    top = module.split(".")[0]
    saved = [os.path.abspath(d) for d in also]
    where = (
        f"it was imported from {saved[0]} when the run was trained; run pararl there or "
        f"put it on PYTHONPATH (PYTHONPATH={saved[0]} pararl ...)"
        if saved
        else "run pararl from the directory that holds it, or put that directory on "
        "PYTHONPATH (PYTHONPATH=DIR pararl ...)"
    )
    raise UsageError(
        f"env '{env_id}' needs module '{module}', which is neither on the Python path "
        f"nor in the working directory ({os.getcwd()}): no {top}.py or {top}/ there; {where}"
    )


def module_dir(module: str) -> Path | None:
    """The directory an imported `module`'s top-level package was found in (the
    `sys.path` entry), or None if it is not imported or has no location."""
    top = sys.modules.get(module.split(".")[0])
    if top is None:
        return None
    file = getattr(top, "__file__", None)
    if file:
        path = Path(file).resolve()
        return path.parent.parent if path.stem == "__init__" else path.parent
    locations = list(getattr(top, "__path__", []))  # a namespace package
    return Path(locations[0]).resolve().parent if locations else None


__all__ = ["added_paths", "import_env_module", "module_dir", "split_env_id"]
