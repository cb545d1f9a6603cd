"""Precedence request > index settings > server defaults, and the settings-name table."""

from __future__ import annotations

import pytest

from es_tour.errors import ConfigError
from es_tour.server import ServerConfig
from es_tour.server._options import check_method, index_settings, resolve

DEFAULTS = {"method": "tour-hard", "labeler": "default", "encoder": "retriever",
            "vector_field": "embedding",
            "text_fields": ("title", "text"), "options": {"k": 10}}


def test_index_settings_are_typed_from_the_engines_strings() -> None:
    flat = {"index.tour.enabled": "true", "index.tour.k": "20", "index.tour.lambda": "0.3",
            "index.tour.text_fields": ["a", "b"], "index.number_of_shards": "1"}
    assert index_settings(flat) == {"enabled": True, "k": 20, "lambda": 0.3,
                                    "text_fields": ("a", "b")}


def test_request_beats_index_beats_server() -> None:
    settings = {"method": "tour-soft", "k": 20, "lambda": 0.3, "temperature": 2.0}
    chosen = resolve({"method": "tour-hard", "k": 7}, settings, DEFAULTS)
    assert chosen.method == "tour-hard" and chosen.options == {"k": 7, "lam": 0.3, "tau": 2.0}
    assert chosen.origins["method"] == "request" and chosen.origins["lam"] == "index"
    assert resolve({}, settings, DEFAULTS).method == "tour-soft"
    assert resolve({}, {}, DEFAULTS).options == {"k": 10}


def test_index_settings_a_method_does_not_take_are_ignored() -> None:
    chosen = resolve({"method": "hre"}, {"lr": 0.5, "threshold": 0.2, "k": 5}, DEFAULTS)
    assert chosen.options == {"k": 5}
    learned = resolve({"method": "learned-agent"}, {"threshold": 0.2}, DEFAULTS)
    assert learned.options == {"k": 10, "threshold": 0.2}


def test_an_index_can_select_rerank_over_hybrid_linear_with_final_score_fusion() -> None:
    flat = {"index.tour.method": "rerank", "index.tour.first_stage": "hybrid-linear",
            "index.tour.lexical_weight": "0.4", "index.tour.bm25_weight": "0.5",
            "index.tour.dense_weight": "0.1", "index.tour.k": "20", "index.tour.lr": "0.3"}
    chosen = resolve({}, index_settings(flat), DEFAULTS)
    assert chosen.method == "rerank"
    assert chosen.options == {"k": 20, "first_stage": "hybrid-linear", "lexical_weight": 0.4,
                              "w_bm25": 0.5, "w_dense": 0.1}
    assert chosen.origins["w_bm25"] == "index" and chosen.origins["first_stage"] == "index"
    # a method that labels nothing ignores the fusion weights the index sets
    linear = resolve({"method": "hybrid-linear"}, index_settings(flat), DEFAULTS)
    assert linear.options == {"k": 20, "lexical_weight": 0.4}


def test_an_index_can_select_hybrid_tour_over_the_linear_pool_at_its_budget() -> None:
    flat = {"index.tour.method": "hybrid-tour", "index.tour.pool": "hybrid-linear",
            "index.tour.lexical": "none", "index.tour.budget": "40",
            "index.tour.bm25_weight": "0.2", "index.tour.first_stage": "bm25"}
    chosen = resolve({}, index_settings(flat), DEFAULTS)
    assert chosen.options == {"k": 10, "pool": "hybrid-linear", "lexical": "none",
                              "budget": 40, "w_bm25": 0.2}
    assert chosen.origins["budget"] == chosen.origins["pool"] == "index"


@pytest.mark.parametrize("method", ["tour-hard", "tour-soft", "rocchio", "hre", "rm3-agent",
                                    "learned-agent", "tour-agent", "hybrid-tour"])
def test_the_index_budget_reaches_every_method_that_takes_one(method: str) -> None:
    chosen = resolve({"method": method}, index_settings({"index.tour.budget": "7"}), DEFAULTS)
    assert chosen.options["budget"] == 7 and chosen.origins["budget"] == "index"
    # the request still wins
    assert resolve({"method": method, "budget": 9}, {"budget": 7}, DEFAULTS).options["budget"] == 9


@pytest.mark.parametrize("method", ["rerank", "rerank-hybrid", "hybrid-linear", "vector-rerank"])
def test_the_index_budget_is_not_a_setting_of_the_rerankers_or_unlabelled_methods(
        method: str) -> None:
    assert "budget" not in resolve({"method": method}, {"budget": 7}, DEFAULTS).options


def test_unknown_methods_list_every_choice() -> None:
    with pytest.raises(ConfigError, match=r"choose one of: .*tour-soft.*rm3-agent"):
        check_method("nope")


@pytest.mark.parametrize("kwargs", [{"upstream": "ftp://x"}, {"upstream": "http://x", "max_k": 0},
                                    {"upstream": "http://x", "engine": "solr"},
                                    {"upstream": "http://x", "method": "nope"}])
def test_server_config_is_checked_when_built(kwargs) -> None:
    with pytest.raises(ConfigError):
        ServerConfig(**kwargs)


@pytest.mark.parametrize("key", ["labeler", "encoder"])
def test_a_model_path_from_a_request_is_refused_and_from_the_index_taken(key, tmp_path):
    with pytest.raises(ConfigError, match=rf"ext.tour.{key} \[{tmp_path}\] is not a registry"):
        resolve({key: str(tmp_path)}, {}, DEFAULTS)
    chosen = resolve({}, {key: str(tmp_path)}, DEFAULTS)
    assert (getattr(chosen, key), chosen.origins[key]) == (str(tmp_path), "index")
    assert getattr(resolve({key: "e5-small-v2"}, {}, DEFAULTS), key) == "e5-small-v2"


def test_tour_exploration_options_pass_from_the_request_to_the_config() -> None:
    from es_tour.tour import TourConfig

    request = {"method": "tour-soft", "explore": True, "memory": "all", "budget": 20,
               "scale": 20.0, "standardize": True, "stop": "top10"}
    chosen = resolve(request, {}, DEFAULTS)
    config = TourConfig.from_mapping(chosen.options)
    assert (config.explore, config.memory, config.budget, config.scale, config.standardize,
            config.stop) == (True, "all", 20, 20.0, True, "top10")


def test_ext_tour_takes_the_settings_names_and_the_option_names_but_not_both() -> None:
    chosen = resolve({"method": "tour-hard", "lambda": 0.4, "bm25_weight": 0.2}, {}, DEFAULTS)
    assert chosen.options["lam"] == 0.4 and chosen.options["w_bm25"] == 0.2
    with pytest.raises(ConfigError, match=r"gives \[lam\] twice"):
        resolve({"method": "tour-hard", "lambda": 0.4, "lam": 0.3}, {}, DEFAULTS)


def test_serve_runs_the_recommended_method_with_its_recommended_options() -> None:
    from es_tour.cli.serve import server_options
    from es_tour.recommended import FRONTIER_20, RECOMMENDED_METHOD

    defaults = ServerConfig(upstream="http://h:9200", method=RECOMMENDED_METHOD,
                            options=server_options(RECOMMENDED_METHOD)).defaults()
    chosen = resolve({}, {}, defaults)
    assert chosen.method == "hybrid-tour"
    expected = {key.removeprefix("index.tour."): value for key, value in FRONTIER_20.items()
                if key not in ("index.tour.enabled", "index.tour.method")}
    as_settings = {"w_bm25": "bm25_weight", "w_dense": "dense_weight"}
    assert {as_settings.get(key, key): value for key, value in chosen.options.items()} == expected
    # a request naming another method takes the server's depth, not its method's options
    other = resolve({"method": "rerank-hybrid"}, {}, defaults)
    assert other.options == {"k": 10} and other.origins["k"] == "server"
    # another server method keeps its own defaults
    assert server_options("tour-hard") == {"k": 10}
