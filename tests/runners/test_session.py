"""The session's metrics rows, through evaluations and resumes, and a run that ends
before its first iteration; evaluations: those skipped counted, the final weights
evaluated, a budget that ends before the first said at start."""

from __future__ import annotations

import csv
import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from pararl import checkpoint, load
from pararl.checkpoint import Header
from pararl.config import DQNConfig
from pararl.envs.make import env_factory
from pararl.errors import said
from pararl.evaluation.episodes import Episodes, Evaluator
from pararl.models import QNetwork
from pararl.rundir import RunDir
from pararl.runners.session import EVAL_METRICS, TrainSession
from tests.procs import ctrl_c_while_saving

CONFIG = DQNConfig(
    env="CartPole-v1", eval_every=100, eval_episodes=1, log_every_s=0.0, total_steps=400,
    checkpoint_every=1000, progress="none", tensorboard=False,
)  # fmt: skip
MODEL = QNetwork(4, 2, (8,))


def state() -> dict[str, object]:
    return {"q": MODEL.state_dict()}


def session(run: RunDir, start: int, resumed: bool = False) -> TrainSession:
    evaluator = Evaluator(env_factory(CONFIG.env), 1, 0, max_steps=20)
    return TrainSession(
        CONFIG, run, evaluator, None, start_steps=start, start_wall=1.0, resumed=resumed
    )


def logged(run: RunDir) -> list[tuple[int, int]]:
    """(env steps, updates) of each metrics row."""
    with run.metrics.open() as f:
        return [(int(float(r["env_steps"])), int(float(r["updates"]))) for r in csv.DictReader(f)]


def test_a_row_only_when_something_moved_on(tmp_path: Path) -> None:
    """A tick with nothing new since the last row (an evaluation's row, then a console
    line's) adds none, nor does a resumed run's first tick where its checkpoint's run
    ended; a learning-only tick (more updates, the same env steps) does."""
    run = RunDir.new(tmp_path / "run", "dqn", CONFIG.env)
    first = session(run, 0)
    for steps, updates in ((50, 1), (100, 2), (100, 2), (100, 7), (150, 9)):
        first.tick(steps, updates, MODEL, state)
    first.finish(150, state, "interrupted")
    assert logged(run) == [(50, 1), (100, 2), (100, 7), (150, 9)]
    resumed = session(run, 150)
    for steps, updates in ((150, 9), (200, 12)):
        resumed.tick(steps, updates, MODEL, state)
    resumed.finish(200, state, "interrupted")
    assert logged(run) == [(50, 1), (100, 2), (100, 7), (150, 9), (200, 12)]


def test_a_resumed_clock_goes_on_from_the_latest_row_kept(tmp_path: Path) -> None:
    """A row kept from before whose wall time is past the checkpoint's (the last
    evaluation of an interrupted run is written after its checkpoint's clock stopped):
    the resumed run's clock starts from it, so wall time never runs backwards."""
    run = RunDir.new(tmp_path / "run", "dqn", CONFIG.env)
    first = session(run, 0)
    first.tick(150, 9, MODEL, state)
    first.finish(150, state, "interrupted")
    walls = [float(r["wall_s"]) for r in csv.DictReader(run.metrics.open())]
    late = max(walls) + 50.0  # as if written 50 s after the checkpoint's clock
    with run.evaluations.open("a") as f:
        csv.writer(f).writerow([150, late, *([""] * (len(EVAL_METRICS) - 2))])
    resumed = session(run, 150)  # its checkpoint's clock: 1 s
    assert resumed.wall_s >= late
    resumed.tick(200, 12, MODEL, state)
    resumed.finish(200, state, "interrupted")
    rows = [float(r["wall_s"]) for r in csv.DictReader(run.metrics.open())]
    assert rows == sorted(rows)


def test_an_evaluation_adds_a_row_only_where_the_env_steps_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An evaluation's row (the console quiet) is written at 100, but not at 200: a
    console row is there already, and the evaluation started after the learner's
    updates alone (an async learner's, while the actor's chunk is on its way)."""
    clock = [0.0]
    monkeypatch.setattr(TrainSession, "wall_s", property(lambda self: clock[0]))
    run = RunDir.new(tmp_path / "run", "dqn", CONFIG.env)
    evaluator = Busy()
    live = TrainSession(dataclasses.replace(CONFIG, log_every_s=10.0), run, evaluator, None)  # type: ignore[arg-type]
    for clock[0], steps, updates in ((0.0, 100, 1), (20.0, 200, 3)):
        live.tick(steps, updates, MODEL, state)  # an evaluation starts; a console row
    evaluator.answers = 1
    for clock[0], steps, updates in ((21.0, 200, 9), (22.0, 250, 10)):
        live.tick(steps, updates, MODEL, state)  # the one due at 200 starts; nothing
    assert evaluator.sent == 2
    live.finish(250, state, "interrupted")
    assert logged(run) == [(100, 1), (200, 3), (250, 10)]


def test_a_resumed_runs_first_line_comes_a_log_interval_in_with_its_rates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = [100.0]  # the checkpoint's wall time
    monkeypatch.setattr(TrainSession, "wall_s", property(lambda self: clock[0]))
    run = RunDir.new(tmp_path / "run", "dqn", CONFIG.env)
    config = dataclasses.replace(CONFIG, log_every_s=10.0, eval_every=10_000, progress="plain")
    resumed = TrainSession(config, run, Busy(), None, start_steps=150, start_wall=100.0)  # type: ignore[arg-type]
    for clock[0], steps in ((100.0, 150), (105.0, 200), (110.0, 250)):
        resumed.tick(steps, steps, MODEL, state)
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("[")]
    assert len(lines) == 1
    assert "250/400 steps  steps/s " in lines[0]  # (the rate meters keep real time)


def test_a_new_run_that_ends_before_its_first_iteration_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C at start, or an env that fails at once: nothing trained, nothing to
    resume, so nothing stays, and the same command can run again there; a user's own
    file in the directory stays."""
    run = RunDir.new(tmp_path / "run", "dqn", CONFIG.env)
    (run.root / "notes.txt").write_text("mine")
    session(run, 0).finish(0, state, "interrupted")
    assert sorted(p.name for p in run.root.iterdir()) == ["notes.txt"]
    assert "interrupted before its first iteration; nothing saved" in capsys.readouterr().err
    RunDir.new(run.root, "dqn", CONFIG.env)  # not refused
    (run.root / "notes.txt").unlink()
    session(run, 0).finish(0, state, "failed")
    assert not run.root.exists()
    # a resumed run is never discarded, even one resumed from a checkpoint at 0 steps
    run = RunDir.new(tmp_path / "zero", "dqn", CONFIG.env)
    first = session(run, 0)
    first.tick(0, 0, MODEL, state)
    first.finish(0, state, "interrupted")
    session(run, 0, resumed=True).finish(0, state, "interrupted")
    assert (run.checkpoints / "interrupted.pt").is_file()


class Busy:
    """A background evaluator whose evaluations run until the test lets them end
    (`answers`: how many may)."""

    deferred = True

    def __init__(self) -> None:
        self.busy, self.sent, self.answers = False, 0, 0

    def submit(self, policy: object) -> None:
        self.busy, self.sent = True, self.sent + 1

    def poll(self, timeout: float = 0.0) -> Episodes | None:
        if not (self.busy and self.answers):
            return None
        self.busy, self.answers = False, self.answers - 1
        return Episodes.of_returns(np.array([1.0]))

    def close(self) -> None:
        pass


def evaluations(run: RunDir) -> list[tuple[int, int]]:
    """(env steps, evaluations skipped before it) of each eval.csv row."""
    with run.evaluations.open() as f:
        return [(int(r["env_steps"]), int(r["eval_skipped"])) for r in csv.DictReader(f)]


def test_evaluations_due_while_one_runs_are_counted_and_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Due at 100, 200, ...: the one at 100 runs until 350, so the one due at 200 is
    skipped and the one due at 300 runs at 350 (the skipped one counted in its row,
    on the progress line and in the last line); the run's final weights are
    evaluated at its end: 3 rows and 1 skipped for the 4 due."""
    run = RunDir.new(tmp_path / "run", "dqn", CONFIG.env)
    evaluator = Busy()
    config = dataclasses.replace(CONFIG, progress="plain")
    live = TrainSession(config, run, evaluator, None)  # type: ignore[arg-type]
    for steps in (100, 150, 200, 250, 300):
        live.tick(steps, steps, MODEL, state)
    evaluator.answers = 1
    live.tick(350, 350, MODEL, state)  # collects the one at 100, starts one at 350
    assert evaluator.sent == 2
    evaluator.answers = 2  # the one at 350, then the final weights'
    live.tick(390, 390, MODEL, state)
    live.finish(400, state, "step budget reached")
    assert evaluations(run) == [(100, 0), (350, 1), (400, 0)]
    err = capsys.readouterr().err
    # (the run's wall time at 350 steps: 0.0 s, or a tenth or more on a loaded machine)
    assert re.search(
        r"eval @ 350 steps \(\d+\.\d s\): 1\.0 ± 0\.0; skipped 1 evaluation that fell due "
        r"before it \(the ",
        err,
    )
    assert "eval 1.0 (1 skipped)" in err  # the progress line
    assert "(best eval 1.0); 1 due evaluation skipped; run saved in" in err


def test_a_run_whose_budget_ends_before_an_evaluation_is_due_evaluates_its_final_weights(
    tmp_path: Path,
) -> None:
    """Said at start; the final weights are evaluated all the same, and the
    evaluations due that a slow last one skipped are counted at the end too."""
    run = RunDir.new(tmp_path / "run", "dqn", CONFIG.env)
    config = dataclasses.replace(CONFIG, eval_every=1_000)
    evaluator = Evaluator(env_factory(CONFIG.env), 1, 0, max_steps=20)
    short = TrainSession(config, run, evaluator, None)
    note = short.schedule_note()
    assert note is not None
    assert "an evaluation every 1,000 env steps (--eval-every) reaches past the budget" in note
    # resumed at 16,000 steps with a budget of 17,000: the next one due is named
    later = dataclasses.replace(CONFIG, eval_every=2_500, total_steps=17_000)
    elsewhere = RunDir.new(tmp_path / "resumed", "dqn", CONFIG.env)
    resumed = TrainSession(later, elsewhere, Busy(), None, start_steps=16_000, resumed=True)  # type: ignore[arg-type]
    assert resumed.schedule_note() == (
        "pararl: the next evaluation (at 17,500 env steps, every 2,500) reaches past the "
        "budget (--total-steps 17,000): no periodic evaluation falls due; its final "
        "weights are evaluated when it ends"
    )
    resumed.close()
    for steps in (100, 200, 400):
        short.tick(steps, steps, MODEL, state)
    short.finish(400, state, "step budget reached")
    assert evaluations(run) == [(400, 0)]
    assert short.last_eval is not None
    other = RunDir.new(tmp_path / "due", "dqn", CONFIG.env)
    assert TrainSession(CONFIG, other, evaluator, None).schedule_note() is None

    run = RunDir.new(tmp_path / "late", "dqn", CONFIG.env)
    busy = Busy()
    late = TrainSession(CONFIG, run, busy, None)  # type: ignore[arg-type]
    for steps in (100, 200, 300, 400):
        late.tick(steps, steps, MODEL, state)
    busy.answers = 2
    late.finish(400, state, "step budget reached")
    assert evaluations(run) == [(100, 0), (400, 2)]  # those at 200 and 300: skipped


def test_a_short_run_says_so_at_start_and_ends_evaluated(tmp_path: Path, pararl: Any) -> None:
    """A budget under --eval-every: one line at start, and the trained agent is
    evaluated at the end (it ended "(no evaluation)")."""
    run = tmp_path / "run"
    done = pararl(
        "train", "dqn", "--total-steps", "300", "--eval-every", "10000", "--mode", "serial",
        "--learning-starts", "100", "--eval-episodes", "2", "--progress", "plain",
        "--no-tensorboard", "--run-dir", str(run),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    [note] = [line for line in lines if "--eval-every" in line]
    assert note == (
        "pararl: an evaluation every 10,000 env steps (--eval-every) reaches past the budget "
        "(--total-steps 300): no periodic evaluation falls due; its final weights are "
        "evaluated when it ends"
    )
    assert "(best eval" in lines[-1]
    assert "no evaluation" not in lines[-1]
    assert [steps for steps, _ in evaluations(RunDir(run))] == [load(run, "final").env_steps]


def test_a_resumed_population_counts_each_skipped_evaluation_once(tmp_path: Path) -> None:
    """eval.csv has a row per agent per evaluation, each with the evaluation's skipped
    count: resumed, the run counts them once, not once per agent."""
    run = RunDir.new(tmp_path / "run", "dqn", CONFIG.env)
    header = "agent," + ",".join(EVAL_METRICS)
    rows = [
        f"{agent},{steps},1.0,9.0,0.0,1,0,9.0,{skipped}"
        for steps, skipped in ((100, 0), (300, 1))
        for agent in range(4)
    ]
    run.evaluations.write_text("\n".join([header, *rows]) + "\n")
    resumed = TrainSession(
        CONFIG,
        run,
        Busy(),
        None,
        start_steps=300,
        start_wall=1.0,
        resumed=True,
        agents=4,  # type: ignore[arg-type]
    )
    assert resumed.skipped_evals == 1


class Scripted:
    """An inline evaluator whose evaluations return the given returns, one per agent."""

    deferred = False
    busy = False

    def __init__(self, *returns: Sequence[float]) -> None:
        self.returns, self.sent, self.given = list(returns), 0, len(returns)

    def submit(self, policy: object) -> None:
        self.sent += 1

    def poll(self, timeout: float = 0.0) -> Episodes | None:
        if self.sent + len(self.returns) <= self.given:
            return None
        return Episodes.of_returns(np.array(self.returns.pop(0)))

    def close(self) -> None:
        pass


def test_a_populations_best_checkpoint_keeps_each_agent_at_its_own_best(
    tmp_path: Path,
) -> None:
    """Agent 0 is best at 200 (15), agent 1 at 300 (30): best.pt holds each there, as
    each run alone would have saved it; resumed, an agent that does not improve keeps
    the one saved."""

    def population(steps: int) -> Any:
        def state() -> dict[str, Any]:
            # each agent's tensors views into one block of both, as a PPO batch's are
            block = torch.full((2, 1000), float(steps))
            agents = [{"mark": block[i, 0], "weights": block[i]} for i in range(2)]
            return {**Header("dqn", 1, steps, 1.0).as_dict(), "agents": agents}

        return state

    def marks(run: RunDir) -> list[float]:
        return [float(a["mark"]) for a in checkpoint.load(run.checkpoint("best"))["agents"]]

    run = RunDir.new(tmp_path / "run", "dqn", CONFIG.env)
    live = TrainSession(CONFIG, run, Scripted([10, 20], [15, 5], [12, 30]), None, agents=2)  # type: ignore[arg-type]
    for steps in (100, 200, 300):
        live.tick(steps, steps, MODEL, population(steps))
    assert marks(run) == [200.0, 300.0]
    # each agent's own elements saved, not the block its views share, once per agent
    saved = checkpoint.load(run.checkpoint("best"))["agents"]
    assert [a["weights"].untyped_storage().nbytes() for a in saved] == [4000, 4000]
    assert live.best_eval == 21.0  # the agents' median, as the console says
    live.finish(300, population(300), "interrupted")
    evaluator = Scripted([14, 40])
    resumed = TrainSession(
        CONFIG,
        run,
        evaluator,
        None,
        start_steps=300,
        resumed=True,
        agents=2,  # type: ignore[arg-type]
    )
    resumed.tick(400, 400, MODEL, population(400))
    assert marks(run) == [200.0, 400.0]


def test_a_run_solved_by_a_background_evaluation_says_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The evaluation at 100 runs while training goes on to 300: solved after 300 env
    steps, by the evaluation at 100."""
    run = RunDir.new(tmp_path / "run", "dqn", CONFIG.env)
    config = dataclasses.replace(CONFIG, progress="plain")
    evaluator = Busy()
    live = TrainSession(config, run, evaluator, 0.5)  # type: ignore[arg-type]
    live.tick(100, 100, MODEL, state)  # due every 100: it starts
    live.tick(200, 200, MODEL, state)  # due, but the one at 100 still runs
    evaluator.answers = 1
    live.tick(300, 300, MODEL, state)  # collected: the target (0.5) reached
    assert live.solved
    live.finish(300, state, "solved")
    said = capsys.readouterr().err
    assert "solved after 300 env steps" in said
    assert "; its evaluation at 100 env steps reached the target; run saved in" in said


def test_a_sweeps_evaluation_line_gives_each_settings_median(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir.new(tmp_path / "run", "ppo", CONFIG.env)
    config = dataclasses.replace(CONFIG, progress="plain")
    settings = ("lr=0.1", "lr=0.1", "lr=0.2", "lr=0.2")
    evaluator = Scripted([10, 30, 100, 300])
    sweep = TrainSession(config, run, evaluator, None, agents=4, settings=settings)  # type: ignore[arg-type]
    sweep.tick(100, 100, MODEL, lambda: {"agents": [{}] * 4})
    assert "; by setting: lr=0.1 20.0, lr=0.2 200.0" in capsys.readouterr().err


class Interrupted(Busy):
    """A background evaluator Ctrl-C'd while the final weights are evaluated."""

    def poll(self, timeout: float = 0.0) -> Episodes | None:
        if self.busy:
            raise KeyboardInterrupt
        return None


def test_ctrl_c_during_the_final_evaluation_keeps_the_run_and_says_how_to_evaluate_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir.new(tmp_path / "run", "dqn", CONFIG.env)
    config = dataclasses.replace(CONFIG, eval_every=1_000)
    live = TrainSession(config, run, Interrupted(), None)  # type: ignore[arg-type]
    for steps in (100, 200, 400):
        live.tick(steps, steps, MODEL, state)
    with pytest.raises(KeyboardInterrupt) as interrupted:
        live.finish(400, state, "step budget reached")
    assert said(interrupted.value)  # the command line adds no second line after it
    err = capsys.readouterr().err
    evaluate = f"`pararl evaluate {run.root} --checkpoint final` evaluates them"
    assert f"final weights was interrupted ({evaluate})" in err
    assert f"run saved in {run.root}" in err
    assert torch.load(run.checkpoint("final"))["status"] == "step budget reached"
    assert run.checkpoint("best").is_file()
    assert logged(run) == [(100, 100), (200, 200), (400, 400)]


def test_a_run_whose_final_evaluation_reaches_the_target_is_saved_as_solved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its budget ends first (the checkpoint is saved then), then the evaluation of
    its final weights reaches the target: the checkpoint a resume reads says solved."""
    run = RunDir.new(tmp_path / "run", "dqn", CONFIG.env)
    evaluator = Busy()
    live = TrainSession(dataclasses.replace(CONFIG, eval_every=1_000), run, evaluator, 0.5)  # type: ignore[arg-type]
    for steps in (100, 200, 400):
        live.tick(steps, steps, MODEL, state)
    evaluator.answers = 1  # returns 1.0, above the target
    live.finish(400, state, "step budget reached")
    assert "pararl: solved after 400 env steps" in capsys.readouterr().err
    saved = torch.load(run.checkpoint("final"))
    assert saved["status"] == "solved"
    assert torch.equal(saved["q"]["net.0.weight"], MODEL.state_dict()["net.0.weight"])


def test_ctrl_c_after_the_final_evaluation_is_not_called_its_interruption(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the solved run's checkpoint is re-saved waits for the file, and the
    last line does not say the evaluation, which ended, was interrupted."""
    run = RunDir.new(tmp_path / "run", "dqn", CONFIG.env)
    evaluator = Busy()
    live = TrainSession(dataclasses.replace(CONFIG, eval_every=1_000), run, evaluator, 0.5)  # type: ignore[arg-type]
    for steps in (100, 200, 400):
        live.tick(steps, steps, MODEL, state)
    evaluator.answers = 1  # the final weights' evaluation reaches the target
    ctrl_c_while_saving(monkeypatch, lambda obj: obj.get("status") == "solved")
    with pytest.raises(KeyboardInterrupt):
        live.finish(400, state, "step budget reached")
    err = capsys.readouterr().err
    assert "pararl: solved after 400 env steps in" in err
    assert "interrupted" not in err
    assert torch.load(run.checkpoint("final"))["status"] == "solved"


def test_a_second_ctrl_c_while_the_run_is_saved_still_gets_its_last_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C again while the interrupted run's checkpoint is written: the file and the
    last metrics row are written whole, then the run's last line says where it is
    saved, and the command line adds nothing after it."""
    run = RunDir.new(tmp_path / "run", "dqn", CONFIG.env)
    live = TrainSession(dataclasses.replace(CONFIG, eval_every=1_000), run, Busy(), None)  # type: ignore[arg-type]
    for steps in (100, 200, 400):
        live.tick(steps, steps, MODEL, state)
    ctrl_c_while_saving(monkeypatch, lambda obj: obj.get("status") == "interrupted")
    with pytest.raises(KeyboardInterrupt) as again:
        live.finish(400, state, "interrupted")
    assert said(again.value)
    assert "pararl: interrupted after 400 env steps" in capsys.readouterr().err
    assert torch.load(run.checkpoint("interrupted"))["status"] == "interrupted"
    assert logged(run)[-1] == (400, 400)
