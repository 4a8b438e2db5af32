"""The documentation site as a reader's browser gets it: the built HTML's navigation
lists every guide (and the translated pages) and a page per benchmark, a guide renders
its headings, and, where a Chromium is installed, a headless browser opens the home
page and draws it (kept in build/screenshots/). CI installs no Chromium (its machine
starts bare): there the HTML parser's checks stand in, and the browser test skips.

The site is the one `make docs` built into site/ when that is newer than everything it
is built from (as in CI, which builds it before the tests); otherwise the test builds
it into a temporary directory (`mkdocs build --strict`, ~8 s on 2 cores). Without
mkdocs (no `docs` extra) the tests skip.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "site"  # mkdocs.yml's site_dir
# what the site is built from: its config, pages, hooks, the files they include, the
# figures, and the package (the API reference, the command line's --help)
SOURCES = ("mkdocs.yml", "docs", "*.md", "results", "figures", "src/pararl")
SCREENSHOTS = ROOT / "build" / "screenshots"  # the browser test's pictures, kept (git ignores it)
CHROMIUM = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _newest_source() -> float:
    newest = 0.0
    for pattern in SOURCES:
        for path in ROOT.glob(pattern):
            files = path.rglob("*") if path.is_dir() else [path]
            newest = max([newest, *(f.stat().st_mtime for f in files if f.is_file())])
    return newest


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A built site: site/ if it is up to date, else a fresh build, once per process
    (the suite runs the browser test, marked slow, first: a module-scoped build was
    made again for the others in a run without xdist)."""
    index = SITE / "index.html"
    if index.is_file() and index.stat().st_mtime >= _newest_source():
        return SITE
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=110,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    return out


class Page(HTMLParser):
    """A page's primary navigation links and its headings (h1, h2), as text."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.nav_links: list[str] = []
        self.headings: list[tuple[str, str]] = []
        self._nav_depth = 0  # inside <nav class="md-nav--primary"> when > 0
        self._heading: str | None = None
        self._text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        if tag == "nav" and (self._nav_depth or "md-nav--primary" in classes):
            self._nav_depth += 1
        elif tag == "a" and self._nav_depth and "md-nav__link" in classes:
            self.nav_links.append(attributes.get("href") or "")
        elif tag in ("h1", "h2"):
            self._heading, self._text = tag, []

    def handle_endtag(self, tag: str) -> None:
        if tag == "nav" and self._nav_depth:
            self._nav_depth -= 1
        elif tag == self._heading:
            text = "".join(self._text).replace("¶", "")
            self.headings.append((tag, " ".join(text.split())))
            self._heading = None

    def handle_data(self, data: str) -> None:
        if self._heading:
            self._text.append(data)


def _read(site: Path, uri: str) -> Page:
    path = site / uri / "index.html"
    assert path.is_file(), f"the site has no page {uri}"
    return Page(path.read_text(encoding="utf-8"))


def _url(page: Path) -> str:
    """The site's URL of a docs/ page, relative to the site's root."""
    uri = page.relative_to(ROOT / "docs").with_suffix("").as_posix()
    return "" if uri == "index" else uri + "/"


def test_the_navigation_lists_every_guide(site: Path) -> None:
    home = _read(site, ".")
    linked = {os.path.normpath(href).rstrip("/") + "/" for href in home.nav_links}
    expected = [
        _url(page)
        for pattern in ("guides/**/*.md", "zh/**/*.md", "get-started.md", "reference/*.md")
        for page in sorted((ROOT / "docs").glob(pattern))
    ]
    assert len(expected) > 10
    missing = [url for url in expected if url not in linked]
    assert not missing, f"the home page's navigation lacks {missing}"


def _markdown_headings(page: Path) -> list[tuple[str, str]]:
    """The h1 and h2 headings of a Markdown page, as the site writes their text."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    found = re.findall(r"^(#{1,2}) (.+?)\s*$", text, re.M)
    return [(f"h{len(level)}", re.sub(r"`|\*\*", "", title)) for level, title in found]


@pytest.mark.parametrize("guide", ["guides/algorithms/dqn.md", "guides/training.md"])
def test_a_guide_renders_its_headings(site: Path, guide: str) -> None:
    source = ROOT / "docs" / guide
    rendered = _read(site, _url(source))
    headings = _markdown_headings(source)
    assert len(headings) >= 3
    assert rendered.headings == headings


def test_each_benchmark_has_a_page_in_the_navigation(site: Path) -> None:
    """BENCHMARKS.md published as pages (docs/hooks.py, `as pages`): one per benchmark
    under Performance, headed by its section's title, and the headline's links go to
    them."""
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    names = dict.fromkeys(re.findall(r"^## .*\(`python -m benchmarks (\w+)`\)", text, re.M))
    assert len(names) > 15
    home = _read(site, ".")
    linked = {os.path.normpath(href).rstrip("/") for href in home.nav_links}
    for name in names:
        assert f"performance/benchmarks/{name}" in linked, name
        page = _read(site, f"performance/benchmarks/{name}/")
        level, title = page.headings[0]
        assert level == "h1"
        assert f"python -m benchmarks {name}" in title
    headline = (site / "performance" / "index.html").read_text(encoding="utf-8")
    assert 'href="benchmarks/td3/#td3-on-mujoco-against-sb3-python--m-benchmarks-td3"' in headline


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


@pytest.fixture
def chromium() -> str:
    found = next((path for name in CHROMIUM if (path := shutil.which(name))), None)
    if found is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    return found


@pytest.mark.slow  # a browser's start-up: ~3 s
def test_a_headless_browser_draws_the_home_page(site: Path, chromium: str, tmp_path: Path) -> None:
    """The home page as a headless Chromium draws it, kept in build/screenshots/."""
    shot = SCREENSHOTS / "home.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    args = [
        chromium, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
        "--window-size=1280,900", (site / "index.html").as_uri(),
    ]  # fmt: skip
    browser = subprocess.run(args, capture_output=True, text=True, timeout=90)
    assert browser.returncode == 0, browser.stderr[-3000:]
    data = shot.read_bytes()
    assert _png_size(data) == (1280, 900)
    assert len(data) > 20_000, "a blank page"  # the home page: text, a table, the nav
