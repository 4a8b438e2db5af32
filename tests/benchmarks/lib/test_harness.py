"""The harness every benchmark runs on: options, interleaving, summaries, tables,
the reproducing command, BENCHMARKS.md sections, and `execute` end to end on a toy."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from benchmarks.__main__ import main
from benchmarks.lib.figures import Panel, Series

from benchmarks.lib import harness as h
from tests.benchmarks.conftest import PNG


@dataclass(frozen=True)
class Toy(h.Options):
    sizes: tuple[int, ...] = (1, 2)
    """sizes"""
    block_s: float = 0.5
    """seconds"""
    fast: bool = False
    """a flag"""


@dataclass
class Row:
    size: int
    rate: h.Summary


def test_command_line_names_every_option_not_at_its_default() -> None:
    config = Toy(quick=True, sizes=(4,), fast=True, out_dir=Path("out"), update_benchmarks=True)
    assert h.command_line("toy", config) == (
        "python -m benchmarks toy --quick --sizes 4 --fast --out-dir out --update-benchmarks True"
    )
    assert h.command_line("toy", Toy()) == "python -m benchmarks toy"


def test_quick_changes_only_options_left_at_their_default() -> None:
    quick = {"sizes": (9,), "block_s": 0.1}
    assert h.apply_quick(Toy(quick=True, block_s=2.0), quick) == Toy(True, sizes=(9,), block_s=2.0)
    assert h.apply_quick(Toy(), quick) == Toy()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (Toy(sizes=()), "--sizes needs at least one value"),
        (Toy(sizes=(1, 0)), "--sizes must be >= 1"),
        (Toy(block_s=0.0), "--block-s must be > 0"),
    ],
)
def test_require_says_which_option(config: Toy, message: str) -> None:
    with pytest.raises(h.UsageError, match=message):
        h.require(config, ">= 1: sizes", "> 0: block_s")


def test_interleaved_rounds_rotation_and_failures() -> None:
    calls: list[str] = []

    def task(name: str) -> float:
        calls.append(name)
        if name == "b" and calls.count("b") == 2:
            raise RuntimeError("boom")
        return float(len(calls))

    failed: list[str] = []
    tasks = {n: (lambda n=n: task(n)) for n in "abc"}
    out = h.interleaved(tasks, 3, lambda name, exc: failed.append(name), rotate=True)
    assert calls == ["a", "b", "c", "b", "c", "a", "a", "c"]  # b dropped after failing
    assert failed == ["b"]
    assert [len(out[n]) for n in "abc"] == [3, 1, 3]
    s = h.summarize([3.0, 1.0, 2.0])
    assert (s.median, s.min, s.max, s.samples) == (2.0, 1.0, 3.0, (3.0, 1.0, 2.0))
    assert h.ratio(s, 4.0) == 0.5
    assert h.ratio(None, s) is None


def test_table_and_formats() -> None:
    cols = [h.Col("a", lambda r: r[0], "l"), h.Col("b", lambda r: r[1])]
    assert h.table(cols, [(1, "x|y")]) == "| a | b |\n|:--|--:|\n| 1 | x\\|y |"
    assert [h.fmt_rate(v) for v in (950, 12_345, 1.25e6, None)] == ["950", "12.3k", "1.25M", "–"]
    assert h.fmt_spread(h.summarize([1.0, 2.0, 4.0]), h.fmt_num) == "2.0 (1.0–4.0)"


def test_replace_section_creates_replaces_appends_and_refuses(tmp_path: Path) -> None:
    path = tmp_path / "B.md"
    h.replace_section(path, "vector", "first")
    h.replace_section(path, "dqn", "other")
    h.replace_section(path, "vector", "second")
    text = path.read_text()
    start, end = h.markers("vector")
    assert text.startswith("# pararl benchmarks")
    assert f"{start}\nsecond\n{end}" in text
    assert "first" not in text
    assert text.index(start) < text.index(h.markers("dqn")[0])  # replaced in place
    path.write_text(f"# x\n{start}\nold\n")
    with pytest.raises(ValueError, match="unmatched"):
        h.replace_section(path, "vector", "new")


def _measure(config: Toy, meta: h.Metadata) -> list[Row]:
    meta.machine_note = "; toy note"
    return [Row(n, h.summarize([n, 2.0 * n])) for n in config.sizes]


def _report(rows: list[Row], meta: h.Metadata) -> h.Report:
    cols = [h.Col("size", lambda r: r.size), h.Col("rate", lambda r: h.fmt_spread(r.rate))]
    panel = Panel("toy", [Series.of("rate", [(r.size, r.rate) for r in rows])], logy=True)
    return h.Report("Toy (`toy`)", "all fine", ["### rows\n\n" + h.table(cols, rows)], [panel])


def test_execute_publishes_json_png_tables_and_the_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    md = tmp_path / "BENCHMARKS.md"
    config = Toy(quick=True, out_dir=tmp_path, benchmarks_md=md)
    h.execute("toy", config, lambda c: c, _measure, _report)
    assert not md.exists()  # --quick leaves BENCHMARKS.md alone
    assert (tmp_path / "bench_toy.png").read_bytes()[:8] == PNG
    data = json.loads((tmp_path / "toy.json").read_text())
    assert data["results"][1] == {
        "size": 2,
        "rate": {"median": 3.0, "min": 2.0, "max": 4.0, "samples": [2.0, 4.0]},
    }
    meta = data["metadata"]
    assert meta["command"] == f"python -m benchmarks toy --quick --out-dir {tmp_path} " + (
        f"--benchmarks-md {md}"
    )
    assert {"git_commit", "cpu_count", "affinity_cpus", "physical_cores", "versions"} <= set(meta)
    assert "| size | rate |" in capsys.readouterr().out

    full = Toy(out_dir=tmp_path, figure=tmp_path / "figures" / "f.png", benchmarks_md=md)
    h.execute("toy", full, lambda c: c, _measure, _report)
    text = md.read_text()
    assert "## Toy (`toy`)\n\n- command: `python -m benchmarks toy --out-dir" in text
    assert "toy note\n\nKey ratios: all fine.\n\n![benchmark](figures/f.png)" in text


def test_a_named_section_keeps_a_second_run_beside_the_first(tmp_path: Path) -> None:
    md = tmp_path / "BENCHMARKS.md"
    first = Toy(out_dir=tmp_path, benchmarks_md=md, figure=tmp_path / "a.png")
    h.execute("toy", first, lambda c: c, _measure, _report)
    second = Toy(
        out_dir=tmp_path, benchmarks_md=md, figure=tmp_path / "b.png", section="toy_big", sizes=(3,)
    )
    h.execute("toy", second, lambda c: c, _measure, _report)
    text = md.read_text()
    assert "<!-- bench:toy:start -->" in text
    assert "<!-- bench:toy_big:start -->" in text
    assert "--section toy_big" in text
    assert "## Toy (`toy`), section toy_big\n" in text
    assert json.loads((tmp_path / "toy_big.json").read_text())["results"][0]["size"] == 3
    assert json.loads((tmp_path / "toy.json").read_text())["results"][0]["size"] == 1
    with pytest.raises(h.UsageError, match="--section"):
        h.execute("toy", Toy(section="Toy Big"), lambda c: c, _measure, _report)


def test_cli_lists_benchmarks_and_rejects_unknown_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "vector" in capsys.readouterr().out
    assert main(["nosuch"]) == 2
