"""The query refinement grammar: q_{t+1} = q_t Δq, parsed, compiled to `bool`, rendered.

A query is the original text q0 plus refinements, each one of

    term        should   (adds evidence, as one more optional clause)
    +term       must     (every hit must contain it)
    -term       must_not (no hit may contain it)
    term^w      should, boosted by w in WEIGHTS

Rendered as Lucene query_string text: `(q0) term +term -term term^4`, with Lucene's special
characters escaped by a backslash. Compiled to one `bool` query whose clauses are named
("q0", "dq1", "dq2", …) so the compiled form can be read back in order. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from es_tour.errors import ConfigError

Operator = Literal["should", "must", "must_not"]
OPERATORS: tuple[Operator, ...] = ("should", "must", "must_not")
# Boosts a step apart on a log2 scale: 0.5 damps a term, 2/4/8 pull progressively harder.
WEIGHTS: tuple[float, ...] = (0.5, 2.0, 4.0, 8.0)
# What the trace and the operator distribution call each kind of Δq.
KINDS: tuple[str, ...] = ("term", "+", "-", "^0.5", "^2", "^4", "^8")

_SPECIAL = set('+-=&|><!(){}[]^"~*?:\\/')
_PREFIX: dict[Operator, str] = {"should": "", "must": "+", "must_not": "-"}
_BASE_NAME = "q0"


class GrammarError(ConfigError):
    """Text or a structure that the refinement grammar does not describe."""


@dataclass(frozen=True)
class Refinement:
    """One Δq: a single analysed term with its operator and (for should) its boost."""

    term: str
    operator: Operator = "should"
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not self.term or any(ch.isspace() for ch in self.term):
            raise GrammarError(f"a refinement term is one non-empty token, got {self.term!r}")
        if self.operator not in OPERATORS:
            raise GrammarError(f"operator must be one of {list(OPERATORS)}, got {self.operator!r}")
        if self.weight != 1.0 and (self.operator != "should" or self.weight not in WEIGHTS):
            raise GrammarError(
                f"a boost is only for should terms and must be one of {list(WEIGHTS)}, "
                f"got {self.operator} {self.term!r}^{self.weight!r}"
            )

    @property
    def kind(self) -> str:
        """"term", "+", "-" or "^w": the operator as the trace names it."""
        if self.weight != 1.0:
            return f"^{_number(self.weight)}"
        return {"should": "term", "must": "+", "must_not": "-"}[self.operator]

    def render(self) -> str:
        text = _PREFIX[self.operator] + _escape(self.term, spaces=True)
        return text if self.weight == 1.0 else f"{text}^{_number(self.weight)}"


@dataclass(frozen=True)
class Query:
    """The original query text and the refinements applied to it, in order."""

    text: str
    refinements: tuple[Refinement, ...] = ()

    def refine(self, delta: Refinement) -> Query:
        """q Δq: the new refinement replaces any earlier one on the same term."""
        kept = tuple(r for r in self.refinements if r.term != delta.term)
        return replace(self, refinements=(*kept, delta))

    @property
    def terms(self) -> frozenset[str]:
        return frozenset(r.term for r in self.refinements)


def render(query: Query) -> str:
    """Lucene query_string text: `(q0) dq1 dq2 …`."""
    return " ".join([f"({_escape(query.text, spaces=False)})",
                     *(r.render() for r in query.refinements)])


def parse(text: str) -> Query:
    """Lucene-ish text -> Query.

    `(q0) dq…` is what `render` writes. Without a leading group, plain words form q0 and
    tokens with a `+`/`-` prefix or a `^w` suffix are refinements.
    """
    stripped = text.lstrip()
    if stripped.startswith("("):
        end = _closing(stripped)
        base, rest = _unescape(stripped[1:end]), stripped[end + 1:]
        return Query(base, tuple(_refinement(token) for token in _tokens(rest)))
    words, refinements = [], []
    for token in _tokens(stripped):
        if token[0] in "+-" or _boost_at(token) is not None:
            refinements.append(_refinement(token))
        else:
            words.append(_unescape(token))
    return Query(" ".join(words), tuple(refinements))


def compile_bool(query: Query, fields: Sequence[str],
                 base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The engine's `bool` query: q0 as a should multi_match, each Δq as a named clause.
    `base`, a request's own query, stands for q0 as written (its fields, boosts, operator,
    syntax); the Δq go around it, and with none it is the query as sent (a lone `should`
    scores and matches as its clause does)."""
    if base is not None and not query.refinements:
        return dict(base)
    clauses: dict[str, list[dict[str, Any]]] = {"should": [], "must": [], "must_not": []}
    clauses["should"].append(dict(base) if base is not None
                             else _match(query.text, fields, _BASE_NAME, 1.0))
    for number, refinement in enumerate(query.refinements, start=1):
        clauses[refinement.operator].append(
            _match(refinement.term, fields, f"dq{number}", refinement.weight))
    return {"bool": {name: found for name, found in clauses.items() if found}}


def from_bool(compiled: Mapping[str, Any]) -> Query:
    """The inverse of `compile_bool`: read the named clauses back in order."""
    try:
        body = compiled["bool"]
        named: dict[str, tuple[Operator, Mapping[str, Any]]] = {}
        for operator in OPERATORS:
            for clause in body.get(operator, []):
                match = clause["multi_match"]
                named[match["_name"]] = (operator, match)
        _, base = named.pop(_BASE_NAME)
        refinements = []
        for number in range(1, len(named) + 1):
            operator, match = named.pop(f"dq{number}")
            refinements.append(Refinement(match["query"], operator, float(match.get("boost", 1.0))))
    except (KeyError, TypeError) as missing:
        raise GrammarError(f"not a compiled refinement query: missing {missing}") from missing
    if named:
        raise GrammarError(f"unexpected clauses {sorted(named)} in a compiled query")
    return Query(base["query"], tuple(refinements))


def _match(text: str, fields: Sequence[str], name: str, weight: float) -> dict[str, Any]:
    match: dict[str, Any] = {"query": text, "fields": list(fields), "type": "most_fields",
                             "_name": name}
    if weight != 1.0:
        match["boost"] = weight
    return {"multi_match": match}


def _refinement(token: str) -> Refinement:
    operator: Operator = "should"
    if token[0] == "+":
        operator, token = "must", token[1:]
    elif token[0] == "-":
        operator, token = "must_not", token[1:]
    weight = 1.0
    boost_at = _boost_at(token)
    if boost_at is not None:
        number = token[boost_at + 1:]
        try:
            weight = float(number)
        except ValueError:
            raise GrammarError(f"boost must be one of {list(WEIGHTS)}, got {number!r}") from None
        token = token[:boost_at]
        if weight == 1.0:
            raise GrammarError(f"boost must be one of {list(WEIGHTS)}, got {number!r}")
    if not token:
        raise GrammarError("an operator without a term")
    return Refinement(_unescape(token), operator, weight)


def _boost_at(token: str) -> int | None:
    """Index of the unescaped `^` that starts a boost suffix, if any."""
    found, i = None, 0
    while i < len(token):
        if token[i] == "\\":
            i += 2
            continue
        if token[i] == "^":
            found = i
        i += 1
    return found


def _tokens(text: str) -> list[str]:
    """Split on unescaped whitespace."""
    tokens, current, i = [], "", 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            current += text[i: i + 2]
            i += 2
            continue
        if ch.isspace():
            if current:
                tokens.append(current)
            current = ""
        else:
            current += ch
        i += 1
    if current:
        tokens.append(current)
    return tokens


def _closing(text: str) -> int:
    """Index of the `)` closing the group that `text` opens."""
    i = 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == ")":
            return i
        i += 1
    raise GrammarError(f"unclosed group in {text!r}")


def _escape(text: str, *, spaces: bool) -> str:
    return "".join("\\" + ch if ch in _SPECIAL or (spaces and ch.isspace()) else ch
                   for ch in text)


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _number(weight: float) -> str:
    return f"{weight:g}"
