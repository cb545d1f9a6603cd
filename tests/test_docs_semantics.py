"""docs/sidecar.md's table of what is refined is the last `make bench-semantics` run's."""

from __future__ import annotations

from pathlib import Path

from es_tour.bench.semantics import (
    PASSED,
    REFINED,
    SIDECAR_DOC,
    Verdict,
    page_rows,
    parse_table,
    refined_table,
    write_pages,
)

PAGE = Path(__file__).parents[1] / "docs" / "benchmarks" / "semantics.md"


def test_the_sidecar_docs_table_is_the_semantics_pages() -> None:
    rows = parse_table(SIDECAR_DOC.read_text())
    assert len(rows) >= 45
    assert rows == page_rows(PAGE.read_text())


def test_the_pages_are_written_from_the_verdicts(tmp_path: Path) -> None:
    verdicts = [Verdict("post_filter", "opensearch", REFINED, "every hit has topic biology"),
                Verdict("post_filter", "elasticsearch", REFINED, "every hit has topic biology"),
                Verdict("collapse", "opensearch", PASSED, reason="collapse | groups"),
                Verdict("collapse", "elasticsearch", PASSED, reason="collapse | groups")]
    doc = tmp_path / "sidecar.md"
    doc.write_text("before\n<!-- refined table: make bench-semantics -->\nold\n"
                   "<!-- end of refined table -->\nafter\n")
    write_pages(verdicts, tmp_path / "semantics.md", ("opensearch", "elasticsearch"), doc)
    expected = [("post_filter", "refined", "refined", "every hit has topic biology"),
                ("collapse", "passed through", "passed through", "collapse \\| groups")]
    assert parse_table(doc.read_text()) == expected
    assert page_rows((tmp_path / "semantics.md").read_text()) == expected
    assert doc.read_text().startswith("before\n") and doc.read_text().endswith("after\n")
    assert "old" not in doc.read_text()
    assert refined_table(verdicts, ("opensearch",)).count("\n") == 3
