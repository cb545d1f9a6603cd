"""The index settings the budget frontier recommends, in one place for every caller.

`make bench-frontier` (docs/benchmarks/frontier.md) chooses, on SciFact train, the method
and fusion weights with the best nDCG@10 at each labeler budget. At 20 pairs per query, with
the default labeler (bge-small-en-v1.5), that is TOUR over hybrid-linear's pool, fused with
z(BM25) at 0.3: the settings below, which `es-tour demo` applies to its index and
`make bench-app` / `make bench-cost` search with (docs/dev-tools.md, "Enable TOUR on an
index", shows them as a settings call).

The budget frontier now chooses bge-small with its query tower tuned on SciFact's judged
train queries (`make tuned-labeler`, docs/models.md "Tuning the labeler's query tower"): at
20 pairs `hybrid-tour` with it scores 0.7774 on test against these settings' 0.7382 with
bge (docs/benchmarks/frontier.md). These settings keep the default labeler all the same:
- the tuned labeler is made from a collection's judgements: an index without judged
  queries has none, and `make demo` starts cold, where embedding SciFact's corpus once
  (10 minutes at bge's 8 docs/s here) and tuning (18 minutes on 2 cores) do not fit its
  10 minutes;
- its gain is all on test queries whose relevant docs train also judged (it learns which
  docs answer): on the 104 whose docs train never judged, the same 20-pair choice scores
  0.7521 against bge's 0.7593 (-0.0072, bootstrap 95% interval -0.0278 to +0.0140;
  docs/benchmarks/labelers.md). An index whose queries keep asking for the docs its
  judgements name sets `index.tour.labeler` to the tuned directory; a default cannot
  assume that.

Nor do they take the frontier's earlier choice, the ensemble
`bge-small-en-v1.5^1+e5-small-v2^0.25`, though it fits train better than bge alone
(docs/benchmarks/labelers.md):
- it does not win on test at this budget: these settings score 0.7369 with the ensemble
  against 0.7382 with bge on the same 300 SciFact test queries, -0.0013 (bootstrap 95%
  interval -0.0082 to +0.0052; 20 queries up, 19 down), and at 10 pairs +0.0074 (-0.0020
  to +0.0173) (`python -m es_tour.bench.labelers --dataset ../shared/datasets/scifact
  --only p2,gain`);
- its warm search would pass the cost bar (138 ms p50 against hybrid-linear's 63 ms,
  2.18x, where bge's is 2.12x in the next run; docs/benchmarks/cost.md), but the demo
  could not warm it: its store needs every doc embedded by both members, and a cold demo
  already labels live; labelling the demo's comparison live took 95 s with the ensemble
  against 43 s with bge (docs/models.md, "Ensemble labelers").
"""

from __future__ import annotations

from typing import Any

# the budget frontier's choice on SciFact train at 20 labeler pairs per query
FRONTIER_20: dict[str, Any] = {
    "index.tour.enabled": True, "index.tour.method": "hybrid-tour",
    "index.tour.pool": "hybrid-linear", "index.tour.lexical": "none", "index.tour.k": 10,
    "index.tour.budget": 20, "index.tour.bm25_weight": 0.3, "index.tour.dense_weight": 0.0,
}
# the method `es-tour serve` runs when neither a request nor its index names one, with
# these options (by their setting names) where neither gives them
RECOMMENDED_METHOD: str = FRONTIER_20["index.tour.method"]
RECOMMENDED_OPTIONS: dict[str, Any] = {
    key.removeprefix("index.tour."): value for key, value in FRONTIER_20.items()
    if key not in ("index.tour.enabled", "index.tour.method")}
# the same choice as an `es-tour eval` method label
FRONTIER_LABEL = "hybrid-tour:budget=20:k=10:pool=hybrid-linear:lexical=none:w_bm25=0.3"
# why, in one line
FRONTIER_WHY = ("the budget frontier's choice on SciFact train at 20 labeler pairs per "
                "query (docs/benchmarks/frontier.md)")
