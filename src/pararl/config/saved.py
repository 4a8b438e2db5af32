"""A run's config as `config.json` in its run directory, and back: what `--resume`
and `pararl evaluate` start from. The file names its config class (`algo`), so any
run directory, of any pararl version that wrote one, says which algorithm it holds."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from pararl.config.run import RunConfig, configs
from pararl.errors import UsageError


def to_json(config: RunConfig, extra: dict[str, Any] | None = None) -> str:
    """`config` with its class name (and `extra` facts, e.g. those resolved at
    start-up), as saved in `config.json`."""
    data = {"algo": type(config).__name__, **dataclasses.asdict(config), **(extra or {})}
    return json.dumps(data, indent=2, default=str)


def config_from_json(text: str) -> RunConfig:
    """A config saved by `to_json` (unknown keys, e.g. derived facts, are ignored)."""
    data = json.loads(text)
    cls = configs().get(data.pop("algo", ""))
    if cls is None:
        raise UsageError("config.json names no known algorithm; is this a pararl run dir?")
    # options since removed are dropped with the other unknown keys, whatever their
    # value: PPO's `double_buffer` changed only how a rollout's work overlapped, not
    # the rollout, and `manual_grad` only how the same gradient was computed, so a run
    # that set them resumes and evaluates as it was
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key not in names:
            continue
        if key in ("run_dir", "resume") and value is not None:
            value = Path(value)
        if key == "hidden":
            value = tuple(value)
        kwargs[key] = value
    return cls(**kwargs)


def saved_facts(run_dir: Path) -> dict[str, Any]:
    """What the run resolved at start-up (`resolved` in its config.json: mode,
    devices, where an env module was found, ...); empty when it saved none."""
    path = Path(run_dir) / "config.json"
    try:
        resolved = json.loads(path.read_text()).get("resolved")
    except (OSError, ValueError):
        return {}
    return dict(resolved) if isinstance(resolved, dict) else {}


def saved_config(run_dir: Path) -> RunConfig:
    """The config of the run saved in `run_dir`; a UsageError when there is none."""
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise UsageError(f"{run_dir}: no config.json there; pass the directory of a pararl run")
    return config_from_json(path.read_text())


__all__ = ["config_from_json", "saved_config", "saved_facts", "to_json"]
