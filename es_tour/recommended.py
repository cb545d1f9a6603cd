"""The index settings the budget frontier recommends, in one place for every caller.

`make bench-frontier` (docs/benchmarks/frontier.md) chooses, on SciFact train, the method
and fusion weights with the best nDCG@10 at each labeler budget. At 20 pairs per query, with
the default labeler (bge-small-en-v1.5), that is TOUR over hybrid-linear's pool, fused with
z(BM25) at 0.3: the settings below, which `es-tour demo` applies to its index and
`make bench-app` / `make bench-cost` search with (docs/dev-tools.md, "Enable TOUR on an
index", shows them as a settings call). The frontier's ensemble labeler fits train better
(docs/benchmarks/labelers.md); it replaces the default here once `make bench-cost` has
measured its warm search against the 2.5x bar (issue 39).
"""

from __future__ import annotations

from typing import Any

# the budget frontier's choice on SciFact train at 20 labeler pairs per query
FRONTIER_20: dict[str, Any] = {
    "index.tour.enabled": True, "index.tour.method": "hybrid-tour",
    "index.tour.pool": "hybrid-linear", "index.tour.lexical": "none", "index.tour.k": 10,
    "index.tour.budget": 20, "index.tour.bm25_weight": 0.3, "index.tour.dense_weight": 0.0,
}
# the same choice as an `es-tour eval` method label
FRONTIER_LABEL = "hybrid-tour:budget=20:k=10:pool=hybrid-linear:lexical=none:w_bm25=0.3"
# why, in one line
FRONTIER_WHY = ("the budget frontier's choice on SciFact train at 20 labeler pairs per "
                "query (docs/benchmarks/frontier.md)")
