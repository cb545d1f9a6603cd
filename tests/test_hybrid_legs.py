"""Which script a hybrid pool's legs ask their other scores with, and what they fall back
to where it fails: the order alone, over legs that answer in memory (the scores each
script gives are checked on both engines by integration_tests/test_engines.py)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest
from cachetools import LRUCache

from es_tour.engines import Hit
from es_tour.engines._hybrid import HybridLegs
from es_tour.errors import EngineError

NOT_SUPPORTED = {"error": {
    "root_cause": [{"type": "illegal_argument_exception",
                    "reason": "script_lang not supported [tour]"}],
    "type": "search_phase_execution_exception", "reason": "all shards failed"}, "status": 400}


class InMemoryLegs(HybridLegs):
    """Legs of an engine with or without the es-tour plugin, with or without painless's
    vector functions in script fields, and named queries' scores."""

    def __init__(self, *, plugin: bool, painless: bool, named: bool):
        self._sharded = LRUCache(maxsize=8)
        self._unscripted = LRUCache(maxsize=8)
        self._untoured = LRUCache(maxsize=8)
        self._vectorless = LRUCache(maxsize=8)
        self._headers = None
        self._legs_by_named_query = named
        self.plugin, self.painless = plugin, painless
        self.asked: list[str] = []  # how each leg asked its other scores

    def _dense_script(self, similarity: Any) -> str | None:
        return "cosineSimilarity(params.q, doc[params.f])" if self.painless else None

    def _constraints(self, ids: Any) -> list[Any]:
        return []

    def _knn_clause(self, *args: Any) -> dict[str, Any]:
        return {"knn": {}}

    async def unsharded_search(self, index: str, body: dict[str, Any], other: str | None = None,
                               *, named: str | None = None, named_scores: bool = False,
                               overview: Any = None) -> list[Hit]:
        script = body.get("script_fields", {}).get("_tour_other_score", {}).get("script")
        way = (script.get("lang", "painless") if script
               else "named" if named is not None or named_scores else "plain")
        self.asked.append(way)
        if way == "tour" and not self.plugin:
            raise EngineError(400, NOT_SUPPORTED)
        return [Hit("k1", 2.0, index=index, other_score=0.5 if way != "plain" else None)]


async def legs(engine: InMemoryLegs) -> Any:
    return await engine.hybrid_legs("docs", np.ones(4), {"match": {"text": "q"}}, 10,
                                    field="embedding", similarity="cosine",
                                    num_candidates=100)


@pytest.mark.parametrize("painless, named, then", [(True, False, "painless"),
                                                   (False, True, "named")])
async def test_without_the_plugin_the_legs_warn_once_and_go_as_before(painless, named, then,
                                                                      caplog):
    engine = InMemoryLegs(plugin=False, painless=painless, named=named)
    with caplog.at_level(logging.WARNING, logger="es_tour.engines"):
        assert await legs(engine) is not None
        assert await legs(engine) is not None
    # the plugin's script asked once, by both legs; then, and from then on, as before
    assert engine.asked[:2] == ["tour", "tour"]
    assert engine.asked[2:] == [then] * 4
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "script_lang not supported [tour]" in warnings[0].getMessage()
    assert "every node" in warnings[0].getMessage()


async def test_with_the_plugin_no_painless_or_named_query_is_asked():
    engine = InMemoryLegs(plugin=True, painless=True, named=True)
    sparse, dense = await legs(engine)
    assert engine.asked == ["tour", "tour"]
    assert sparse[0].other_score == 0.5 and dense[0].score == 0.5 and dense[0].other_score == 2.0


async def test_without_any_script_or_named_scores_the_pool_asks_apart():
    engine = InMemoryLegs(plugin=False, painless=False, named=False)
    assert await legs(engine) is None
    assert engine.asked == ["tour", "tour"]
    assert await legs(engine) is None
    assert engine.asked == ["tour", "tour"]  # nothing asked again
