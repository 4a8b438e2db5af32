"""`pararl` command line: `pararl GROUP COMMAND [options]`.

Each command is a typed dataclass config parsed by tyro (field docstrings are the
`--help`). Bad input prints one line and exits with code 2; Ctrl-C exits with 130
and SIGTERM with 143, both after saving the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import itertools
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pararl.errors import RunFinished, Terminated, UsageError, said, sigterm_as_interrupt
from pararl.registry import ALGORITHMS, Algorithm, algorithm_of_run


@dataclass(frozen=True)
class Command:
    config: Callable[[], type]  # imported lazily: `pararl --help` stays fast
    run: Callable[[Any, frozenset[str]], Any]  # (config, the options given on the line)


@dataclass(frozen=True)
class Entry:
    """A command as the usage text lists it: its help, and how to load it (on use
    only, so that `pararl --help` does not import torch)."""

    help: str
    load: Callable[[], Command]


def _train(algo: Algorithm) -> Entry:
    """`pararl train NAME`; torch is imported only once it runs."""
    return Entry(algo.help, lambda: Command(lambda: algo.config, _run_training))


def _run_training(config: Any, given: frozenset[str]) -> Any:
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
    return train(config, eval_child=child, given=given)


def _evaluate() -> Command:
    from pararl.config import EvaluateConfig

    def run(config: EvaluateConfig, given: frozenset[str]) -> Any:
        from pararl import playback

        maml_only = sorted(given & {"tasks", "adapt_steps"})
        if maml_only and (algo := algorithm_of_run(config.run_dir)).adapt is None:
            flags = " and ".join("--" + name.replace("_", "-") for name in maml_only)
            raise UsageError(f"{flags}: for MAML runs; {config.run_dir} is a {algo.name} run")

        return playback.run(config)

    return Command(lambda: EvaluateConfig, run)


def _compare() -> Command:
    from pararl.config import CompareConfig

    def run(config: CompareConfig, given: frozenset[str]) -> Any:
        from pararl import compare

        return compare.run(config)

    return Command(lambda: CompareConfig, run)


COMMANDS: dict[tuple[str, ...], Entry] = {
    **{("train", name): _train(algo) for name, algo in ALGORITHMS.items()},
    ("evaluate",): Entry("return of a run's checkpoint; render or record video", _evaluate),
    ("compare",): Entry("two sets of runs' final returns: IQM, P(A > B), p-value", _compare),
}


def _resume_algo(args: list[str]) -> list[str]:
    """`pararl train --resume DIR` -> `pararl train ALGO --resume DIR` (from its config)."""
    from pathlib import Path

    value = args[2] if args[1] == "--resume" and len(args) > 2 else args[1].partition("=")[2]
    if not value or value.startswith("--"):
        raise UsageError("--resume needs a run directory: pararl train --resume RUN_DIR")
    return ["train", algorithm_of_run(Path(value)).name, *args[1:]]


def _usage(group: str = "") -> str:
    lines = ["usage: pararl GROUP COMMAND [options]   (pararl GROUP COMMAND --help)", ""]
    for key, entry in COMMANDS.items():
        if key[0].startswith(group):
            lines.append(f"  pararl {' '.join(key):<22} {entry.help}")
    if "train".startswith(group):
        resume = "train --resume RUN_DIR"
        lines.append(f"  pararl {resume:<22} carry a saved run on from its checkpoint")
    lines.append("  pararl --version")
    return "\n".join(lines)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"pararl {version('pararl')}"
    except PackageNotFoundError:  # a checkout on the path, not installed
        return "pararl (not installed)"


def given_options(args: Sequence[str]) -> frozenset[str]:
    """The config fields named on the command line (`--lr`, `--no-tensorboard`, ...)."""
    names = set()
    for arg in args:
        if arg.startswith("--"):
            name = arg[2:].partition("=")[0].replace("-", "_")
            names.add(name)
            if name.startswith("no_"):
                names.add(name[3:])
    return frozenset(names)


def one_line(box: str) -> str:
    """tyro's boxed parse error as one line: its first paragraph, and its suggestion."""
    lines = [line.strip(" \t│╭╮╰╯") for line in box.splitlines()]
    paragraphs: list[str] = []
    current: list[str] = []
    for line in lines:
        if not line.strip("─ ") or line.startswith("─"):
            if current:
                paragraphs.append(" ".join(current))
            current = []
        else:
            current.append(" ".join(line.split()))
    paragraphs.append(" ".join(current))
    text = next((p for p in paragraphs if p), "could not parse the options")
    pattern = r"- <class '(?!NoneType)[^']*'>: (.*?)(?= - <class|$)"
    detail = [d for p in paragraphs for d in re.findall(pattern, p)]
    if detail:
        text = text.split(":")[0] + ": " + detail[-1].strip()
    if "Perhaps you meant:" in box:
        after = box.split("Perhaps you meant:", 1)[1].split()
        flags = [w for w in after if w.startswith("--")][:1]
        text += f"; did you mean {flags[0]}?" if flags else ""
    return text.rstrip(".")


def _parse(entry: Entry, key: tuple[str, ...], args: list[str]) -> Any:
    """The command's config from `args`; a parse error becomes one UsageError line."""
    import tyro

    command = entry.load()
    prog = f"pararl {' '.join(key)}"
    fields = {f.name for f in dataclasses.fields(command.config())}
    if key[0] == "train" and "seeds" in given_options(args) and "seeds" not in fields:
        raise UsageError(
            f"--seeds: {prog} does not train several agents in one run yet (PPO and DQN "
            "do); train each seed as a run of its own, with --seed N"
        )
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return command, tyro.cli(command.config(), args=args, prog=prog, description=entry.help)
    except SystemExit as exc:
        if exc.code in (0, None):  # --help
            raise
        hint = _sweep_hint(args) if "sweep" in fields else ""
        raise UsageError(f"{one_line(err.getvalue())}{hint} (see {prog} --help)") from None


def _sweep_hint(args: Sequence[str]) -> str:
    """Several values after one setting that `--sweep` takes (`--lr 3e-4 1e-3`): how
    to train an agent on each ("" where there is none such)."""
    from pararl.config.ppo import SWEEPABLE

    for i, arg in enumerate(args):
        name = arg[2:].replace("-", "_")
        if not arg.startswith("--") or name not in SWEEPABLE:
            continue
        values = list(itertools.takewhile(lambda a: not a.startswith("--"), args[i + 1 :]))
        if len(values) > 1:
            return f"; to train agents on several values, give --sweep {name}={','.join(values)}"
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    if args[0] == "--version":
        print(_version())
        return 0
    try:
        with sigterm_as_interrupt():
            if args[0] == "train" and len(args) > 1 and args[1].startswith("--resume"):
                args = _resume_algo(args)
            key = next((k for k in COMMANDS if tuple(args[: len(k)]) == k), None)
            if key is None:
                return _unknown(args)
            command, config = _parse(COMMANDS[key], key, args[len(key) :])
            command.run(config, given_options(args[len(key) :]))
    except UsageError as exc:
        print(f"pararl: error: {exc}", file=sys.stderr)
        return 2
    except RunFinished as exc:
        print(f"pararl: {exc}", file=sys.stderr)
        return 0
    except Terminated:
        print("pararl: terminated (SIGTERM)", file=sys.stderr)
        return 143
    except KeyboardInterrupt as exc:
        if not said(exc):
            print("pararl: interrupted", file=sys.stderr)
        return 130
    return 0


def _unknown(args: list[str]) -> int:
    """A group alone or with --help lists its commands; anything else is an error."""
    groups = {key[0] for key in COMMANDS}
    if args[0] in groups and (len(args) == 1 or args[1] in ("-h", "--help")):
        print(_usage(args[0]))
        return 0 if len(args) > 1 else 2
    if args[0] == "bench":
        raise UsageError(
            "benchmarks run from a checkout of pararl: python -m benchmarks NAME "
            "(python -m benchmarks --help lists them)"
        )
    raise UsageError(f"unknown command '{' '.join(args[:2])}'; run 'pararl --help'")


def entry() -> None:
    """The `pararl` program: `main`, then exit with its code."""
    code = 1
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # what reads the output went away (`pararl train dqn --help | head`): no
        # traceback, and no second error when the interpreter flushes stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = code or 1
    sys.exit(code)


if __name__ == "__main__":
    entry()
