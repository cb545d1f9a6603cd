"""The Java plugin and the Python registries agree on `index.tour.*`.

The plugin validates settings when they are written; Python reads them on every search.
A value the plugin accepts and Python rejects fails every search on that index, so each
bound the plugin declares is tried on the Python options it maps to, and the defaults and
method names must be the same on both sides. The Java sources are read as text, so this
needs no build.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from es_tour.agents import (
    AgentOptions,
    HreOptions,
    HybridTourOptions,
    LearnedOptions,
    TourAgentOptions,
)
from es_tour.agents._hybrid_tour import LEXICAL_POLICIES, POOLS
from es_tour.errors import ConfigError
from es_tour.pipeline._first_stage import (
    FIRST_STAGES,
    LEXICAL_WEIGHT,
    DepthOptions,
    FirstStageOptions,
)
from es_tour.pipeline._relevance_feedback import RelevanceFeedbackOptions
from es_tour.pipeline._rerank import VectorRerankOptions
from es_tour.pipeline._tour_loop import RocchioOptions
from es_tour.pipeline._types import FusionWeights
from es_tour.plugin_settings import (
    by_name,
    choices,
    constant,
    methods,
    model_pattern,
    settings_source,
)
from es_tour.server import ServerConfig
from es_tour.server._config import DEFAULT_WINDOW
from es_tour.server._options import _SETTING_NAMES, resolve, setting_names
from es_tour.tour import TourConfig

SETTINGS = settings_source()
DECLARED = by_name()

# The option class each index-selectable method builds from its settings.
OPTION_CLASSES: dict[str, Any] = {
    "tour-hard": TourConfig, "tour-soft": TourConfig, "rocchio": RocchioOptions,
    "hre": HreOptions, "rm3-agent": AgentOptions, "learned-agent": LearnedOptions,
    "rerank-hybrid": DepthOptions, "vector-rerank": VectorRerankOptions,
    "hybrid-tour": HybridTourOptions, "tour-agent": TourAgentOptions,
    "rerank": FirstStageOptions, "hybrid-linear": FirstStageOptions,
    "relevance-feedback": RelevanceFeedbackOptions,
}
FUSION_SETTINGS = ("bm25_weight", "dense_weight")  # checked by FusionWeights, for any method


def java_constant(name: str) -> float:
    return constant(SETTINGS, name)


def java_bounds(setting: str) -> tuple[float, float]:
    """(min, max) of a numeric setting, from its declaration."""
    declared = DECLARED[setting]
    assert declared.low is not None and declared.high is not None, setting
    return declared.low, declared.high


def java_default(setting: str) -> float:
    default = DECLARED[setting].default
    assert default is not None, setting
    return float(default)


def test_the_plugin_offers_exactly_the_methods_python_maps_settings_for():
    enum = set(methods())
    assert enum == set(_SETTING_NAMES) == set(OPTION_CLASSES)


NUMERIC = ("k", "max_rounds", "budget", "lr", "lambda", "temperature", "threshold",
           "lexical_weight", *FUSION_SETTINGS)


def build_options(method: str, option: str, value: Any) -> Any:
    if option in ("w_bm25", "w_dense"):
        return FusionWeights(**{option: value})
    return OPTION_CLASSES[method].from_mapping({option: value})


@pytest.mark.parametrize("setting", NUMERIC)
def test_every_value_the_plugin_accepts_every_method_taking_it_accepts(setting):
    low, high = java_bounds(setting)
    for method in _SETTING_NAMES:
        names = setting_names(method)
        if setting not in names:
            continue
        for value in (low, high):
            typed = int(value) if setting in ("k", "max_rounds", "budget") else value
            try:
                build_options(method, names[setting], typed)
            except ConfigError as error:
                pytest.fail(f"index.tour.{setting}={typed} passes the plugin, but "
                            f"{method} rejects it: {error}")


@pytest.mark.parametrize("setting", ("k", "max_rounds", "lr", "lambda", "temperature",
                                     "threshold"))
def test_the_plugin_defaults_are_tours_defaults(setting):
    option = _SETTING_NAMES["tour-hard"][setting]
    assert java_default(setting) == pytest.approx(getattr(TourConfig(), option))


def test_the_sidecar_caps_match_the_plugin_maxima():
    caps = ServerConfig(upstream="http://127.0.0.1:9200")
    assert caps.max_k == java_constant("K_MAX")
    assert caps.max_rounds == java_constant("MAX_ROUNDS_MAX")
    assert caps.max_size == java_constant("WINDOW_MAX")


def test_the_plugins_window_default_is_the_sidecars():
    assert java_default("window") == DEFAULT_WINDOW == ServerConfig(
        upstream="http://127.0.0.1:9200").window


def test_the_plugin_defaults_for_first_stages_and_fusion_are_pythons():
    assert java_default("lexical_weight") == LEXICAL_WEIGHT
    for setting in FUSION_SETTINGS:
        assert java_default(setting) == FusionWeights().w_bm25 == FusionWeights().w_dense == 0
    assert java_choices("FIRST_STAGES") == FIRST_STAGES
    assert java_choice_default("first_stage") == FirstStageOptions().first_stage == "knn"


def java_choices(name: str) -> tuple[str, ...]:
    return choices(SETTINGS, name)


def java_choice_default(setting: str) -> str:
    return str(DECLARED[setting].default)


def test_hybrid_tours_pool_and_lexical_settings_offer_pythons_choices_and_defaults():
    assert java_choices("POOLS") == POOLS and java_choices("LEXICAL_POLICIES") == LEXICAL_POLICIES
    defaults = HybridTourOptions()
    assert java_choice_default("pool") == defaults.pool
    assert java_choice_default("lexical") == defaults.lexical
    assert java_default("budget") == defaults.budget
    for pool, lexical in zip(POOLS, LEXICAL_POLICIES, strict=True):
        HybridTourOptions.from_mapping({"pool": pool, "lexical": lexical})


def test_fusion_settings_reach_every_labelling_method_and_nothing_else():
    labelling = {"tour-hard", "tour-soft", "rocchio", "hre", "rm3-agent", "learned-agent",
                 "rerank-hybrid", "hybrid-tour", "tour-agent", "rerank", "relevance-feedback"}
    for method in _SETTING_NAMES:
        assert ("bm25_weight" in setting_names(method)) == (method in labelling), method


def test_declared_defaults_that_differ_from_a_methods_own_are_left_to_the_method():
    """Why the sidecar never applies the plugin's defaults (docs/plugin.md): some differ
    from the method's own, and an index that sets nothing must run the method as it is."""
    differing = []
    for method, option_class in OPTION_CLASSES.items():
        own = option_class()
        for setting, option in setting_names(method).items():
            if setting in ("k", *FUSION_SETTINGS) or not hasattr(own, option):
                continue  # k: the server default (10) wins over both
            if str(DECLARED[setting].default) not in (str(getattr(own, option)),
                                                      f"{getattr(own, option)}.0"):
                differing.append((method, setting))
                server = {"method": method, "labeler": "default", "encoder": "retriever",
                          "vector_field": "embedding",
                          "text_fields": ("title", "text"), "options": {"k": 10}}
                resolved = resolve({}, {}, server)
                assert option not in resolved.options, (method, option)
    assert ("rocchio", "lambda") in differing and ("rm3-agent", "max_rounds") in differing


def test_the_model_and_field_settings_default_to_the_servers_and_take_its_model_names():
    from es_tour.server._options import CONTEXT_KEYS, index_settings
    from onnx_models import ALIASES, MODELS

    config = ServerConfig(upstream="http://x")
    assert f'model("encoder", "{config.encoder}")' in SETTINGS
    assert f'PREFIX + "labeler", "{config.labeler}", TourSettings::requireLabeler' in SETTINGS
    for name in ("labeler", "encoder"):
        assert name in CONTEXT_KEYS
        assert index_settings({f"index.tour.{name}": "models/x"}) == {name: "models/x"}
    assert f'PREFIX + "vector_field", "{config.vector_field}"' in SETTINGS
    pattern = re.compile(model_pattern())
    # every registry name, and the paths `es-tour export` and `train-reranker` write to
    for model in [*MODELS, *ALIASES, "models/my-reranker", "/srv/es-tour/e5-ft_2"]:
        assert pattern.fullmatch(model), model
    assert not pattern.fullmatch("two words")
