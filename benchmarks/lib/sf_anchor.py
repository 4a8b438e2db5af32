"""Sample Factory's APPO (Petrenko et al. 2020) as an anchor, in a virtual environment
of its own (`make venv-sf`: it pins gymnasium 0.29, pararl needs 1.x): `command`
starts its Atari trainer, `points` reads the agent steps and the policy lag off the
report it logs every few seconds.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path

from benchmarks.lib.harness import ROOT
from benchmarks.lib.training import Point

VENV = ROOT / ".venv-sf"
# "[2026-11-29 21:14:05,123][01234] Fps is (...). Total num frames: 81920. Throughput:
# 0: 1.0. Samples: 20480. Policy #0 lag: (min: 0.0, avg: 0.5, max: 1.0)"; the lag is
# -1 until the learner has trained once; the line may start with a terminal colour
REPORT = re.compile(
    r"^(?:\x1b\[[\d;]*m)*\[(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+)\]\[\d+\] Fps is .*?"
    r"Samples: (?P<samples>\d+)\. Policy #0 lag: \(min: (?P<lag>-?[\d.]+)",
    re.MULTILINE,
)


def python() -> Path:
    """The interpreter of Sample Factory's environment; a missing one says how to make it."""
    exe = VENV / "bin" / "python"
    if not exe.exists():
        raise FileNotFoundError(f"Sample Factory runs in {VENV}: make it with `make venv-sf`")
    return exe


def command(env: str, train_dir: Path, workers: int, envs_per_worker: int,
            seed: int = 0) -> list[str]:  # fmt: skip
    """APPO on Sample Factory's Atari `env` (`atari_pong`: PongNoFrameskip-v4 with its
    DeepMind wrappers, 4 frames skipped and 4 stacked) with its Atari settings (CleanRL's
    PPO: rollouts of 128 steps, 4 epochs of 4 minibatches of 256, lr 2.5e-4 decayed,
    clip 0.1), asynchronous (acting goes on while the learner trains), on the CPU, until
    it is stopped (its `--train_for_seconds` never fires in 2.1.1: the clock it reads is
    not advanced)."""
    return [
        str(python()), str(Path(__file__).with_name("sf_atari.py")), f"--env={env}", "--algo=APPO",
        "--experiment=anchor", f"--train_dir={train_dir}", "--device=cpu", "--async_rl=True",
        f"--num_workers={workers}", f"--num_envs_per_worker={envs_per_worker}",
        f"--seed={seed}", "--with_wandb=False",
        "--save_every_sec=100000", "--keep_checkpoints=1",
    ]  # fmt: skip


def points(log: str) -> list[Point]:
    """(seconds since its first report, agent steps, 1 once it has trained else 0) of
    each report in the log."""
    out: list[Point] = []
    start = None
    for m in REPORT.finditer(log):
        t = datetime.datetime.strptime(m["time"], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        start = t if start is None else start
        out.append((t - start, int(m["samples"]), int(float(m["lag"]) >= 0)))
    return out
