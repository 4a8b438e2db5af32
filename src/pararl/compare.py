"""`pararl compare RUN_A RUN_B`: whether the agents of one side end with higher returns
than those of the other, as "Deep RL at the Edge of the Statistical Precipice"
(Agarwal et al., 2021) asks a comparison to report it (`pararl.stats`).

Each side's scores are its agents' final evaluation returns (`pararl.scores`). For
each side: the interquartile mean with its percentile bootstrap interval, the median
and the mean; then the probability that an agent of A scores higher than one of B
with its interval, the two-sided Mann-Whitney U test's p-value, and one line saying
what they mean. The bootstrap streams are children of one seed (`--seed`): the same
seed and runs, the same output (and a side's interval the same as A or as B).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from pararl import stats
from pararl.config import CompareConfig
from pararl.errors import UsageError
from pararl.scores import Side, side


@dataclass(frozen=True)
class Summary:
    """One side's final returns: how many, their IQM with its interval, median, mean."""

    agents: int
    iqm: float
    iqm_ci: tuple[float, float]
    median: float
    mean: float


@dataclass(frozen=True)
class Comparison:
    """A's scores against B's: each side's summary, P(A > B) with its interval, the
    Mann-Whitney p-value (and how it was computed), and the settings that made them."""

    a: Side
    b: Side
    summary_a: Summary
    summary_b: Summary
    improvement: float  # P(A > B) + 0.5 P(A = B), an agent of each drawn at random
    improvement_ci: tuple[float, float]
    p_value: float
    method: Literal["exact", "asymptotic"]
    alpha: float
    confidence: float
    reps: int
    seed: int

    @property
    def verdict(self) -> str:
        """What the p-value says, in one line; with too few agents for any untied
        split to reach `alpha`, that too (ties make the test asymptotic, whose normal
        approximation is not to be trusted at such sizes)."""
        p, alpha = self.p_value, self.alpha
        n, m = self.summary_a.agents, self.summary_b.agents
        least = stats.smallest_p(n, m)
        few = f"{n} agent{_s(n)} against {m} can give no p below {least:.3g}"
        if p < alpha:
            higher, lower = ("A", "B") if self.improvement > 0.5 else ("B", "A")
            text = (
                f"{higher}'s returns are higher than {lower}'s: a significant difference "
                f"at {alpha:g} (p = {p:.3g})"
            )
            if least >= alpha:  # only tied scores' normal approximation gets there
                text += f"; but untied, {few}: more agents are needed to trust it"
            return text
        text = f"no significant difference at {alpha:g} (p = {p:.3g})"
        if least >= alpha:
            text += f"; {few}: more agents are needed to tell"
        return text

    def report(self) -> str:
        """The comparison as `pararl compare` prints it."""
        level = f"{100 * self.confidence:g}% CI"
        shown = [
            value
            for s in (self.summary_a, self.summary_b)
            for value in (s.iqm, *s.iqm_ci, s.median, s.mean)
        ]
        num = _numbers(shown)
        lines = self.warnings()
        for name, one, summary in (("A", self.a, self.summary_a), ("B", self.b, self.summary_b)):
            lines.append(f"{name}  {_described(one)}")
            lo, hi = summary.iqm_ci
            lines.append(
                f"   IQM {num(summary.iqm)}  {level} [{num(lo)}, {num(hi)}]   "
                f"median {num(summary.median)}   mean {num(summary.mean)}"
            )
        lo, hi = self.improvement_ci
        lines.append(
            f"P(A > B) {self.improvement:.3f}  {level} [{lo:.3f}, {hi:.3f}]   "
            "(an agent of A against one of B; ties count half)"
        )
        lines.append(f"Mann-Whitney U, two-sided ({self.method}): p = {self.p_value:.3g}")
        lines.append(self.verdict)
        return "\n".join(lines)

    def warnings(self) -> list[str]:
        """What may keep these returns from comparing, said before them: runs on
        several envs, and final evaluations at far apart env steps (a run stopped
        early, or trained to another budget)."""
        said = []
        envs = sorted(set(self.a.envs) | set(self.b.envs))
        if len(envs) > 1:
            said.append(
                f"warning: these runs are on {len(envs)} envs ({', '.join(envs)}): "
                "their returns may not compare"
            )
        spans = [[f.env_steps for f in s.finals if f.env_steps] for s in (self.a, self.b)]
        if all(spans) and max(max(s) for s in spans) > 1.5 * min(min(s) for s in spans):
            at = [f"{min(s):,}" + (f"-{max(s):,}" if max(s) > min(s) else "") for s in spans]
            said.append(
                f"warning: the final evaluations are at {at[0]} env steps (A) and {at[1]} "
                "(B): runs stopped early or trained to other budgets"
            )
        return said

    def to_json(self) -> dict[str, Any]:
        """The numbers, as `--json` writes them."""

        def one(s: Side, summary: Summary) -> dict[str, Any]:
            return {
                "paths": [str(p) for p in s.paths],
                "runs": [str(r) for r in s.runs],
                "envs": s.envs,
                "agents": summary.agents,
                "iqm": summary.iqm,
                "iqm_ci": list(summary.iqm_ci),
                "median": summary.median,
                "mean": summary.mean,
                "scores": [
                    {
                        "run": str(f.run),
                        "agent": f.agent,
                        "env_steps": f.env_steps,
                        "score": f.score,
                    }
                    for f in s.finals
                ],
            }

        return {
            "a": one(self.a, self.summary_a),
            "b": one(self.b, self.summary_b),
            "probability_of_improvement": self.improvement,
            "probability_of_improvement_ci": list(self.improvement_ci),
            "mann_whitney_p": self.p_value,
            "mann_whitney_method": self.method,
            "verdict": self.verdict,
            "warnings": self.warnings(),
            "alpha": self.alpha,
            "confidence": self.confidence,
            "reps": self.reps,
            "seed": self.seed,
            "bootstrap": "percentile, over agents (each side resampled on its own)",
        }


def compare(
    a: Side,
    b: Side,
    reps: int = stats.REPS,
    confidence: float = stats.CONFIDENCE,
    alpha: float = 0.05,
    seed: int = 0,
) -> Comparison:
    """Side `a` against side `b` (`pararl.scores.side`). The bootstrap streams are
    children of `SeedSequence(seed)`: each side's IQM interval draws from the first
    (the same as A or as B: `compare(b, a)` shows each side as `compare(a, b)` does),
    P(A > B)'s from the second."""
    one_side, both = np.random.SeedSequence(seed).spawn(2)
    x, y = a.scores, b.scores
    return Comparison(
        a=a,
        b=b,
        summary_a=summarize(x, reps, confidence, np.random.default_rng(one_side)),
        summary_b=summarize(y, reps, confidence, np.random.default_rng(one_side)),
        improvement=stats.probability_of_improvement(x, y),
        improvement_ci=stats.probability_of_improvement_ci(
            x, y, reps, confidence, np.random.default_rng(both)
        ),
        p_value=stats.mann_whitney(x, y),
        method=stats.mann_whitney_method(x, y),
        alpha=alpha,
        confidence=confidence,
        reps=reps,
        seed=seed,
    )


def summarize(
    scores: Sequence[float] | np.ndarray, reps: int, confidence: float, rng: stats.Rng
) -> Summary:
    """One side's summary: the IQM's interval drawn from `rng`."""
    values = stats.scores_of(scores)
    return Summary(
        agents=int(values.size),
        iqm=stats.iqm(values),
        iqm_ci=stats.bootstrap_ci(values, stats.iqm, reps, confidence, rng),
        median=float(np.median(values)),
        mean=float(np.mean(values)),
    )


def run(config: CompareConfig) -> Comparison:
    """`pararl compare`: read both sides, compare them, print the comparison (and
    write `--json`); returns it."""
    config.validate()
    paths_a, paths_b = config.sides()
    a, b = side(paths_a, "A"), side(paths_b, "B")
    agents_a, agents_b = ({(f.run.resolve(), f.agent) for f in one.finals} for one in (a, b))
    both = sorted(agents_a & agents_b)
    if both:
        (run, agent), more = both[0], len(both) - 1
        also = f" and {more} more" if more else ""
        raise UsageError(
            f"agent {agent} of {run}{also} is on both sides: it would be compared with "
            "itself; name each run (or each of a sweep's settings) on one side only"
        )
    result = compare(
        a,
        b,
        reps=config.reps,
        confidence=config.confidence,
        alpha=config.alpha,
        seed=config.seed,
    )
    if config.json is not None:
        write_json(result, config.json)
    print(result.report())
    if config.json is not None:
        print(f"numbers written to {config.json}")
    return result


def write_json(result: Comparison, path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result.to_json(), indent=2) + "\n")
    except OSError as exc:
        raise UsageError(f"--json {path}: {exc.strerror or exc}") from None


def _described(one: Side) -> str:
    """A side in words: what it was given, its runs and agents, envs, and the env
    steps of its final evaluations."""
    shown = [str(p) for p in one.paths]
    names = ", ".join(shown if len(shown) <= 3 else [*shown[:2], f"... ({len(shown)} paths)"])
    runs, agents = len(one.runs), len(one.finals)
    text = f"{names}: {runs} run{_s(runs)}, {agents} agent{_s(agents)}"
    if one.envs:
        text += f" ({', '.join(one.envs)})"
    if one.steps is not None:
        lo, hi = one.steps
        at = f"{lo:,}" if lo == hi else f"{lo:,} to {hi:,}"
        text += f", final evaluation{_s(agents)} at {at} env steps"
    return text


def _numbers(values: Sequence[float]) -> Callable[[float], str]:
    """How the report shows returns: all with the same decimals, enough for four
    significant digits of the largest (500.0, 21.53, 0.1250; none from 1,000 up)."""
    largest = max((abs(v) for v in values), default=0.0)
    digits = 1 if largest == 0 else min(6, max(0, 3 - math.floor(math.log10(largest))))
    return lambda value: f"{value:,.{digits}f}"


def _s(count: int) -> str:
    return "" if count == 1 else "s"


__all__ = ["Comparison", "Summary", "compare", "run", "summarize"]
