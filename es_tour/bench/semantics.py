"""docs/benchmarks/semantics.md and docs/sidecar.md's table of what is refined, from the
verdicts of integration_tests/test_sidecar_semantics.py (`make bench-semantics`).

Each request shape gets one verdict per engine: refined with the engine's meaning kept
(and the property checked), or passed through with the answer identical to the engine's
(and the reason the sidecar gave).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from es_tour.bench._machine import machine

REFINED, PASSED = "refined, semantics kept", "passed through, identical to the engine"
SIDECAR_DOC = Path(__file__).parents[2] / "docs" / "sidecar.md"
TABLE_START = "<!-- refined table: make bench-semantics -->"
TABLE_END = "<!-- end of refined table -->"
_NAMES = {"opensearch": "OpenSearch", "elasticsearch": "Elasticsearch"}


@dataclass(frozen=True)
class Verdict:
    """What the sidecar did with one shape on one engine."""

    shape: str
    engine: str
    verdict: str
    kept: str = ""  # the property checked, when refined
    reason: str = ""  # the X-Es-Tour-Passthrough reason, when passed through


def refined_table(verdicts: Sequence[Verdict], engines: Sequence[str]) -> str:
    """Markdown: per shape, refined or passed through on each engine, and why."""
    shapes = list(dict.fromkeys(v.shape for v in verdicts))
    found = {(v.shape, v.engine): v for v in verdicts}
    lines = [f"| request shape | {' | '.join(_NAMES[e] for e in engines)} | kept, or why not |",
             f"|---|{'---|' * len(engines)}---|"]
    for shape in shapes:
        cells, notes = [], []
        for engine in engines:
            verdict = found.get((shape, engine))
            cells.append("—" if verdict is None else
                         "refined" if verdict.verdict == REFINED else "passed through")
            if verdict is not None:
                note = verdict.kept if verdict.verdict == REFINED else verdict.reason
                notes.append(note)
        note = "; ".join(dict.fromkeys(n for n in notes if n))
        lines.append(f"| {shape} | {' | '.join(cells)} | {_cell(note)} |")
    return "\n".join(lines)


def parse_table(text: str) -> list[tuple[str, ...]]:
    """The rows of the table between the markers of `text` (docs/sidecar.md), as cells."""
    start, end = text.index(TABLE_START), text.index(TABLE_END)
    rows = [line for line in text[start + len(TABLE_START): end].strip().splitlines()
            if line.startswith("|")][2:]
    return [tuple(cell.strip() for cell in row.strip("|").split(" | ")) for row in rows]


def page_rows(text: str) -> list[tuple[str, ...]]:
    """The rows of the verdict table of docs/benchmarks/semantics.md, as cells."""
    table = text[text.index("| request shape"):].split("\n\n", 1)[0]
    return [tuple(cell.strip() for cell in row.strip("|").split(" | "))
            for row in table.splitlines()[2:]]


def write_pages(verdicts: Sequence[Verdict], page: Path, engines: Sequence[str],
                sidecar_doc: Path = SIDECAR_DOC) -> None:
    """Write the semantics page, and the same table into docs/sidecar.md."""
    table = refined_table(verdicts, engines)
    refined = {e: sum(v.engine == e and v.verdict == REFINED for v in verdicts) for e in engines}
    shapes = len({v.shape for v in verdicts})
    counts = ", ".join(f"{_NAMES[e]} {refined[e]}" for e in engines)
    page.write_text(
        "# Semantics: every answer means what the engine's would\n\n"
        "Written by `make bench-semantics` (integration_tests/test_sidecar_semantics.py), "
        f"on {machine()}. Each of {shapes} request shapes was sent to the engine and to "
        "the sidecar with the recommended settings on (es_tour/recommended.py) and judged:\n\n"
        f"- **{REFINED}**: refined (ext.tour), with the engine's hits.total, aggregations, "
        "page length and hit fields, the engine's own fetch of each doc both answers show, "
        "and the property named;\n"
        f"- **{PASSED}**: the sidecar says why in `X-Es-Tour-Passthrough`, and answers what "
        "the engine answers.\n\n"
        f"Refined shapes: {counts}. A shape that lost its meaning fails the suite, so "
        "this page lists none.\n\n" + table + "\n\n"
        "— : the test node of that engine cannot run the shape at all (Elasticsearch's "
        "integ-test zip has no painless).\n")
    text = sidecar_doc.read_text()
    start, end = text.index(TABLE_START), text.index(TABLE_END)
    sidecar_doc.write_text(f"{text[:start]}{TABLE_START}\n{table}\n{text[end:]}")


def _cell(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("|", "\\|")).strip()
