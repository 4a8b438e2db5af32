"""Resuming a run: which checkpoint it continues from, which options may change, and
where its metrics continue.

- The checkpoint is chosen by what the files hold, never by their modification
  time (a copy of a run has new mtimes): the most env steps wins; at equal steps
  `final`/`interrupted`/`latest` win over `step_N`. A DQN or SAC state gets the replay
  memory saved with it, if any (`runners.checkpoints`).
- Options that manage the run (budget, evaluation, checkpoints, logging, workers,
  devices, backend) apply when given, except that an on-policy run keeps its number of
  envs (`kept_envs`), and a run whose envs follow a changed mode or workers says so
  (`changed_envs`); any other option given with a value other than the run's is
  refused by name: the run keeps the settings it learned with.
- A run whose checkpoint says it is finished, resumed without a larger budget, and
  a budget not above the steps already done, stop at once and say so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from pathlib import Path
from typing import Any

from pararl import checkpoint
from pararl.config import RunConfig
from pararl.config.env_source import EnvFactory, is_factory_name
from pararl.errors import RunFinished, UsageError
from pararl.rundir import RunDir
from pararl.runners import checkpoints

# the options that may change on resume: how the run is managed, not what it learns
MUTABLE = frozenset(
    {
        "total_steps",
        "target_return",
        "workers",
        "mode",
        "device",
        "compile",
        "learner_threads",
        "act_device",
        "learn_device",
        "eval_every",
        "eval_episodes",
        "eval_in",
        "checkpoint_every",
        "checkpoint_every_s",
        "eval_max_steps",
        "eval_actions",
        "log_every_s",
        "progress",
        "tensorboard",
        "backend",
        "ray_address",
        "ray_timeout_s",
        "restart_actors",
        "resume",
        "trust_checkpoint",
    }
)
FINISHED = ("solved", "step budget reached")


def given_fields(config: RunConfig) -> frozenset[str]:
    """For a config made in Python: the fields set to something other than the default."""
    default = type(config)()
    fields = dataclasses.fields(config)
    return frozenset(f.name for f in fields if getattr(config, f.name) != getattr(default, f.name))


def latest_checkpoint(run: RunDir, algo: str, trust: bool = False) -> tuple[Path, dict[str, Any]]:
    """The checkpoint to resume from, and its state: see the module docstring.
    `step_N` files carry their env steps in the name (the session writes them so);
    the others are read for theirs. Only the chosen state is kept in memory. `algo`:
    the run's (another's checkpoint is refused); `trust`: unpickle files the
    weights-only loader refuses (`checkpoint.load`)."""
    best: tuple[tuple[int, int], Path, dict[str, Any] | None] | None = None
    for path in run.checkpoints.glob("*.pt"):
        name = path.stem
        if name in ("best", "replay"):  # for acting; the replay memory of another
            continue
        number = name.removeprefix("step_")
        if name.startswith("step_") and number.isdigit():
            rank, state = (int(number), 0), None
        else:
            state = checkpoint.load(path, trust, algo)
            # at equal steps: final/interrupted (they say how the run ended), latest, step_N
            rank = (run_steps(state), 1 if name == "latest" else 2)
        if best is None or rank > best[0]:
            best = (rank, path, state)
    if best is None:
        raise UsageError(f"{run.root} has no checkpoint to resume from (checkpoints/*.pt)")
    _, path, state = best
    state = state if state is not None else checkpoint.load(path, trust, algo)
    if "replay" in state:
        state = {**state, "replay": checkpoints.replay_for(run, state, trust)}
    return path, state


def run_steps(state: dict[str, Any]) -> int:
    """The run's env steps at a checkpoint, as its budget, `step_N` names and metrics
    count them: the header's, times the replicas of an averaging run (whose header
    holds rank 0's own steps, each replica stepping as many)."""
    return checkpoint.Header.of(state).env_steps * int(state.get("replicas") or 1)


def summary(path: Path, state: dict[str, Any], dropped: tuple[int, int]) -> str:
    """What a resume starts from, for the console: the checkpoint, its env steps and
    wall time, and the metrics rows logged after it that were dropped (`dropped`:
    how many, and the most env steps among them)."""
    header = checkpoint.Header.of(state)
    text = (
        f"pararl: resuming from {path.parent.name}/{path.name}: {run_steps(state):,} env "
        f"steps, {header.wall_s:.0f} s of training"
    )
    count, last = dropped
    if count:
        text += (
            f"; {count} metrics rows logged after it (up to {last:,} env steps) were "
            "dropped and are redone"
        )
    return text


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _shown(value: Any) -> str:
    """A saved option's value as it would be given: a list's items spaced, none as
    `(none)`."""
    if isinstance(value, (tuple, list)):
        return " ".join(str(v) for v in value) or "(none)"
    return str(value)


def _same(name: str, requested: RunConfig, saved: RunConfig) -> bool:
    """Whether option `name` was given as the run has it: a sweep by its values (lr=3e-4
    is lr=0.0003), the run's directory also as the directory it is resumed from
    (the first command again, with --resume added)."""
    ours, theirs = getattr(requested, name), getattr(saved, name)
    if ours == theirs:
        return True
    if name == "sweep":
        try:
            return bool(requested.grid == saved.grid)  # type: ignore[attr-defined]
        except (UsageError, AttributeError):
            return False
    if name == "run_dir" and requested.resume is not None and ours is not None:
        return Path(ours).resolve() == Path(requested.resume).resolve()
    return False


def resumed_config(saved: RunConfig, requested: RunConfig, given: Collection[str]) -> RunConfig:
    """The saved config with the run-management options that were given applied;
    a UsageError naming any other option given with a different value. A run whose
    env a factory built is saved with the factory's name: the factory is given
    again (`env=`), from Python."""
    names = {f.name for f in dataclasses.fields(saved)}
    budget = set(saved.BUDGET_OPTIONS)
    mutable = MUTABLE | budget | ({"env"} if _factory_again(saved, requested) else set())
    refused = sorted(
        n for n in given if n in names and n not in mutable and not _same(n, requested, saved)
    )
    if "run_dir" in refused and requested.resume is not None:
        raise UsageError(
            f"--run-dir {requested.run_dir}: a resumed run goes on in its own directory "
            f"(--resume {requested.resume}); drop --run-dir, or copy the run there and "
            "resume the copy"
        )
    if refused:
        kept = ", ".join(f"{_flag(n)} {_shown(getattr(saved, n))}" for n in refused)
        raise UsageError(
            f"a resumed run keeps the settings it learned with ({kept}); "
            f"only run options change on resume (--total-steps, --eval-every, --workers, ...); "
            "start a new run to change the others"
        )
    changes = {n: getattr(requested, n) for n in given if n in mutable and n in names}
    if budget & set(given) and "total_steps" not in given:
        changes["total_steps"] = None  # set anew from them (`for_env`)
    changes["run_dir"] = saved.run_dir if requested.resume is None else Path(requested.resume)
    # trusting a file is this invocation's decision, never carried over from the last
    changes["trust_checkpoint"] = requested.trust_checkpoint
    return dataclasses.replace(saved, **changes)


def _factory_again(saved: RunConfig, requested: RunConfig) -> bool:
    """Whether `requested` gives the factory of a run saved by its factory's name."""
    return (
        isinstance(requested.env, EnvFactory)
        and isinstance(saved.env, str)
        and is_factory_name(saved.env)
    )


def kept_envs(config: RunConfig, facts: dict[str, Any], given: Collection[str]) -> RunConfig:
    """A resumed on-policy run keeps its number of envs (`ENVS_SET_THE_BATCH`): its
    rollout, and so its batch and the updates its schedules count, are made of them.
    A run saved with `envs_per_worker` keeps its workers (left to `auto`, `--workers`
    would follow the new machine's cores: a run of 2 x 4 envs resumed on 16 cores would
    go on with 64); otherwise the envs are kept and split over the new machine's
    workers. A `--workers` that changes the envs is refused by name."""
    num_envs = facts.get("num_envs")
    if not config.ENVS_SET_THE_BATCH or not isinstance(num_envs, int):
        return config
    if config.envs_per_worker is None:
        if "workers" in given and config.workers is not None and num_envs % config.workers:
            raise UsageError(
                f"--workers {config.workers}: this run learns from {num_envs} envs, which "
                "set its batch, and a resumed run keeps them; give --workers that divides "
                f"{num_envs}, or drop it"
            )
        return dataclasses.replace(config, num_envs=num_envs)
    workers = max(1, num_envs // config.envs_per_worker)
    if "workers" in given and config.workers is not None and config.workers != workers:
        raise UsageError(
            f"--workers {config.workers}: this run learns from {num_envs} envs ({workers} "
            f"workers x {config.envs_per_worker}), which set its batch, and a resumed run "
            "keeps them; drop --workers, or start a new run"
        )
    return dataclasses.replace(config, workers=workers)


def changed_envs(
    before: dict[str, Any], now: dict[str, Any], envs_per_worker: int | None
) -> str | None:
    """A line for a resumed run that steps another number of envs than it did (a DQN
    population's follow its mode and workers, which may change on resume), and the
    options that keep them; None when the number is the same, or the run saved no
    mode to compare (MAML's follow the cores alone). `before`, `now`: the facts
    resolved at the last start and at this one; `envs_per_worker`: the run's."""
    old, new = before.get("num_envs"), now.get("num_envs")
    was, mode = before.get("mode"), now.get("mode")
    if not (isinstance(old, int) and isinstance(new, int) and was and mode) or old == new:
        return None
    options = [f"--mode {was}"] if was != mode else []
    if envs_per_worker and old % envs_per_worker == 0:
        # in every mode a population's agent steps workers x envs_per_worker envs
        options.append(f"--workers {old // envs_per_worker}")
    each = " each" if now.get("seeds") else ""
    how = f" (mode {was}, now {mode})" if was != mode else ""
    return (
        f"pararl: this run stepped {old} envs{each} before and goes on with {new}{how}: "
        f"its envs follow its mode and workers; give {' '.join(options) or '--workers'} "
        "to keep them"
    )


def changed_mode(before: dict[str, Any], now: dict[str, Any]) -> str | None:
    """A line for a resumed run that goes on in another mode than it trained in (with
    as many envs: `changed_envs` speaks of the others), and the option that keeps it;
    None when the mode is the same or the run saved none."""
    was, mode = before.get("mode"), now.get("mode")
    if not (was and mode) or was == mode:
        return None
    return (
        f"pararl: this run trained in mode {was} before and goes on in mode {mode}; "
        f"give --mode {was} to keep it"
    )


def extends_budget(config: RunConfig, given: Collection[str]) -> bool:
    """Whether a resume gave the run a budget (--total-steps, or an option that sets
    it: `BUDGET_OPTIONS`)."""
    return "total_steps" in given or any(n in given for n in config.BUDGET_OPTIONS)


def check_left_to_do(config: RunConfig, state: dict[str, Any], given: Collection[str]) -> None:
    """RunFinished when the resumed run has nothing left to do."""
    done, root = run_steps(state), config.resume
    if extends_budget(config, given) and config.budget <= done:
        # what set the budget: --total-steps when given, else an option that sets it
        others = (n for n in config.BUDGET_OPTIONS if n in given)
        by = "total_steps" if "total_steps" in given else next(others)
        asked = f"{_flag(by)} {getattr(config, by):,}"
        if by != "total_steps":
            asked += f" ({config.budget:,} env steps)"
        raise RunFinished(
            f"{root} already has {done:,} env steps, {asked} asks for no more; nothing to do"
        )
    if not extends_budget(config, given) and (
        state.get("status") in FINISHED or done >= config.budget
    ):
        status = state.get("status") or "step budget reached"
        raise RunFinished(
            f"{root} is finished ({status}, {done:,} of {config.budget:,} env steps); "
            f"pass --total-steps N (more than {done:,}) to train on"
            + "".join(f", or a larger {_flag(n)}" for n in config.BUDGET_OPTIONS)
        )


__all__ = [
    "MUTABLE",
    "changed_envs",
    "changed_mode",
    "check_left_to_do",
    "extends_budget",
    "given_fields",
    "kept_envs",
    "latest_checkpoint",
    "resumed_config",
    "summary",
]
