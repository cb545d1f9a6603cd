"""README.md and docs/ read as a product: short guide pages, and none of the project's
internal notes (issue talk, commit hashes in prose, acceptance labels), which belong in the
git log."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
# A guide past this serves two modes at once: split it (../shared/DOCS.md, "Short pages").
GUIDE_LINES = 600

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_ISSUE = re.compile(r"\bissue\s*#|\bthe issue\b|\bissue\s+\d|\bissues?'s?\b", re.I)
_HASH = re.compile(r"\b[0-9a-f]{7,40}\b")
_LABEL = re.compile(r"\bP[1-5][ab]?\b")
# a bench command's --baseline: the revision its page compares against, named in its rows
_BASELINE = re.compile(r"--baseline[ =]([0-9a-f]{7,40})\b")


def guides() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.glob("*.md"))]


def pages() -> list[Path]:
    """Every page a reader opens: the guides and the benchmark reports."""
    return guides() + sorted((DOCS / "benchmarks").glob("*.md"))


def prose(text: str) -> str:
    """`text` without code blocks and code spans: a command may name a revision."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def commit_hashes(text: str) -> list[str]:
    """Words of 7 to 40 hex digits with a digit and a letter in prose: what `git log`
    prints, not a number or an English word. A revision that the page's own command
    passes as `--baseline` is that command's argument, which the page may name."""
    baselines = set(_BASELINE.findall(text))
    return [word for word in _HASH.findall(prose(text))
            if re.search(r"\d", word) and re.search(r"[a-f]", word)
            and word not in baselines]


def internal_notes(text: str) -> list[str]:
    """What of `text` is the project's bookkeeping rather than the product's."""
    return (_ISSUE.findall(text) + commit_hashes(text) + _LABEL.findall(prose(text)))


def _name(page: Path) -> str:
    return str(page.relative_to(REPO))


@pytest.mark.parametrize("page", guides(), ids=_name)
def test_each_guide_is_short(page: Path) -> None:
    lines = len(page.read_text().splitlines())
    assert lines <= GUIDE_LINES, f"{_name(page)} has {lines} lines: split it"


@pytest.mark.parametrize("page", pages(), ids=_name)
def test_no_page_holds_internal_notes(page: Path) -> None:
    assert internal_notes(page.read_text()) == []


@pytest.mark.parametrize("line", [
    "Before these changes the issue's six inputs each answered 500.",
    "as issue #12 asked",
    "see issue 40",
    "A first design (commit 161ebec: one tower)",
    "measured at 2e9867d0c1 on main",
    "`--baseline 036aa75` and, in prose, 2e9867d",
    "**P5:** ingest runs at 0.94x",
    "## Models (P3)",
    "# The labelers (P1a, P1b, P2, cost)",
])
def test_internal_notes_are_found(line: str) -> None:
    assert internal_notes(line)


@pytest.mark.parametrize("line", [
    "python -m es_tour.bench.load --baseline 2e9867d --scale 20",
    "```bash\ngit checkout 036aa75\n```",
    "a digest of the doc's text; 1,100 cases, 10000 hits, deadbeef",
    "anchor [RESULTS.md](RESULTS.md#proxy) and p50 ms, p95 ms",
    "the index's own settings stay; issued one search",
])
def test_product_text_passes(line: str) -> None:
    assert internal_notes(line) == []


def test_the_sidecar_guide_is_within_its_limit() -> None:
    assert len((DOCS / "sidecar.md").read_text().splitlines()) <= GUIDE_LINES


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub writes it."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text())
    return {_slug(heading) for heading in re.findall(r"^#+ (.*)$", text, flags=re.M)}


def broken_links(page: Path) -> list[str]:
    """The relative links of `page` whose file or heading is not there."""
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", _FENCE.sub("", page.read_text())):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists() or (anchor and dest.suffix == ".md"
                                 and anchor not in _anchors(dest)):
            broken.append(target)
    return broken


@pytest.mark.parametrize("page", pages(), ids=_name)
def test_every_link_reaches_its_page_and_heading(page: Path) -> None:
    assert broken_links(page) == []


def test_a_moved_heading_is_a_broken_link(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\n## Sizing\n")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md#sizing) [gone](a.md#operating-it) [none](c.md) "
                    "[web](https://example.com/x#y)\n")
    assert broken_links(page) == ["a.md#operating-it", "c.md"]


def test_docs_named_by_the_code_are_there() -> None:
    """A `docs/...md#anchor` in the code, the Makefile or pyproject.toml (help text, a
    comment a reader follows) names a page and heading that exist."""
    sources = [*sorted((REPO / "es_tour").rglob("*.py")), REPO / "Makefile",
               REPO / "pyproject.toml"]
    missing = []
    for source in sources:
        for path, anchor in re.findall(r"\b(docs/[\w/.-]+\.md)(?:#([\w-]+))?",
                                       source.read_text()):
            page = REPO / path
            if not page.exists() or (anchor and anchor not in _anchors(page)):
                missing.append(f"{source.relative_to(REPO)}: {path}#{anchor}")
    assert missing == []
