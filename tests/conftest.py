"""Suite-wide set-up, and the in-process `pararl` command fixture."""

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Torch's OpenMP threads wait for work by spinning. The suite runs a worker per core
# (`-n auto`), so each worker's multi-threaded updates (MAML's outer step, a large
# PPO update, the algorithm tests) run beside another busy process, where a thread
# that spins at a barrier holds up its peers that the scheduler has given away: on 2
# cores a 2-thread MAML meta-iteration ran 5-10x slower than on one thread. Waiting
# threads sleep instead (set before torch loads; children inherit it). It changes no
# thread count pararl chooses, only how idle threads wait.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from pararl.cli import main

# Each pytest-xdist worker in a session of its own. Linux's scheduler (with autogroup,
# as desktop and most distribution kernels run) shares the CPU fairly between
# sessions first, and weighs niceness only within one. The evaluation process a test
# starts runs niced (`pararl.evaluation.child.NICENESS`), to give way to its own
# training run; in the workers' shared session it gave way to the other worker's test
# instead, and a test waiting for it waited ten times as long as on a machine where
# the run is alone (its first evaluation alone: 10-20 s). Ctrl-C in the terminal still
# stops the suite: the workers go with their controller.
if "PYTEST_XDIST_WORKER" in os.environ and hasattr(os, "setsid"):
    with contextlib.suppress(OSError):  # already a session leader
        os.setsid()

# Tests send Ctrl-C (SIGINT) to processes they start. A shell that runs the suite as
# a background job starts it with SIGINT ignored; children inherit that, and Python
# then never raises KeyboardInterrupt in them. Take SIGINT back before any test runs
# (an exec resets a handler, not an ignore, so children get the default again).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# Tests that share something set up once per process, by path prefix: under
# pytest-xdist (`-n`, in the default options) each group runs in one worker, one test
# after another. The Ray tests share one simulated cluster (`tests/samplers/ray/
# conftest.py`); split over two workers, each would start its own. The modules share
# a module-scoped fixture (a trained run), which each worker would train again.
XDIST_GROUPS = (
    "tests/samplers/ray/",
    "tests/algos/test_fused.py",  # the compiled steps: dynamo's first compile once
    "tests/envs/test_atari.py",  # Gymnasium's reference frames, made once per mode
    "tests/runners/test_dqn_population.py",
    "tests/runners/test_maml.py",
    "tests/runners/test_modes_agree.py",
    "tests/runners/test_ppo_population.py",
    "tests/runners/test_sac.py",
    "tests/runners/test_td3.py",
    "tests/test_agent.py",
    "tests/test_checkpoint.py",
    "tests/test_cli_reference.py",
    "tests/test_env_factories.py",
    "tests/test_first_hour.py",
    "tests/test_playback.py",
    "tests/test_site.py",  # builds the site once (a module-scoped fixture)
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's load-scope scheduling with one scope per test, but one per group: a
    worker takes whole scopes, the largest first (the groups), then single tests."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return next((g for g in XDIST_GROUPS if nodeid.startswith(g)), nodeid)

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked `slow` first (the rest keep their order): xdist hands the
    single tests out in this order after the groups, so the longest start early and
    the short ones fill in beside them, instead of one long test running alone at
    the end while the other worker idles."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True, scope="session")
def quiet_runs() -> Iterator[dict[str, Any]]:
    """Two things a run does that most tests do not look at, off for the session (the
    module-scoped fixtures' runs included), each back on for the tests marked for it:
    - `--eval-in auto` evaluates in the training process, unless a test is marked
      `eval_child`: on 2 cores `auto` spawns the evaluation process, whose imports
      cost ~4 s of CPU per run, and most tests train runs of a second or two.
      `process` still spawns it, as do `pararl` programs the tests start as
      subprocesses;
    - a run draws its learning curve as it ends, in the training process: ~0.3 s of
      matplotlib, more than a whole run of most tests here (~230 runs, a tenth of the
      suite's CPU). Tests marked `learning_curve` draw it, as do `pararl` programs the
      tests start as subprocesses and evaluation processes (which draw it when idle);
      tests/test_plots.py tests the drawing itself.
    Yields the real functions, which `_runs_as_marked` puts back."""
    from pararl.evaluation import child
    from pararl.runners import session, setup

    real = {
        "evaluates_in_process": child.evaluates_in_process,
        "learning_curve": session.learning_curve,
    }

    def evaluates_in_process(eval_in: str) -> bool:
        return eval_in == "process"

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(child, "evaluates_in_process", evaluates_in_process)
        patch.setattr(setup, "evaluates_in_process", evaluates_in_process)
        patch.setattr(session, "learning_curve", lambda *args: None)
        yield real


@pytest.fixture(autouse=True)
def _runs_as_marked(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, quiet_runs: dict[str, Any]
) -> None:
    """A test marked `eval_child` or `learning_curve` gets that part of a run back."""
    from pararl.evaluation import child
    from pararl.runners import session, setup

    if request.node.get_closest_marker("eval_child"):
        monkeypatch.setattr(child, "evaluates_in_process", quiet_runs["evaluates_in_process"])
        monkeypatch.setattr(setup, "evaluates_in_process", quiet_runs["evaluates_in_process"])
    if request.node.get_closest_marker("learning_curve"):
        monkeypatch.setattr(session, "learning_curve", quiet_runs["learning_curve"])


@pytest.fixture(autouse=True, scope="session")
def _workers_block_between_commands() -> Iterator[None]:
    """Vector-env workers block for their next command at once instead of spinning
    first (`ParallelVectorEnv`'s `spin_s`, `pararl.mp.listen`). A spin buys a step's
    latency with CPU time, which pays on cores the run has to itself; here two test
    workers share two cores, and a spinning env worker of one test takes CPU that the
    other test's processes need: the suite spent 697 CPU-s with workers that block,
    730 with spinning ones (one run each, the same hour). tests/vector/test_listen.py
    tests the spin itself, with its `spin_s` given."""
    from pararl.mp import listen

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(listen, "SPIN_S", 0.0)
        yield


@pytest.fixture(autouse=True, scope="session")
def _evaluation_children_from_a_fork_server(_scratch_machine_cache: None) -> Iterator[None]:
    """Evaluation processes start from a fork server that has imported what they need
    (torch, pararl, matplotlib) once per test worker, not as fresh interpreters
    (`spawn`, `evaluation.child.EvalChild`), whose imports cost ~3 s of CPU each, in
    ~20 tests. Like `spawn`, the server starts a clean process (no thread of this one)
    and hands it this process's `sys.path` and working directory; it lives as long as
    this worker, started before any test (after the environment it inherits is set),
    so the tests' process counts include it.
    `pararl` programs the tests start as subprocesses spawn theirs as a user's run does."""
    import multiprocessing as mp
    from multiprocessing import forkserver
    from types import SimpleNamespace

    from pararl.evaluation import child

    # `envs.make`: what `serve` imports on its first request too (the env factories)
    mp.set_forkserver_preload(
        [
            "pararl.evaluation.serve",
            "pararl.envs.make",
            "matplotlib.figure",
            "matplotlib.backends.backend_agg",
        ]
    )
    forkserver.ensure_running()
    server = mp.get_context("forkserver")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(child, "mp", SimpleNamespace(get_context=lambda method: server))
        yield


@pytest.fixture(autouse=True, scope="session")
def _scratch_machine_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Measurements pararl caches per machine (`runners.ppo_mode`) go to a scratch
    directory for the session, not the user's cache."""
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if saved is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = saved


@dataclass
class Result:
    """What a `pararl` command returned and wrote to stderr."""

    returncode: int
    stderr: str
    stdout: str = ""


@pytest.fixture
def pararl(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """`pararl(*args)` runs the command line in this process (`pararl.cli.main`,
    what the program calls): the same code path, no interpreter start-up."""

    def run(*args: str) -> Result:
        capsys.readouterr()  # only what this command writes
        try:
            code = main(list(args))
        except SystemExit as exc:  # the option parser's own exit (bad option types)
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return Result(code, out.err, out.out)

    return run


# A user's own env module, as a new user writes one: no `render_mode` in the
# constructor, a keyword argument of its own, registered on import.
USER_ENV = '''
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Corridor(gym.Env):
    """Walk right to the end of a corridor of `length` cells; reward 1 there."""

    def __init__(self, length=5):
        self.length = length
        self.observation_space = spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.pos = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.pos = max(0, self.pos + (1 if int(action) == 1 else -1))
        done = self.pos >= self.length
        return np.array([self.pos / self.length], np.float32), float(done), done, False, {}


gym.register("Corridor-v0", entry_point="corridor_env:Corridor", max_episode_steps=40)
'''


@dataclass
class UserModule:
    """`corridor_env.py` (env `corridor_env:Corridor-v0`) in `directory`, which is
    the working directory and not on `sys.path`."""

    directory: Path
    env_id: str = "corridor_env:Corridor-v0"


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[UserModule]:
    """A user's env module in a fresh working directory; afterwards the module, its
    registration and any `sys.path` entry pararl added for it are gone."""
    import gymnasium as gym

    from pararl.envs import modules

    home = tmp_path / "project"
    home.mkdir()
    (home / "corridor_env.py").write_text(USER_ENV)
    monkeypatch.chdir(home)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(home))])
    monkeypatch.setattr(modules, "_ADDED", [])
    yield UserModule(home)
    sys.modules.pop("corridor_env", None)
    gym.registry.pop("Corridor-v0", None)
