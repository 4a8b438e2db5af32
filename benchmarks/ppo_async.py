"""`python -m benchmarks ppo_async`: asynchronous PPO on MinAtar against pararl's own
serial and sync loops and SB3's PPO, each trained to the same budget (`lib.compare`;
finished seeds kept in `results/ppo_async`), after the floor of one asynchronous
iteration, measured once per game: `--mode async` acts rollout j + 1 in an actor process
while the learner updates on rollout j, so an iteration is at least the longer of the
two. Each pararl run's metrics.csv (a row per rollout) and config.json give its mode,
busy fractions, lag and iteration (`run_facts`).

Targets (the issue's): async's final return the same as serial's and sync's
(Mann-Whitney, two-sided, p > 0.05) in at most 0.6x their wall time, and at most 0.5x
SB3's; one async iteration within 1.2x its floor.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import multiprocessing as mp
import statistics
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks.lib import compare, training
from benchmarks.lib import harness as h
from benchmarks.lib.compare import Comparison, Outcome, Run, System
from pararl.stats import mann_whitney, smallest_p

GAMES = ("Breakout", "Asterix")
NUM_ENVS = 8  # every system's: pararl's default, SB3's `lib.sb3.PPO_ENVS`
ASYNC = "pararl-async"
ALPHA = 0.05  # "the same final return": Mann-Whitney's two-sided p above this
WALL_TARGETS = {"pararl-serial": 0.6, "pararl-sync": 0.6, "sb3": 0.5}  # async's wall ÷ theirs
SAME_FINAL = ("pararl-serial", "pararl-sync")  # whose final async must match
FLOOR_TARGET = 1.2  # async's iteration ÷ its floor
FLOOR_WARMUP = 2  # rollouts acted and updates before the floor's timed ones


def pararl(mode: str, default: bool = True, color: str | None = None) -> System:
    """`pararl train ppo --mode MODE` with its MinAtar defaults, a metrics row per rollout."""
    return System(f"pararl-{mode}", f"pararl PPO ({mode})", "ppo", {"mode": mode,
                  "log_every_s": 0.0}, default=default, color=color)  # fmt: skip


ROW = Comparison(
    name="ppo_async",
    title="Asynchronous PPO on MinAtar against the serial and sync loops and SB3",
    systems=(pararl("async", color="C0"), pararl("serial", color="C1"),
             pararl("sync", default=False, color="C2"),
             System("sb3", "SB3 PPO", "ppo", anchor="minatar", color="C3")),
    runs=tuple(f"MinAtar/{game}-v1:{seed}" for seed in range(3) for game in GAMES),
    budget=1_000_000, eval_every=100_000, run_timeout_s=3 * 3_600.0,
    keep_dir="results/ppo_async", kept=("sb3_threads",),
    quick=dict(runs=("MinAtar/Breakout-v1:0",), budget=8_192, eval_every=4_096,
               eval_episodes=2, final_evals=2, run_timeout_s=600.0),
)  # fmt: skip


@dataclass(frozen=True)
class Config(compare.Options, h.Options):
    """Async PPO on MinAtar against serial (and sync) and SB3, after the floor of one
    async iteration. --quick: Breakout, one seed, 8,192 steps, nothing kept."""

    floor_repeats: int = 10  # Floor: timed rollouts and updates per game, after two untimed.


def resolve(config: Config) -> Config:
    c = h.apply_quick(compare.resolve(ROW, config), {"floor_repeats": 3})
    h.require(c, ">= 1: floor_repeats")
    for run in c.runs:  # the anchor has pararl's MinAtar settings
        h.check([(not run.startswith("MinAtar/"), f"--runs: '{run}' is not a MinAtar/ id")])
    return c


# --- the floor --------------------------------------------------------------------------


@dataclass
class Floor:
    """One game's floor: one actor acting a rollout of every env (`InlineActors.take`)
    and `PPOLearner.update` on it, each on one torch thread, timed alone (in turn) and
    beside the other (each while a second process does the other side without pause),
    and the update alone on every core; seconds. The two vCPUs of this machine can slow
    each other: a GEMM on one ran at 0.65-0.7x its speed beside a busy other in one
    sitting, at full speed in another (notes-2026-11-30)."""

    env: str
    acting: h.Summary
    update: h.Summary
    num_envs: int
    num_steps: int
    epochs: int
    minibatches: int
    minibatch_size: int
    acting_beside: h.Summary | None = None  # acting while an update runs beside it
    update_beside: h.Summary | None = None  # an update while acting runs beside it
    update_wide: h.Summary | None = None  # an update alone on every core
    sitting: str = ""  # when and where it was measured (`compare.sitting`)

    @property
    def floor_s(self) -> float:  # an async iteration at best: side by side
        return max(self.acting.median, self.update.median)

    @property
    def serial_s(self) -> float:  # a serial iteration at best: one after the other
        return self.acting.median + self.update.median

    @property
    def beside_s(self) -> float | None:
        """An async iteration at best as the loop runs it, on cores that may slow each
        other: both sides at their speed beside the other until the one that ends
        first is done, then the other alone; the update's rest on every core, which
        the actor lends it once it waits (`LentCores`)."""
        if self.acting_beside is None or self.update_beside is None:
            return None
        wide = self.update_wide.median if self.update_wide else self.update.median
        return overlapped(self.acting.median, self.acting_beside.median,
                          self.update.median, self.update_beside.median, b_rest=wide)  # fmt: skip


def overlapped(a: float, a_beside: float, b: float, b_beside: float,
               b_rest: float | None = None) -> float:  # fmt: skip
    """The wall time of two jobs run side by side, `a` and `b` seconds alone and
    `a_beside`, `b_beside` seconds each beside the other: together until the first
    ends, then the rest of the other's work alone (`b`'s at the speed of `b_rest`
    seconds for the whole, where it then runs faster: on the other's cores too)."""
    together = min(a_beside, b_beside)
    rest = b if b_rest is None else b_rest
    return together + a * (1 - together / a_beside) + rest * (1 - together / b_beside)


def _pieces(env: str, num_envs: int, seed: int) -> tuple[Any, Any, Callable[[], Any]]:
    """The run's own pieces on one torch thread: its `PPOState`, one actor of every env
    (`InlineActors`, the async actor's serial twin) and a round's first half (act a
    rollout, give its batch; the update is `state.learner.update(batch, state.rng)`)."""
    import torch

    from pararl.config import PPOConfig
    from pararl.envs.make import env_factory, probe_env
    from pararl.runners.ppo_state import PPOState
    from pararl.samplers.rollout.actors import ActorPlan, InlineActors
    from pararl.samplers.rollout.collect import batch_of
    from pararl.seeding import env_seeds

    fn, spaces = env_factory(env, training=True), probe_env(env)
    config = PPOConfig(env=env, act_device="cpu", learn_device="cpu")
    torch.manual_seed(seed)
    state = PPOState(config.for_spaces(*spaces), *spaces, num_envs)
    spec = state.rollout_spec
    plan = ActorPlan(state.make_model, fn, spec, state.mask_info, 0, seed=seed)
    actors = InlineActors(plan, 1, env_seeds(seed, num_envs), state.learner.model, 0)

    def act() -> Any:
        taken = actors.take()  # its weights, its steps, its copy out
        actors.publish(state.learner.model, actors.next)
        batch = batch_of(taken.arrays, spec)
        batch.pop("discounted")  # the reward scale's, not the loss's (`train_loop`)
        return batch

    return state, actors, act


def _neighbour(conn: Any, env: str, num_envs: int, side: str) -> None:
    """A second process doing one side of an iteration (`acting` or `update`) without
    pause until its parent says close or goes away (the pipe is then readable)."""
    state, actors, act = _pieces(env, num_envs, seed=1)
    try:
        batch = act()
        conn.send((True, None))  # ready: its loop starts
        while not conn.poll(0):
            if side == "acting":
                act()
            else:
                state.learner.update(dict(batch), state.rng)
    finally:
        actors.close()


@contextlib.contextmanager
def beside(env: str, num_envs: int, side: str, timeout_s: float = 300.0) -> Iterator[None]:
    """Run `side` of an iteration in a spawned process for the duration of the block;
    it has started its loop when the block begins and is gone when it ends."""
    from pararl.mp.procs import ProcessGroup

    group = ProcessGroup(_neighbour, [(env, num_envs, side)], mp.get_context("spawn"),
                         name="ppo-async-beside")  # fmt: skip
    try:
        group.await_ready(timeout_s)
        yield
    finally:
        group.close()


def floor_in_own_process(env: str, repeats: int, warmup: int, timeout_s: float = 900.0
                         ) -> Floor:  # fmt: skip
    """`measure_floor` in a spawned process of its own, as a run has one: a second
    game's state in the same process made its update 1.5x slower (glibc returned the
    freed heap, and each step faulted its pages in again: 107 ms against 71 with
    `MALLOC_TOP_PAD_` set, 69 in a fresh process; notes-2026-11-30). Not a daemon:
    it starts the process `beside` runs."""
    from pararl.mp.procs import ProcessGroup

    group = ProcessGroup(_send_floor, [(env, repeats, warmup)], mp.get_context("spawn"),
                         name="ppo-async-floor", daemon=False)  # fmt: skip
    try:
        (floor,) = group.gather([0], timeout_s, "measured no floor in {timeout} s")
        return floor
    finally:
        group.close()


def _send_floor(conn: Any, env: str, repeats: int, warmup: int) -> None:
    conn.send((True, measure_floor(env, repeats, warmup)))


def measure_floor(env: str, repeats: int, warmup: int, num_envs: int = NUM_ENVS,
                  contended: bool = True) -> Floor:  # fmt: skip
    """Act a rollout, update on it, publish the weights, `warmup` + `repeats` times
    with the run's own pieces, alone; the update on every core as often; then
    (`contended`) each side `warmup` + `repeats` times beside a process doing the
    other."""
    from pararl.intraop import torch_threads
    from pararl.mp.threads import every_core_threads

    def rounds(n: int, act: Callable[[], Any], update: Callable[[Any], Any],
               ) -> tuple[list[float], list[float]]:  # fmt: skip
        acting: list[float] = []
        updates: list[float] = []
        for i in range(warmup + n):
            acted, batch = h.timed(act)
            took, _ = h.timed(functools.partial(update, batch))
            if i >= warmup:
                acting.append(acted)
                updates.append(took)
        return acting, updates

    with torch_threads(1):
        state, actors, act = _pieces(env, num_envs, seed=0)
        learn = functools.partial(state.learner.update, rng=state.rng)
        try:
            acting, updates = rounds(repeats, act, learn)
            batch = act()
            with torch_threads(every_core_threads()):
                _, updates_wide = rounds(repeats, lambda: dict(batch), learn)
            acting_beside = updates_beside = None
            if contended:
                with beside(env, num_envs, "update"):
                    acting_beside, _ = rounds(repeats, act, lambda batch: None)
                with beside(env, num_envs, "acting"):
                    _, updates_beside = rounds(repeats, lambda: dict(batch), learn)
        finally:
            actors.close()
    s, hyper = state.settings, state.learner.hyper
    return Floor(env, h.summarize(acting), h.summarize(updates), num_envs, s.num_steps,
                 hyper.update_epochs, hyper.num_minibatches, s.minibatch_size,
                 h.maybe(acting_beside or []), h.maybe(updates_beside or []),
                 h.summarize(updates_wide))  # fmt: skip


# --- what each pararl run says of itself ------------------------------------------------


def run_facts(rows: Sequence[Mapping[str, str]], config: Mapping[str, Any]) -> dict[str, Any]:
    """From a run's metrics.csv rows and config.json: its mode and why, its rollouts, an
    iteration's wall time (the mean over the rollouts after the first, every pause
    counted; the median of those a row apart), the rows' means of the busy fractions,
    the lag and the update's threads (None: not in its rows)."""
    resolved = config.get("resolved", {})
    rollout = int(resolved.get("num_envs") or NUM_ENVS) * int(config["num_steps"])
    points = [(int(float(r["env_steps"])), float(r["wall_s"])) for r in rows if r.get("wall_s")]
    gaps = [t1 - t0 for (s0, t0), (s1, t1) in pairwise(points) if s1 - s0 == rollout]
    spanned = (points[-1][0] - points[0][0]) / rollout if points else 0.0

    def mean(key: str) -> float | None:
        values = [float(r[key]) for r in rows if r.get(key)]
        return statistics.fmean(values) if values else None

    return {
        **{key: resolved.get(key) for key in ("mode", "mode_reason", "num_envs")},
        "rollouts": points[-1][0] // rollout if points else 0,
        "iteration_s": (points[-1][1] - points[0][1]) / spanned if spanned else None,
        "iteration_median_s": statistics.median(gaps) if gaps else None,
        **{key: mean(key) for key in ("actor_busy", "learner_busy", "policy_lag",
                                      "update_threads")},
    }  # fmt: skip


def read_run(s: System, run: Run, run_dir: Path) -> None:
    """`compare.measure`'s `after`: a pararl run's facts into `run.extra`."""
    if not s.anchor:
        config = json.loads((run_dir / "config.json").read_text())
        run.extra = run_facts(training.read_metrics(run_dir), config)


@dataclass
class Results:
    outcome: Outcome
    floors: list[Floor]


def measure(c: Config, meta: h.Metadata) -> Results:
    floors = []
    for env in dict.fromkeys(run.rpartition(":")[0] for run in c.runs):
        h.progress(f"ppo_async: the floor on {env} ({c.floor_repeats} rollouts and updates) ...")
        floor = floor_in_own_process(env, c.floor_repeats, FLOOR_WARMUP)
        floors.append(floor := dataclasses.replace(floor, sitting=compare.sitting(meta)))
        h.progress(
            f"ppo_async: {env}: acting {1e3 * floor.acting.median:.0f} ms, update "
            f"{1e3 * floor.update.median:.0f} ms, floor {1e3 * floor.floor_s:.0f} ms, side "
            f"by side {1e3 * (floor.beside_s or float('nan')):.0f} ms"
        )
    return Results(compare.measure(ROW, c, meta, after=read_run), floors)


# --- the arithmetic of the report -------------------------------------------------------


def of(runs: Sequence[Run], env: str, system: str, value: Callable[[Run], Any]) -> list[float]:
    """`value` of each run of `system` on `env` that has one."""
    mine = [value(r) for r in runs if (r.env, r.system) == (env, system)]
    return [float(v) for v in mine if v is not None]


def verdict(met: bool | None) -> str:
    return "–" if met is None else "met" if met else "missed"


@dataclass
class Versus:
    """Async against another system on one game, over their seeds."""

    env: str
    other: str
    async_final: h.Summary | None
    other_final: h.Summary | None
    async_wall: h.Summary | None
    other_wall: h.Summary | None
    p: float | None  # Mann-Whitney, two-sided, of the finals
    smallest_p: float  # the smallest p these numbers of seeds can give
    wall_ratio: float | None  # async's wall ÷ the other's run of the same seed, median

    @property
    def seeds(self) -> str:
        n = (len(s.samples) if s else 0 for s in (self.async_final, self.other_final))
        return " vs ".join(map(str, n))

    @property
    def targets(self) -> dict[str, bool | None]:
        """Its targets met or not (None: not measured): the same final (against serial
        and sync), the wall ratio."""
        wall = None if self.wall_ratio is None else self.wall_ratio <= WALL_TARGETS[self.other]
        if self.other not in SAME_FINAL:
            return {"wall": wall}
        return {"final": None if self.p is None else self.p > ALPHA, "wall": wall}


def versus(runs: Sequence[Run], env: str, other: str, last: int) -> Versus:
    mine, theirs = (of(runs, env, s, lambda r: r.final(last)) for s in (ASYNC, other))
    a_wall, o_wall = (h.maybe(of(runs, env, s, lambda r: r.wall_s if r.ok else None))
                      for s in (ASYNC, other))  # fmt: skip
    both = bool(mine and theirs)
    p = mann_whitney(mine, theirs) if both else None
    least = smallest_p(len(mine), len(theirs)) if both else 1.0
    own = [r for r in runs if (r.system, r.env) == (ASYNC, env)]
    return Versus(env, other, h.maybe(mine), h.maybe(theirs), a_wall, o_wall, p, least,
                  compare.wall_ratio(runs, own, other))  # fmt: skip


def compared(outcome: Outcome, last: int) -> list[Versus]:
    """Async against every other system run, game by game."""
    runs, out = outcome.runs, []
    for env in dict.fromkeys(r.env for r in runs):
        systems = dict.fromkeys(r.system for r in runs if r.env == env)
        if ASYNC in systems:
            out += [versus(runs, env, s, last) for s in systems if s != ASYNC]
    return out


@dataclass
class Iteration:
    """One game's floor against the async runs' iteration (and the serial runs')."""

    floor: Floor
    iteration: h.Summary | None  # each async run's mean iteration, over seeds
    serial: h.Summary | None
    sync: h.Summary | None = None

    @property
    def ratio(self) -> float | None:
        return h.ratio(self.iteration, self.floor.floor_s)

    @property
    def beside_ratio(self) -> float | None:
        """Async's iteration against its floor with the two sides slowing each other."""
        return None if self.floor.beside_s is None else h.ratio(self.iteration,
                                                                self.floor.beside_s)  # fmt: skip

    @property
    def best_vs_sync(self) -> float | None:
        """The least async ÷ sync wall an iteration allows: that floor ÷ sync's iteration
        (evaluations and start-up aside)."""
        best = self.floor.beside_s
        return None if best is None or self.sync is None else best / self.sync.median

    @property
    def met(self) -> bool | None:
        return None if self.ratio is None else self.ratio <= FLOOR_TARGET


def iterations(runs: Sequence[Run], floors: Sequence[Floor]) -> list[Iteration]:
    """Each floor against the iterations of the runs of its own sitting (a kept run's
    machine may have run at another speed)."""

    def mean(f: Floor, system: str) -> h.Summary | None:
        mine = [r for r in runs if r.sitting == f.sitting]
        return h.maybe(of(mine, f.env, system, lambda r: r.extra.get("iteration_s")))

    return [Iteration(f, mean(f, ASYNC), mean(f, "pararl-serial"), mean(f, "pararl-sync"))
            for f in floors]  # fmt: skip


# --- report -----------------------------------------------------------------------------


def settings_note() -> str:
    """The settings every system trains with, from pararl's MinAtar config (which
    `lib.sb3.minatar_ppo` gives SB3 too)."""
    from pararl.config import PPOConfig

    s = PPOConfig().for_env("minatar").config
    return (
        f"Every system: PPO on {NUM_ENVS} envs x {s.num_steps} steps, {s.update_epochs} epochs "
        f"of {s.minibatch_size}-sample minibatches, lr {s.lr:g}"
        f"{' annealed linearly to 0' if s.anneal_lr else ''}, gamma {s.gamma:g}, GAE lambda "
        f"{s.gae_lambda:g}, clip {s.clip_coef:g}, entropy {s.ent_coef:g}, value loss weight "
        f"{s.vf_coef:g}, gradient norm {s.max_grad_norm:g} (pararl's MinAtar defaults), the "
        "MinAtar paper's network on pararl's MinAtar envs (sticky actions 0.1, in evaluation "
        "too). pararl: `pararl train ppo --mode async|serial|sync --log-every-s 0` (async: "
        "one actor process of the 8 envs beside the learner; sync: env worker processes, 2 x "
        "4 on 2 cores); SB3: PPO on 8 envs in one process."
    )


def ms(value: float | h.Summary | None) -> str:
    if isinstance(value, h.Summary):
        return h.fmt_spread(value, lambda v: f"{1e3 * v:.0f}")
    return h.fmt_num(None if value is None else 1e3 * value, 0)


BUSY: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("rollouts", "rollouts", "{:.0f}".format), ("actor_busy", "actor busy", "{:.0%}".format),
    ("learner_busy", "learner busy", "{:.0%}".format),
    ("policy_lag", "policy lag", "{:.2f}".format),
    ("iteration_s", "iteration ms, mean", lambda v: f"{1e3 * v:.0f}"),
    ("iteration_median_s", "iteration ms, median", lambda v: f"{1e3 * v:.0f}"),
    ("update_threads", "update threads", "{:.1f}".format),
)  # fmt: skip


def blocks_of(r: Results, c: Any, label: Mapping[str, str], versuses: Sequence[Versus],
              iters: Sequence[Iteration]) -> list[str]:  # fmt: skip
    """Async against each system with its targets, the busy fractions and the floor."""
    met = [m for v in versuses for m in v.targets.values()] + [it.met for it in iters]
    done = "not measured" if all(m is None for m in met) else "no" if False in met else "yes"
    weak = [v for v in versuses if v.other in SAME_FINAL and v.smallest_p > ALPHA]
    caution = "" if not weak else (
        f" With {weak[0].seeds} seeds the smallest p Mann-Whitney can give is "
        f"{weak[0].smallest_p:.2f}: \"the same\" there says only that no difference was shown."
    )  # fmt: skip
    game = compare.family

    def returns(s: h.Summary | None) -> str:
        return h.fmt_spread(s, compare.whole)

    vs_cols: list[h.Col[Versus]] = [
        h.Col("game", lambda v: game(v.env), "l"),
        h.Col("against", lambda v: label.get(v.other, v.other), "l"),
        h.Col("async final", lambda v: returns(v.async_final)),
        h.Col("their final", lambda v: returns(v.other_final)),
        h.Col("Mann-Whitney p (seeds; the smallest possible)", lambda v: "–" if v.p is None
              else f"{v.p:.2f} ({v.seeds}; {v.smallest_p:.2f})"),
        h.Col("async wall s", lambda v: returns(v.async_wall)),
        h.Col("their wall s", lambda v: returns(v.other_wall)),
        h.Col("async ÷ their wall", lambda v: h.fmt_ratio(v.wall_ratio)),
        h.Col("targets", lambda v: ", ".join(f"{k} {verdict(m)}" for k, m in v.targets.items()),
              "l"),
    ]  # fmt: skip
    intro = (
        "#### Async against each system, and the targets\n\nThe issue's: async's final return "
        f"the same as serial's and sync's (Mann-Whitney, two-sided, p > {ALPHA:g}) in at most "
        f"{WALL_TARGETS['pararl-serial']:g}× their wall time and {WALL_TARGETS['sb3']:g}× SB3's; "
        f"an async iteration within {FLOOR_TARGET:g}× its floor (below).{caution} All met: "
        f"{done}. Final: the mean of each run's last {c.final_evals} evaluations; medians over "
        "seeds (min–max); wall: launch to exit; async ÷ their wall: the median over seeds of "
        "async's run against theirs of the same seed (one sitting)."
    )

    def busy(key: str, fmt: Callable[[float], str]) -> Callable[[tuple[str, str]], str]:
        return lambda es: h.fmt_spread(
            h.maybe(of(r.outcome.runs, *es, lambda x: x.extra.get(key))), fmt
        )

    def reason(es: tuple[str, str]) -> str:
        runs = [x for x in r.outcome.runs if (x.env, x.system) == es and x.extra.get("mode")]
        return "–" if not runs else f"{runs[0].extra['mode']} ({runs[0].extra['mode_reason']})"

    pairs = [(x.env, x.system) for x in r.outcome.runs if not ROW.system(x.system).anchor]
    busy_cols: list[h.Col[tuple[str, str]]] = [
        h.Col("game", lambda es: game(es[0]), "l"),
        h.Col("system", lambda es: label[es[1]], "l"),
        h.Col("mode (why)", reason, "l"),
        *(h.Col(head, busy(key, fmt)) for key, head, fmt in BUSY),
    ]
    busy_note = (
        "#### Busy fractions, lag and iteration of pararl's runs\n\nEach run's mean over its "
        "metrics.csv rows (one per rollout), median over seeds (min–max). Actor busy: the share "
        "of a rollout's time spent acting; learner busy: the update's share of the time "
        "between two rollouts; policy lag: rollouts between the acting weights and the "
        "learner's. Iteration: wall time per rollout after the first, the mean (every pause "
        "counted) and the median of single rollouts."
    )
    floor = r.floors[0] if r.floors else None
    what = "" if floor is None else (
        f"acting one rollout ({floor.num_envs} envs x {floor.num_steps} steps, one actor, its "
        f"busy time) and one update ({floor.epochs} epochs x {floor.minibatches} minibatches "
        f"of {floor.minibatch_size})"
    )  # fmt: skip
    floor_cols: list[h.Col[Iteration]] = [
        h.Col("game", lambda it: game(it.floor.env), "l"),
        h.Col("acting ms", lambda it: ms(it.floor.acting)),
        h.Col("update ms", lambda it: ms(it.floor.update)),
        h.Col("floor ms (the longer)", lambda it: ms(it.floor.floor_s)),
        h.Col("async iteration ms", lambda it: ms(it.iteration)),
        h.Col(f"÷ floor (target ≤ {FLOOR_TARGET:g})",
              lambda it: f"{h.fmt_ratio(it.ratio)} ({verdict(it.met)})"),
        h.Col("serial's floor ms (the sum)", lambda it: ms(it.floor.serial_s)),
        h.Col("serial iteration ms", lambda it: ms(it.serial)),
        h.Col("acting ms, beside an update", lambda it: ms(it.floor.acting_beside)),
        h.Col("update ms, beside acting", lambda it: ms(it.floor.update_beside)),
        h.Col("update ms, every core", lambda it: ms(it.floor.update_wide)),
        h.Col("floor ms, side by side", lambda it: ms(it.floor.beside_s)),
        h.Col("async ÷ it", lambda it: h.fmt_ratio(it.beside_ratio)),
        h.Col("sync iteration ms", lambda it: ms(it.sync)),
        h.Col("best async ÷ sync wall (that floor ÷ sync's iteration)",
              lambda it: h.fmt_ratio(it.best_vs_sync)),
    ]  # fmt: skip
    floor_note = (
        f"#### The floor of one asynchronous iteration\n\nMeasured before the runs, once per "
        f"game: {what}, each alone on one torch thread, {c.floor_repeats} times after "
        f"{FLOOR_WARMUP} untimed; median (min–max). Overlapped, an iteration takes at least "
        "the longer of the two; the serial loop the sum. The two vCPUs of this machine can "
        "slow each other (a fp32 GEMM on one ran at 0.65-0.7x its speed beside a busy "
        "other in one sitting, at full speed in another), so each side is also timed beside "
        "a second process doing the other side without pause, and the update alone on "
        "every core; side by side, the two run at those speeds until the shorter ends, "
        "then the longer alone, the update on every core (the actor lends it its core "
        "once it waits, `LentCores`; `overlapped`). Each game's floor is measured in a "
        "process of its own, as a run has one. "
        "That floor over sync's iteration is the least async ÷ sync wall this machine "
        "allows, evaluations and start-up aside. The iterations beside it are those of the "
        "runs of the same sitting (a kept run's is not: its machine may have run at another "
        "speed)."
    )
    return [
        f"{intro}\n\n{h.table(vs_cols, versuses)}",
        f"{busy_note}\n\n{h.table(busy_cols, list(dict.fromkeys(pairs)))}",
        f"{floor_note}\n\n{h.table(floor_cols, iters)}",
    ]


def key_ratios(versuses: Sequence[Versus], iterations: Sequence[Iteration]) -> str:
    """Per game: async's wall against each system's, its final against serial's, its
    iteration against the floor; each with its target and verdict."""
    iters = {it.floor.env: it for it in iterations}
    parts = []
    for env in dict.fromkeys(v.env for v in versuses):
        mine = [v for v in versuses if v.env == env]
        ratios = ", ".join(f"{short(v.other)} {h.fmt_ratio(v.wall_ratio)} (≤ "
                           f"{WALL_TARGETS[v.other]:g}: {verdict(v.targets['wall'])})"
                           for v in mine)  # fmt: skip
        text = [f"{compare.family(env)}: async wall ÷ {ratios}"]
        serial = next((v for v in mine if v.other == "pararl-serial"), None)
        if serial is not None and serial.p is not None:
            text.append(f"final {compare.whole(h.med(serial.async_final))} vs serial "
                        f"{compare.whole(h.med(serial.other_final))} (p = {serial.p:.2f}, "
                        f"{serial.seeds} seeds)")  # fmt: skip
        it = iters.get(env)
        if it is not None and it.ratio is not None:
            text.append(f"iteration ÷ floor {h.fmt_ratio(it.ratio)} (≤ {FLOOR_TARGET:g}: "
                        f"{verdict(it.met)})")  # fmt: skip
        if it is not None and it.best_vs_sync is not None:
            text.append(f"the floor side by side allows async ÷ sync ≥ "
                        f"{h.fmt_ratio(it.best_vs_sync)}")  # fmt: skip
        parts.append(", ".join(text))
    return "; ".join(parts) or "nothing measured"


def short(system: str) -> str:
    """`pararl-serial` -> `serial`; `sb3` -> `SB3`."""
    return "SB3" if system == "sb3" else system.removeprefix("pararl-")


def report(r: Results, meta: h.Metadata) -> h.Report:
    c = SimpleNamespace(**meta.params)
    row = dataclasses.replace(ROW, notes=settings_note())
    _, blocks, panels = compare.report(row, r.outcome, c)
    label = {s.name: s.label for s in row.systems}
    versuses, iters = compared(r.outcome, c.final_evals), iterations(r.outcome.runs, r.floors)
    return h.Report(
        f"Asynchronous PPO on MinAtar against serial, sync and SB3 (`{h.PROG} ppo_async`)",
        key_ratios(versuses, iters), [*blocks_of(r, c, label, versuses, iters), *blocks], panels,
        figure_alt="MinAtar return against env steps and wall time, async PPO against "
        "serial, sync and SB3", legend_below=True,
    )  # fmt: skip
