"""The options of `pararl compare` (`pararl.compare` runs it): light, as every config
is (no torch)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro

from pararl.errors import UsageError

# run directories, or directories of runs (no "(default: )" in the help: none is one)
Paths = Annotated[tuple[Path, ...], tyro.conf.arg(help_behavior_hint="")]


@dataclass
class CompareConfig:
    """`pararl compare RUN_A RUN_B`: do A's agents end with higher returns than B's?
    Each side's final evaluation returns, one per agent (the last row of each agent
    in eval.csv): their interquartile mean with its bootstrap confidence interval,
    median and mean; the probability that an agent of A scores higher than one of B,
    with its interval; and the two-sided Mann-Whitney U test's p-value (Agarwal et
    al., 2021, "Deep RL at the Edge of the Statistical Precipice")."""

    runs: Annotated[Paths, tyro.conf.Positional, tyro.conf.arg(metavar="RUN_A RUN_B")] = ()
    """The two sides: each a run directory, or a directory of runs (their agents pooled);
    RUN:NAME=VALUE[,NAME=VALUE] keeps the agents of RUN with those settings (a sweep's
    combination, or seed=N)."""
    a: Annotated[Paths, tyro.conf.arg(metavar="RUN [RUN ...]")] = ()
    """Side A as several paths (runs, or directories of runs); the one positional is B."""
    b: Annotated[Paths, tyro.conf.arg(metavar="RUN [RUN ...]")] = ()
    """Side B as several paths (runs, or directories of runs); the one positional is A."""
    seed: int = 0
    """Seed of the bootstrap resamples: the same seed, the same intervals."""
    reps: int = 50_000
    """Bootstrap resamples per interval (rliable's default)."""
    confidence: float = 0.95
    """Coverage of the confidence intervals."""
    alpha: float = 0.05
    """Significance level of the verdict on the Mann-Whitney p-value."""
    json: Path | None = None
    """Write the numbers, and every agent's score, to this JSON file too."""

    def sides(self) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
        """Side A's paths and side B's: --a and --b, the positional runs filling the
        sides they leave, A first; each side at least one path."""
        given = [self.a, self.b]
        left = list(self.runs)
        for i, side in enumerate(given):
            if not side and left:
                given[i] = (left.pop(0),)
        if left or not all(given):
            raise UsageError(
                "compare takes two sides: pararl compare RUN_A RUN_B, or --a RUN [RUN ...] "
                f"--b RUN [RUN ...] (got {len(self.runs)} positional run"
                f"{'' if len(self.runs) == 1 else 's'}"
                f"{', --a' if self.a else ''}{', --b' if self.b else ''})"
            )
        return given[0], given[1]

    def validate(self) -> None:
        if self.reps < 1:
            raise UsageError(f"--reps must be >= 1, not {self.reps}")
        for name in ("confidence", "alpha"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 < value < 1):
                raise UsageError(f"--{name} must be between 0 and 1 (exclusive), not {value}")
        if self.seed < 0:
            raise UsageError(f"--seed must be >= 0, not {self.seed}")
        self.sides()


__all__ = ["CompareConfig"]
