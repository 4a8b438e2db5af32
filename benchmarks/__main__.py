"""`python -m benchmarks NAME [--quick] [options]`, or `--list`: the one list of benchmarks.

Each module has a tyro `Config` and `resolve`, `measure`, `report` (`lib.harness.execute`).
Bad input exits 2; Ctrl-C 130 and SIGTERM 143, after stopping what the benchmark started.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

from benchmarks import learning
from benchmarks.lib import harness as h
from benchmarks.lib.compare import Comparison, describe
from pararl.errors import Terminated, UsageError, sigterm_as_interrupt

BENCHMARKS = {
    "vector": "vector env stepping throughput against Gymnasium, SB3 and one env",
    "dqn": "DQN: time to solve vs SB3, transitions/s vs the DQN post's design",
    "ppo": "PPO: time to solve vs SB3",
    "devices": "PPO wall time per device placement and net width (the CPU/GPU placement post)",
    "mujoco": "PPO on MuJoCo (1M steps) against SB3 + VecNormalize, CleanRL's figures",
    "sac": "SAC on MuJoCo (300k steps, async) against SB3's SAC, rl-zoo's figures",
    "td3": "TD3 on MuJoCo (200k steps, async) against SB3's TD3, rl-zoo's figure",
    "masks": "PPO with action masks on Taxi-v4 (300k steps) against sb3-contrib's MaskablePPO",
    "dictobs": "PPO on Dict observations (CartPole as two keys, 50k steps) vs SB3 MultiInputPolicy",
    "recurrent": "LSTM PPO on memory tasks vs sb3-contrib's RecurrentPPO and feed-forward PPO",
    "partial": "multi-task sampler: wait for all vs timeout vs min_envs vs auto",
    "maml": "MAML-TRPO meta-iteration time split, pararl vs the sampling post's design",
    "ray": "Ray actors vs local actor processes: DQN sampling throughput",
    "handwritten": "pararl's own parts alone (FlatAdam, event writer, stacked layers, ...)",
    "checkpoint": "checkpoint save/load, weights-only vs pickled (handwritten --parts checkpoint)",
    "replay": "replay for image stacks, bytes and batch time, frames vs naive (handwritten ...)",
    "pixels": "MinAtar DQN/PPO learning vs SB3 (curves, time to SB3's final), Pong steps/s",
    "atari": "Atari samplers: pararl vs EnvPool, ale-py, Gymnasium, SB3 (Pong, Breakout)",
    "minatar_ab": "PPO on MinAtar vs SB3: final policies evaluated alike, greedy and sampled",
    "ppo_async": "async PPO on MinAtar (1M steps) vs serial, sync and SB3; its overlap's floor",
    "recurrent_core": "recurrent PPO's sequence replay: padded, packed, loop (handwritten ...)",
    "learner": "learners alone: DQN/PPO updates/s vs SB3's train() and the FLOP floor",
    "seeds": "N seeds in one batched run vs N separate runs two at a time (CartPole, MinAtar)",
    "results": "whole runs at the field's budgets (hours, resumable) vs published numbers",
}
# a name that is another benchmark with these options first (its own come after them)
PRESETS = {
    name: ["handwritten", "--parts", part, "--repeats", "5", "--section", name]
    for name, part in (("checkpoint", "checkpoint"), ("replay", "replay"),
                       ("recurrent_core", "recurrent"))
}  # fmt: skip


def usage() -> str:
    lines = ["usage: python -m benchmarks NAME [--quick] [options]   (NAME --help)"]
    lines += ["       python -m benchmarks --list", ""]
    lines += [f"  {name:<11} {text}" for name, text in BENCHMARKS.items()]
    return "\n".join([*lines, "", "Never run two benchmarks at once."])


def rows(module: object) -> list[Comparison]:
    """A benchmark's learning comparisons (`ROW`, `SOLVE`), whose defaults its help names."""
    return [
        row
        for name in ("ROW", "SOLVE")
        if isinstance(row := getattr(module, name, None), Comparison)
    ]


def parse(args: Sequence[str]) -> tuple[str, Any, Any]:
    """`NAME [options]` as the benchmark it names runs it: the module `execute` runs
    under (a preset's), the module and its tyro `Config`; bad options exit 2 (tyro)."""
    import tyro

    name = args[0]
    preset = PRESETS.get(name, [name])
    module = (
        learning.benchmark(name)
        if name in learning.BENCHMARKS
        else importlib.import_module(f"benchmarks.{preset[0]}")
    )
    config = tyro.cli(
        module.Config,
        args=[*preset[1:], *args[1:]],
        prog=f"python -m benchmarks {name}",
        description=". ".join([BENCHMARKS[name], *map(describe, rows(module))]),
    )
    return preset[0], module, config


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--list"]:
        print("\n".join(BENCHMARKS))
        return 0
    if not args or args[0] not in BENCHMARKS:
        print(usage(), file=sys.stdout if args[:1] in (["-h"], ["--help"]) else sys.stderr)
        return 0 if args[:1] in (["-h"], ["--help"]) else 2
    try:
        # SIGTERM takes Ctrl-C's path, so the runs a benchmark started are stopped too
        with sigterm_as_interrupt():
            name, module, config = parse(args)
            results = h.execute(name, config, module.resolve, module.measure, module.report)
    except UsageError as exc:
        print(f"benchmarks: error: {exc}", file=sys.stderr)
        return 2
    except Terminated:
        print("benchmarks: terminated (SIGTERM)", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("benchmarks: interrupted", file=sys.stderr)
        return 130
    return getattr(module, "exit_code", lambda _: 0)(results)  # a check's verdict


if __name__ == "__main__":
    sys.exit(main())
