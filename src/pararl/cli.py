"""`pararl` command line: `pararl GROUP COMMAND [options]`.

Each command is a typed dataclass config parsed by tyro (field docstrings are the
`--help`). Bad input prints one line and exits with code 2; Ctrl-C exits with 130.
"""

from __future__ import annotations

import atexit
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pararl.errors import UsageError


@dataclass(frozen=True)
class Command:
    config: Callable[[], type]  # imported lazily: `pararl --help` stays fast
    run: Callable[[Any], Any]
    quick_exit: bool = False  # every file it writes is closed when `run` returns


@dataclass(frozen=True)
class Entry:
    """A command as the usage text lists it: its help, and how to load it (on use
    only, so that `pararl --help` imports neither torch nor the benchmarks)."""

    help: str
    load: Callable[[], Command]


def _bench(module: str, config: str, help_text: str) -> Entry:
    """A `pararl bench NAME` command from `pararl.bench.<module>`."""

    def load() -> Command:
        bench = importlib.import_module(f"pararl.bench.{module}")
        return Command(lambda: getattr(bench, config), bench.run)

    return Entry(help_text, load)


def _train(config: str, help_text: str) -> Entry:
    """A `pararl train ALGO` command; torch is imported only once it runs."""

    def load() -> Command:
        from pararl import config as configs

        return Command(lambda: getattr(configs, config), _run_training, True)

    return Entry(help_text, load)


def _run_training(config: Any) -> Any:
    """Start the evaluation child before importing torch here, so that its imports
    overlap with ours (`pararl.eval_child`); then train."""
    from pararl import eval_child

    if eval_child.evaluates_in_process(config.eval_in):
        eval_child.prestart()
    try:
        from pararl.api import train

        return train(config)
    finally:
        eval_child.discard()


def _evaluate() -> Command:
    from pararl.playback_config import EvaluateConfig

    def run(config: EvaluateConfig) -> Any:
        from pararl import playback

        return playback.run(config)

    return Command(lambda: EvaluateConfig, run, quick_exit=True)


COMMANDS: dict[tuple[str, ...], Entry] = {
    ("train", "dqn"): _train("DQNConfig", "train DQN (actors + learner)"),
    ("train", "ppo"): _train("PPOConfig", "train PPO (batched env workers)"),
    ("evaluate",): Entry("greedy return of a run's checkpoint; render or record video", _evaluate),
    ("bench", "vector"): _bench("vector", "VectorBenchConfig", "vector env stepping throughput"),
    ("bench", "dqn"): _bench(
        "dqn",
        "DQNBenchConfig",
        "DQN: time to solve vs SB3, transitions/s vs the seed's design, overlap",
    ),
    ("bench", "ppo"): _bench(
        "ppo", "PPOBenchConfig", "PPO: time to solve vs SB3, double-buffered sampling throughput"
    ),
    ("bench", "devices"): _bench(
        "devices",
        "DevicesBenchConfig",
        "PPO wall time per device placement and net width (seeds/002)",
    ),
    ("bench", "partial"): _bench(
        "partial",
        "PartialBenchConfig",
        "multi-task sampler: wait for all vs timeout vs min_envs vs auto (seeds/001)",
    ),
    ("bench", "ray"): _bench(
        "ray",
        "RayBenchConfig",
        "Ray actors vs local actor processes (sampling), and the scaling model",
    ),
}


def _resume_algo(args: list[str]) -> list[str]:
    """`pararl train --resume DIR` -> `pararl train ALGO --resume DIR` (from its config)."""
    import json
    from pathlib import Path

    value = args[2] if args[1] == "--resume" and len(args) > 2 else args[1].partition("=")[2]
    config = Path(value) / "config.json"
    if not config.is_file():
        raise UsageError(f"--resume {value}: no config.json there; pass a pararl run directory")
    algo = {"DQNConfig": "dqn", "PPOConfig": "ppo"}.get(
        json.loads(config.read_text()).get("algo", "")
    )
    if algo is None:
        raise UsageError(f"--resume {value}: unknown algorithm in its config.json")
    return ["train", algo, *args[1:]]


def _usage() -> str:
    lines = ["usage: pararl GROUP COMMAND [options]   (pararl GROUP COMMAND --help)", ""]
    for key, entry in COMMANDS.items():
        lines.append(f"  pararl {' '.join(key):<16} {entry.help}")
    return "\n".join(lines)


_state = {"quick_exit": False}


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
        _state["quick_exit"] = command.quick_exit
    except UsageError as exc:
        print(f"pararl: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pararl: interrupted", file=sys.stderr)
        return 130
    return 0


def entry() -> None:
    """The `pararl` program: `main`, then exit with its code.

    After a training run or an evaluation, whose files are all closed by then, the
    process ends right after the atexit handlers, skipping the interpreter's
    teardown: freeing torch's modules takes ~0.5 s, a tenth of the time to solve
    CartPole.
    """
    code = main()
    if _state["quick_exit"]:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    entry()
