"""The ```bash and ```python blocks of README.md (and its translations, README.*.md)
and of the documentation site's pages (docs/**/*.md, and the files they include) run,
page by page in the page's order, as a reader would run them, on tiny budgets.

The convention: every bash and Python block runs, unless an HTML comment right before
it says why not, in sybil's skip directive (invisible on GitHub and on the site):

    <!-- skip: next "trains until solved: minutes" -->

A block is skipped only when it cannot run in a few seconds (an install, a whole
training run, Atari, MuJoCo's samplers, Ray, torchrun) or needs what the page does not
give (a module of the reader's own); skipping is the exception. A block that another
page holds word for word and runs says so (README.md's copies of the guides' blocks),
`<!-- skip: next "runs in docs/PAGE.md" -->`, and is checked to be there, unskipped.
A translation (README.zh-CN.md of README.md, docs/zh/PAGE.md of docs/PAGE.md) holds
its original's blocks, skip directives included, in the same order, word for word, so
they would run as its original's do: they run once, on the original. Blocks in other
languages (text, yaml, none) are not run; ```sh, ```shell, ```console and ```py are
refused, so that a block meant to run is not passed over for its spelling.

How a page runs: in a fresh working directory, on one CPU (the process's affinity:
what `pararl` resolves for a one-core machine, serial modes and evaluations inline, so
that no block pays for starting processes: ~3 s of interpreter start-up each on two
cores, more than a tiny run takes), with the Python blocks sharing one namespace.

- A bash block holds `pararl` commands only, one a line (`#` comments and `\\`
  continuations as the shell reads them). Each runs in this process through
  `pararl.cli.main`, the program's own entry point (as tests/conftest.py's `pararl`
  fixture), and must exit with 0; `--progress none` is appended to `pararl train`,
  and a new run must have trained to its end (its `final` checkpoint).
- Budgets shrink (in the test: the library has no hook for it): `--total-steps N` and
  `total_steps=N` become `SMALL`, and a `pararl train` line or a `*Config(` call that
  gives none gets `SMALL`, and `EPISODES` per evaluation unless it gives its own; a
  `--resume` line's `--total-steps` becomes `2 * SMALL`, so that it extends the run
  before it.
- Placeholders: a made-up run directory such as `runs/dqn-CartPole-v1-20250101-120000`
  is the newest `runs/dqn-CartPole-v1-*` the page made, and `RUN_DIR` the run last
  named or made on the page; a block that names a run no block before it made fails,
  and says so.

Why sybil: its Markdown lexers find fenced blocks and directives in HTML comments with
their lines, its skip directive (with a reason) is the marking convention, and each
language gets an evaluator of ours. pytest-examples runs Python only, and imports
black (no dependency of pararl) to format examples; mktestdocs has no marks (every
block of a language runs) and runs bash blocks with `bash -c`, a new interpreter per
command: a tiny `pararl train` took 8-9 s that way here against 0.3-1.7 s in process.
"""

from __future__ import annotations

import os
import re
import shlex
import time
import unittest
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sybil import Example, Sybil
from sybil.parsers.markdown import CodeBlockParser, SkipParser

from pararl.cli import main

ROOT = Path(__file__).resolve().parents[1]
READMES = sorted(ROOT.glob("README*.md"))  # README.md and its translations
DOCS = sorted((ROOT / "docs").rglob("*.md"))
LANGUAGES = ("zh",)  # docs/LANGUAGE/PAGE.md translates docs/PAGE.md
INCLUDED = sorted(  # the repository's files the site includes (docs/hooks.py)
    {
        ROOT / m
        for page in DOCS
        for m in re.findall(r"^<!-- include: ([^#\s]+)", page.read_text(), re.M)
    }
)


def _original(page: Path) -> Path | None:
    """The page that `page` translates, if it is a translation."""
    parts = page.relative_to(ROOT).parts
    if len(parts) == 1 and re.fullmatch(r"README\.[\w-]+\.md", parts[0]):
        return ROOT / "README.md"
    if len(parts) > 2 and parts[0] == "docs" and parts[1] in LANGUAGES:
        return ROOT.joinpath("docs", *parts[2:])
    return None


TRANSLATIONS = {page: original for page in (*READMES, *DOCS) if (original := _original(page))}
PAGES = [  # those with a fenced block, but translations: they run as their originals
    page
    for page in (*READMES, *DOCS, *INCLUDED)
    if page not in TRANSLATIONS
    and re.search(r"^ *(```|~~~)", page.read_text(encoding="utf-8"), re.M)
]
SMALL = 256  # env steps: a PPO rollout or two, a few hundred DQN/SAC steps
EPISODES = 2  # per evaluation (20 by default: 20,000 steps of an untrained HalfCheetah)
REFUSED = ("sh", "shell", "console", "zsh", "py", "pycon", "python3")


# a fenced block, with the skip directive right before it if there is one
BLOCK = re.compile(r"^(?:(<!-- skip:[^\n]*-->)\n)?(```|~~~)(\w*)\n(.*?)^\2", re.M | re.S)


def _where(example: Example) -> str:
    path = Path(example.path)
    return f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{example.line}"


def _runs() -> set[Path]:
    return set(Path("runs").glob("*")) if Path("runs").is_dir() else set()


class Runs:
    """The page's run directories: `RUN_DIR` is the one last named or made."""

    def __init__(self) -> None:
        self.last: Path | None = None

    def named(self, prefix: str) -> str:
        """The newest run directory whose name starts with `prefix`."""
        found = sorted(Path("runs").glob(f"{prefix}*"), key=lambda p: p.stat().st_mtime)
        assert found, f"the block names a run {prefix}*, but no block before it made one"
        self.last = found[-1]
        return str(self.last)

    def substitute(self, text: str) -> str:
        text = re.sub(r"\bruns/([\w.-]+?-)\d{8}-\d{6}\b", lambda m: self.named(m[1]), text)
        if re.search(r"\bRUN_DIR\b", text):
            assert self.last is not None, "the block names RUN_DIR, but no block before made a run"
            text = re.sub(r"\bRUN_DIR\b", str(self.last), text)
        return text

    def made(self, before: set[Path]) -> None:
        new = sorted(_runs() - before, key=lambda p: p.stat().st_mtime)
        if new:
            self.last = new[-1]


def _page_runs(example: Example) -> Runs:
    runs = example.namespace.setdefault("__runs__", Runs())
    assert isinstance(runs, Runs)
    return runs


def _shrink_command(argv: list[str]) -> list[str]:
    """A `pararl train` command on a small budget."""
    if argv[:1] != ["train"] or "--help" in argv or "-h" in argv:
        return argv
    budget = str(2 * SMALL if "--resume" in argv else SMALL)
    argv = [budget if i and argv[i - 1] == "--total-steps" else a for i, a in enumerate(argv)]
    if "--resume" not in argv:  # a resumed run keeps its own
        for option, value in (("--total-steps", budget), ("--eval-episodes", str(EPISODES))):
            if option not in argv:
                argv += [option, value]
    return [*argv, "--progress", "none"]


def _commands(source: str) -> Iterator[list[str]]:
    """The commands of a bash block, as the shell splits them."""
    for line in source.replace("\\\n", " ").splitlines():
        argv = shlex.split(line, comments=True)
        if argv:
            yield argv


def run_bash(example: Example) -> None:
    for argv in _commands(example.parsed):
        assert argv[0] == "pararl", (
            f"{_where(example)}: `{shlex.join(argv)}`: only `pararl` commands "
            'run here; mark the block <!-- skip: next "why" --> if it cannot run'
        )
        runs, before = _page_runs(example), _runs()
        args = _shrink_command(shlex.split(runs.substitute(shlex.join(argv[1:]))))
        try:
            code = main(args)
        except SystemExit as exc:  # the option parser's own exit (`--help`)
            code = int(exc.code or 0)
        assert code == 0, f"{_where(example)}: `pararl {shlex.join(args)}`: {code}"
        runs.made(before)
        if args[0] == "train" and "--help" not in args and "--resume" not in args:
            made = _runs() - before  # a new run, trained to its budget
            assert len(made) == 1, f"{_where(example)}: `pararl {shlex.join(args)}` made {made}"
            assert (made.pop() / "checkpoints" / "final.pt").is_file()


def _shrink_python(source: str) -> str:
    """`total_steps=` small, and given (with `eval_episodes=`) to a config that gives
    none (the lookahead reads a call's arguments up to its first parenthesis)."""
    source = re.sub(r"\btotal_steps=[\d_]+", f"total_steps={SMALL}", source)
    for field, value in (("total_steps", SMALL), ("eval_episodes", EPISODES)):
        call = rf"\b(\w+Config)\((?![^()]*\b(?:{field}|resume)=)"
        source = re.sub(call, rf"\1({field}={value}, ", source)
    return source


def run_python(example: Example) -> None:
    runs, before = _page_runs(example), _runs()
    source = runs.substitute(_shrink_python(example.parsed))
    code = compile("\n" * example.line + source, example.path, "exec")
    exec(code, example.namespace)
    runs.made(before)


def refuse(example: Example) -> None:
    raise AssertionError(
        f"{_where(example)}: write ```bash or ```python, which run (or are "
        "skipped with a reason), not ```" + str(example.region.lexemes["arguments"])
    )


class RefusedLanguages(CodeBlockParser):
    """The fenced blocks in a language that reads like one meant to run."""

    language = "|".join(REFUSED)

    def __call__(self, document: Any) -> Iterator[Any]:
        for region in self.lexers(document):
            if region.lexemes["arguments"] in REFUSED:
                region.parsed = region.lexemes["source"]
                region.evaluator = refuse
                yield region


SYBIL = Sybil(
    parsers=[
        SkipParser(),
        CodeBlockParser("bash", run_bash),
        CodeBlockParser("python", run_python),
        RefusedLanguages(),
    ]
)


def _runs_elsewhere(example: Example, reason: str) -> None:
    """A block skipped as `runs in PAGE` is in PAGE, word for word, and not skipped
    there."""
    if not reason.startswith("runs in "):
        return
    other = (ROOT / reason.removeprefix("runs in ")).read_text(encoding="utf-8")
    fence = f"```{example.region.lexemes['arguments']}\n{example.parsed}```"
    assert fence in other, f"{_where(example)}: {reason}, but that page has no such block"
    before = other[: other.index(fence)].rstrip().rsplit("\n", 1)[-1]
    assert not before.startswith("<!-- skip:"), f"{_where(example)}: {reason}, skipped there"


@pytest.fixture
def one_cpu() -> Iterator[None]:
    """This thread (and what it starts) on one CPU of those it may use."""
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, cpus)


def _evaluate(page: Path) -> tuple[list[str], list[int]]:
    """Run a page's blocks in order: those run (with their seconds), the lines of
    those skipped."""
    ran, skipped = [], []
    for example in SYBIL.parse(page):
        if example.region.evaluator not in (run_bash, run_python, refuse):
            example.evaluate()  # a skip directive
            continue
        start = time.perf_counter()
        try:
            example.evaluate()
        except unittest.SkipTest as skip:
            _runs_elsewhere(example, str(skip))
            skipped.append(example.line)
        else:
            ran.append(f"{example.line} ({time.perf_counter() - start:.1f} s)")
    return ran, skipped


@pytest.mark.slow  # README.md's blocks: ~10 s
@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_pages_blocks_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_cpu: None
) -> None:
    monkeypatch.chdir(tmp_path)  # the runs go to ./runs here
    ran, skipped = _evaluate(page)
    print(f"{page.name}: blocks run at lines {', '.join(ran)}; skipped at {skipped}")


@pytest.mark.parametrize(
    ("page", "original"), TRANSLATIONS.items(), ids=lambda p: str(p.relative_to(ROOT))
)
def test_a_translation_holds_its_originals_blocks(page: Path, original: Path) -> None:
    """Word for word, skip directives included, and so is every example sybil finds
    (what `_evaluate` would run or skip, in order): the translation's blocks run as
    its original's do, so they run once, on the original (a page that is in PAGES)."""

    def blocks(path: Path) -> list[tuple[str, ...]]:
        return [m.group(1, 3, 4) for m in BLOCK.finditer(path.read_text(encoding="utf-8"))]

    def examples(path: Path) -> list[tuple[str, str, str]]:
        found = [(e.region.evaluator, e.region.lexemes, e.parsed) for e in SYBIL.parse(path)]
        return [  # run_bash, run_python, refuse or the skip directive's Skipper
            (getattr(run, "__name__", type(run).__name__), str(lex.get("arguments")), str(p))
            for run, lex, p in found
        ]

    assert original.is_file(), f"{page.relative_to(ROOT)} translates no page: {original}"
    assert blocks(page) == blocks(original), (
        f"{page.relative_to(ROOT)}: its blocks differ from {original.relative_to(ROOT)}'s"
    )
    assert examples(page) == examples(original), (
        f"{page.relative_to(ROOT)}: its runnable examples differ from "
        f"{original.relative_to(ROOT)}'s"
    )
    assert page not in PAGES
    assert original in PAGES or not blocks(page)


def test_budgets_shrink_and_placeholders_name_the_pages_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _shrink_command(["train", "dqn", "--total-steps", "300000"]) == [
        "train", "dqn", "--total-steps", str(SMALL), "--eval-episodes", str(EPISODES),
        "--progress", "none",
    ]  # fmt: skip
    assert _shrink_command(["train", "--resume", "R", "--total-steps", "9"])[:5] == [
        "train", "--resume", "R", "--total-steps", str(2 * SMALL),
    ]  # fmt: skip
    assert _shrink_command(["train", "dqn", "--help"]) == ["train", "dqn", "--help"]
    assert _shrink_python('PPOConfig(env="X", total_steps=10_000)') == (
        f'PPOConfig(eval_episodes={EPISODES}, env="X", total_steps={SMALL})'
    )
    assert _shrink_python("PPOConfig(resume=run)") == "PPOConfig(resume=run)"  # its own
    monkeypatch.chdir(tmp_path)
    runs = Runs()
    with pytest.raises(AssertionError, match="no block before it made one"):
        runs.substitute("evaluate runs/dqn-CartPole-v1-20250101-120000")
    (tmp_path / "runs" / "dqn-CartPole-v1-20261129-003618").mkdir(parents=True)
    assert runs.substitute("runs/dqn-CartPole-v1-20250101-120000 RUN_DIR") == (
        "runs/dqn-CartPole-v1-20261129-003618 runs/dqn-CartPole-v1-20261129-003618"
    )


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('<!-- skip: next "why" -->\n```bash\npararl no-such-command\n```\n', None),
        ("```text\npararl no-such-command\n```\n", None),  # not run: no bash, no python
        ("```bash\nmake train\n```\n", "only `pararl` commands run here"),
        ("```sh\npararl train dqn\n```\n", "write ```bash or ```python"),
        (
            '<!-- skip: next "runs in README.md" -->\n```bash\npararl no-such-command\n```\n',
            "runs in README.md, but that page has no such block",
        ),
    ],
)
def test_the_marking_convention(tmp_path: Path, text: str, error: str | None) -> None:
    page = tmp_path / "page.md"
    page.write_text(text)
    if error is not None:
        with pytest.raises(AssertionError, match=re.escape(error)):
            _evaluate(page)
    else:
        assert _evaluate(page) == ([], [2] if "skip:" in text else [])


def test_the_benchmarks_page_lists_every_benchmark() -> None:
    """docs/performance/run-benchmarks.md's table: a row for each name of
    `python -m benchmarks --list`, in its order."""
    from benchmarks.__main__ import BENCHMARKS

    page = (ROOT / "docs" / "performance" / "run-benchmarks.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \|", page, re.M)
    assert rows == list(BENCHMARKS)
