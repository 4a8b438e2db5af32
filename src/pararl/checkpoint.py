"""Checkpoints: one header for every algorithm's, written atomically (temp file +
rename), read weights-only, with a clear error.

A checkpoint holds tensors, numbers, strings, and lists, tuples and dicts of them,
so `torch.load(weights_only=True)` reads it, and reading one cannot run code: a
shared run directory is data, not a program. The one other thing states hold,
numpy arrays (replay memories, action bounds), is stored as a tensor under
`NDARRAY` and given back as an array. A file the weights-only loader refuses (one
written before pararl loaded checkpoints weights-only, or not by pararl) is refused
with what to do; `trust=True` (`--trust-checkpoint`) unpickles it the old
way, after a warning, for a file whose source the user trusts.

`torch.load` over safetensors: optimizer states, counters and nested dicts go
through it as they are, in the file format checkpoints always had; safetensors
would need them flattened beside a JSON file, for the same load time
(BENCHMARKS.md, "Checkpoints").
"""

from __future__ import annotations

import os
import pickle
import re
import secrets
import sys
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pararl.errors import UsageError, interrupts_held

NDARRAY = "__ndarray__"  # the key of a dict that stands for a numpy array
TRUST_FLAG = "--trust-checkpoint"


@dataclass(frozen=True)
class Header:
    """What every checkpoint begins with, whatever the algorithm: the version of the
    algorithm's own state's format, the algorithm, and how far the run had got (its
    env steps, the step budget's unit, and its wall seconds). `--resume` picks a
    checkpoint by it (`runners.resume`)."""

    algo: str
    format: int
    env_steps: int
    wall_s: float

    def as_dict(self) -> dict[str, Any]:
        """The header's entries of a checkpoint (the algorithm's state follows)."""
        return {
            "format": self.format,
            "algo": self.algo,
            "env_steps": self.env_steps,
            "wall_s": self.wall_s,
        }

    @classmethod
    def of(cls, state: dict[str, Any]) -> Header:
        """The header of a loaded checkpoint (one written before a run kept its wall
        time, or the first format version, has 0.0 and 1)."""
        return cls(
            str(state.get("algo", "")),
            int(state.get("format", 1)),
            int(state.get("env_steps", 0)),
            float(state.get("wall_s", 0.0)),
        )


def _like(original: Mapping[Any, Any], items: dict[Any, Any]) -> dict[Any, Any]:
    """`items` as the kind of dict `original` is: a module's `state_dict()` is an
    OrderedDict whose `_metadata` (its modules' versions) `load_state_dict` reads."""
    if not isinstance(original, OrderedDict):
        return items
    out: OrderedDict[Any, Any] = OrderedDict(items)
    metadata = getattr(original, "_metadata", None)
    if metadata is not None:
        out._metadata = metadata  # type: ignore[attr-defined]
    return out


def encode(value: Any, where: str = "state") -> Any:
    """`value` in the forms the weights-only loader takes: numpy arrays become
    `{NDARRAY: tensor}` (sharing memory: no copy of a contiguous replay memory),
    numpy scalars Python numbers. Anything else that is not a tensor, number, string,
    None, list, tuple or dict is a TypeError naming where it is: a state must not
    need code to be read back."""
    if isinstance(value, torch.Tensor | str | bool | int | float | None):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise TypeError(f"{where} is a numpy array of Python objects; store numbers")
        return {NDARRAY: torch.from_numpy(np.ascontiguousarray(value))}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        if NDARRAY in value:
            raise TypeError(f"{where} has the key {NDARRAY!r}, which checkpoints reserve")
        return _like(value, {k: encode(v, f"{where}[{k!r}]") for k, v in value.items()})
    if isinstance(value, list | tuple):
        items = [encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    raise TypeError(
        f"{where} is a {type(value).__qualname__}, which a weights-only checkpoint cannot "
        "hold; store tensors, numbers, strings, and lists or dicts of them"
    )


def decode(value: Any) -> Any:
    """What `encode` made, back: `{NDARRAY: tensor}` is a numpy array again."""
    if isinstance(value, dict):
        if len(value) == 1 and NDARRAY in value:
            return value[NDARRAY].numpy()
        return _like(value, {k: decode(v) for k, v in value.items()})
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, tuple):
        return tuple(decode(v) for v in value)
    return value


PARTIAL = ".partial"  # the suffix of a file being written (`save`), whole or gone after


def save(path: Path, state: dict[str, Any]) -> None:
    """Write `state` to `path` so that a crash mid-write never leaves a broken file:
    into a new file beside it (`.NAME.RANDOM.partial`), then renamed over it. The new
    file takes the permissions any file the user makes gets (the umask's), as the
    run's CSVs do, so whoever may read a shared run may read its checkpoints. A
    process killed mid-write leaves its partial file, which `remove_partial` clears
    when the run next starts."""
    encoded = encode(state)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}{PARTIAL}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with interrupts_held():  # a Ctrl-C or SIGTERM takes effect once the file is whole
            with os.fdopen(fd, "wb") as f:
                torch.save(encoded, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_partial(directory: Path) -> list[Path]:
    """The partial files `save` left in `directory` (a process killed mid-write),
    removed; call it only where nothing else writes there now (a run starting)."""
    left = sorted(directory.glob(f".*{PARTIAL}")) if directory.is_dir() else []
    for partial in left:
        partial.unlink(missing_ok=True)
    return left


def _unpickled(path: Path) -> Any:
    """`path` unpickled (`--trust-checkpoint`, for a file the weights-only loader
    refused), after a warning."""
    print(
        f"pararl: warning: {TRUST_FLAG}: unpickling {path}, which runs any code it "
        "holds; do this only with a file whose source you trust",
        file=sys.stderr,
    )
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise _corrupt(path, exc) from exc


def mismatch(path: Path, exc: BaseException) -> UsageError:
    """`path` read, but its weights do not fit the network its run's config.json
    describes (a file of another run, or an edited one), in one line."""
    said = " ".join([line.strip() for line in str(exc).splitlines() if line.strip()][:2])
    detail = f"{type(exc).__name__}: {said[:200]}" if said else type(exc).__name__
    return UsageError(
        f"checkpoint {path} does not fit the run its directory describes ({detail}); "
        "use the checkpoints and config.json of one run, as pararl train saved them"
    )


def _corrupt(path: Path, exc: Exception) -> UsageError:
    return UsageError(
        f"checkpoint {path} is corrupt or unreadable ({type(exc).__name__}); move it out "
        "of checkpoints/ (a resume then starts from the newest one left), load another "
        "(pararl evaluate --checkpoint NAME), or retrain"
    )


def _refused(path: Path, exc: pickle.UnpicklingError) -> UsageError:
    """The weights-only loader refused `path`: what it found, and what to do."""
    found = re.search(r"GLOBAL ([\w.]+)", str(exc))
    what = f"the Python object {found.group(1)}" if found else "Python objects"
    return UsageError(
        f"checkpoint {path} holds {what}, which pararl does not load: unpickling it could "
        "run any code (a checkpoint of an earlier pararl version holds numpy arrays so); "
        f"if you trust where the file came from, pass {TRUST_FLAG} "
        "(pararl.load(..., trust_checkpoint=True)) to load it the old way"
    )


def load(path: Path, trust: bool = False, algo: str | None = None) -> dict[str, Any]:
    """The state saved at `path`, read weights-only; where the weights-only loader
    refuses it, `trust` unpickles it instead (a file from an earlier pararl version or
    another trusted source), with a warning (a file it accepts is read weights-only,
    `trust` or not). `algo`: the algorithm the caller reads it as (another
    algorithm's is refused)."""
    if not path.is_file():
        raise UsageError(
            f"no checkpoint at {path}; pass a run directory that holds "
            "checkpoints/ (from pararl train)"
        )
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if "GLOBAL" not in str(exc):  # not a pickle that names Python code: broken
            raise _corrupt(path, exc) from exc
        if not trust:
            raise _refused(path, exc) from exc
        state = _unpickled(path)
    except Exception as exc:
        raise _corrupt(path, exc) from exc
    if not isinstance(state, dict) or "format" not in state:
        raise UsageError(
            f"{path} is not a pararl checkpoint; use a file from a run's checkpoints/ directory"
        )
    try:
        saved = Header.of(state).algo
    except (TypeError, ValueError) as exc:
        raise UsageError(
            f"checkpoint {path} has a header pararl cannot read ({exc}); use a file from a "
            "run's checkpoints/ directory as pararl train saved it"
        ) from None
    if algo is not None and saved and saved != algo:
        raise UsageError(
            f"checkpoint {path} is a {saved.upper()} checkpoint, not {algo.upper()}; use "
            "a checkpoint of this run (its checkpoints/ directory)"
        )
    return decode(state)
