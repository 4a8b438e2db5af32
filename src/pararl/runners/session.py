"""Everything around a training loop: run directory, saved config, metrics,
console, periodic greedy evaluation, checkpoints, and when to stop.

`metrics.csv` has a row per log point, `eval.csv` one per greedy evaluation; each
is in the order of its `env_steps` (an evaluation's result arrives after later log
rows were written, so the two are kept apart; TensorBoard gets both).

Evaluations fall due every `eval_every` env steps. One runs at a time: one that
falls due while the last still runs (in the evaluation process), or several that one
iteration of the loop steps past, are skipped for the next the loop reaches, and
counted: `eval_skipped` in the row of the evaluation that follows them, and the
run's total on the progress line and in its last line. A run that trains its whole
budget ends with an evaluation of its final weights, whether or not one was due (a
solved run ends on the evaluation that reached its target)."""

from __future__ import annotations

import contextlib
import copy
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from pararl import checkpoint
from pararl.config import RunConfig, to_json
from pararl.errors import UsageError, interrupts_held, said
from pararl.evaluation.background import BackgroundEvaluator
from pararl.evaluation.episodes import Episodes, Evaluator, Progress, progress_notes
from pararl.evaluation.reported import ReportedReturns
from pararl.logging import (
    Console,
    MetricsWriter,
    RateMeter,
    column,
    last_row,
    truncate_after,
)
from pararl.plots import learning_curve
from pararl.rundir import RunDir
from pararl.runners import checkpoints
from pararl.stats import iqm
from pararl.vector import WorkerError, WorkerTimeoutError

StateFn = Callable[[], dict[str, Any]]
Stats = dict[str, Any] | Callable[[], dict[str, Any]] | None

# The session's own metric columns; each loop declares the rest (its `METRICS`,
# handed over in its `Plan`), and a metric in neither is an error
# (`logging.MetricsWriter`).
METRICS = (
    "env_steps",
    "wall_s",
    "updates",
    "steps_per_s",
    "updates_per_s",
    "replay_ratio",
    "episode_return",
)
# eval.csv: one row per greedy evaluation, at the env steps of the weights evaluated
EVAL_METRICS = (
    "env_steps",
    "wall_s",
    "eval_return",
    "eval_std",
    "eval_episodes",
    "eval_truncated",
    "eval_length",
    "eval_skipped",  # evaluations due since the previous row's that did not run
)


def _by_step(eval_csv: Any, agents: int) -> list[float]:
    """The evaluations' returns in eval.csv, in order: a population's median over its
    agents at each evaluation."""
    returns = column(eval_csv, "eval_return")
    if agents == 1:
        return returns
    return [float(np.median(returns[i : i + agents])) for i in range(0, len(returns), agents)]


def _own_copy(state: Any) -> Any:
    """A copy of one agent's state whose tensors own just their elements: a
    population's agent holds views into one block of every agent's weights, which
    `copy.deepcopy` would copy whole for each agent (N agents: N blocks)."""
    if isinstance(state, torch.Tensor):
        return state.detach().clone()
    if isinstance(state, dict):
        return {key: _own_copy(value) for key, value in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(_own_copy(value) for value in state)
    return copy.deepcopy(state)


def _by_setting(settings: Sequence[str], means: np.ndarray) -> str:
    """Each setting's median return over its agents, in the sweep's order."""
    groups: dict[str, list[float]] = {}
    for setting, mean in zip(settings, means, strict=True):
        groups.setdefault(setting, []).append(float(mean))
    return ", ".join(f"{name} {np.median(values):.1f}" for name, values in groups.items())


def evaluations(count: int) -> str:
    return f"{count:,} evaluation{'' if count == 1 else 's'}"


RETURN_WINDOW = 20  # `episode_return`: the mean of this many last training episodes


class TrainSession:
    """Bookkeeping for one run. The loop calls `record_episodes` with step infos and
    `tick` once per iteration; `tick` logs, evaluates and checkpoints on schedule.
    `title`: the console's (default: the env id); `metrics`: the loop's own metric
    columns, beside the session's (`METRICS`)."""

    def __init__(
        self,
        config: RunConfig,
        run: RunDir,
        evaluator: Evaluator | BackgroundEvaluator | ReportedReturns,
        target_return: float | None,
        extra_config: dict[str, Any] | None = None,
        start_steps: int = 0,
        start_wall: float = 0.0,
        title: str = "",
        metrics: Sequence[str] = (),
        recent_returns: Sequence[float] = (),
        resumed: bool = False,
        agents: int = 1,
        agent_returns: Sequence[Sequence[float]] = (),
        settings: Sequence[str] = (),
    ) -> None:
        """`agents`: a population's (`--seeds`): metrics.csv and eval.csv then have a
        row per agent (an `agent` column), episodes count for the agent whose env
        ended them (the envs of agent i are the i-th block of the vector env), and
        the progress line, the best checkpoint and the target go by the agents'
        median (solved: every agent's evaluation reached the target);
        `agent_returns`: each agent's window of training episodes, resumed;
        `settings`: a sweep's, each agent's (its evaluation lines give each setting's
        median too)."""
        self.config, self.run, self.evaluator = config, run, evaluator
        self.agents = agents
        self.settings = tuple(settings)
        self.target_return = target_return
        # whole or not at all: a run whose config.json is cut could not be resumed
        partial = run.config.with_name(run.config.name + ".partial")
        partial.write_text(to_json(config, extra_config))
        partial.replace(run.config)
        checkpoint.remove_partial(run.checkpoints)  # a killed run's cut-off saves
        # resumed: rows written after the checkpoint are redone now
        self.dropped = truncate_after(run.metrics, start_steps) if start_steps else (0, 0)
        if start_steps:
            truncate_after(run.evaluations, start_steps)
        tb = run.tensorboard if config.tensorboard else None
        agent = ("agent",) if agents > 1 else ()
        # resumed: TensorBoard drops what it holds past the checkpoint, as the CSVs do
        purge = start_steps + 1 if start_steps else None
        self.metrics = MetricsWriter(run.metrics, tb, (*agent, *METRICS, *metrics), purge)
        self.evaluations = MetricsWriter(
            run.evaluations, self.metrics.events, (*agent, *EVAL_METRICS)
        )
        self.console = Console(
            config.budget, config.progress, title or config.env_name, start_steps, agents
        )
        if start_steps:
            # a row kept from before may have been written after the checkpoint's clock
            # stopped (the last evaluation of an interrupted run): the clock goes on
            # from the later, so that wall time never runs backwards in the files
            logged = [*column(run.metrics, "wall_s"), *column(run.evaluations, "wall_s")]
            start_wall = max([start_wall, *logged])
        self._t0 = time.monotonic() - start_wall
        # the first line a log interval in, resumed or not (it has rates to show)
        self._last_log = start_wall
        # (env steps, updates) of the last metrics row: rows only move forward
        kept = last_row(run.metrics, ("env_steps", "updates")) if start_steps else None
        self._logged = (int(kept[0]), int(kept[1])) if kept else (start_steps - 1, -1)
        # a new run (not one resumed, even from a checkpoint at 0 steps): if it ends
        # before its first tick, what it wrote goes
        self._fresh = not (resumed or start_steps)
        self._start_steps = start_steps
        self._latest: tuple[int, int, Stats] | None = None  # the last tick's numbers
        every = config.eval_interval
        self._next_eval = (start_steps // every + 1) * every
        # a fresh run saves at its first tick too: any run can be resumed, even one
        # killed outright before the first periodic checkpoint
        every = config.checkpoint_interval
        self._next_ckpt = (start_steps // every + 1) * every if start_steps else 1
        self._last_ckpt_s = start_wall  # wall time of the last periodic checkpoint
        # a resumed run goes on with its window of training episodes (saved in each
        # checkpoint) and its best evaluation (eval.csv, cut at the checkpoint): fresh,
        # the window showed the first few episodes to end after the reset, and `best`
        # was overwritten by the first evaluation, however poor
        self.episode_returns: deque[float] = deque(recent_returns, maxlen=RETURN_WINDOW)
        self.agent_returns: list[deque[float]] = [
            deque(agent_returns[i] if i < len(agent_returns) else (), maxlen=RETURN_WINDOW)
            for i in range(agents if agents > 1 else 0)
        ]
        evaluated = _by_step(run.evaluations, agents) if start_steps else []
        self.best_eval = max(evaluated, default=-np.inf)
        # a population's best checkpoint keeps each agent at its own best evaluation:
        # those returns (eval.csv, a row per agent in order), and the agents' saved
        # states (read from best.pt once one improves, when resumed)
        returns = column(run.evaluations, "eval_return") if start_steps and agents > 1 else []
        self._agent_best = np.array(
            [max(returns[i::agents], default=-np.inf) for i in range(agents)]
        )
        self._best_agents: list[Any] | None = None
        self.last_eval: float | None = evaluated[-1] if evaluated else None
        self.last_eval_iqm: float | None = None  # a population's, over its agents
        if len(returns) >= agents > 1:  # resumed: its last evaluation's, as it printed it
            self.last_eval_iqm = iqm(np.asarray(returns[-agents:]))
        # evaluations that fell due and did not run (the module docstring)
        skipped = column(run.evaluations, "eval_skipped") if start_steps else []
        self.skipped_evals = int(sum(skipped[:: max(agents, 1)]))  # a row per agent each
        self.solved = False
        self._solved_at = 0  # the env steps of the evaluation that reached the target
        self._eval_interrupted = False  # Ctrl-C during the evaluation of the final weights
        self.ended_said = False  # the run's last line is printed (where it is saved)
        # the evaluation in flight: its env steps, wall time, state and the due ones
        # skipped before it
        self._pending: tuple[int, float, StateFn, int] | None = None
        self._evaluated_at = -1  # the env steps of the weights last sent to evaluate
        self._policy: Any = None  # the network `tick` was last given
        self._step_rate, self._update_rate = RateMeter(), RateMeter()

    def _state(self, state_fn: StateFn) -> dict[str, Any]:
        """A checkpoint's state: the loop's, and the window of training episodes (a
        population's: each agent's too)."""
        state = {**state_fn(), "episode_returns": list(self.episode_returns)}
        if self.agent_returns:
            state["agent_returns"] = [list(d) for d in self.agent_returns]
        return state

    @property
    def wall_s(self) -> float:
        return time.monotonic() - self._t0

    @property
    def untrained(self) -> bool:
        """A new run that has finished no iteration: ended now, it saves nothing
        (`finish`), so there is nothing to resume."""
        return self._fresh and self._latest is None

    def record_episodes(self, infos: dict[str, Any]) -> None:
        """Collect finished episodes' true returns (RecordEpisodeStatistics infos;
        under SAME_STEP autoreset pass `infos["final_info"]`)."""
        if "episode" in infos:
            mask = infos["_episode"]
            self.episode_returns.extend(float(r) for r in infos["episode"]["r"][mask])
            if self.agent_returns:  # agent i's envs are the i-th block
                per = len(mask) // self.agents
                for env in np.flatnonzero(mask):
                    self.agent_returns[env // per].append(float(infos["episode"]["r"][env]))

    def done(self, env_steps: int) -> bool:
        return self.solved or env_steps >= self.config.budget

    def tick(
        self,
        env_steps: int,
        updates: int,
        policy: Any,
        state_fn: StateFn,
        stats: Stats = None,
    ) -> None:
        """Log, evaluate and checkpoint when due. `stats` may be a function: it is
        called only when a log line is written. `policy` is the acting network
        (`models.acting`), whose weights a background evaluator is sent."""
        now = self.wall_s
        self._policy = policy
        self._latest = (env_steps, updates, stats)
        if not self._step_rate.started:  # rates count from the first iteration's end
            self._step_rate.update(env_steps)
            self._update_rate.update(updates)
        self._collect_eval()
        due = env_steps >= self._next_eval and not self.solved
        evaluating = due and not self.evaluator.busy
        if evaluating:
            self._start_eval(env_steps, policy, state_fn, self._skipped(env_steps))
        self._periodic_checkpoint(env_steps, now, state_fn)
        console = now - self._last_log >= self.config.log_every_s
        if console:
            self._last_log = now
        # a metrics row per evaluation too (short runs get a curve), unless the env
        # steps have not moved since the last row (an async learner's updates while
        # the actor's chunk is on its way): the curve has a point there already
        if console or (evaluating and env_steps > self._logged[0]):
            self.log(env_steps, updates, stats() if callable(stats) else stats, console)

    def _periodic_checkpoint(self, env_steps: int, now: float, state_fn: StateFn) -> None:
        """`step_N` every `checkpoint_every` env steps; between them, `latest` every
        `checkpoint_every_s` seconds (a run killed outright loses at most that)."""
        if env_steps >= self._next_ckpt:
            every = self.config.checkpoint_interval
            self._next_ckpt = (env_steps // every + 1) * every
            checkpoints.save(self.run, f"step_{env_steps}", self._state(state_fn))
        elif now - self._last_ckpt_s >= self.config.checkpoint_every_s:
            checkpoints.save(self.run, "latest", self._state(state_fn))
        else:
            return
        self._last_ckpt_s = now

    def _due_until(self, env_steps: int) -> int:
        """How many evaluations have fallen due by `env_steps` since the last one
        that ran; the schedule moves past them."""
        every = self.config.eval_interval
        if env_steps < self._next_eval:
            return 0
        due = env_steps // every - self._next_eval // every + 1
        self._next_eval = (env_steps // every + 1) * every
        return due

    def _skipped(self, env_steps: int) -> int:
        """The evaluations due by `env_steps` that the one starting now stands for
        (the schedule moves past them). A loop that reports its own returns (MAML's
        post-adaptation returns, `ReportedReturns`) skips none: it reports at every
        iteration it can, however many intervals that iteration spans."""
        passed = max(self._due_until(env_steps) - 1, 0)
        return 0 if isinstance(self.evaluator, ReportedReturns) else passed

    def schedule_note(self) -> str | None:
        """A line for the start of a run whose budget ends before its first
        evaluation falls due (None: one does)."""
        budget, every = self.config.budget, self.config.eval_interval
        if self._next_eval <= budget:
            return None
        if self._start_steps:  # resumed: the next one after where it goes on from
            where = f"the next evaluation (at {self._next_eval:,} env steps, every {every:,})"
        else:
            where = f"an evaluation every {every:,} env steps (--eval-every)"
        return (
            f"pararl: {where} reaches past the budget (--total-steps {budget:,}): no "
            "periodic evaluation falls due; its final weights are evaluated when it ends"
        )

    def _start_eval(
        self,
        env_steps: int,
        policy: Any,
        state_fn: StateFn,
        skipped: int = 0,
        weights_move_on: bool = True,
    ) -> None:
        """Evaluate `policy` (its weights at `env_steps`); `skipped`: the evaluations
        due since the last that did not run (this one stands for them)."""
        if self.evaluator.deferred and not hasattr(policy, "state_dict"):
            raise TypeError(
                "a background evaluator needs the network, not a policy without weights"
            )
        self._evaluated_at = env_steps
        if self.evaluator.deferred and weights_move_on:
            # the weights move on while the episodes run: keep the evaluated state
            snapshot = copy.deepcopy(state_fn())
            self._pending = (env_steps, self.wall_s, lambda: snapshot, skipped)
        else:
            self._pending = (env_steps, self.wall_s, state_fn, skipped)
        if isinstance(self.evaluator, Evaluator):  # in this process: it says how far it is
            self.evaluator.progress = self._progress_note(env_steps)
        self.evaluator.submit(policy)
        self._collect_eval()  # inline: the returns are in already

    def _collect_eval(self, timeout: float = 0.0) -> float | None:
        """Record the evaluation in flight if its episodes are in (within `timeout` s)."""
        episodes: Episodes | None = self.evaluator.poll(timeout)
        if episodes is None or self._pending is None:
            return None
        env_steps, wall_s, state_fn, skipped = self._pending
        self._pending = None
        self.skipped_evals += skipped
        each = episodes.split(self.agents)
        for i, agent in enumerate(each):
            self.evaluations.write(
                {
                    **({"agent": i} if self.agents > 1 else {}),
                    "env_steps": env_steps,
                    "wall_s": round(wall_s, 3),
                    "eval_return": agent.mean,
                    "eval_std": agent.std,
                    "eval_episodes": len(agent.returns),
                    "eval_truncated": int(agent.truncated.sum()),
                    "eval_length": float(agent.lengths.mean()) if agent.cap else None,
                    "eval_skipped": skipped,
                }
            )
        means = np.array([agent.mean for agent in each])
        # a population goes by its median agent; solved once every agent is
        mean, std = float(np.median(means)), episodes.std
        self.last_eval = mean
        self.last_eval_iqm = iqm(means) if self.agents > 1 else None
        notes = [note] if (note := episodes.cap_note()) else []
        if self.agents > 1:
            notes.insert(
                0,
                f"median of {self.agents} agents (IQM {self.last_eval_iqm:.1f}), from "
                f"{means.min():.1f} to {means.max():.1f}",
            )
        if self.settings:
            notes.insert(1, "by setting: " + _by_setting(self.settings, means))
        if skipped:
            why = "the last was running" if self.evaluator.deferred else "one iteration passed them"
            notes.append(f"skipped {evaluations(skipped)} that fell due before it ({why})")
        self.console.message(
            f"eval @ {env_steps:,} steps ({wall_s:.1f} s): {mean:.1f} ± {std:.1f}"
            + "".join(f"; {note}" for note in notes)
        )
        if self.agents > 1:
            self._save_agents_best(means, state_fn)
            self.best_eval = max(self.best_eval, mean)
        elif mean > self.best_eval:
            self.best_eval = mean
            checkpoints.save(self.run, "best", state_fn())
        if self.target_return is not None and means.min() >= self.target_return:
            self.solved = True
            self._solved_at = env_steps  # the weights evaluated; training may have gone on
        return mean

    def _save_agents_best(self, means: np.ndarray, state_fn: StateFn) -> None:
        """A population's `best` checkpoint: every agent at its own best evaluation,
        as its run alone would keep it (`pararl.load(RUN, agent=i)` reads it). The
        agents whose return rose replace theirs; the others stay as they were saved."""
        improved = np.flatnonzero(means > self._agent_best)
        if improved.size == 0:
            return
        state = state_fn()
        agents = state["agents"]
        if self._best_agents is None:
            self._best_agents = self._saved_best_agents()
        for i in improved:
            self._best_agents[i] = _own_copy(agents[i])  # the weights move on
            self._agent_best[i] = means[i]
        kept = [
            best if best is not None else _own_copy(now)
            for best, now in zip(self._best_agents, agents, strict=True)
        ]
        self._best_agents = kept
        checkpoints.save(self.run, "best", {**state, "agents": kept})

    def _saved_best_agents(self) -> list[Any]:
        """The agents of a resumed population's `best` checkpoint (None for each when
        there is none to read, or it holds another number of agents)."""
        path = self.run.checkpoint("best")
        if not self._fresh and path.is_file():
            try:
                saved = checkpoint.load(path).get("agents")
            except UsageError:
                saved = None
            if isinstance(saved, list) and len(saved) == self.agents:
                return list(saved)
        return [None] * self.agents

    def log(
        self, env_steps: int, updates: int, stats: dict[str, Any] | None, console: bool = True
    ) -> dict[str, Any]:
        """Write a metrics row, unless nothing moved since the last (and show it on the
        console unless `console` is False)."""
        row: dict[str, Any] = {
            "env_steps": env_steps,
            "wall_s": round(self.wall_s, 3),
            "updates": updates,
            "steps_per_s": self._step_rate.update(env_steps),
            "updates_per_s": self._update_rate.update(updates),
            "replay_ratio": updates / max(env_steps, 1),
            "episode_return": (
                float(np.mean(self.episode_returns)) if self.episode_returns else None
            ),
            "eval_return": self.last_eval,
            "eval_skipped": self.skipped_evals,
        }
        per_agent = {k: v for k, v in (stats or {}).items() if np.ndim(v) == 1}
        # tensors -> floats here
        row.update({k: float(v) for k, v in (stats or {}).items() if k not in per_agent})
        windows = [float(np.mean(d)) if d else None for d in self.agent_returns]
        if self.agent_returns:  # the progress line: the median agent's, and the IQM
            seen = [w for w in windows if w is not None]
            row["episode_return"] = float(np.median(seen)) if seen else None
            row["return_iqm"] = iqm(seen) if seen else None
            row["eval_iqm"] = self.last_eval_iqm
        # a row per (env steps, updates) moved on: a tick with nothing new since the last
        # row (an evaluation's row, then a console line's; a resumed run's first tick
        # where its checkpoint's run ended) adds none
        if (env_steps, updates) > self._logged:
            self._logged = (env_steps, updates)
            # eval.csv has them; the IQMs over agents are the agents' rows' to compute
            console_only = ("eval_return", "eval_skipped", "return_iqm", "eval_iqm")
            shared = {k: v for k, v in row.items() if k not in console_only}
            if self.agents == 1:
                self.metrics.write(shared)
            for i in range(self.agents if self.agents > 1 else 0):
                own = {k: float(v[i]) for k, v in per_agent.items()}
                self.metrics.write({"agent": i, **shared, "episode_return": windows[i], **own})
            row.update({k: float(np.median(v)) for k, v in per_agent.items()})
        if console:
            self.console.update(row)
        return row

    def _last_evaluation(self, env_steps: int, state_fn: StateFn) -> None:
        """Wait for the evaluation in flight (it may be the best, or reach the target),
        then evaluate the final weights, unless they were the last evaluated or the
        run is solved (it ends on the evaluation that reached the target): due or not,
        a run that trained its budget ends with their return (it stands for any that
        fell due since the last that ran). Training has stopped, so how far they are
        is shown while they run."""
        if self.evaluator.busy:
            self._await_eval(self._pending[0] if self._pending else env_steps)
        final = env_steps != self._evaluated_at and not self.solved and self._policy is not None
        if final and not self.evaluator.busy:
            self._evaluate_here_if_never_asked()
            # training has stopped: no snapshot needed
            skipped = self._skipped(env_steps)
            self._start_eval(env_steps, self._policy, state_fn, skipped, weights_move_on=False)
            self._await_eval(env_steps)

    def _evaluate_here_if_never_asked(self) -> None:
        """A run that ends before its evaluation process was given any work (`--eval-in
        auto`: a short run, or one whose evaluations fell past its budget) evaluates its
        final weights here: training has stopped, so this process's core is free, and
        the child may still be importing torch (seconds that the run would wait for). The
        episodes are the child's (`BackgroundEvaluator.here`)."""
        child = self.evaluator
        if (
            isinstance(child, BackgroundEvaluator)
            and not child.asked
            and self.config.eval_in == "auto"
        ):
            child.close()
            self.evaluator = child.here()

    def _progress_note(self, env_steps: int) -> Callable[[Progress], None]:
        """A console note on how far the evaluation of the weights at `env_steps` is."""
        return progress_notes(self.console.message, f"the weights at {env_steps:,} env steps")

    def _await_eval(self, env_steps: int) -> None:
        """Collect the evaluation in flight in the child, noting its progress; the
        child says how far it is every few seconds, and one silent for its
        `timeout_s` raises (`BackgroundEvaluator.poll`)."""
        note = self._progress_note(env_steps)
        seen = None
        while self.evaluator.busy:
            if self._collect_eval(timeout=0.5) is not None:
                return
            progress = getattr(self.evaluator, "progress", None)
            if progress is not None and progress is not seen:
                seen = progress
                note(progress)

    def finish(self, env_steps: int, state_fn: StateFn, status: str) -> None:
        """Final checkpoint and plot; says how the run ended and where it is."""
        if self.untrained:
            self._discard(status)
            return
        name = "final" if status in ("solved", "step budget reached") else "interrupted"
        # what `--resume` reads (`runners.resume`)
        state = {**self._state(state_fn), "status": status}
        evaluated = name != "final"  # whether the final weights' evaluation is behind us
        try:
            with interrupts_held():  # first, and whole: nothing is lost
                checkpoints.save(self.run, name, state)
                if status != "failed" and self._latest is not None:
                    steps, updates, stats = self._latest
                    if (steps, updates) > self._logged:  # metrics.csv ends where training did
                        stats = stats() if callable(stats) else stats
                        self.log(steps, updates, stats, console=False)
            if name == "final":
                self._last_evaluation(env_steps, state_fn)
                evaluated = True
                if self.solved and status == "step budget reached":
                    self._saved_solved(name, state)
        except (WorkerError, WorkerTimeoutError) as exc:
            self.console.message(f"pararl: the last evaluation failed: {exc}")
        except KeyboardInterrupt as exc:  # the run is saved: its last line (next) says
            self._eval_interrupted = not evaluated  # so, and how to evaluate its final
            said(exc, mark=True)  # weights if cut before: no second line after it
            raise
        finally:
            try:
                with interrupts_held():  # a second Ctrl-C waits for the curve and the line
                    self._wrap_up(env_steps, state_fn, status)
            finally:
                self.close()  # idempotent: the runners' own close() is then a no-op

    def _saved_solved(self, name: str, state: dict[str, Any]) -> None:
        """The evaluation of the final weights reached the target after they were saved
        (as the budget's end): their checkpoint says "solved", as the run's last line
        does and a resume will (its replay memory, if any, is already in replay.pt)."""
        solved = {**state, "status": "solved"}
        if "replay" in solved:
            solved["replay"] = None
        checkpoint.save(self.run.checkpoint(name), solved)

    def _discard(self, status: str) -> None:
        """A new run that ended before its first iteration (Ctrl-C at start, an env
        that fails at once) trained nothing and has nothing to resume: what it wrote
        goes, so that the same command can run again in the same directory."""
        try:
            self.evaluations.close()
            self.metrics.close()
            self.console.close()
        finally:
            try:
                self.close()
            finally:
                self.run.discard()
        print(f"pararl: {status} before its first iteration; nothing saved", file=sys.stderr)

    def _wrap_up(self, env_steps: int, state_fn: StateFn, status: str) -> None:
        if not self.run.checkpoint("best").exists():
            checkpoints.save(self.run, "best", state_fn())  # never with the replay memory
        if self.solved and status == "step budget reached":
            status = "solved"  # by the evaluation collected at the end
        self.evaluations.close()
        self.metrics.close()
        self.console.close(env_steps, self.last_eval, self.skipped_evals)
        self._plot()
        best = "no evaluation" if self.last_eval is None else f"best eval {self.best_eval:.1f}"
        skipped = self.skipped_evals
        said = (
            f"; {skipped:,} due evaluation{'' if skipped == 1 else 's'} skipped" if skipped else ""
        )
        if status == "solved" and self._solved_at != env_steps:
            # a background evaluation's episodes ran while training went on
            said += f"; its evaluation at {self._solved_at:,} env steps reached the target"
        if self._eval_interrupted:
            agent = " --agent I" if self.agents > 1 else ""  # a batch's: agent by agent
            said += (
                "; the evaluation of its final weights was interrupted (`pararl evaluate "
                f"{self.run.root} --checkpoint final{agent}` evaluates them)"
            )
        print(
            f"pararl: {status} after {env_steps:,} env steps in {self.wall_s:.1f} s "
            f"({best}){said}; run saved in {self.run.root}",
            file=sys.stderr,
            flush=True,
        )
        self.ended_said = True  # a Ctrl-C from here on needs no line of its own

    def _plot(self) -> None:
        """The learning curve: drawn by the evaluation process when it is idle and up
        (it has matplotlib loaded), else here."""
        args = (self.run.metrics, self.run.evaluations, self.run.curve, self.config.env_name)
        if isinstance(self.evaluator, BackgroundEvaluator) and not self.evaluator.busy:
            self.run.curve.unlink(missing_ok=True)  # only a curve drawn now counts
            with contextlib.suppress(WorkerError, WorkerTimeoutError):  # else: draw it here
                if self.evaluator.plot(*args) is not None:
                    return
        learning_curve(*args)

    def close(self) -> None:
        self.evaluator.close()
