"""Hard pseudo-positive sets and the early-stop rule."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from es_tour.errors import ConfigError
from es_tour.tour import pseudo_label_distribution, pseudo_positives, should_stop


def test_pseudo_label_distribution_is_softmax_over_phi_divided_by_tau():
    phi = np.array([1.0, 0.0, -1.0])
    expected = np.exp(phi / 0.5) / np.exp(phi / 0.5).sum()
    np.testing.assert_allclose(pseudo_label_distribution(phi, 0.5), expected)


def test_pseudo_positives_when_one_doc_dominates_is_that_doc():
    phi = np.array([0.0, 0.1, 9.0, -0.3, 0.2])
    assert pseudo_positives(phi, tau=0.5, p=0.5).tolist() == [2]


@pytest.mark.parametrize(("k", "p"), [(4, 0.5), (5, 0.5), (10, 0.7), (10, 0.3), (7, 1.0), (3, 0.1)])
def test_pseudo_positives_when_phi_is_flat_has_ceil_p_times_k_docs(k, p):
    positives = pseudo_positives(np.full(k, 1.5), tau=0.5, p=p)
    assert len(positives) == math.ceil(p * k)
    # Ties keep rank order.
    assert positives.tolist() == list(range(math.ceil(p * k)))


def test_pseudo_positives_are_in_descending_phi_order():
    phi = np.array([0.1, 0.9, 0.5, 0.7])
    positives = pseudo_positives(phi, tau=1.0, p=0.9)
    assert np.all(np.diff(phi[positives]) <= 0)
    assert positives.dtype.kind == "i"


@settings(max_examples=150, deadline=None)
@given(
    phi=arrays(
        np.float64,
        st.integers(1, 30),
        elements=st.floats(-20, 20, allow_nan=False, allow_infinity=False),
    ),
    tau=st.floats(0.05, 5.0),
    p=st.floats(0.01, 0.99),
)
def test_pseudo_positives_is_smallest_prefix_reaching_p(phi, tau, p):
    positives = pseudo_positives(phi, tau, p)
    probs = pseudo_label_distribution(phi, tau)
    mass = np.cumsum(probs[positives])
    tolerance = 1e-12
    assert mass[-1] >= p - tolerance
    without_last = mass[-2] if len(mass) > 1 else 0.0
    assert without_last < p - tolerance
    assert len(set(positives.tolist())) == len(positives)
    assert phi[positives].min() >= np.delete(phi, positives).max(initial=-np.inf)


def test_hard_stops_when_top1_is_pseudo_positive():
    assert should_stop("hard", np.array([5.0, 1.0, 0.0]), tau=0.5, p=0.5)


def test_hard_continues_when_top1_is_not_pseudo_positive():
    assert not should_stop("hard", np.array([0.0, 5.0, 1.0]), tau=0.5, p=0.5)


def test_hard_stops_when_top1_joins_a_larger_positive_set():
    # Flat phi with p = 1 makes every result positive, the top-1 included.
    assert should_stop("hard", np.array([0.0, 5.0, 5.0]), tau=100.0, p=1.0)


def test_soft_stops_when_top1_has_highest_phi():
    assert should_stop("soft", np.array([3.0, 1.0, 3.0]))


def test_soft_continues_when_another_doc_has_higher_phi():
    assert not should_stop("soft", np.array([2.9, 3.0, 1.0]))


def test_should_stop_rejects_unknown_variant_listing_options():
    with pytest.raises(ConfigError, match=r"\['hard', 'soft'\].*'medium'"):
        should_stop("medium", np.array([1.0]))
