"""Ensemble labelers: names parse to members and weights, scores are weighted sums of
each member's standardised score, and each member keeps its own cache and counts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from es_tour.errors import ConfigError
from es_tour.models import (
    DualEncoder,
    DualEncoderLabeler,
    EnsembleLabeler,
    Member,
    ensemble_name,
    is_ensemble,
    load_labeler,
    parse_ensemble,
    vector_labelers,
)
from es_tour.models._labelers import DocKey, _CachedLabeler

DOCS = [("d1", "alpha"), ("d2", "beta"), ("d3", "gamma")]


class TableLabeler(_CachedLabeler):
    """Scores from a table by doc text; counts the calls that reach the model."""

    def __init__(self, name: str, table: dict[str, float]):
        super().__init__(name)
        self.table = table
        self.model_calls = 0

    def _score_new(self, query: str, keys: list[DocKey], texts: list[str]) -> np.ndarray:
        self.model_calls += 1
        return np.array([self.table[text] for text in texts], dtype=np.float32)


def _ensemble(weights: Sequence[float], spreads: dict[str, float] | None = None
              ) -> tuple[EnsembleLabeler, TableLabeler, TableLabeler]:
    first = TableLabeler("first", {"alpha": 0.9, "beta": 0.5, "gamma": 0.1})
    second = TableLabeler("second", {"alpha": 0.2, "beta": 0.8, "gamma": 0.4})
    table = spreads or {}
    ensemble = EnsembleLabeler([(first, weights[0]), (second, weights[1])],
                               spreads=lambda labeler: table.get(labeler.name, 1.0))
    return ensemble, first, second


def test_names_parse_to_members_and_weights_and_back() -> None:
    assert parse_ensemble("bge-small-en-v1.5+e5-small-v2^0.5") == (
        Member("bge-small-en-v1.5", 1.0), Member("e5-small-v2", 0.5))
    assert ensemble_name(parse_ensemble("a^2+b")) == "a^2+b^1"
    assert is_ensemble("a+b") and is_ensemble("a^2") and not is_ensemble("bge-small-en-v1.5")


def test_an_existing_model_directory_with_a_plus_is_one_model(tmp_path) -> None:
    directory = tmp_path / "e5+ft"
    directory.mkdir()
    assert not is_ensemble(str(directory))
    assert is_ensemble(str(tmp_path / "e5+other"))


@pytest.mark.parametrize(("name", "reason"), [
    ("a++b", "empty member"), ("a^x+b", "positive number"), ("a^0+b", "positive number"),
    ("a^-1+b", "positive number"), ("a^nan+b", "positive number"), ("a+a", "twice"),
    ("a+b+c+d+e", "at most 4")])
def test_a_bad_name_says_what_is_wrong(name: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        parse_ensemble(name)


def test_scores_are_the_weighted_sum_of_standardised_member_scores() -> None:
    ensemble, _, _ = _ensemble([1.0, 0.5], spreads={"first": 0.2, "second": 0.1})
    scores = ensemble.score("q", DOCS, "index")
    # each member over its spread, in the first member's units (its spread 0.2)
    expected = [0.2 * (0.9 / 0.2 + 0.5 * 0.2 / 0.1), 0.2 * (0.5 / 0.2 + 0.5 * 0.8 / 0.1),
                0.2 * (0.1 / 0.2 + 0.5 * 0.4 / 0.1)]
    np.testing.assert_allclose(scores, expected, rtol=1e-6)
    assert ensemble.name == "first^1+second^0.5"


def test_a_lone_member_scores_as_that_model_alone() -> None:
    first = TableLabeler("first", {"alpha": 0.9, "beta": 0.5, "gamma": 0.1})
    ensemble = EnsembleLabeler([(first, 1.0)], spreads=lambda labeler: 0.25)
    np.testing.assert_allclose(ensemble.score("q", DOCS, "i"), [0.9, 0.5, 0.1], rtol=1e-6)


def test_member_weights_change_the_ranking() -> None:
    led_by_first, _, _ = _ensemble([1.0, 0.1])
    led_by_second, _, _ = _ensemble([0.1, 1.0])
    assert np.argmax(led_by_first.score("q", DOCS, "i")) == 0  # alpha
    assert np.argmax(led_by_second.score("q", DOCS, "i")) == 1  # beta


def test_each_member_scores_a_pair_once_and_counts_it() -> None:
    ensemble, first, second = _ensemble([1.0, 1.0])
    ensemble.score("q", DOCS[:2], "i")
    ensemble.score("q", DOCS, "i")
    assert ensemble.pairs_scored == 3
    assert (first.pairs_scored, second.pairs_scored) == (3, 3)
    assert (first.model_calls, second.model_calls) == (2, 2)
    # a member that also labels alone has those pairs already: the ensemble adds none
    first.score("q2", DOCS, "i")
    ensemble.score("q2", DOCS, "i")
    assert first.pairs_scored == 6 and second.pairs_scored == 6
    ensemble.clear_cache()
    ensemble.score("q", DOCS[:1], "i")
    assert first.pairs_scored == 7  # a cold start forgets the members' scores too


def test_registry_ensemble_loads_each_member_and_stores_their_vectors(
        minilm_dir, default_labeler_dir) -> None:
    ensemble = load_labeler("retriever+default^0.5")
    assert isinstance(ensemble, EnsembleLabeler)
    assert [member.name for member in ensemble.members] == ["minilm-l6", "bge-small-en-v1.5"]
    assert vector_labelers(ensemble) == list(ensemble.members)
    assert ensemble.member_weights == (1.0, 0.5)
    scores = ensemble.score("vitamin d", [("d1", "Vitamin D and bone fractures."),
                                          ("d2", "Elasticsearch shards.")], "i")
    assert scores[0] > scores[1]
    alone = DualEncoderLabeler(DualEncoder(minilm_dir))
    assert vector_labelers(alone) == [alone]
