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

Importing a module runs it. When the module is named by a run directory (its
config.json), which may come from anyone, the module and the file it resolves to
are said before the import (`named_by`), found without running any of it.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
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


def locate(module: str) -> Path | None:
    """The file `module` would be imported from (a package's `__init__.py`, or a
    namespace package's directory), found on `sys.path` without importing anything;
    None when it is not there."""
    top, *rest = module.split(".")
    try:
        spec = importlib.util.find_spec(top)  # a top-level name: found, not run
    except (ImportError, ValueError):
        return None
    name = top
    for part in rest:
        if spec is None or not spec.submodule_search_locations:
            return None
        name = f"{name}.{part}"
        spec = importlib.machinery.PathFinder.find_spec(name, list(spec.submodule_search_locations))
    if spec is None:
        return None
    if spec.origin and spec.has_location:
        return Path(spec.origin).resolve()
    locations = list(spec.submodule_search_locations or [])
    return Path(locations[0]).resolve() if locations else None


def _try_import(module: str, env_id: str, named_by: Path | None = None) -> bool:
    """Import `module`; False when it is not on `sys.path`. `named_by`: the run
    directory that names it, said with the module's file before it runs."""
    if named_by is not None and module not in sys.modules:
        where = locate(module)
        if where is None:
            return False
        print(
            f"pararl: run {named_by} names env module '{module}' ({env_id}): importing {where}",
            file=sys.stderr,
            flush=True,
        )
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if _not_found(exc, module):
            return False
        raise _failed(module, env_id, exc) from exc
    except Exception as exc:
        raise _failed(module, env_id, exc) from exc
    return True


def import_env_module(
    module: str,
    env_id: str,
    also: Sequence[str | Path] = (),
    named_by: Path | None = None,
    trusted: bool = False,
) -> None:
    """Import `module` from `sys.path`, else from the working directory, else from
    each directory of `also` (the first that has it stays on `sys.path`). A
    UsageError that says what to put on PYTHONPATH when none has it. `named_by`:
    the run directory whose config names the module (said before importing it).

    A run directory is data: one shared with you must not run code by being loaded
    (`checkpoint`'s weights-only loading). So a module a run names (`named_by`) is
    imported from the directories the run names (`also`), or from a working directory
    inside the run, only when the run is `trusted` (`--trust-checkpoint`); from
    `sys.path`, or a working directory outside the run, it is the user's own."""
    if _try_import(module, env_id, named_by):
        return
    untrusted = named_by is not None and not trusted
    run = named_by.resolve() if named_by is not None else None
    cwd = Path(os.getcwd()).resolve()
    in_run = run is not None and (cwd == run or run in cwd.parents)
    places = [] if untrusted and in_run else [os.getcwd()]
    if not untrusted:
        places += [str(d) for d in also]
    tried: list[str] = []
    for directory in places:
        directory = os.path.abspath(directory)
        if directory in sys.path or directory in tried:
            continue
        tried.append(directory)
        sys.path.append(directory)
        importlib.invalidate_caches()
        if _try_import(module, env_id, named_by):
            _ADDED.append(directory)
            return
        sys.path.remove(directory)
    top = module.split(".")[0]
    saved = [os.path.abspath(d) for d in also]
    trust = (
        ", or add --trust-checkpoint to let pararl import it from the directories the "
        "run names (a module runs code: only for a run you trust)"
        if untrusted
        else ""
    )
    where = (
        f"it was imported from {saved[0]} when the run was trained; run pararl there or "
        f"put it on PYTHONPATH (PYTHONPATH={saved[0]} pararl ...){trust}"
        if saved
        else "run pararl from the directory that holds it, or put that directory on "
        f"PYTHONPATH (PYTHONPATH=DIR pararl ...){trust}"
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


__all__ = ["added_paths", "import_env_module", "locate", "module_dir", "split_env_id"]
