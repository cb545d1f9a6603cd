"""docs/sidecar.md's table of pass-through reasons is the code's one table (`Reason`): a
reason added to either without the other fails here."""

from __future__ import annotations

import re
from string import Formatter

from es_tour.bench.semantics import SIDECAR_DOC, parse_table
from es_tour.server._passthrough import Reason

TABLE_START = "<!-- pass-through reasons: es_tour/server/_passthrough.py -->"
TABLE_END = "<!-- end of pass-through reasons -->"
_QUOTED = re.compile(r"`([^`]+)`")


def pattern(reason: Reason) -> re.Pattern[str]:
    """What a message of `reason` looks like: its template, any value in each field."""
    parts = []
    for literal, field, _, _ in Formatter().parse(reason.value):
        parts.append(re.escape(literal))
        if field is not None:
            parts.append(".+")
    return re.compile("".join(parts))


def matching(message: str) -> list[Reason]:
    """The reasons whose template `message` fills in: one, for a message of the code's."""
    return [reason for reason in Reason if pattern(reason).fullmatch(message)]


def documented() -> list[str]:
    """The reasons of docs/sidecar.md's table, as written: each row's first cell holds only
    quoted reasons, separated by commas."""
    text = SIDECAR_DOC.read_text()
    table = text[text.index(TABLE_START) + len(TABLE_START): text.index(TABLE_END)]
    rows = [line for line in table.strip().splitlines() if line.startswith("|")][2:]
    messages = []
    for row in rows:
        first = row.strip("|").split(" | ")[0].strip()
        quoted = _QUOTED.findall(first)
        assert quoted and first == ", ".join(f"`{message}`" for message in quoted), row
        messages += quoted
    return messages


def test_every_reason_is_documented_and_every_documented_reason_is_one() -> None:
    covered = set()
    for message in documented():
        found = matching(message)
        assert len(found) == 1, f"docs/sidecar.md's [{message}] is {len(found)} Reasons' message"
        covered.update(found)
    missing = [reason.name for reason in Reason if reason not in covered]
    assert not missing, f"docs/sidecar.md's table leaves out {missing}"


def test_each_reasons_message_is_read_as_that_reason_alone() -> None:
    for reason in Reason:
        assert matching(Formatter().vformat(reason.value, (), _Example())) == [reason]


def test_the_semantics_suites_pass_through_reasons_are_in_the_table() -> None:
    # a row's last cell: each engine's reason, joined by "; " where they differ
    passed = [message for row in parse_table(SIDECAR_DOC.read_text())
              if "passed through" in row for message in row[-1].split("; ")]
    assert passed
    for message in passed:
        assert len(matching(message)) == 1, message


class _Example(dict[str, str]):
    """Any field filled with a placeholder value."""

    def __missing__(self, key: str) -> str:
        return f"<{key}>"
