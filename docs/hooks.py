"""MkDocs hooks (mkdocs.yml `hooks:`): the site shows the repository's own Markdown
files where they live, instead of copies.

A page includes a file, or one section of it, with a line of its own:

    <!-- include: ARCHITECTURE.md -->
    <!-- include: BENCHMARKS.md#headline -->

    <!-- include: BENCHMARKS.md as pages -->

`#slug` takes the section under the heading with that anchor (GitHub's, which the
site's `toc` slugify makes too), up to the next heading of its level or above, without
the heading itself. The page that includes a whole file publishes it: links in any
included text are rewritten from the repository's layout to the site's, so
`[RESULTS.md](RESULTS.md)` in BENCHMARKS.md goes to the page that includes RESULTS.md,
`(#a-section)` in the headline to that section, and `figures/*.png` to the copies this
hook adds to the site. A link to a repository file that no page publishes is a
warning, which `mkdocs build --strict` fails on.

`as pages` publishes a file as one page per section of level 2 (those another page
includes by `#slug` aside), listed in the navigation under the including page, which
shows the file's opening and a link to each. A section whose title ends in
", section NAME" (a second run of one benchmark, `python -m benchmarks NAME --section
...`) joins the page of the title before it. A link to an anchor of such a file, from
included text or from a page of docs/ to the including page, goes to the page that
holds the anchor.

A line of its own `<!-- cli-reference -->` becomes the command line's reference: what
`pararl --help` prints, then for each command of `pararl.cli.COMMANDS` (the table the
program itself dispatches on, so a new command appears without an edit here) its one
line of help and the text of `pararl COMMAND --help`, as a terminal of `HELP_COLUMNS`
columns shows it. tests/test_cli_reference.py checks it against the program.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import posixpath
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.hooks.include")

ROOT = Path(__file__).resolve().parents[1]  # the repository
INCLUDE = re.compile(
    r"^<!-- include: (?P<path>[^#\s]+)(?:#(?P<section>\S+))?(?P<pages> as pages)? -->$", re.M
)
FIGURES = "figures"  # the repository's figures, copied to the site at the same path
FENCE = re.compile(r"^(```|~~~)")
# a Markdown link or image whose target is relative: [text](target) or ![alt](target)
LINK = re.compile(r"(?P<head>!?\[[^\]\n]*\])\((?P<target>[^)\s]+)\)")
HEADING = re.compile(r"^(?P<level>#{1,6}) (?P<title>.+?)\s*#*$")
CLI_REFERENCE = re.compile(r"^<!-- cli-reference -->$", re.M)
HELP_COLUMNS = 80  # the help's width on the page: a common terminal's
SECOND_RUN = re.compile(r", section \S+$")  # a title's tail: a benchmark's second section
COMMAND = re.compile(r"\s*\(`python -m benchmarks (?P<name>\w+)`\)")  # a title's command

# repository path -> the docs path of the page that publishes it (set by on_files)
published: dict[str, str] = {}
# (repository path, anchor) -> the docs path of the page that holds it, for the files
# published as pages and the sections included by `#slug` (set by on_config)
anchors: dict[tuple[str, str], str] = {}


@dataclass
class Split:
    """A file published `as pages`: the page that includes it, the file's opening,
    and its pages (docs path -> title, Markdown) in the file's order."""

    source: str
    index: str
    opening: str
    pages: dict[str, tuple[str, str]] = field(default_factory=dict)


splits: dict[str, Split] = {}  # repository path -> how it is split (set by on_config)
generated: dict[str, str] = {}  # a split's page (docs path) -> its repository file


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Note which page publishes which repository file; split the files included `as
    pages`, and list their pages in the navigation."""
    splits.clear()
    generated.clear()
    anchors.clear()
    published.clear()
    pages = sorted(Path(config.docs_dir).rglob("*.md"))
    includes = [
        (page.relative_to(config.docs_dir).as_posix(), match)
        for page in pages
        for match in INCLUDE.finditer(page.read_text(encoding="utf-8"))
    ]
    for uri, match in includes:  # the page that includes a whole file publishes it
        if match["section"] is None:
            if match["path"] in published:
                log.warning("%s is included whole by two pages", match["path"])
            published[match["path"]] = uri
    sections = {(m["path"], m["section"]): uri for uri, m in includes if m["section"]}
    for uri, match in includes:
        if match["pages"] and match["section"] is None:
            # a section another page includes has no page of its own: its anchor is there
            included = {s: u for (path, s), u in sections.items() if path == match["path"]}
            splits[match["path"]] = _split(match["path"], uri, set(included))
            anchors.update({(match["path"], s): u for s, u in included.items()})
    for split in splits.values():
        for page, (_, markdown) in split.pages.items():
            generated[page] = split.source
            anchors.update({(split.source, a): page for a in _anchors(markdown)})
        _nest(config.nav or [], split)
    return config


def _split(source: str, index: str, included: set[str]) -> Split:
    """`source` cut into its opening and one page per section of level 2, but those
    whose anchors are in `included`."""
    text = (ROOT / source).read_text(encoding="utf-8")
    sections = _level_two(text)
    split = Split(source, index, text[: sections[0][1]] if sections else text)
    folder = posixpath.splitext(index)[0]
    for title, start, end in sections:
        if _slug(title) in included:
            continue
        base = SECOND_RUN.sub("", title)
        command = COMMAND.search(base)
        page = f"{folder}/{command['name'] if command else _slug(base)}.md"
        body = text[start:end].split("\n", 1)[1]
        if page not in split.pages:
            heading = base if title == base else f"{base}\n\n## {title}"
            split.pages[page] = (COMMAND.sub("", base), f"# {heading}\n{body}")
        else:
            name, markdown = split.pages[page]
            split.pages[page] = (name, f"{markdown.rstrip()}\n\n## {title}\n{body}")
    return split


def _headings(text: str) -> Iterator[tuple[int, int, int, str]]:
    """The headings of `text` outside fenced code: where the heading's line starts and
    ends, its level and its title."""
    offset, in_code = 0, False
    for line in text.splitlines(keepends=True):
        if FENCE.match(line):
            in_code = not in_code
        elif not in_code and (heading := HEADING.match(line)):
            yield offset, offset + len(line), len(heading["level"]), heading["title"]
        offset += len(line)


def _level_two(text: str) -> list[tuple[str, int, int]]:
    """The sections of level 2: title, and where each starts and ends in `text`."""
    found = [(title, start) for start, _, level, title in _headings(text) if level == 2]
    ends = [start for _, start in found[1:]] + [len(text)]
    return [(title, start, end) for (title, start), end in zip(found, ends, strict=True)]


def _anchors(markdown: str) -> list[str]:
    """The anchors of a page's headings (outside code)."""
    return [_slug(title) for _, _, _, title in _headings(markdown)]


def _nest(nav: list[object], split: Split) -> bool:
    """Put the split's pages under its including page's entry in `nav`."""
    for i, entry in enumerate(nav):
        if isinstance(entry, dict):
            ((title, value),) = entry.items()
            if value == split.index:
                pages = [{name: page} for page, (name, _) in split.pages.items()]
                nav[i] = {title: [split.index, *pages]}
                return True
            if isinstance(value, list) and _nest(value, split):
                return True
    return False


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the split files' pages; copy the figures."""
    for page, source in generated.items():
        markdown = splits[source].pages[page][1]
        files.append(File.generated(config, page, content=markdown))
    for figure in sorted((ROOT / FIGURES).glob("*.png")):
        uri = f"{FIGURES}/{figure.name}"
        files.append(File.generated(config, uri, abs_src_path=str(figure)))
        published[uri] = uri
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace each include line by the text it names, its links rewritten."""
    uri = page.file.src_uri
    if uri in generated:  # a page of a split file
        return _rewrite_links(markdown, generated[uri], uri)

    def expand(match: re.Match[str]) -> str:
        path, section = match["path"], match["section"]
        if match["pages"] and path in splits:
            split = splits[path]
            listed = "\n".join(
                f"- [{name}]({posixpath.relpath(p, posixpath.dirname(uri) or '.')})"
                for p, (name, _) in split.pages.items()
            )
            opening = _rewrite_links(split.opening, path, uri)
            return f"{opening.rstrip()}\n\nEach benchmark on a page of its own:\n\n{listed}\n"
        source = ROOT / path
        if not source.is_file():
            log.warning("%s: include of %s: no such file", page.file.src_uri, path)
            return match[0]
        text = source.read_text(encoding="utf-8")
        if section is not None:
            found = _section(text, section)
            if found is None:
                log.warning("%s: %s has no section #%s", page.file.src_uri, path, section)
                return match[0]
            text = found
        return _rewrite_links(text, path, page.file.src_uri)

    markdown = _to_split_pages(INCLUDE.sub(expand, markdown), uri)
    return CLI_REFERENCE.sub(lambda _: cli_reference(), markdown)


def _to_split_pages(markdown: str, page_uri: str) -> str:
    """A page's links to an anchor of a split file's including page, sent to the page
    that holds the anchor."""
    index = {split.index: split.source for split in splits.values()}

    def link(match: re.Match[str]) -> str:
        path, _, anchor = match["target"].partition("#")
        if not path or not anchor or re.match(r"^[a-z][a-z0-9+.-]*:|^/", path):
            return match[0]
        target = posixpath.normpath(posixpath.join(posixpath.dirname(page_uri), path))
        holder = anchors.get((index.get(target, ""), anchor))
        if holder is None:
            return match[0]
        relative = posixpath.relpath(holder, posixpath.dirname(page_uri) or ".")
        return f"{match['head']}({relative}#{anchor})"

    return _sub_links(markdown, link)


@contextlib.contextmanager
def _columns(columns: int) -> Iterator[None]:
    """A terminal `columns` wide, as the help formatter reads it
    (`shutil.get_terminal_size`: $COLUMNS first)."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(columns)
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def cli_help(*args: str) -> str:
    """What `pararl ARGS` prints (`pararl.cli.main`, in this process) to a UTF-8
    terminal of `HELP_COLUMNS` columns (tyro draws its boxes in UTF-8 when the output's
    encoding is "utf-8"; no colours, as the output is no tty)."""
    from pararl.cli import main

    buffer = io.BytesIO()
    out = io.TextIOWrapper(buffer, encoding="utf-8", newline="\n")
    # SystemExit: the option parser's own exit after --help
    with _columns(HELP_COLUMNS), contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(list(args))
    out.flush()
    return buffer.getvalue().decode("utf-8")


def cli_reference() -> str:
    """The command line's reference page body: the usage, then every command's help."""
    from pararl.cli import COMMANDS

    parts = [
        "What `pararl --help` prints:\n",
        f"```text\n{cli_help('--help')}```\n",
    ]
    for key, entry in COMMANDS.items():
        command = " ".join(key)
        parts += [
            f"## pararl {command}\n",
            f"{entry.help[:1].upper()}{entry.help[1:]}. What `pararl {command} --help` prints:\n",
            f"```text\n{cli_help(*key, '--help')}```\n",
        ]
    return "\n".join(parts)


def _slug(title: str) -> str:
    """GitHub's anchor for a heading (as pymdownx.slugs.slugify(case="lower") makes)."""
    text = re.sub(r"`|\*\*|<[^>]+>", "", title).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _section(text: str, slug: str) -> str | None:
    """The body of the section under the heading whose anchor is `slug`."""
    start, level = None, 0
    for line_start, line_end, depth, title in _headings(text):
        if start is None:
            if _slug(title) == slug:
                start, level = line_end, depth
        elif depth <= level:
            return text[start:line_start]
    return None if start is None else text[start:]


def _sub_links(text: str, replace: Callable[[re.Match[str]], str]) -> str:
    """`text` with each Markdown link outside fenced code replaced by `replace`."""
    out, in_code = [], False
    for line in text.splitlines(keepends=True):
        if FENCE.match(line):
            in_code = not in_code
        out.append(line if in_code else LINK.sub(replace, line))
    return "".join(out)


def _rewrite_links(text: str, source: str, page_uri: str) -> str:
    """Links of `source` (a repository path), made to work from the page `page_uri`;
    fenced code is left as it is."""
    return _sub_links(text, lambda m: _link(m, source, page_uri))


def _link(match: re.Match[str], source: str, page_uri: str) -> str:
    target = match["target"]
    if re.match(r"^[a-z][a-z0-9+.-]*:|^/", target):  # a URL, or absolute
        return match[0]
    path, _, anchor = target.partition("#")
    repo_path = source  # an anchor alone: a section of the included file
    if path:
        repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
    uri = anchors.get((repo_path, anchor)) or published.get(repo_path)
    if uri is None:
        log.warning(
            "%s: the link %s in %s goes to %s, which no page of the site publishes",
            page_uri, target, source, repo_path,
        )  # fmt: skip
        return match[0]
    relative = "" if uri == page_uri else posixpath.relpath(uri, posixpath.dirname(page_uri) or ".")
    return f"{match['head']}({relative}{'#' + anchor if anchor else ''})"
