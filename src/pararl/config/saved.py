"""A run's config as `config.json` in its run directory, and back: what `--resume`
and `pararl evaluate` start from. The file names its config class (`algo`), so any
run directory, of any pararl version that wrote one, says which algorithm it holds.

Reading one checks it as the command line checks options: each value against its
field's annotated type (`json_fields`), then the config's own `validate`. A
truncated, hand-edited or other-version file is one UsageError line that names the
file and what is wrong, never a traceback or a run with a value of the wrong type.
Fields the file lacks take their defaults: earlier versions wrote fewer."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from pararl.config.json_fields import WrongValue, field_types, read, shown
from pararl.config.run import RunConfig, configs
from pararl.errors import UsageError

# the keys a config.json may hold beside `algo` and its class's fields, and why each
# is read past (any other is refused by name)
NOT_FIELDS: dict[str, str] = {
    "resolved": "facts resolved at start-up, written by every run (`saved_facts` reads them)",
    # options since removed, whatever their value: a run that set them resumes and
    # evaluates as it was
    "double_buffer": "PPO's, removed: it changed how a rollout's work overlapped, not the rollout",
    "manual_grad": "PPO's, removed: it changed how the same gradient was computed",
}

_JSON_KINDS = {list: "a list", str: "a string", bool: "true or false", type(None): "null"}


def to_json(config: RunConfig, extra: dict[str, Any] | None = None) -> str:
    """`config` with its class name (and `extra` facts, e.g. those resolved at
    start-up), as saved in `config.json`; an env factory by its name."""
    fields = {**dataclasses.asdict(config), "env": config.env_name}
    data = {"algo": type(config).__name__, **fields, **(extra or {})}
    return json.dumps(data, indent=2, default=str)


def config_from_json(text: str, source: str | Path | None = None) -> RunConfig:
    """A config saved by `to_json`, checked: known keys (`NOT_FIELDS` besides the
    fields), values of the fields' types, in range (`validate`). `source`: the file
    `text` came from, named in errors."""
    where = "config.json" if source is None else str(source)
    try:
        data = _parse(text, where)
        cls = _config_class(data, where)
        kwargs = _fields(data, cls, where)
    except RecursionError:
        raise UsageError(f"{where} is nested too deeply to be a run's config") from None
    config = cls(**kwargs)
    try:
        config.validate()
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}") from None
    return config


def _parse(text: str, where: str) -> dict[str, Any]:
    """The JSON object in `text`."""
    if not text.strip():
        raise UsageError(f"{where} is empty (cut off as it was written?); start the run again")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{where} is not valid JSON ({exc.msg}: line {exc.lineno} column {exc.colno}); "
            "truncated or mis-edited? restore it from a copy, or mend it by hand"
        ) from None
    except ValueError:  # an integer longer than Python reads from text
        raise UsageError(f"{where} holds a number too long to read; mend it by hand") from None
    if not isinstance(data, dict):
        kind = _JSON_KINDS.get(type(data), "a number")
        raise UsageError(
            f"{where} holds {kind}, not an object of settings; pass the directory of a pararl run"
        )
    return data


def _config_class(data: dict[str, Any], where: str) -> type[RunConfig]:
    """The config class `data` names (`algo`)."""
    name = data.get("algo")
    cls = configs().get(name) if isinstance(name, str) else None
    if cls is None:
        named = f'"algo": {shown(name)}' if "algo" in data else 'no "algo"'
        raise UsageError(
            f"{where} names no known algorithm ({named}; known: {', '.join(sorted(configs()))}); "
            "pass the directory of a pararl run, or use the pararl version that wrote it"
        )
    return cls


def _fields(data: dict[str, Any], cls: type[RunConfig], where: str) -> dict[str, Any]:
    """The values of `cls`'s fields in `data`, each of its field's type."""
    hints = field_types(cls)
    unknown = [key for key in data if key not in hints and key != "algo" and key not in NOT_FIELDS]
    if unknown:
        keys = ", ".join(shown(key, 40) for key in unknown[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        what, it = ("is not a field", "it") if len(unknown) == 1 else ("are not fields", "them")
        raise UsageError(
            f"{where}: {keys}{more} {what} of {cls.__name__}; remove {it}, or use the "
            "pararl version that wrote the run"
        )
    kwargs: dict[str, Any] = {}
    for name, hint in hints.items():
        if name in data:
            try:
                kwargs[name] = read(data[name], hint, name)
            except WrongValue as exc:
                raise UsageError(f"{where}: {exc}") from None
    return kwargs


def saved_facts(run_dir: Path) -> dict[str, Any]:
    """What the run resolved at start-up (`resolved` in its config.json: mode,
    devices, where an env module was found, ...); empty when it saved none."""
    path = Path(run_dir) / "config.json"
    try:
        resolved = json.loads(path.read_text()).get("resolved")
    except (OSError, ValueError, AttributeError, RecursionError):
        return {}
    return dict(resolved) if isinstance(resolved, dict) else {}


def saved_config(run_dir: Path) -> RunConfig:
    """The config of the run saved in `run_dir` (read, never written); a UsageError
    when there is none, or it is not one."""
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise UsageError(f"{run_dir}: no config.json there; pass the directory of a pararl run")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not text; pass the directory of a pararl run") from None
    except OSError as exc:
        raise UsageError(f"{path} cannot be read ({exc.strerror or exc})") from None
    return config_from_json(text, path)


__all__ = ["NOT_FIELDS", "config_from_json", "saved_config", "saved_facts", "to_json"]
