"""Checkpoints: one header for every algorithm's, read back with the defaults an
older checkpoint needs; read weights-only, so that a run directory from anyone is
data: a file whose unpickling would run code is refused through `pararl evaluate`,
`--resume` and `pararl.load`, and runs nothing; an earlier pararl's file loads with
`--trust-checkpoint` only, after a warning."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from pararl import DQNConfig, checkpoint, load, train
from pararl.checkpoint import Header
from pararl.errors import Terminated, UsageError, sigterm_as_interrupt


def test_header_round_trips_through_a_file(tmp_path: Path) -> None:
    state = {**Header("ppo", 2, 4096, 12.5).as_dict(), "learner": {"updates": 3}}
    checkpoint.save(tmp_path / "c.pt", state)
    loaded = checkpoint.load(tmp_path / "c.pt")
    assert Header.of(loaded) == Header("ppo", 2, 4096, 12.5)
    assert loaded["learner"] == {"updates": 3}


def test_an_older_checkpoint_without_wall_time_or_format_reads() -> None:
    assert Header.of({"algo": "dqn", "env_steps": 100}) == Header("dqn", 1, 100, 0.0)


def assert_same(a: Any, b: Any, where: str = "state") -> None:
    """`a` and `b` are the same tree, leaf types and bits included."""
    assert type(a) is type(b), (where, type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert (a.dtype, a.shape) == (b.dtype, b.shape), where
        assert torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)), where
    elif isinstance(a, np.ndarray):
        assert (a.dtype, a.shape) == (b.dtype, b.shape), where
        assert a.tobytes() == b.tobytes(), where
    else:
        assert a == b, where


def test_arrays_optimizer_and_random_states_round_trip_bit_for_bit(tmp_path: Path) -> None:
    net = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    net(torch.randn(4, 3)).sum().backward()
    optimizer.step()
    rng = np.random.default_rng(7)
    rng.random(5)
    frames = np.arange(2 * 4 * 4, dtype=np.uint8).reshape(2, 4, 4)
    state = {
        **Header("dqn", 1, 10, 1.5).as_dict(),
        "net": net.state_dict(),
        "optimizer": optimizer.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "numpy_rng": rng.bit_generator.state,
        "replay": {
            "obs": frames[:, ::2],  # not contiguous
            "priorities": np.array([0.5, np.nan, 1e-30]),
            "done": np.array([True, False]),
            "actions": np.array([[1, 2]], np.int64),
            "bounds": (np.float32(-2.0), np.full(2, 2.0, np.float32)),
        },
    }
    checkpoint.save(tmp_path / "c.pt", state)
    # a weights-only load takes the file as it is: nothing in it names code
    torch.load(tmp_path / "c.pt", weights_only=True)
    loaded = checkpoint.load(tmp_path / "c.pt")
    assert loaded["net"]._metadata == state["net"]._metadata  # load_state_dict reads it
    expected = {**state, "replay": {**state["replay"], "bounds": (-2.0, np.full(2, 2.0, "f4"))}}
    expected["replay"]["obs"] = np.ascontiguousarray(frames[:, ::2])
    assert_same(loaded, expected)
    rng.bit_generator.state = loaded["numpy_rng"]
    again = np.random.default_rng(7)
    again.random(5)
    assert rng.random() == again.random()  # the stream goes on where it was


def test_a_state_that_would_need_code_is_not_saved(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"state\['config'\] is a PosixPath"):
        checkpoint.save(tmp_path / "c.pt", {"format": 1, "config": tmp_path})
    assert not list(tmp_path.iterdir())  # no file, no temp file


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_the_write_takes_effect_once_the_file_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sig: signal.Signals
) -> None:
    """SIGTERM or Ctrl-C that comes while `torch.save` writes: the write ends, the
    checkpoint is whole and in place, then the run's interrupt is raised (raised
    inside torch's zip writer, it would leave the writer half-done, and the writer's
    own error on the way out, "unexpected pos", would hide it)."""
    real_save = torch.save

    def save_with_a_signal_halfway(obj: Any, f: Any) -> None:
        os.kill(os.getpid(), sig)  # the temp file is open, nothing written yet
        real_save(obj, f)

    monkeypatch.setattr(checkpoint.torch, "save", save_with_a_signal_halfway)
    state = {"format": 1, "weights": torch.arange(1000.0), "steps": 5}
    with (
        sigterm_as_interrupt(),
        pytest.raises(Terminated if sig == signal.SIGTERM else KeyboardInterrupt),
    ):
        checkpoint.save(tmp_path / "c.pt", state)
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]  # no temp file left
    saved = checkpoint.load(tmp_path / "c.pt")
    assert torch.equal(saved["weights"], state["weights"])
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers back


# A file whose unpickling runs code: what a stranger's checkpoint can hold.
class Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


def craft(path: Path, marker: Path, state: dict[str, Any]) -> None:
    """Replace `path` with `state` plus a payload, written as `torch.save` writes."""
    torch.save({**checkpoint.encode(state), "payload": Payload(marker)}, path)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished DQN run: best, final and step checkpoints, and replay.pt."""
    run = tmp_path_factory.mktemp("checkpoints") / "run"
    train(
        DQNConfig(
            mode="serial", run_dir=run, total_steps=300, learning_starts=100,
            eval_every=300, eval_episodes=1, tensorboard=False, progress="none",
            workers=1, envs_per_worker=1, hidden=(8,), batch_size=8,
        )
    )  # fmt: skip
    return run


@pytest.fixture
def run(trained: Path, tmp_path: Path) -> Path:
    """A copy of the trained run, for a test to spoil."""
    return Path(shutil.copytree(trained, tmp_path / "run"))


def test_a_crafted_checkpoint_runs_no_code_from_any_entry_point(
    run: Path, tmp_path: Path, pararl: Any
) -> None:
    marker = tmp_path / "marker"
    for name in ("best", "final"):
        path = run / "checkpoints" / f"{name}.pt"
        craft(path, marker, checkpoint.load(path))
    with pytest.raises(UsageError, match=r"the Python object exec, .*--trust-checkpoint"):
        load(run, "final")
    for args in (("evaluate", str(run)), ("train", "--resume", str(run), "--total-steps", "400")):
        result = pararl(*args)
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "could run any code" in result.stderr
    assert not marker.exists()


def test_a_crafted_replay_memory_runs_no_code_and_nothing_is_overwritten(
    run: Path, tmp_path: Path, pararl: Any
) -> None:
    marker = tmp_path / "marker"
    replay = run / "checkpoints" / "replay.pt"
    craft(replay, marker, checkpoint.load(replay))
    before = {p.name: p.read_bytes() for p in (run / "checkpoints").iterdir()}
    result = pararl("train", "--resume", str(run), "--total-steps", "400")
    assert result.returncode == 2, result.stderr
    assert "replay.pt holds the Python object exec," in result.stderr, result.stderr
    assert not marker.exists()
    assert {p.name: p.read_bytes() for p in (run / "checkpoints").iterdir()} == before


def test_an_earlier_versions_checkpoint_loads_only_when_trusted(run: Path, pararl: Any) -> None:
    final = run / "checkpoints" / "final.pt"
    state = checkpoint.load(final)
    state["learner"]["bounds"] = np.ones(2)  # numpy arrays pickled, as pararl once saved them
    torch.save(state, final)
    refused = pararl("evaluate", str(run), "--checkpoint", "final", "--episodes", "1")
    assert refused.returncode == 2
    assert "numpy" in refused.stderr
    assert "--trust-checkpoint" in refused.stderr
    trusted = pararl(
        "evaluate", str(run), "--checkpoint", "final", "--episodes", "1", "--trust-checkpoint"
    )
    assert trusted.returncode == 0, trusted.stderr
    assert "warning: --trust-checkpoint: unpickling" in trusted.stderr
    assert load(run, "final", trust_checkpoint=True).env_steps == 300
    # a file the weights-only loader takes is read so, trusted or not: no warning
    best = pararl("evaluate", str(run), "--episodes", "1", "--trust-checkpoint")
    assert best.returncode == 0, best.stderr
    assert "unpickling" not in best.stderr


def test_a_truncated_or_foreign_checkpoint_is_one_line(run: Path, pararl: Any) -> None:
    final = run / "checkpoints" / "final.pt"
    state = checkpoint.load(final)
    checkpoint.save(final, {**state, "algo": "sac"})
    with pytest.raises(UsageError, match="is a SAC checkpoint, not DQN"):
        load(run, "final")
    best = run / "checkpoints" / "best.pt"
    best.write_bytes(best.read_bytes()[: best.stat().st_size // 2])
    result = pararl("evaluate", str(run))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "corrupt or unreadable" in result.stderr


def test_a_corrupt_newest_checkpoint_says_how_to_resume_from_the_one_before(run: Path) -> None:
    """Its error says to move it out of checkpoints/; done so, the resume takes the newest
    checkpoint left (the run's step_N)."""
    from pararl.rundir import RunDir
    from pararl.runners.resume import latest_checkpoint

    final = run / "checkpoints" / "final.pt"
    final.write_bytes(final.read_bytes()[: final.stat().st_size // 2])
    with pytest.raises(UsageError, match=r"corrupt or unreadable.*move it out of checkpoints/"):
        latest_checkpoint(RunDir(run), "dqn")
    final.rename(run / "final.pt.bad")
    path, state = latest_checkpoint(RunDir(run), "dqn")
    assert path.stem.startswith("step_")
    assert Header.of(state).env_steps > 0


def test_a_checkpoint_that_does_not_fit_its_run_is_one_line(run: Path, pararl: Any) -> None:
    """Weights of another network (config.json edited, or a file from another run), or
    a header that is not a number, are refused in one line by every entry point; the
    files stay as they were."""
    config = json.loads((run / "config.json").read_text())
    config["hidden"] = [16, 16]
    (run / "config.json").write_text(json.dumps(config))
    before = {p.name: p.read_bytes() for p in (run / "checkpoints").iterdir()}
    for args in (("evaluate", str(run)), ("train", "--resume", str(run), "--total-steps", "400")):
        result = pararl(*args)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert "does not fit the run its directory describes" in lines[-1], result.stderr
        assert len([x for x in lines if x.startswith("pararl: error")]) == 1, result.stderr
    assert {p.name: p.read_bytes() for p in (run / "checkpoints").iterdir()} == before
    final = run / "checkpoints" / "final.pt"
    checkpoint.save(final, {**checkpoint.load(final), "env_steps": "lots"})
    with pytest.raises(UsageError, match="has a header pararl cannot read"):
        checkpoint.load(final)
