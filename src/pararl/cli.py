"""`pararl` command line: `pararl GROUP COMMAND [options]`.

Each command is a typed dataclass config parsed by tyro (field docstrings are the
`--help`). Bad input prints one line and exits with code 2; Ctrl-C exits with 130.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pararl.errors import UsageError
from pararl.registry import ALGORITHMS, Algorithm, algorithm_of_run


@dataclass(frozen=True)
class Command:
    config: Callable[[], type]  # imported lazily: `pararl --help` stays fast
    run: Callable[[Any], Any]


@dataclass(frozen=True)
class Entry:
    """A command as the usage text lists it: its help, and how to load it (on use
    only, so that `pararl --help` does not import torch)."""

    help: str
    load: Callable[[], Command]


def _train(algo: Algorithm) -> Entry:
    """`pararl train NAME`; torch is imported only once it runs."""
    return Entry(algo.help, lambda: Command(lambda: algo.config, _run_training))


def _run_training(config: Any) -> Any:
    """Start the evaluation process before importing torch here, so that its imports
    overlap with ours (`pararl.evaluation.child`); the run takes it over."""
    from pararl.evaluation.child import EvalChild, evaluates_in_process

    child = EvalChild() if evaluates_in_process(config.eval_in) else None
    try:
        from pararl.api import train
    except BaseException:
        if child is not None:
            child.close(grace=0.0)
        raise
    return train(config, eval_child=child)


def _evaluate() -> Command:
    from pararl.playback_config import EvaluateConfig

    def run(config: EvaluateConfig) -> Any:
        from pararl import playback

        return playback.run(config)

    return Command(lambda: EvaluateConfig, run)


COMMANDS: dict[tuple[str, ...], Entry] = {
    **{("train", name): _train(algo) for name, algo in ALGORITHMS.items()},
    ("evaluate",): Entry("greedy return of a run's checkpoint; render or record video", _evaluate),
}


def _resume_algo(args: list[str]) -> list[str]:
    """`pararl train --resume DIR` -> `pararl train ALGO --resume DIR` (from its config)."""
    from pathlib import Path

    value = args[2] if args[1] == "--resume" and len(args) > 2 else args[1].partition("=")[2]
    return ["train", algorithm_of_run(Path(value)).name, *args[1:]]


def _usage() -> str:
    lines = ["usage: pararl GROUP COMMAND [options]   (pararl GROUP COMMAND --help)", ""]
    for key, entry in COMMANDS.items():
        lines.append(f"  pararl {' '.join(key):<16} {entry.help}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    try:
        if args[0] == "train" and len(args) > 1 and args[1].startswith("--resume"):
            args = _resume_algo(args)
        key = next((k for k in COMMANDS if tuple(args[: len(k)]) == k), None)
        if key is None:
            raise UsageError(f"unknown command '{' '.join(args[:2])}'; run 'pararl --help'")
        import tyro

        entry = COMMANDS[key]
        command = entry.load()
        config: Any = tyro.cli(
            command.config(),
            args=args[len(key) :],
            prog=f"pararl {' '.join(key)}",
            description=entry.help,
        )
        command.run(config)
    except UsageError as exc:
        print(f"pararl: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pararl: interrupted", file=sys.stderr)
        return 130
    return 0


def entry() -> None:
    """The `pararl` program: `main`, then exit with its code."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
