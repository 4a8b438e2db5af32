"""Optional dependencies (the package's extras): importing one that is missing is a
one-line `UsageError` that names the extra to install."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from pararl.errors import UsageError


def hint(module: str, extra: str, needed_for: str) -> str:
    return f"{needed_for} needs {module}: pip install 'pararl[{extra}]'"


def available(module: str) -> bool:
    """Whether `module` can be imported, without importing it."""
    return importlib.util.find_spec(module) is not None


def require(module: str, extra: str, needed_for: str) -> ModuleType:
    """`module`, imported; or a UsageError that says which extra brings it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(hint(module, extra, needed_for)) from None


__all__ = ["available", "hint", "require"]
