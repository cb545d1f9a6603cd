"""The sidecar's counters: one prometheus_client registry per app, read as Prometheus text
(`GET /_tour/metrics`) or as engine-style JSON (`GET /_tour/stats`).

Counts and durations only: no label holds query text, and every label takes a bounded set
of values (method names from the pipeline's registry, pass-through reasons cut to their
fixed prefix and capped in number).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from es_tour.models import Labeler
from es_tour.pipeline import StoreCounts, VectorStore

PREFIX = "es_tour_"
# distinct pass-through reasons kept as labels; any later new one counts as OTHER
MAX_REASONS = 64
OTHER = "other"
# seconds: a plain search's tens of ms up to a refinement that runs to the 60 s cap
LATENCY_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def reason_label(reason: str) -> str:
    """A pass-through reason less what the request put in it: reasons that name a key, a
    clause or a value of the request name it in brackets after a fixed prefix
    (`unsupported body key [x]` -> `unsupported body key`)."""
    return reason.split("[", 1)[0].strip() or OTHER


class Stats:
    """What the sidecar counts; `labelers()` (name -> each labeler loaded) is read at each
    scrape for the model work the labelers did, which tells the label cache's hit rate."""

    def __init__(self, labelers: Callable[[], Mapping[str, Labeler]] = dict,
                 store: Callable[[], VectorStore | None] = lambda: None):
        self.registry = CollectorRegistry()
        r = self.registry
        self.refined = Counter(f"{PREFIX}refined", "Searches answered by a full refinement",
                               ["method"], registry=r)
        self.degraded = Counter(f"{PREFIX}degraded", "Searches answered with the round-0 "
                                "ranking because the deadline passed", ["method"], registry=r)
        self.passed_through = Counter(f"{PREFIX}passed_through", "Searches and _msearch items "
                                      "sent to the engine unrefined", ["reason"], registry=r)
        self.rejected = Counter(f"{PREFIX}rejected", "Searches refused with 429: every "
                                "refinement slot busy", registry=r)
        self.latency = Histogram(f"{PREFIX}search_duration_seconds", "Time to answer a "
                                 "refined or degraded search", ["method"],
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.pairs = Counter(f"{PREFIX}pairs_labelled", "(query, doc) pairs the answered "
                             "searches labelled, cached scores included", ["method"], registry=r)
        self.model_seconds = Counter(f"{PREFIX}model_seconds", "Model time of the answered "
                                     "searches", ["method"], registry=r)
        self.queue = Gauge(f"{PREFIX}queue_depth", "Refinements waiting for an admission slot",
                           registry=r)
        r.register(_LabelerWork(labelers))
        r.register(_StoreWork(store))
        self._reasons: set[str] = set()
        self._lock = threading.Lock()

    def passthrough(self, reason: str) -> None:
        label = reason_label(reason)
        with self._lock:  # the cap holds however many threads count at once
            if label not in self._reasons:
                if len(self._reasons) >= MAX_REASONS:
                    label = OTHER
                else:
                    self._reasons.add(label)
        self.passed_through.labels(reason=label).inc()

    def answered(self, method: str, degraded: bool, seconds: float, pairs: int,
                 model_ms: float) -> None:
        """One intercepted search answered, fully refined or (`degraded`) round 0."""
        (self.degraded if degraded else self.refined).labels(method=method).inc()
        self.latency.labels(method=method).observe(seconds)
        self.pairs.labels(method=method).inc(pairs)
        self.model_seconds.labels(method=method).inc(model_ms / 1000)

    def prometheus(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)

    def to_json(self) -> dict[str, Any]:
        """Every metric, engine-style: `{"timestamp", "es_tour": {name: ...}}`; a labelled
        metric as `{"total", "by_<label>": {value: count}}`, a histogram as `{"count",
        "sum", "buckets"}` per label value; plus the label cache's hit rate."""
        out: dict[str, Any] = {}
        for family in self.registry.collect():
            name = family.name.removeprefix(PREFIX)
            if family.type == "histogram":
                out[name] = _histogram(family)
            else:
                out[name] = _counts(family)
        scored = out["labeler_pairs_scored"]
        embedded = out["labeler_docs_embedded"]
        # only the labelers with a doc-vector cache (dual encoders) count docs embedded
        vectored = sum(scored.get("by_labeler", {}).get(name, 0)
                       for name in embedded.get("by_labeler", {}))
        out["label_cache"] = {"hit_rate": _hit_rate(scored["total"],
                                                    out["pairs_labelled"]["total"]),
                              "doc_vector_hit_rate": _hit_rate(embedded["total"], vectored)}
        asked, found = (out[f"store_docs_{name}"]["total"] for name in ("asked", "found"))
        out["vector_store"] = {"hit_rate": _hit_rate(asked - found, asked)}
        return {"timestamp": int(time.time() * 1000), "es_tour": out}


def _hit_rate(misses: float, lookups: float) -> float | None:
    """1 - misses / lookups; None before any lookup. Clipped at 0: a search cut at its
    deadline did work that its round-0 answer does not count as lookups."""
    return round(max(0.0, 1 - misses / lookups), 4) if lookups else None


def _counts(family: Metric) -> dict[str, Any] | float:
    """{"total", "by_<label>"} of a counter or gauge with at most one label."""
    samples = [s for s in family.samples if not s.name.endswith("_created")]
    if family.type == "gauge" and not any(s.labels for s in samples):
        return samples[0].value if samples else 0.0
    out: dict[str, Any] = {"total": sum(s.value for s in samples)}
    for sample in samples:
        for label, value in sample.labels.items():
            out.setdefault(f"by_{label}", {})[value] = sample.value
    return out


def _histogram(family: Metric) -> dict[str, Any]:
    """{"by_<label>": {value: {"count", "sum", "buckets": {le: cumulative count}}}}."""
    out: dict[str, Any] = {}
    for sample in family.samples:
        labels = dict(sample.labels)
        le = labels.pop("le", None)
        ((label, value),) = labels.items()
        entry = out.setdefault(f"by_{label}", {}).setdefault(
            value, {"count": 0, "sum": 0.0, "buckets": {}})
        if sample.name.endswith("_bucket"):
            entry["buckets"][le] = sample.value
        elif sample.name.endswith("_count"):
            entry["count"] = sample.value
        elif sample.name.endswith("_sum"):
            entry["sum"] = sample.value
    return out


@runtime_checkable
class _EmbedsDocs(Protocol):
    """A labeler that embeds docs apart from queries (`DualEncoderLabeler`)."""

    docs_embedded: int

    @property
    def queued_docs(self) -> int: ...


class _LabelerWork(Collector):
    """The work each loaded labeler did, read from its own counters at scrape: pairs it
    scored anew (the score cache's misses) and, for a dual encoder, docs it embedded (the
    doc-vector cache's misses)."""

    def __init__(self, labelers: Callable[[], Mapping[str, Labeler]]):
        self._labelers = labelers

    def collect(self) -> Iterator[Metric]:
        scored = CounterMetricFamily(f"{PREFIX}labeler_pairs_scored", "Pairs a labeler scored "
                                     "anew: its score cache's misses", labels=["labeler"])
        embedded = CounterMetricFamily(f"{PREFIX}labeler_docs_embedded", "Docs a dual-encoder "
                                       "labeler embedded: its doc-vector cache's misses",
                                       labels=["labeler"])
        queued = GaugeMetricFamily(f"{PREFIX}labeler_docs_queued", "Docs waiting now for a "
                                   "dual-encoder labeler's next shared batch", labels=["labeler"])
        for name, labeler in self._labelers().items():
            scored.add_metric([name], labeler.pairs_scored)
            if isinstance(labeler, _EmbedsDocs):  # a dual encoder; cross-encoders embed none
                embedded.add_metric([name], labeler.docs_embedded)
                queued.add_metric([name], labeler.queued_docs)
        yield scored
        yield embedded
        yield queued


class _StoreWork(Collector):
    """What the labeler vector store did, read from its counters at scrape (all 0 before
    the first refined search, or with the store off)."""

    def __init__(self, store: Callable[[], VectorStore | None]):
        self._store = store

    def collect(self) -> Iterator[Metric]:
        store = self._store()
        counts = store.counts if store is not None else StoreCounts()
        for name, help_text in STORE_METRICS.items():
            yield CounterMetricFamily(f"{PREFIX}store_{name}", help_text,
                                      value=getattr(counts, name.removeprefix("docs_")))


STORE_METRICS = {
    "docs_asked": "Docs a search looked up in the vector store (in no in-process cache)",
    "docs_found": "Docs whose vector the store held: embedding skipped",
    "docs_written": "Doc vectors written to the store",
    "docs_dropped": "Doc vectors not written: the store failed or the write queue was full",
    "failures": "Store reads or writes that failed (each turns the store off for a while)",
}
