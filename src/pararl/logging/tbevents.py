"""TensorBoard scalars written directly as event files, without importing TensorBoard.

`torch.utils.tensorboard` imports the `tensorboard` package, ~0.2 s of start-up in
every run (a twentieth of the time to solve CartPole with PPO), to write what is a
few bytes per scalar. An event file is a sequence of TFRecords, each an `Event`
protocol buffer: the first holds the file version, the others a wall time, a step
and a `Summary` with one `simple_value`. That subset of the format is encoded here
by hand; TensorBoard reads it as it reads its own writer's files (tested).

Formats: TFRecord framing (length, masked CRC32C of the length, data, masked CRC32C
of the data) and the `Event`/`Summary` messages of TensorBoard's `event.proto` and
`summary.proto`.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum TFRecords use."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data: bytes) -> bytes:
    """One TFRecord: length, its masked CRC, the data, the data's masked CRC."""
    length = struct.pack("<Q", len(data))
    return (
        length
        + struct.pack("<I", _masked(crc32c(length)))
        + data
        + struct.pack("<I", _masked(crc32c(data)))
    )


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        bits, value = value & 0x7F, value >> 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2): strings and sub-messages."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def event(wall_time: float, step: int | None = None, **fields: bytes) -> bytes:
    """An `Event`: wall_time (1, double), step (2, int64), and one of file_version
    (3, string), summary (5, Summary) or session_log (7, SessionLog)."""
    out = b"\x09" + struct.pack("<d", wall_time)
    if step is not None:
        out += b"\x10" + _varint(step & 0xFFFFFFFFFFFFFFFF)
    if "file_version" in fields:
        out += _field(3, fields["file_version"])
    if "summary" in fields:
        out += _field(5, fields["summary"])
    if "session_log" in fields:
        out += _field(7, fields["session_log"])
    return out


SESSION_START = b"\x08\x01"  # a `SessionLog` of status (1, enum) START (1)


def scalar_summary(tag: str, value: float) -> bytes:
    """A `Summary` with one `Value`: tag (1, string), simple_value (2, float)."""
    value_msg = _field(1, tag.encode()) + b"\x15" + struct.pack("<f", value)
    return _field(1, value_msg)


class EventWriter:
    """Appends scalars to a new event file in `logdir`; every `flush` reaches disk.
    `purge_from`: a resumed run's first step to redo; TensorBoard drops what the files
    before this one hold from that step on (a `SessionLog` START at it: the purge of
    `torch.utils.tensorboard`'s `purge_step`), as the run drops those rows of its
    metrics.csv."""

    def __init__(self, logdir: Path, purge_from: int | None = None) -> None:
        logdir.mkdir(parents=True, exist_ok=True)
        now = time.time()
        name = f"events.out.tfevents.{int(now)}.{socket.gethostname()}.{os.getpid()}.pararl"
        self.path = logdir / name
        self._file = self.path.open("ab")
        self._file.write(record(event(now, file_version=b"brain.Event:2")))
        if purge_from is not None:
            self._file.write(record(event(now, purge_from, session_log=SESSION_START)))
        self._file.flush()

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self._file.write(record(event(time.time(), step, summary=scalar_summary(tag, value))))

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()


__all__ = ["EventWriter", "crc32c", "record"]
