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


@dataclass(frozen=True)
class Command:
    config: Callable[[], type]  # imported lazily: `pararl --help` stays fast
    run: Callable[[Any], Any]
    help: str


def _bench_vector() -> Command:
    from pararl.bench import vector

    return Command(lambda: vector.VectorBenchConfig, vector.run, "vector env stepping throughput")


COMMANDS: dict[tuple[str, str], Callable[[], Command]] = {
    ("bench", "vector"): _bench_vector,
}


def _usage() -> str:
    lines = ["usage: pararl GROUP COMMAND [options]   (pararl GROUP COMMAND --help)", ""]
    for group, name in COMMANDS:
        lines.append(f"  pararl {group} {name}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args and args[0] in ("-h", "--help") else 2
    key = (args[0], args[1])
    if key not in COMMANDS:
        print(f"pararl: error: unknown command '{' '.join(key)}'\n\n{_usage()}", file=sys.stderr)
        return 2
    import tyro

    command = COMMANDS[key]()
    config = tyro.cli(command.config(), args=args[2:], prog=f"pararl {args[0]} {args[1]}")
    try:
        command.run(config)
    except UsageError as exc:
        print(f"pararl: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pararl: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
