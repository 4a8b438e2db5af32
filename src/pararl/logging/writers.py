"""Metric writers: one CSV row per log point, TensorBoard scalars alongside."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from pararl.logging.tbevents import EventWriter

COLUMNS = (
    "env_steps",
    "wall_s",
    "updates",
    "steps_per_s",
    "updates_per_s",
    "replay_ratio",
    "epsilon",
    "episode_return",
    "eval_return",
    "eval_std",
    "loss",
    "q_mean",
    "policy_lag",
    "actor_cpu",
    "learner_cpu",
    "pg_loss",
    "v_loss",
    "entropy",
    "approx_kl",
    "clipfrac",
    "sync_ms",
    "actor_version",
    "obs_std",  # PPO with normalisation: the observations' mean standard deviation
    "reward_scale",  # ... and the factor rewards are learned at
    "iteration",  # MAML: meta-iterations done
    "pre_return",  # ... mean return of the episodes before adaptation
    "post_return",  # ... and after it (the "valid" episodes)
    "kl",  # ... KL of the outer TRPO step
    "ls_steps",  # ... its line-search candidates
    "step_accepted",  # ... 1 if the line search found a step, 0 if theta was kept
    "surrogate_before",
    "surrogate_after",
    "sampled_steps",  # ... env steps actually stepped (episodes may end early)
    "time_sampling_s",
    "time_adaptation_s",
    "time_outer_s",
    # new columns go last: rows appended to an older run's file keep their order
)


class MetricsWriter:
    """Appends rows to `metrics.csv` (fixed columns, blanks where absent) and, when
    enabled, the same scalars to a TensorBoard event file. Flushes every row to both:
    nothing is lost on a crash."""

    def __init__(
        self, csv_path: Path, tensorboard_dir: Path | None, columns: tuple[str, ...] = COLUMNS
    ) -> None:
        self.columns = columns
        new = not csv_path.exists() or csv_path.stat().st_size == 0
        self._file = csv_path.open("a", newline="")
        self._csv = csv.DictWriter(self._file, fieldnames=columns, extrasaction="ignore")
        if new:
            self._csv.writeheader()
        self._tb = None if tensorboard_dir is None else EventWriter(tensorboard_dir)

    def write(self, row: dict[str, Any]) -> None:
        self._csv.writerow({k: ("" if v is None else v) for k, v in row.items()})
        self._file.flush()
        if self._tb is not None:
            step = int(row["env_steps"])
            for key, value in row.items():
                if key != "env_steps" and isinstance(value, (int, float)):
                    self._tb.add_scalar(key, value, step)
            self._tb.flush()

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()


def truncate_after(csv_path: Path, env_steps: int) -> None:
    """Drop the rows of `metrics.csv` past `env_steps` (a resumed run redoes them), so
    that no step is logged twice; rewritten atomically, a no-op when nothing is past."""
    if not csv_path.is_file():
        return
    with csv_path.open(newline="") as f:
        reader = csv.DictReader(f)
        header, rows = reader.fieldnames or list(COLUMNS), list(reader)
    kept = [r for r in rows if not r.get("env_steps") or float(r["env_steps"]) <= env_steps]
    if len(kept) == len(rows):
        return
    tmp = csv_path.with_name(csv_path.name + ".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(kept)
    tmp.replace(csv_path)
