"""The Ray backend's errors, without a Ray cluster: Ray not installed, bad options,
and the fault book's limits (deaths, deadlines, an actor that cannot start)."""

from __future__ import annotations

import sys
import time

import pytest

from pararl.cli import main
from pararl.samplers.ray.faults import ActorLostError, FaultBook


@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_without_ray_the_cli_says_how_to_install_it(
    algo: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    code = main(["train", algo, "--backend", "ray", "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.count("\n") == 0
    assert "pip install 'pararl[ray]'" in err
    assert not (tmp_path / "run").exists()  # refused before making a run directory


def test_ray_options_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "dqn", "--ray-address", "auto"]) == 2
    assert "--ray-address needs --backend ray" in capsys.readouterr().err
    assert main(["train", "ppo", "--backend", "ray", "--ray-timeout-s", "0"]) == 2
    assert "--ray-timeout-s must be > 0" in capsys.readouterr().err


def test_fault_book_counts_each_death_once_and_gives_up() -> None:
    log: list[str] = []
    book = FaultBook(log.append, max_deaths=1, timeout_s=60.0)
    book.died(0, RuntimeError("node lost"))
    book.died(0, RuntimeError("unavailable"))  # failures while it restarts: same death
    assert book.deaths == {0: 1}
    assert len(log) == 1
    assert log[0].startswith("pararl: actor 0 died, restarted")
    assert "node lost" in log[0]
    book.answered(0)  # back up
    with pytest.raises(ActorLostError, match="died 2 times"):
        book.died(0, RuntimeError("again"))


def test_fault_book_gives_up_on_a_restart_that_never_ends() -> None:
    book = FaultBook(print, max_deaths=5, timeout_s=0.05)
    book.died(1, RuntimeError("killed"))
    time.sleep(0.1)
    with pytest.raises(ActorLostError, match="actor 1 has not answered"):
        book.died(1, RuntimeError("still unavailable"))


def test_fault_book_deadline() -> None:
    book = FaultBook(print, max_deaths=1, timeout_s=5.0)
    book.check_deadline(0, time.monotonic())  # in time: nothing happens
    with pytest.raises(ActorLostError, match="actor 3 has not answered for 6 s"):
        book.check_deadline(3, time.monotonic() - 6.0)


def test_an_actor_that_fails_in_its_constructor_stops_the_run_at_once() -> None:
    from ray.exceptions import RayActorError

    book = FaultBook(print, max_deaths=10, timeout_s=300.0)
    error = RayActorError(
        error_msg="The actor died because of an error raised in its creation task, "
        'ray::ChunkActor.__init__()\n  File "actor.py", line 4, in __init__\n'
        "ValueError: no such env: Foo-v0",
        actor_init_failed=True,
    )
    # Ray does not restart it, and waiting --ray-timeout-s would only delay the same error
    with pytest.raises(ActorLostError, match="actor 2 failed while starting: ValueError: no such"):
        book.died(2, error)
