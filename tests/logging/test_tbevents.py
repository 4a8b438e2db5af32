"""Event files written without TensorBoard, read back by TensorBoard itself."""

from __future__ import annotations

import csv
import struct
import subprocess
import sys
from pathlib import Path

from pararl.logging.tbevents import EventWriter, crc32c, record
from pararl.logging.writers import MetricsWriter

COLUMNS = ("env_steps", "episode_return", "eval_return")


def test_crc32c_check_value_and_record_framing() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the standard CRC-32C check value
    framed = record(b"abc")
    assert struct.unpack("<Q", framed[:8])[0] == 3
    assert framed[12:15] == b"abc"
    assert len(framed) == 8 + 4 + 3 + 4


def _scalars(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_tensorboard_reads_the_scalars(tmp_path: Path) -> None:
    writer = EventWriter(tmp_path / "tb")
    writer.add_scalar("loss", 0.25, 0)
    writer.add_scalar("loss", -1.5, 2**40)  # a step beyond 32 bits
    writer.add_scalar("eval/return", 500.0, 10)
    writer.close()
    writer.close()  # idempotent
    assert _scalars(tmp_path / "tb") == {
        "loss": [(0, 0.25), (2**40, -1.5)],
        "eval/return": [(10, 500.0)],
    }


def test_records_pass_tensorboards_checksums(tmp_path: Path) -> None:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    writer = EventWriter(tmp_path)
    writer.add_scalar("x", 1.0, 1)
    writer.close()
    data = writer.path.read_bytes()
    while data:
        (length,) = struct.unpack("<Q", data[:8])
        assert struct.unpack("<I", data[8:12])[0] == masked_crc32c(data[:8])
        body = data[12 : 12 + length]
        assert struct.unpack("<I", data[12 + length : 16 + length])[0] == masked_crc32c(body)
        data = data[16 + length :]


def test_metrics_rows_reach_both_files_at_once(tmp_path: Path) -> None:
    metrics = MetricsWriter(tmp_path / "metrics.csv", tmp_path / "tb", COLUMNS)
    metrics.write({"env_steps": 256, "episode_return": 20.0, "eval_return": None})
    # readable before close: every row is flushed
    assert _scalars(tmp_path / "tb") == {"episode_return": [(256, 20.0)]}
    with (tmp_path / "metrics.csv").open() as f:
        assert next(csv.DictReader(f))["episode_return"] == "20.0"
    metrics.close()


def test_writing_does_not_import_tensorboard(tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; "
        "from pararl.logging.writers import MetricsWriter; "
        f"m = MetricsWriter(Path({str(tmp_path / 'm.csv')!r}), Path({str(tmp_path / 'tb')!r}), "
        "('env_steps', 'loss')); "
        "m.write({'env_steps': 1, 'loss': 0.5}); m.close(); "
        "print(sorted(k for k in sys.modules if k.split('.')[0] == 'tensorboard'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert _scalars(tmp_path / "tb") == {"loss": [(1, 0.5)]}


def test_a_resumed_runs_file_has_tensorboard_drop_the_steps_it_redoes(tmp_path: Path) -> None:
    """A run resumed at 300 redoes what it logged after its checkpoint: TensorBoard
    keeps the first file's steps up to 300 and the new file's from 301, each once."""
    first = EventWriter(tmp_path)
    for step in (100, 200, 300, 400, 500):
        first.add_scalar("loss", float(step), step)
    first.close()
    again = EventWriter(tmp_path, purge_from=301)
    for step in (400, 500, 600):
        again.add_scalar("loss", -float(step), step)
    again.close()
    assert _scalars(tmp_path) == {
        "loss": [
            (100, 100.0),
            (200, 200.0),
            (300, 300.0),
            (400, -400.0),
            (500, -500.0),
            (600, -600.0),
        ]
    }
