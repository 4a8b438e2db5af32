"""Suite-wide set-up, and the in-process `pararl` command fixture."""

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from pararl.cli import main

# Tests send Ctrl-C (SIGINT) to processes they start. A shell that runs the suite as
# a background job starts it with SIGINT ignored; children inherit that, and Python
# then never raises KeyboardInterrupt in them. Take SIGINT back before any test runs
# (an exec resets a handler, not an ignore, so children get the default again).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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
