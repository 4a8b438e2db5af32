"""Shared set-up of a training run: validation, devices, run dir, resume."""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from gymnasium.envs.registration import EnvSpec

from pararl import checkpoint, extras, seeding
from pararl.config import KIND_TEXT, EnvKind, Filled, RunConfig
from pararl.config.env_source import EnvArg, EnvFactory
from pararl.config.saved import saved_config, saved_facts
from pararl.envs.make import Probed, check_env_id, env_factory, probe, probe_masks
from pararl.envs.modules import module_dir, split_env_id
from pararl.errors import UsageError, said
from pararl.evaluation.background import BackgroundEvaluator
from pararl.evaluation.child import EvalChild, evaluates_in_process
from pararl.evaluation.episodes import Evaluator, episode_cap
from pararl.evaluation.reported import ReportedReturns
from pararl.models.networks import Encoder
from pararl.models.population import Stack
from pararl.mp.topology import physical_cores
from pararl.rundir import RunDir
from pararl.runners import resume
from pararl.runners.session import TrainSession


def make_evaluator(
    cfg: RunConfig,
    model_fn: Callable[[], torch.nn.Module | Stack],
    child: EvalChild | None = None,
    start_steps: int = 0,
    probed: Probed | None = None,
    seeds: Sequence[int] = (),
) -> Evaluator | BackgroundEvaluator:
    """The run's evaluator (greedy, or `--eval-actions sampled`): in a child process
    when there is a core to spare (or when asked), else in the training loop.
    `child`: an evaluation process started earlier by the caller (`pararl train`
    starts it before importing torch), adopted here; without one, the evaluator
    starts its own. `probed`: what building the env told (`prepare`): an env a
    factory builds gets its time limit and registration from there. `seeds`: a
    population's (`--seeds`), each agent on its seed's episodes (`Evaluator`);
    `model_fn` then builds the population."""
    env_fn = env_factory(cfg.env, kwargs=cfg.env_kwargs)
    stream = (start_steps,)  # a resumed run evaluates on new episodes
    limit = probed.time_limit if probed is not None else None
    cap = episode_cap(cfg.env, cfg.env_kwargs, cfg.eval_max_steps, limit)
    carried = _spec_for_child(cfg.env, probed.spec if probed is not None else None)
    if evaluates_in_process(cfg.eval_in) and carried is not False:
        spec = carried if isinstance(carried, gym.envs.registration.EnvSpec) else None
        return BackgroundEvaluator(
            env_fn,
            cfg.eval_episodes,
            cfg.seed,
            model_fn,
            spec=spec,
            child=child,
            stream=stream,
            max_steps=cap,
            actions=cfg.eval_actions,
            seeds=seeds,
        )
    if child is not None:
        child.close(grace=0.0)  # not needed: evaluations run in this process
    return Evaluator(
        env_fn, cfg.eval_episodes, cfg.seed, stream, cap, cfg.eval_actions, seeds=seeds
    )


def _spec_for_child(env: EnvArg, made_from: EnvSpec | None = None) -> EnvSpec | bool | None:
    """The registration a spawned child needs to build `env`: None when importing
    is enough (`module:EnvId`, or an id that is not registered here), False when it
    cannot be carried because it refers to the caller's `__main__` (an env defined
    in the script itself: then evaluation stays in this process). A factory travels
    itself (pickled by value where it must be), with the registration its env was
    made from (`made_from`), if any; one that cannot be pickled stays here too."""
    if isinstance(env, EnvFactory):
        try:
            pickle.dumps(env)
        except Exception:
            return False
        if made_from is None:
            return None
        env = made_from.id
    if not isinstance(env, str) or ":" in env:
        return None
    try:
        spec = gym.spec(env)
    except gym.error.Error:
        return None
    try:
        carried = pickle.dumps(spec)
    except Exception:
        return False
    return False if b"__main__" in carried else spec


def open_session(
    p: Prepared, algo: str, plan: Plan, eval_child: EvalChild | None = None
) -> TrainSession:
    """The run's session, with its evaluator, the algorithm's metric columns and the
    facts resolved at start-up (saved under `resolved` in config.json). A plan with
    `reported` returns (the loop measures them itself) evaluates with those instead of
    greedy episodes."""
    start_steps, start_wall = plan.start
    evaluator: Evaluator | BackgroundEvaluator | ReportedReturns
    if plan.reported is not None:
        if eval_child is not None:
            eval_child.close(grace=0.0)  # not needed: the loop measures the returns
        evaluator = plan.reported
    else:  # a population (`plan.seeds`): every agent's episodes at once
        evaluator = make_evaluator(
            p.config, plan.make_model, eval_child, start_steps, p.probed, seeds=plan.seeds
        )
    facts = {
        **plan.resolved,
        "env_kind": p.kind,
        "defaults_tuned_for": p.filled.tuned_for,
        "eval_in": "process" if evaluator.deferred else "inline",
        "eval_max_steps": getattr(evaluator, "max_steps", None),
        "target_return": p.spec_threshold,
        **p.env_facts,
    }
    try:
        return TrainSession(
            p.config,
            p.run,
            evaluator,
            p.spec_threshold,
            {"resolved": facts},
            start_steps=start_steps,
            start_wall=start_wall,
            title=f"{algo} {p.config.env_name}",
            metrics=plan.metrics,
            recent_returns=(p.resume_state or {}).get("episode_returns", ()),
            resumed=p.resume_state is not None,
            agents=max(1, len(plan.seeds)),
            agent_returns=(p.resume_state or {}).get("agent_returns", ()),
            settings=plan.settings,
        )
    except BaseException:
        evaluator.close()
        raise


def encoder_note(net: torch.nn.Module) -> tuple[str, ...]:
    """The start-up line of Dict and Tuple observations: which network reads which
    leaf (none for a network without an encoder)."""
    encoder = next((m for m in net.modules() if isinstance(m, Encoder)), None)
    return () if encoder is None else (f"pararl: multi-input encoder: {encoder.describe()}",)


@dataclass
class Prepared:
    filled: Filled[Any]  # the config, every default of its kind of env set
    run: RunDir
    spec_threshold: float | None
    observation_space: gym.Space
    action_space: gym.Space
    resume_state: dict[str, Any] | None
    resumed_from: Path | None = None  # the checkpoint file the state was read from
    # how the env was found (saved in config.json): where `module:EnvId` was, or the
    # factory that built it and the id it was made from
    env_facts: dict[str, str] = field(default_factory=dict)
    probed: Probed | None = None  # what building the env once told
    action_masks: bool = False  # the env gives action masks (`envs.masks`)
    resumed_facts: dict[str, Any] = field(default_factory=dict)  # as the run saved them
    # a solved run resumed with a larger budget: the target it reached, no longer its own
    solved_before: float | None = None

    @property
    def config(self) -> Any:
        return self.filled.config

    @property
    def kind(self) -> EnvKind:
        """The kind of env, which picked the defaults."""
        return self.filled.kind


SpaceCheck = Callable[[Any, gym.Space, gym.Space], None]


def prepare(
    config: RunConfig, algo: str, check_spaces: SpaceCheck, given: Collection[str] | None = None
) -> Prepared:
    """Validate the config (or take the resumed run's: `runners.resume`), probe the
    env, fill in the defaults of its kind, make the run dir. `given`: the options set
    by the user (default: those that differ from the defaults)."""
    resume_state, resumed_from, module_dirs = None, None, []
    before: dict[str, Any] = {}  # a resumed run's facts as it saved them
    named_by: Path | None = None  # the run directory whose config names the env
    typed = given is not None  # the command line's (else: what differs from the defaults)
    given = resume.given_fields(config) if given is None else given
    if config.trust_checkpoint and config.resume is None:  # an invocation's, not a run's
        raise UsageError(
            "--trust-checkpoint is about loading a saved run's checkpoints: use it with --resume"
        )
    if config.resume is not None:
        run = RunDir(Path(config.resume))
        if not run.config.is_file():
            raise UsageError(
                f"--resume {config.resume}: no config.json there; pass the "
                "directory of a pararl run"
            )
        saved = saved_config(run.root)
        if type(saved) is not type(config):
            saved_algo, asked = (
                type(c).__name__.removesuffix("Config").upper() for c in (saved, config)
            )
            raise UsageError(
                f"--resume {config.resume} is a {saved_algo} run, not {asked}; resume it "
                f"with pararl train --resume {config.resume}"
            )
        config = resume.resumed_config(saved, config, given)
        before = saved_facts(run.root)
        config = resume.kept_envs(config, before, given)
        resumed_from, resume_state = resume.latest_checkpoint(run, algo, config.trust_checkpoint)
        found = before.get("env_module_dir")
        module_dirs, named_by = ([found] if found else []), run.root
    config.validate()
    if config.resume is None:
        config.check_given(given, typed)
    if config.backend == "ray" and not extras.available("ray"):
        # say it now, before a run directory is made
        raise UsageError(extras.hint("Ray", "ray", "--backend ray"))
    spec = check_env_id(config.env, module_dirs, named_by, config.trust_checkpoint)
    probed = probe(config.env, config.wrapper, config.env_kwargs)
    obs_space, act_space = probed.observation_space, probed.action_space
    made_from = probed.spec.id if spec is None and probed.spec is not None else None
    spec = spec or probed.spec  # a factory's env: the registration it was made from
    check_spaces(config, obs_space, act_space)
    filled = config.for_spaces(obs_space, act_space, made_from)
    masks = probe_masks(config.env, act_space, config.wrapper, config.env_kwargs)
    config = filled.config
    config.validate()
    if resume_state is not None:
        resume.check_left_to_do(config, resume_state, given)
    else:
        run = RunDir.new(config.run_dir, algo, made_from or _short_name(config.env_name))
        filled = replace(filled, config=replace(config, run_dir=run.root))
    threshold = spec.reward_threshold if spec is not None else None
    target = config.target_return if config.target_return is not None else threshold
    solved_before: float | None = None
    if resume_state is not None and "target_return" not in given:
        solved = resume_state.get("status") == "solved"
        if solved and resume.extends_budget(config, given):
            solved_before, target = target, None  # its target would end it at once
        elif "target_return" in before and before["target_return"] is None:
            target = None  # dropped so at an earlier resume (config.json's `resolved`)
    facts = _env_facts(config, made_from)
    return Prepared(
        filled,
        run,
        target,
        obs_space,
        act_space,
        resume_state,
        resumed_from,
        facts,
        probed,
        masks,
        before,
        solved_before,
    )


def _short_name(env_name: str) -> str:
    """A factory's name as a run directory's part: `my_envs.make_maze()` -> `make_maze`."""
    return env_name.removesuffix("()").rsplit(".", 1)[-1].strip("<>") or env_name


def _env_facts(config: RunConfig, made_from: str | None) -> dict[str, str]:
    """How the env was found, saved in config.json: where the module of a
    `module:EnvId` was (so that `pararl evaluate` and `--resume` can import it from
    another directory), or the factory that built it and the id its env was made
    from (neither can be rebuilt from there: `envs.make.factory_needed`)."""
    if isinstance(config.env, EnvFactory):
        facts = {"env_factory": config.env_name}
        return facts if made_from is None else {**facts, "env_made_from": made_from}
    module = split_env_id(config.env_name)[0]
    found = module_dir(module) if module is not None else None
    return {} if found is None else {"env_module_dir": str(found)}


@dataclass
class Plan:
    """What an algorithm's set-up hands `compose`: how to run, count, save and
    close the run it built."""

    banner: str  # the start-up line (the run dir is added)
    metrics: tuple[str, ...]  # the loop's metric columns (beside the session's own)
    resolved: dict[str, Any]  # facts resolved at start-up, saved in config.json
    # the evaluated policy's constructor: a network, or a population (`--seeds`)
    make_model: Callable[[], torch.nn.Module | Stack]
    start: tuple[int, float]  # env steps and wall seconds already done (resume)
    run: Callable[[TrainSession], None]  # the training loop, until the session is done
    steps: Callable[[], int]  # the run's env steps now
    checkpoint: Callable[[float], dict[str, Any]]  # the full state, given the wall time
    close: Callable[[], None] = field(default=lambda: None)
    reported: ReportedReturns | None = None  # the loop's own returns as the evaluation
    notes: tuple[str, ...] = ()  # said at start, after the banner (warnings, replay memory)
    seeds: tuple[int, ...] = ()  # a population's agents' seeds (`--seeds`); () for one agent
    # a sweep's (`--sweep`): each agent's settings, as the evaluation lines name them
    settings: tuple[str, ...] = ()


def refuse_unbatched(who: str, refusals: Sequence[tuple[bool, str]]) -> None:
    """A population run's (`--seeds`) first refusal that holds, in one line: `who` says
    how many agents (e.g. "--seeds 4"), each refusal what is not batched yet."""
    for refused, what in refusals:
        if refused:
            raise UsageError(
                f"{who}: {what} is not batched across agents yet; drop it, or train the "
                "agents as separate runs"
            )


def check_batch_workers(workers: int | None, mode: str) -> None:
    """A population's `--workers` where the mode asked for has no env workers: serial
    steps every agent's envs in this process, async in its one actor process (one
    line, rather than the count silently unused; `auto` with `--workers` runs sync).
    PPO's: its agents' envs are `--num-envs` each whatever the workers (a DQN run's
    are `--workers` x `--envs-per-worker`, so there the count means something)."""
    if workers is None or workers < 2 or mode not in ("serial", "async"):
        return
    where = "in this process" if mode == "serial" else "in one actor process"
    raise UsageError(
        f"--workers {workers}: a batch in --mode {mode} steps every agent's envs {where}; "
        "drop --workers, or use --mode sync to step them on workers"
    )


def check_resumed_agents(who: str, resume: dict[str, Any] | None, agents: int) -> None:
    """A population resumed with as many agents as it saved (one line if not)."""
    saved = len((resume or {}).get("agents", ()))
    if resume is not None and saved != agents:
        raise UsageError(f"{who}: the run resumed has {saved or 1} agent(s); resume it as it was")


@contextlib.contextmanager
def envs_named_by_agent(per_agent: int, seeds: Sequence[int]) -> Iterator[None]:
    """A population's env that fails is reported with its agent and seed (agent i's
    envs are the i-th block of `per_agent`): a worker's or actor's `WorkerError`, or
    the env's own exception in serial mode, both carry the env's index (`env_index`)."""
    try:
        yield
    except Exception as exc:
        index = getattr(exc, "env_index", None)
        if index is not None and hasattr(exc, "add_note"):  # add_note: Python 3.11+
            agent, own = divmod(index, per_agent)
            exc.add_note(
                f"pararl: env {index} is agent {agent}'s (seed {seeds[agent]}, "
                f"its env {own} of {per_agent})"
            )
        raise


def _unfitting(exc: BaseException) -> bool:
    """Whether `exc`, raised while a resumed run's state was applied, says that the
    checkpoint's weights do not fit the network the run's config builds."""
    return isinstance(exc, RuntimeError) and "Error(s) in loading state_dict" in str(exc)


def _say_start(p: Prepared, plan: Plan, session: TrainSession) -> None:
    """The start-up lines: the banner and run dir, where a resumed run starts, the
    defaults filled in, the plan's notes (which may speak of them), and a warning for
    too many workers."""
    session.console.message(f"{plan.banner}, run dir {p.run.root}")
    if p.resumed_from is not None and p.resume_state is not None:
        session.console.message(resume.summary(p.resumed_from, p.resume_state, session.dropped))
        per_worker = getattr(p.config, "envs_per_worker", None)
        changed = resume.changed_envs(p.resumed_facts, plan.resolved, per_worker)
        changed = changed or resume.changed_mode(p.resumed_facts, plan.resolved)
        if changed is not None:
            session.console.message(changed)
        if p.solved_before is not None:
            session.console.message(
                f"pararl: this run was solved (target {p.solved_before:g}); given more steps, it "
                "trains them all (add --target-return to stop on a target again)"
            )
    unused = p.config.unused()
    shown = {k: v for k, v in p.filled.defaults.items() if k not in unused}
    if shown:  # before the notes, which may speak of them
        settings = ", ".join(f"{k} {v}" for k, v in shown.items())
        tuned = p.filled.tuned_for
        source = KIND_TEXT[p.kind] + (f", tuned for {tuned}" if tuned else "")
        session.console.message(f"pararl: defaults for {source}: {settings}")
    for note in plan.notes:
        session.console.message(note)
    schedule = session.schedule_note()
    if schedule is not None:
        session.console.message(schedule)
    workers, cores = p.config.workers, physical_cores()
    stepped_here = plan.resolved.get("mode") == "serial"  # no env workers to share them
    if workers is not None and workers > cores and not stepped_here:
        session.console.message(
            f"pararl: warning: --workers {workers} is more than the {cores} cores here; "
            "they share them, each runs slower (leave --workers out to use one per core)"
        )


def compose(
    config: RunConfig,
    algo: str,
    check_spaces: SpaceCheck,
    build: Callable[[Prepared], Plan],
    eval_child: EvalChild | None = None,
    given: Collection[str] | None = None,
) -> TrainSession:
    """Every training run: prepare (validate, resume, probe the env, run dir) ->
    seed -> the algorithm's own set-up (`build`: devices, state, sampler) -> session
    -> run -> final checkpoint, last evaluation and plot, however the run ends."""
    p: Prepared | None = None
    try:
        p = prepare(config, algo, check_spaces, given)
        seeding.seed_everything(p.config.seed)
        plan = build(p)
    except BaseException as exc:
        if eval_child is not None:
            eval_child.close(grace=0.0)  # it holds no work: not given time to finish starting
        if p is not None and p.resume_state is None:
            p.run.remove_if_empty()  # a refused start leaves no run directory behind
        if p is not None and p.resumed_from is not None and _unfitting(exc):
            raise checkpoint.mismatch(p.resumed_from, exc) from exc
        raise
    session: TrainSession | None = None
    try:
        session = open_session(p, algo, plan, eval_child)
        status = "failed"
        try:
            _say_start(p, plan, session)
            plan.run(session)
            status = "solved" if session.solved else "step budget reached"
        except KeyboardInterrupt as exc:
            status = "interrupted"
            said(exc, mark=True)  # by `finish`, next: how far it got, where it is saved
            raise
        finally:
            session.finish(plan.steps(), lambda: plan.checkpoint(session.wall_s), status)
    except KeyboardInterrupt as exc:  # a second Ctrl-C while the run ended: its last
        if session is not None and session.ended_said:  # line has said where it is
            said(exc, mark=True)
        raise
    finally:
        try:
            plan.close()
        except KeyboardInterrupt as exc:  # Ctrl-C while closing (its children are
            if session is not None and session.ended_said:  # reaped all the same)
                said(exc, mark=True)
            raise
    return session
