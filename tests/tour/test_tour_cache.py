"""LabelCache counts hits and misses across rounds."""

from __future__ import annotations

import numpy as np
import pytest

from es_tour.tour import LabelCache


def test_label_cache_counts_hits_and_misses_across_two_rounds():
    cache = LabelCache()
    first_round = ["a", "b", "c"]
    missing = cache.missing(first_round)
    assert missing == ["a", "b", "c"]
    cache.update(missing, [0.1, 0.2, 0.3])
    assert (cache.hits, cache.misses) == (0, 3)

    second_round = ["c", "d", "a", "e"]
    missing = cache.missing(second_round)
    assert missing == ["d", "e"]
    cache.update(missing, np.array([0.4, 0.5]))
    assert (cache.hits, cache.misses) == (2, 5)
    np.testing.assert_allclose(cache.get(second_round), [0.3, 0.4, 0.1, 0.5])
    assert len(cache) == 5


def test_label_cache_counts_a_repeated_id_once_per_call():
    cache = LabelCache()
    assert cache.missing(["a", "a", "b"]) == ["a", "b"]
    assert (cache.hits, cache.misses) == (0, 2)


def test_label_cache_get_names_ids_never_labelled():
    cache = LabelCache()
    cache.update(["a"], [1.0])
    with pytest.raises(KeyError, match="'z'"):
        cache.get(["a", "z"])


def test_label_cache_update_rejects_length_mismatch():
    with pytest.raises(ValueError, match="2 ids but 1 scores"):
        LabelCache().update(["a", "b"], [1.0])


def test_label_cache_top_orders_by_phi_and_keeps_labelling_order_on_ties():
    cache = LabelCache()
    cache.update(["a", "b", "c", "d"], [0.2, 0.9, 0.2, 0.5])
    assert cache.top(3) == ["b", "d", "a"]
    assert cache.top(10) == ["b", "d", "a", "c"]
