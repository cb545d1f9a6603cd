"""Why a search passes through to the engine untouched: the one table of reasons.

Each reason has a stable name and the message sent in `X-Es-Tour-Passthrough` (and the
pass-through log); `{field}`s in it are filled with what the request holds (a key, a
clause, a value). docs/sidecar.md lists every one (`tests/test_docs_passthrough.py` holds
the two to each other), and the metrics count them by the message's part before its first
`[`, so what a request fills in goes in brackets after a fixed prefix where it can.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

MAX_HEADER = 200  # characters of a pass-through reason sent back


class Reason(Enum):
    """A reason a search passes through: its name, and its message's template."""

    # the index's (or the engine's) own say
    NOT_ENABLED = "index.tour.enabled is not true"
    PAST_RESULT_WINDOW = ("from + size is past index.max_result_window [{limit}]: the "
                          "engine's own answer")
    # what the request searches, and how it pages
    MULTI_INDEX = "multi-index"
    SCROLL = "scroll"
    PARAMETER = "unsupported parameter [{key}]"
    BODY_KEY = "unsupported body key [{key}]"
    EXT = "unsupported ext {keys}"
    SIZE_0 = "size 0"
    SORT = "sort by a field"
    # body keys that mean something only in the engine's own order
    COLLAPSE = "collapse groups hits by the engine's order"
    RESCORE = "rescore reorders the engine's top hits"
    SEARCH_AFTER = "search_after pages by the engine's sort values"
    PIT = "a point in time pages by the engine's sort values"
    SUGGEST = "suggest answers from the engine alone"
    PROFILE = "profile describes the engine's own execution"
    MIN_SCORE = "min_score cuts on the engine's score"
    TERMINATE_AFTER = "terminate_after stops the engine's collection early"
    INDICES_BOOST = "indices_boost weighs several indices"
    ROUTING = "routing searches some of the index's shards, and the rounds search all"
    # the query: no text to refine, or scores no refinement keeps
    NO_TEXT = "no query text"
    EMPTY_TEXT = "empty query text"
    QUERY = "unsupported query [{kind}]"
    OPTION = "unsupported {clause} option {options}"
    FIELDS = "{kind} on more than one field"
    OPTIONAL_CLAUSE = "optional clause {what} on a non-text field"
    OPTIONAL_TERM = ("optional query string term [{name}:{value}] on a non-text field "
                     "(+{name}:... filters)")
    NESTED_GROUP = "query string group on [{name}] nested past one level"
    # vectors
    KNN_CLAUSES = "multiple knn clauses"
    KNN_WITHOUT_VECTOR = "knn without query_vector"
    KNN_QUERY_WITHOUT_VECTOR = "knn query without vector"
    # search templates (`_template`)
    TEMPLATE_OPTION = "template option [{option}]"
    MAY_NOT_RENDER = "the caller may not render templates"
    NO_TEMPLATES = "the engine serves no search templates"


class Passthrough(Exception):
    """The request is not one the sidecar serves, for `why`; `reason`, its message filled
    in with `fields`, goes in X-Es-Tour-Passthrough."""

    def __init__(self, why: Reason, **fields: Any):
        self.why = why
        self.reason = why.value.format(**fields)
        super().__init__(self.reason)

    def header(self) -> str:
        """The reason as a header value: printable ASCII (a body key may hold CR, LF or any
        character), and short."""
        text = json.dumps(self.reason, ensure_ascii=True)[1:-1]
        return text if len(text) <= MAX_HEADER else text[: MAX_HEADER - 3] + "..."
