"""Errors that the command line turns into one line and exit code 2."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator, Mapping
from typing import Any


class UsageError(ValueError):
    """Bad input from the user: the message says what was wrong and what to do."""


class RunFinished(Exception):  # noqa: N818 - not an error: the run is done
    """`--resume` of a run with nothing left to do: the message says why and how to
    train on (the command line prints it and exits with code 0)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill`, `docker stop`, a batch scheduler's pre-emption): raised in the
    main thread so that it takes Ctrl-C's path (checkpoint, clean shutdown); the
    command line exits with 143."""


_SAID = "pararl_said"


def said(exc: BaseException, mark: bool = False) -> bool:
    """Whether a run's own last line has told the user how `exc` ended it ("pararl:
    interrupted after N env steps ...; run saved in DIR"), so that the command line
    adds no second line; `mark`: it has."""
    if mark:
        setattr(exc, _SAID, True)
    return bool(getattr(exc, _SAID, False))


@contextlib.contextmanager
def handled(
    handlers: Mapping[int, Callable[[int, Any], None] | signal.Handlers],
) -> Iterator[None]:
    """`handlers` (functions, or `SIG_IGN`) handle their signals while the block runs,
    in the main thread, and the previous ones after it; elsewhere (where no handler
    runs) signals are left alone."""
    try:
        previous = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises `Terminated` in the main thread while the block runs."""

    def handler(signum: int, frame: Any) -> None:
        raise Terminated()

    with handled({signal.SIGTERM: handler}):
        yield


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Ctrl-C (SIGINT) and SIGTERM wait until the block ends, then take effect as if
    they came just after it: a write that must not be cut (a checkpoint's file) runs
    to its end. Raised inside a library's writer, the interrupt would instead leave
    the writer half-done, and what the writer raises in its clean-up (torch's zip
    writer: "unexpected pos") would hide it."""
    caught: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        caught.append(signum)

    try:
        with handled({signal.SIGINT: hold, signal.SIGTERM: hold}):
            yield
    finally:
        for signum in dict.fromkeys(caught):  # each signal once, in the order they came
            signal.raise_signal(signum)
