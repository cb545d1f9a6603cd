"""Reading the query DSL of a search: the text to refine, and the constraints every round keeps.

The scoring clauses of a `bool` (`must`, `should`) that search a text field give the text;
`filter`, `must_not`, `post_filter` and required clauses on other fields (a `term` on a
keyword, a `match` on `topic`) become filters that every engine call of every round
applies. The BM25 leg runs the request's query as written (its fields, boosts, operator,
phrases and query-string syntax); the embedding and the labeler get its free text. Scoring
options of text clauses (`operator: and`, `minimum_should_match`) are relevance, not
constraints, as in the engines' own hybrid queries: the kNN leg does not apply them. What
no filter can honour (a scoring `function_score`, an optional clause on a non-text field,
a query-string group that cannot be told apart) raises Passthrough.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from reprlib import repr as shown
from typing import Any

from es_tour.errors import ConfigError
from es_tour.server._passthrough import Passthrough, Reason

TEXT_CLAUSES = ("match", "match_phrase", "multi_match", "combined_fields", "query_string",
                "simple_query_string")
SYNTAX_CLAUSES = ("query_string", "simple_query_string")  # the engine parses their syntax
# Leaf clauses that only select docs: required, they are filters as they stand.
SELECTING_CLAUSES = frozenset({"term", "terms", "terms_set", "range", "exists", "prefix",
                               "wildcard", "regexp", "fuzzy", "ids", "geo_distance",
                               "geo_bounding_box", "geo_shape", "geo_polygon", "constant_score",
                               "match_bool_prefix", "match_phrase_prefix"})
BOOL_KEYS = frozenset({"must", "should", "filter", "must_not", "minimum_should_match", "boost",
                       "_name", "adjust_pure_negative"})
# options of the text clauses that change how BM25 scores or matches, not what the text is
_TEXT_OPTIONS = frozenset({
    "query", "fields", "type", "operator", "boost", "analyzer", "minimum_should_match",
    "fuzziness", "prefix_length", "max_expansions", "fuzzy_transpositions", "lenient",
    "zero_terms_query", "auto_generate_synonyms_phrase_query", "slop", "tie_breaker", "_name",
    "default_field", "default_operator", "flags", "analyze_wildcard", "quote_field_suffix",
    "phrase_slop", "fuzzy_max_expansions", "fuzzy_prefix_length", "rewrite", "fuzzy_rewrite",
    "allow_leading_wildcard", "enable_position_increments", "quote_analyzer",
    "max_determinized_states", "time_zone", "escape", "cutoff_frequency",
})
MULTI_MATCH_TYPES = ("best_fields", "most_fields", "cross_fields", "phrase", "phrase_prefix",
                     "bool_prefix")

# query_string tokens: an optional +/- sign, an optional `field:`, then a quoted phrase, a
# bracketed range, a group of values in parentheses, or a bare word; `(`, `)` and the
# operators stand alone
_TOKEN = re.compile(r'\s*([+-]?)(?:([\w.*]+):)?'
                    r'("(?:[^"\\]|\\.)*"|[\[{][^\]}]*[\]}]|\([^()]*\)|[^\s()"]+|[()])')
_OPERATORS = frozenset({"AND", "OR", "NOT", "&&", "||", "!"})
_SYNTAX_CHARS = re.compile(r"[~^]\S*|[*?\\/]")


@dataclass
class QueryParts:
    """A query taken apart: texts for the embedding, and the filters every leg keeps."""

    texts: list[str] = field(default_factory=list)
    filters: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str | None:
        joined = " ".join(t for t in self.texts if t.strip())
        return joined or (None if not self.texts else "")


def query_parts(query: Any, text_fields: Sequence[str] | None) -> QueryParts:
    """`query` taken apart. `text_fields` None takes every field for a text field."""
    parts = QueryParts()
    _clause(query, "must", parts, text_fields)
    return parts


def _clause(clause: Any, occur: str, parts: QueryParts, fields: Sequence[str] | None) -> None:
    """One clause found in `occur` (must or should) of the query."""
    if not isinstance(clause, Mapping) or len(clause) != 1:
        raise ConfigError("a query clause must be an object with exactly one clause, got "
                          f"{shown(clause)}")
    ((kind, body),) = clause.items()
    if kind == "bool":
        _bool(body, occur, parts, fields)
    elif kind == "match_all":
        pass  # selects every doc and scores them alike
    elif kind == "dis_max":
        _dis_max(body, occur, parts, fields)
    elif kind in TEXT_CLAUSES:
        _text_clause(kind, body, occur, parts, fields)
    elif kind in SELECTING_CLAUSES:
        _required(dict(clause), occur, parts, f"[{kind}]")
    else:
        raise Passthrough(Reason.QUERY, kind=kind)


def _bool(body: Any, occur: str, parts: QueryParts, fields: Sequence[str] | None) -> None:
    if not isinstance(body, Mapping):
        raise ConfigError(f"bool must be an object, got {shown(body)}")
    unknown = set(body) - BOOL_KEYS
    if unknown:
        raise ConfigError(f"bool does not take {sorted(unknown)}")
    constraints = [*_clauses(body, "filter"),
                   *({"bool": {"must_not": [c]}} for c in _clauses(body, "must_not"))]
    if constraints:
        _required_all(constraints, occur, parts, "a bool's filter or must_not")
    must, should = _clauses(body, "must"), _clauses(body, "should")
    for inner in must:
        _clause(inner, occur, parts, fields)
    # with no must and no filter a bool's should clauses select docs; otherwise they score
    for inner in should:
        _clause(inner, occur if not must and not constraints and len(should) == 1
                else "should", parts, fields)


def _dis_max(body: Any, occur: str, parts: QueryParts, fields: Sequence[str] | None) -> None:
    """A dis_max selects the docs any of its queries selects: each one alone is as required
    as the dis_max, several only score."""
    if not isinstance(body, Mapping) or not isinstance(body.get("queries"), list) \
            or not body["queries"]:
        raise ConfigError(f"dis_max needs a non-empty list of queries, got {shown(body)}")
    unknown = set(body) - {"queries", "tie_breaker", "boost", "_name"}
    if unknown:
        raise ConfigError(f"dis_max does not take {sorted(unknown)}")
    queries = body["queries"]
    for inner in queries:
        _clause(inner, occur if len(queries) == 1 else "should", parts, fields)


def _clauses(body: Mapping[str, Any], occur: str) -> list[Any]:
    value = body.get(occur, [])
    return list(value) if isinstance(value, list) else [value]


def _required(clause: dict[str, Any], occur: str, parts: QueryParts, what: str) -> None:
    _required_all([clause], occur, parts, what)


def _required_all(clauses: list[dict[str, Any]], occur: str, parts: QueryParts,
                  what: str) -> None:
    """Clauses that select docs: filters when required; an optional one only scores, which
    no filter can honour."""
    if occur != "must":
        raise Passthrough(Reason.OPTIONAL_CLAUSE, what=what)
    parts.filters.extend(clauses)


def _text_clause(kind: str, body: Any, occur: str, parts: QueryParts,
                 fields: Sequence[str] | None) -> None:
    named, spec = _clause_fields(kind, body)
    unknown = set(spec) - _TEXT_OPTIONS
    if unknown:
        raise Passthrough(Reason.OPTION, clause=kind, options=sorted(unknown))
    text = spec.get("query")
    if not isinstance(text, str):
        raise ConfigError(f"{kind} needs a string `query`, got {shown(text)}")
    _check_values(kind, spec)
    if named is not None and fields is not None and not _any_text_field(named, fields):
        _required({kind: body}, occur, parts, f"[{kind}] on {named}")
        return
    if kind in SYNTAX_CLAUSES:
        text = _free_text(kind, spec, occur, parts, fields)
    parts.texts.append(text)


def _clause_fields(kind: str, body: Any) -> tuple[list[str] | None, Mapping[str, Any]]:
    """(the fields the clause names, None for the index's default; its options)."""
    if not isinstance(body, Mapping):
        raise ConfigError(f"{kind} must be an object, got {shown(body)}")
    if kind in ("match", "match_phrase"):
        names = [key for key in body if key not in ("boost", "_name")]
        if len(names) != 1:
            raise Passthrough(Reason.FIELDS, kind=kind)
        value = body[names[0]]
        spec = dict(value) if isinstance(value, Mapping) else {"query": value}
        if not isinstance(spec.get("query"), str):
            raise ConfigError(f"{kind} query text must be a string, got {shown(spec.get('query'))}")
        return names, spec
    if kind in SYNTAX_CLAUSES:
        named = body.get("fields", [body["default_field"]] if "default_field" in body else None)
        return named, body
    return body.get("fields"), body


def _any_text_field(named: Any, fields: Sequence[str]) -> bool:
    if not isinstance(named, list) or not all(isinstance(n, str) for n in named):
        raise ConfigError(f"fields must be a list of field names, got {shown(named)}")
    bare = [n.split("^", 1)[0] for n in named]
    return any(fnmatchcase(text, pattern) for pattern in bare for text in fields)


def _check_values(kind: str, spec: Mapping[str, Any]) -> None:
    """The values the engine would refuse, refused as it does."""
    operator = spec.get("operator", spec.get("default_operator", "or"))
    boost = spec.get("boost", 1.0)
    if not isinstance(operator, str) or operator.lower() not in ("and", "or"):
        raise ConfigError(f"{kind} operator must be [and] or [or], got {shown(operator)}")
    if not isinstance(boost, (int, float)) or isinstance(boost, bool) or boost < 0:
        raise ConfigError(f"{kind} boost must be a number >= 0, got {shown(boost)}")
    if kind == "multi_match" and spec.get("type", "best_fields") not in MULTI_MATCH_TYPES:
        raise ConfigError(f"multi_match type must be one of {list(MULTI_MATCH_TYPES)}, "
                          f"got {shown(spec['type'])}")


def _free_text(kind: str, spec: Mapping[str, Any], occur: str, parts: QueryParts,
               fields: Sequence[str] | None) -> str:
    """The words of a query string for the embedding, its syntax dropped. A term on a field
    that is not text is a filter when required (`+year:2019`, `-topic:x`, or under
    default_operator AND) and passes the search through when optional (it only scores)."""
    query = str(spec["query"])
    required = str(spec.get("default_operator", "or")).lower() == "and"
    words: list[str] = []
    previous = ""
    for match in _TOKEN.finditer(query):
        sign, name, value = match.groups()
        if name is not None and value in ("(", ")"):
            raise Passthrough(Reason.NESTED_GROUP, name=name)
        if value in _OPERATORS or value in ("(", ")"):
            previous = value
            continue
        if name is not None and fields is not None and not any(
                fnmatchcase(text, name) for text in fields):
            # the group's own operator as the request meant it: `year:(2010 2011)` under AND
            term = {kind: {"query": f"{name}:{value}",
                           **{key: spec[key] for key in ("default_operator",) if key in spec}}}
            negated = sign == "-" or previous in ("NOT", "!")
            if negated:
                _required({"bool": {"must_not": [term]}}, occur, parts, f"[{name}:{value}]")
            elif sign == "+" or previous in ("AND", "&&") or required:
                _required(term, occur, parts, f"[{name}:{value}]")
            else:
                raise Passthrough(Reason.OPTIONAL_TERM, name=name, value=value)
        elif sign != "-" and previous not in ("NOT", "!"):
            words.extend(word for word in _SYNTAX_CHARS.sub(" ", value.strip('"()')).split()
                         if word not in _OPERATORS)
        previous = value
    return " ".join(" ".join(words).split())
