"""`es-tour eval --budgets`: which methods run at each budget, and with which option."""

from __future__ import annotations

import pytest

from es_tour.errors import ConfigError
from es_tour.evaluation import parse_budgets, parse_methods, with_budgets
from es_tour.pipeline import BUDGET_OPTIONS, METHODS


def test_labelling_methods_run_once_per_budget_with_their_budget_option_set() -> None:
    specs = with_budgets(parse_methods("bm25,rerank:k=100,tour-hard:lr=0.1,hre"), [10, 20])
    assert [(s.label, s.budget) for s in specs] == [
        ("bm25", None),
        ("rerank:k=10", 10), ("rerank:k=20", 20),  # the budget replaces the given window
        ("tour-hard:lr=0.1:budget=10", 10), ("tour-hard:lr=0.1:budget=20", 20),
        ("hre:budget=10", 10), ("hre:budget=20", 20),
    ]
    assert specs[3].options == {"lr": 0.1, "budget": 10}


def test_every_budget_option_is_a_registered_method() -> None:
    assert set(BUDGET_OPTIONS) <= set(METHODS)


@pytest.mark.parametrize("text", ["", "10,x", "0,10", "-5"])
def test_bad_budgets_are_clear_errors(text: str) -> None:
    with pytest.raises(ConfigError, match="budgets"):
        parse_budgets(text)


def test_budgets_parse_in_order() -> None:
    assert parse_budgets("10, 20,40") == [10, 20, 40]
