"""The benchmarks' command line: SIGTERM stops a benchmark and the runs it started
(each run is a process in its own session, which a signal to the benchmark alone does
not reach); every benchmark `--list` names imports and answers `--help`."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_sigterm_stops_the_benchmark_and_its_runs(tmp_path: Path) -> None:
    pytest.importorskip("stable_baselines3")
    cmd = [sys.executable, "-m", "benchmarks", "sac", "--quick", "--out-dir", str(tmp_path)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        children: list[psutil.Process] = []
        while not children and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
            children = psutil.Process(proc.pid).children(recursive=True)
        assert children, "the benchmark started no run"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err.decode()
    assert "terminated (SIGTERM)" in err.decode()
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, [p.cmdline() for p in alive]


def test_every_listed_benchmark_imports_and_explains_itself(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchmarks.__main__ import BENCHMARKS, main

    assert main(["--list"]) == 0
    assert capsys.readouterr().out.split() == list(BENCHMARKS)
    for name in BENCHMARKS:
        with pytest.raises(SystemExit) as exit_:
            main([name, "--help"])
        assert exit_.value.code == 0, name
        assert f"python -m benchmarks {name}" in capsys.readouterr().out


# benchmarks the pages name as retired, each with the commit that still runs it
RETIRED = {"maml_curves"}
PLACEHOLDER = re.compile(r"\.\.\.|\[|\b[A-Z]{3,}\b")  # NAME, SEED, [--quick], ...


def cited_commands() -> list[tuple[str, str]]:
    """Each `python -m benchmarks ...` the README, the docs and BENCHMARKS.md's
    headline table state (the sections' own `command:` lines record what ran at their
    commit), with the page it stands on."""
    pages = [ROOT / "README.md", ROOT / "README.zh-CN.md", *sorted((ROOT / "docs").rglob("*.md"))]
    texts = [(p.name, p.read_text()) for p in pages]
    texts.append(("BENCHMARKS.md", (ROOT / "BENCHMARKS.md").read_text().split("\n## ")[1]))
    found = re.compile(r"`(python -m benchmarks [^`]+)`")
    return [(page, " ".join(m[1].split())) for page, text in texts for m in found.finditer(text)]


def test_every_command_the_pages_cite_parses_and_resolves() -> None:
    from benchmarks.__main__ import BENCHMARKS, parse

    commands = [(page, cmd) for page, cmd in cited_commands() if not PLACEHOLDER.search(cmd)]
    assert len(commands) > 40  # the headline's and the guides'
    for page, cmd in commands:
        args = cmd.split()[3:]
        if args == ["--list"]:
            continue
        if args[0] in RETIRED:
            assert args[0] not in BENCHMARKS, f"{page}: {args[0]} is no longer retired"
            continue
        try:
            _, module, config = parse(args)
            module.resolve(config)
        except SystemExit as exc:  # tyro's answer to an unknown option
            pytest.fail(f"{page}: `{cmd}` does not parse (exit {exc.code})")
