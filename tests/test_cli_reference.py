"""The site's command line reference (docs/reference/cli.md) is generated when the site
is built (docs/hooks.py) from the program's own `--help`: it shows, for every
registered algorithm and every other command, what `pararl ... --help` prints, and a
command added to `pararl.cli.COMMANDS` appears on it without an edit."""

from __future__ import annotations

import importlib.util
import io
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pararl import cli
from pararl.registry import ALGORITHMS

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "cli.md"


@pytest.fixture(scope="module")
def hooks() -> Iterator[ModuleType]:
    """docs/hooks.py, loaded as mkdocs loads it (from its file, as a module in
    `sys.modules` while it runs: its dataclass reads its own module)."""
    pytest.importorskip("mkdocs")
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def _help(args: list[str], monkeypatch: pytest.MonkeyPatch) -> str:
    """What `pararl ARGS` prints, through the program's own entry point, to a UTF-8
    terminal of 80 columns."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="\n")
    with monkeypatch.context() as patch:
        patch.setenv("COLUMNS", "80")
        patch.setattr(sys, "stdout", out)
        try:
            code = cli.main(args)
        except SystemExit as exc:  # tyro's exit after --help
            code = int(exc.code or 0)
    assert code == 0
    out.seek(0)
    return out.read()


def _page(hooks: ModuleType) -> str:
    """The page as the site shows it: its Markdown after the hook ran."""
    return str(hooks.CLI_REFERENCE.sub(lambda _: hooks.cli_reference(), PAGE.read_text()))


def test_the_page_is_generated_where_it_says(hooks: ModuleType) -> None:
    assert hooks.HELP_COLUMNS == 80  # the width the page and this test read
    assert len(hooks.CLI_REFERENCE.findall(PAGE.read_text())) == 1


@pytest.mark.parametrize("algo", sorted(ALGORITHMS))
def test_the_page_shows_pararl_train_algo_help(
    algo: str,
    hooks: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    page = _page(hooks)
    expected = _help(["train", algo, "--help"], monkeypatch)
    assert expected.startswith(f"usage: pararl train {algo} ")
    section = page.split(f"\n## pararl train {algo}\n", 1)[1].split("\n## ", 1)[0]
    assert f"```text\n{expected}```" in section


def test_the_page_shows_every_command_and_the_usage(
    hooks: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = _page(hooks)
    assert f"```text\n{_help(['--help'], monkeypatch)}```" in page
    headings = re.findall(r"^## pararl (.+)$", page, re.M)
    assert headings == [" ".join(key) for key in cli.COMMANDS]
    evaluate = _help(["evaluate", "--help"], monkeypatch)
    assert f"```text\n{evaluate}```" in page


def test_in_process_help_is_the_programs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The help captured in this process is what `pararl` run as a program prints."""
    env = {**os.environ, "COLUMNS": "80", "PYTHONIOENCODING": "utf-8"}
    args = ["train", "dqn", "--help"]
    program = subprocess.run(
        [sys.executable, "-m", "pararl.cli", *args], env=env, capture_output=True, text=True
    )
    assert program.returncode == 0, program.stderr
    assert program.stdout == _help(args, monkeypatch)


@dataclass
class CompareConfig:
    """A command that only this test adds."""

    runs: tuple[str, ...] = ()
    """Run directories to compare."""


def test_a_new_command_appears_without_an_edit(
    hooks: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    def load() -> Any:
        return cli.Command(lambda: CompareConfig, lambda config, given: None)

    commands = {**cli.COMMANDS, ("compare",): cli.Entry("compare runs side by side", load)}
    monkeypatch.setattr(cli, "COMMANDS", commands)
    page = hooks.cli_reference()
    assert "\n## pararl compare\n" in page
    assert "Compare runs side by side. What `pararl compare --help` prints:" in page
    assert "Run directories to compare." in page
