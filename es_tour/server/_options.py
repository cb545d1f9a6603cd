"""Which method runs with which options: request `ext.tour` > `index.tour.*` > server defaults.

The plugin's settings are named for users (`lambda`, `temperature`, `threshold`,
`bm25_weight`); the method option classes use the papers' names (`lam`, `tau`, `p`,
`w_bm25`). One table maps them; ext.tour and method strings take either name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import es_tour.agents  # noqa: F401  (registers the agent methods)
from es_tour.engines import VectorField
from es_tour.errors import ConfigError
from es_tour.models import is_ensemble, parse_ensemble
from es_tour.pipeline import (
    BUDGET_OPTIONS,
    FUSION_NAMES,
    METHODS,
    SearchContext,
    SearchMethod,
    build_method,
)

SETTINGS_PREFIX = "index.tour."
# the first hits es-tour orders when neither a request nor its index says: ten pages of ten
DEFAULT_WINDOW = 100

# setting name -> option name, per method; a setting a method does not take is ignored
# when it comes from the index, and rejected when the request names it.
# TOUR's scale, standardize, explore, memory and stop come only from the request.
_TOUR = {"k": "k", "max_rounds": "max_rounds", "lr": "lr", "lambda": "lam",
         "temperature": "tau", "threshold": "p"}
_SETTING_NAMES: dict[str, dict[str, str]] = {
    "tour-hard": _TOUR,
    "tour-soft": _TOUR,
    "rocchio": {"k": "k", "lambda": "lam"},
    "hre": {"k": "k"},
    "rm3-agent": {"k": "k", "max_rounds": "max_rounds"},
    "learned-agent": {"k": "k", "max_rounds": "max_rounds", "threshold": "threshold"},
    "rerank-hybrid": {"k": "k"},  # k: the labeler's budget, pairs per query
    # k: new docs a round; TOUR's step options from the request
    "hybrid-tour": {"k": "k", "max_rounds": "max_rounds", "pool": "pool", "lexical": "lexical",
                    "lexical_weight": "lexical_weight"},
    "tour-agent": {"k": "k", "max_rounds": "max_rounds"},  # its loss (`variant`) from the request
    "vector-rerank": {"k": "k"},  # its μ comes only from the request (`mu`)
    # k: the window labelled, so the budget
    "rerank": {"k": "k", "first_stage": "first_stage", "lexical_weight": "lexical_weight"},
    "hybrid-linear": {"k": "k", "lexical_weight": "lexical_weight"},
    # k: the kNN top docs labelled as feedback; a, b, c and pairs from the request
    "relevance-feedback": {"k": "k"},
}
# the labeler's pairs per query, for every method with a `budget` option; the rerankers'
# budget is their window, set by `k`
_BUDGET = {"budget": "budget"}
_FIRST_STAGE = {"k": "k"}  # bm25, knn, hybrid-rrf: selectable per request only

# ext.tour keys that choose the context, not the method's options (`window`: how many of
# the first hits es-tour orders)
CONTEXT_KEYS = ("method", "labeler", "encoder", "vector_field", "text_fields", "window")
# the models a search runs with: a registry name, or a model directory on the sidecar's
# host, which only the index's settings and the server's own options may name
MODEL_KEYS = ("labeler", "encoder")

_INT_SETTINGS = ("k", "max_rounds", "budget", "window")
_FLOAT_SETTINGS = ("lr", "lambda", "temperature", "threshold", "lexical_weight", "bm25_weight",
                   "dense_weight")


def setting_names(method: str) -> dict[str, str]:
    """setting name -> option name for `method`: its own, and the budget's and fusion's if
    it labels."""
    names = _SETTING_NAMES.get(method, _FIRST_STAGE)
    if method not in BUDGET_OPTIONS:
        return names
    return names | (_BUDGET if BUDGET_OPTIONS[method] == "budget" else {}) | FUSION_NAMES


def settings_for(method: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The flat `index.tour.*` settings that make an index run `method` with `options`
    (`setting_names` read backwards); an option no setting holds is an error, since the
    index would silently run without it."""
    setting_of = {option: setting for setting, option in setting_names(method).items()}
    if unheld := sorted(set(options) - set(setting_of)):
        raise ConfigError(f"{method} option(s) {unheld} have no index.tour.* setting; they "
                          "can only be given per request (ext.tour)")
    return {f"{SETTINGS_PREFIX}enabled": True, f"{SETTINGS_PREFIX}method": check_method(method),
            **{SETTINGS_PREFIX + setting_of[option]: value
               for option, value in options.items()}}


def method_names() -> list[str]:
    return list(METHODS)


def check_method(name: str) -> str:
    if name not in METHODS:
        raise ConfigError(f"unknown tour method [{name}]; choose one of: "
                          f"{', '.join(method_names())}")
    return name


def build(name: str, context: SearchContext, options: Mapping[str, Any], *,
          by_id: bool = True) -> SearchMethod:
    """The method called `name` (a pipeline method or an agent), its options checked now;
    `by_id` as `build_method` takes it."""
    return build_method(check_method(name), context, options, by_id=by_id)


def index_settings(flat: Mapping[str, Any]) -> dict[str, Any]:
    """`index.tour.*` flat settings (strings, as the engine returns them) -> typed values."""
    out: dict[str, Any] = {}
    for key, raw in flat.items():
        if not key.startswith(SETTINGS_PREFIX):
            continue
        name = key[len(SETTINGS_PREFIX):]
        if name == "enabled":
            out[name] = str(raw).lower() == "true"
        elif name in _INT_SETTINGS or name in _FLOAT_SETTINGS:
            out[name] = _number(key, raw, int if name in _INT_SETTINGS else float)
        elif name == "text_fields":
            items = raw if isinstance(raw, list) else str(raw).strip("[]").split(",")
            out[name] = tuple(str(item).strip() for item in items if str(item).strip())
        else:
            out[name] = raw
    return out


def _number(key: str, raw: Any, kind: type) -> Any:
    """An index setting as a number; a value the plugin would not have let through is a 400."""
    try:
        return kind(raw)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"index setting [{key}] is not a valid {kind.__name__}: "
                          f"{str(raw)[:40]!r}") from None


@dataclass(frozen=True)
class Resolved:
    """The method to run, its options, the context it runs in, and where each value came from."""

    method: str
    options: dict[str, Any]
    labeler: str
    encoder: str
    vector_field: str
    text_fields: tuple[str, ...]
    window: int = DEFAULT_WINDOW
    origins: dict[str, str] = field(default_factory=dict)


def check_encoder_fits(found: VectorField, encoder: str, dimension: int, index: str) -> None:
    """A ConfigError (400) naming both dimensions when the query encoder's vectors do not fit
    the index's vector field; an index with no vector yet cannot tell."""
    if found.dimension is not None and found.dimension != dimension:
        raise ConfigError(
            f"encoder [{encoder}] makes {dimension}-d vectors, but the vector field "
            f"[{found.name}] of [{index}] holds {found.dimension}-d vectors: set "
            "index.tour.encoder to the model the index was embedded with")


def resolve(request: Mapping[str, Any], settings: Mapping[str, Any],
            defaults: Mapping[str, Any]) -> Resolved:
    """Merge the three layers. `request` is ext.tour without its request-only keys;
    `settings` is `index_settings(...)`; `defaults` holds method, labeler, encoder,
    vector_field, text_fields and an `options` mapping."""
    origins: dict[str, str] = {}

    def pick(key: str) -> Any:
        for origin, layer in (("request", request), ("index", settings), ("server", defaults)):
            if key in layer and layer[key] is not None:
                origins[key] = origin
                return layer[key]
        return None

    method = check_method(str(pick("method")))
    names = setting_names(method)
    options: dict[str, Any] = {}
    # the server's options are its own method's; another method takes only their depth
    own_method = origins["method"] == "server"
    for key, value in defaults.get("options", {}).items():
        option = names.get(key, key)
        if option in names.values() and (own_method or option == "k"):
            options[option], origins[option] = value, "server"
    for key, value in settings.items():
        if key in names:
            options[names[key]], origins[names[key]] = value, "index"
    for key, value in request.items():
        if key in CONTEXT_KEYS:
            continue
        option = names.get(key, key)  # setting names and option names are both accepted
        if origins.get(option) == "request":
            raise ConfigError(f"ext.tour gives [{option}] twice: as [{key}] and by its "
                              "other name")
        options[option], origins[option] = value, "request"
    text_fields = checked_text_fields(pick("text_fields"))
    labeler, encoder, vector_field = pick("labeler"), pick("encoder"), pick("vector_field")
    for key, value in (("labeler", labeler), ("encoder", encoder), ("vector_field", vector_field)):
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{key} must be a non-empty string, got {value!r}")
        if key in MODEL_KEYS and origins[key] == "request":
            _registry_model(key, value)
    window = pick("window") or DEFAULT_WINDOW
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        raise ConfigError(f"window must be an integer >= 1, got {window!r}")
    return Resolved(method, options, labeler, encoder, vector_field, text_fields, window,
                    origins)


def layered_text_fields(request: Mapping[str, Any], settings: Mapping[str, Any],
                        default: Any) -> tuple[str, ...]:
    """The text fields as `resolve` picks them (request > index > server), before the
    method is known: the query's text is read from these fields' clauses."""
    for layer in (request, settings):
        if layer.get("text_fields") is not None:
            return checked_text_fields(layer["text_fields"])
    return checked_text_fields(default)


def checked_text_fields(value: Any) -> tuple[str, ...]:
    """A name or a non-empty list of names, as a tuple; else a ConfigError (a 400)."""
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, (list, tuple)) or not value or not all(
            isinstance(name, str) and name for name in value):
        raise ConfigError(f"text_fields must be a non-empty list of names, got {value!r}")
    return tuple(value)


def _registry_model(key: str, name: str) -> None:
    """A request may pick registry models only (each member of an ensemble labeler): a path
    would let any caller open files on the sidecar's host."""
    from onnx_models import ALIASES, MODELS

    if key == "labeler" and is_ensemble(name):
        for member in parse_ensemble(name):
            _registry_model(key, member.model)
        return
    if name not in MODELS and name not in ALIASES:
        raise ConfigError(f"ext.tour.{key} [{name}] is not a registry model; choose one of: "
                          f"{', '.join([*MODELS, *ALIASES])} (a model directory goes in "
                          f"index.tour.{key} or the server's --{key})")
