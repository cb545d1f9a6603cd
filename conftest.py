"""Fixtures the unit and integration suites share."""

from __future__ import annotations

from pathlib import Path

import pytest

from es_tour.datasets import BeirSplit
from es_tour.training._query_tower import TunedTower


@pytest.fixture(scope="session")
def bones_tower(tmp_path_factory: pytest.TempPathFactory
                ) -> tuple[BeirSplit, TunedTower, Path, int]:
    """bge-small's query tower tuned (`QUICK`) on questions about bones that all call one
    doc relevant: its judged split, what the tuning reports, the model directory and the
    optimiser steps it took. Tuned once a session (about a minute on 2 cores): the unit
    suite checks the directory, the integration suite serves it."""
    from es_tour.training import build
    from es_tour.training._query_tower import tune_query_tower
    from tests.models.test_query_tower import QUICK, bones_split

    build("default")
    root = tmp_path_factory.mktemp("bones-tower")
    split, out = bones_split(root), root / "bge-queries"
    steps: list[None] = []
    tuned = tune_query_tower("default", split, out, QUICK, lambda: steps.append(None))
    return split, tuned, out, len(steps)
