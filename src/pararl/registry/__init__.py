"""The algorithms pararl trains, by name: one spec each (a module of this package
whose `SPEC` is an `Algorithm`), found by listing the package, so that adding an
algorithm adds its spec module and nothing here. The command line's `train`
subcommands, `pararl.train`, `pararl.load`, `pararl evaluate` and `--resume` all read
this table.

It sits above the runners and the algorithms: a spec imports them inside its
functions, so listing the commands (`pararl --help`) imports the configs only.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from pararl.config import RunConfig
from pararl.config.saved import saved_config
from pararl.errors import UsageError
from pararl.registry.spec import Algorithm, Evaluation


def _specs() -> dict[str, Algorithm]:
    found: list[Algorithm] = []
    for module in pkgutil.iter_modules(__path__):
        spec = getattr(importlib.import_module(f"{__name__}.{module.name}"), "SPEC", None)
        if isinstance(spec, Algorithm):
            found.append(spec)
    return {a.name: a for a in sorted(found, key=lambda a: a.name)}


ALGORITHMS: dict[str, Algorithm] = _specs()


def algorithm_of(config: RunConfig) -> Algorithm:
    for algo in ALGORITHMS.values():
        if type(config) is algo.config:
            return algo
    raise UsageError(
        f"no algorithm trains a {type(config).__name__}; pass one of "
        + ", ".join(a.config.__name__ for a in ALGORITHMS.values())
    )


def algorithm_of_run(run_dir: Path) -> Algorithm:
    """The algorithm of the run saved in `run_dir` (from its config.json)."""
    return algorithm_of(saved_config(run_dir))


__all__ = ["ALGORITHMS", "Algorithm", "Evaluation", "algorithm_of", "algorithm_of_run"]
