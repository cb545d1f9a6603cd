"""The sidecar's counters: bounded labels, one registry read as Prometheus text and as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from es_tour.engines._types import doc_key
from es_tour.pipeline import DocCache, Timings
from es_tour.pipeline._doc_cache import FetchedDoc
from es_tour.server._stats import MAX_REASONS, MULTIPROC_ENV, OTHER, Stats, reason_label

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("reason", "label"), [
    ("unsupported body key [secret words]", "unsupported body key"),
    ("unsupported ext ['mine']", "unsupported ext"),
    ("optional query string term [title:vitamin d] on a non-text field (+title:... filters)",
     "optional query string term"),
    ("index.tour.enabled is not true", "index.tour.enabled is not true"),
    ("size 0", "size 0"),
    ("[only brackets]", OTHER),
])
def test_a_reason_keeps_its_fixed_prefix_and_drops_what_the_request_put_in_it(
        reason: str, label: str) -> None:
    assert reason_label(reason) == label


def test_passthrough_reasons_past_the_cap_count_as_other() -> None:
    stats = Stats()
    for i in range(MAX_REASONS + 5):
        stats.passthrough(f"reason {i}")
    by_reason = stats.to_json()["es_tour"]["passed_through"]["by_reason"]
    assert len(by_reason) == MAX_REASONS + 1 and by_reason[OTHER] == 5


def test_json_and_prometheus_text_report_the_same_counts() -> None:
    dual = SimpleNamespace(name="default", pairs_scored=3, docs_embedded=1, queued_docs=7)
    cross = SimpleNamespace(name="cross", pairs_scored=1)  # embeds no docs
    stats = Stats(lambda: {"default": dual, "cross": cross})
    stats.answered("tour-hard", degraded=False, seconds=0.2, pairs=10,
                   timings=Timings(model_ms=150.0, engine_ms=40.0), engine_searches=4,
                   page="labelled docs")
    stats.answered("tour-hard", degraded=True, seconds=1.5, pairs=0,
                   timings=Timings(model_ms=5.0, engine_ms=2.5), engine_searches=1, page="engine")
    stats.passthrough("unsupported body key [x]")
    stats.rejected.inc()
    stats.queue.inc()

    body = stats.to_json()["es_tour"]
    assert body["refined"] == {"total": 1.0, "by_method": {"tour-hard": 1.0}}
    assert body["degraded"]["by_method"] == {"tour-hard": 1.0}
    assert body["passed_through"]["by_reason"] == {"unsupported body key": 1.0}
    assert body["rejected"]["total"] == 1.0 and body["queue_depth"] == 1.0
    latency = body["search_duration_seconds"]["by_method"]["tour-hard"]
    assert latency["count"] == 2.0 and latency["buckets"]["0.25"] == 1.0
    assert body["model_seconds"]["total"] == pytest.approx(0.155)
    assert body["engine_seconds"]["by_method"]["tour-hard"] == pytest.approx(0.0425)
    assert body["engine_searches"] == {"total": 5.0, "by_method": {"tour-hard": 5.0}}
    assert body["pages"] == {"total": 2.0,
                             "by_came_from": {"labelled docs": 1.0, "engine": 1.0}}
    # 4 pairs scored anew of 10 labelled; 1 doc embedded of the dual encoder's 3 new pairs
    assert body["label_cache"] == {"hit_rate": 0.6, "doc_vector_hit_rate": 0.6667}

    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(stats.prometheus().decode())
               for s in family.samples}
    assert samples[("es_tour_refined_total", (("method", "tour-hard"),))] == 1.0
    assert samples[("es_tour_passed_through_total", (("reason", "unsupported body key"),))] == 1
    assert samples[("es_tour_labeler_pairs_scored_total", (("labeler", "default"),))] == 3.0
    assert samples[("es_tour_labeler_docs_embedded_total", (("labeler", "default"),))] == 1.0
    assert ("es_tour_labeler_docs_embedded_total", (("labeler", "cross"),)) not in samples
    assert samples[("es_tour_labeler_docs_queued", (("labeler", "default"),))] == 7.0
    assert body["labeler_docs_queued"]["by_labeler"] == {"default": 7.0}
    assert samples[("es_tour_queue_depth", ())] == 1.0


def test_no_search_answered_yet_has_no_hit_rate() -> None:
    assert Stats().to_json()["es_tour"]["label_cache"] == {"hit_rate": None,
                                                           "doc_vector_hit_rate": None}


def test_the_doc_caches_docs_and_bytes_are_its_own_figures_now() -> None:
    cache = DocCache()
    view = cache.view("caller", "uuid")
    for seq_no in range(3):
        view.put(doc_key(seq_no), FetchedDoc({"_id": f"d{seq_no}"}, {"text": "t" * 100},
                                             np.ones(4, dtype=np.float32)))
    stats = Stats(doc_cache=lambda: cache).to_json()["es_tour"]
    assert stats["doc_cache_docs"] == 3 and len(cache) == 3
    assert stats["doc_cache_bytes"] == cache.nbytes > 0


def test_each_app_counts_apart() -> None:
    first, second = Stats(), Stats()
    first.rejected.inc()
    assert second.to_json()["es_tour"]["rejected"]["total"] == 0.0


_WORKER = """
import sys
from types import SimpleNamespace
import numpy as np

from es_tour.engines._types import doc_key
from es_tour.pipeline import DocCache, Timings
from es_tour.pipeline._doc_cache import FetchedDoc
from es_tour.server._stats import Stats
labeler = SimpleNamespace(name="default", pairs_scored=0, docs_embedded=0, queued_docs=2)
stats = Stats(lambda: {"default": labeler})
stats.workers.inc()
stats.answered("tour-hard", degraded=False, seconds=0.2, pairs=10,
               timings=Timings(model_ms=100.0, engine_ms=30.0), engine_searches=3, page="engine")
labeler.pairs_scored, labeler.docs_embedded = 4, 1
stats.sync()
stats.sync()  # what a labeler did is added once
stats.passthrough("unsupported body key [x]")
"""


def test_worker_processes_counts_add_up_in_the_shared_directory(tmp_path: Path) -> None:
    env = {**os.environ, MULTIPROC_ENV: str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    for _ in range(2):  # two workers, one after the other: the counts outlive a worker
        subprocess.run([sys.executable, "-c", _WORKER], env=env, check=True)
    reader = subprocess.run(
        [sys.executable, "-c", "import json; from es_tour.server._stats import Stats; "
         "print(json.dumps(Stats().to_json()['es_tour']))"],
        env=env, check=True, capture_output=True, text=True)
    body = json.loads(reader.stdout)
    assert body["refined"]["by_method"] == {"tour-hard": 2.0}
    assert body["pairs_labelled"]["total"] == 20.0
    assert body["engine_searches"]["total"] == 6.0
    assert body["engine_seconds"]["total"] == pytest.approx(0.06)
    assert body["search_duration_seconds"]["by_method"]["tour-hard"]["count"] == 2.0
    assert body["passed_through"]["by_reason"] == {"unsupported body key": 2.0}
    assert body["labeler_pairs_scored"]["by_labeler"] == {"default": 8.0}
    assert body["labeler_docs_embedded"]["total"] == 2.0
    assert body["label_cache"]["hit_rate"] == 0.6
    # gauges sum over the live workers: neither worker was marked dead, so both count
    assert body["workers"] == 2.0 and body["labeler_docs_queued"]["total"] == 4.0


def test_a_labeler_loaded_again_counts_from_zero_and_its_count_stays() -> None:
    first = SimpleNamespace(name="default", pairs_scored=5)
    loaded: dict[str, object] = {"default": first}
    stats = Stats(lambda: loaded)  # type: ignore[arg-type,return-value]
    stats.sync()
    loaded.clear()
    stats.sync()
    assert stats.to_json()["es_tour"]["labeler_loaded"]["by_labeler"] == {"default": 0.0}
    loaded["default"] = SimpleNamespace(name="default", pairs_scored=2)
    body = stats.to_json()["es_tour"]
    assert body["labeler_pairs_scored"]["by_labeler"] == {"default": 7.0}
    assert stats.loaded_labelers() == ["default"]
