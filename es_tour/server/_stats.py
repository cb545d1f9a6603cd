"""The sidecar's counters: one prometheus_client registry per app, read as Prometheus text
(`GET /_tour/metrics`) or as engine-style JSON (`GET /_tour/stats`).

Counts and durations only: no label holds query text, and every label takes a bounded set
of values (method names from the pipeline's registry, pass-through reasons cut to their
fixed prefix and capped in number).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import Metric
from prometheus_client.multiprocess import MultiProcessCollector

from es_tour.models import Labeler
from es_tour.pipeline import DocCache, Timings, VectorStore

PREFIX = "es_tour_"
# distinct pass-through reasons kept as labels; any later new one counts as OTHER
MAX_REASONS = 64
OTHER = "other"
# seconds: a plain search's tens of ms up to a refinement that runs to the 60 s cap
LATENCY_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# where worker processes keep their metrics (prometheus_client's multiprocess mode)
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
SYNC_S = 1.0  # how often a worker copies its labelers' and store's counts in


def reason_label(reason: str) -> str:
    """A pass-through reason less what the request put in it: reasons that name a key, a
    clause or a value of the request name it in brackets after a fixed prefix
    (`unsupported body key [x]` -> `unsupported body key`)."""
    return reason.split("[", 1)[0].strip() or OTHER


class _KeptRankings(Protocol):
    """The rankings kept for later pages (`_rankings.RankingCache`), as the gauges read them."""

    @property
    def nbytes(self) -> int: ...

    def __len__(self) -> int: ...


class Stats:
    """What the sidecar counts; `labelers()` (name -> each labeler loaded) and `store()` are
    read at each `sync` for the model and store work they did, which tells the label
    cache's and the store's hit rates.

    Under `es-tour serve --workers N` (PROMETHEUS_MULTIPROC_DIR set before the worker
    imported prometheus_client) every metric lives in that directory's per-process files,
    and a scrape reads all of them: counters and histograms summed over the workers (those
    that exited included), gauges summed over the live ones. A worker copies its labelers'
    and store's own counters in at each search it answers, each scrape it serves, and once a
    second (`SYNC_S`).
    """

    def __init__(self, labelers: Callable[[], Mapping[str, Labeler]] = dict,
                 store: Callable[[], VectorStore | None] = lambda: None,
                 doc_cache: Callable[[], DocCache | None] = lambda: None,
                 rankings: Callable[[], _KeptRankings | None] = lambda: None):
        self.registry = CollectorRegistry()
        self.multiprocess_dir = os.environ.get(MULTIPROC_ENV) or None
        r = self.registry
        self.refined = Counter(f"{PREFIX}refined", "Searches answered by a full refinement",
                               ["method"], registry=r)
        self.degraded = Counter(f"{PREFIX}degraded", "Searches answered with the round-0 "
                                "ranking because the deadline passed, or as the engine ranks "
                                "them because their caller can read no vector", ["method"],
                                registry=r)
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
        self.engine_seconds = Counter(f"{PREFIX}engine_seconds", "Time the answered "
                                      "searches' methods waited for the engine, summed over "
                                      "their calls", ["method"], registry=r)
        self.engine_searches = Counter(f"{PREFIX}engine_searches", "Engine searches the "
                                       "answered searches' methods made (their trace's "
                                       "engine_calls)", ["method"], registry=r)
        self.rankings_reused = Counter(f"{PREFIX}rankings_reused", "Searches answered from "
                                       "the ranking the same caller's same search made "
                                       "(another page of it): no round, one page fetch",
                                       ["method"], registry=r)
        self.pages = Counter(f"{PREFIX}pages", "Pages the answered searches served, by "
                             "where they came from: the engine's page search, or the docs "
                             "read to label (ext.tour.page)", ["came_from"], registry=r)
        self.queue = Gauge(f"{PREFIX}queue_depth", "Refinements waiting for an admission slot",
                           registry=r, multiprocess_mode="livesum")
        self.workers = Gauge(f"{PREFIX}workers", "Worker processes serving", registry=r,
                             multiprocess_mode="livesum")
        self._scored = Counter(f"{PREFIX}labeler_pairs_scored", "Pairs a labeler scored anew: "
                               "its score cache's misses", ["labeler"], registry=r)
        self._embedded = Counter(f"{PREFIX}labeler_docs_embedded", "Docs a dual-encoder "
                                 "labeler embedded: its doc-vector cache's misses", ["labeler"],
                                 registry=r)
        self._queued = Gauge(f"{PREFIX}labeler_docs_queued", "Docs waiting now for a "
                             "dual-encoder labeler's next shared batch", ["labeler"],
                             registry=r, multiprocess_mode="livesum")
        self._loaded = Gauge(f"{PREFIX}labeler_loaded", "1 while a worker has the labeler "
                             "loaded", ["labeler"], registry=r, multiprocess_mode="livemax")
        self._store = {name: Counter(f"{PREFIX}store_{name}", help_text, registry=r)
                       for name, help_text in STORE_METRICS.items()}
        self._doc_cache = {name: Counter(f"{PREFIX}doc_cache_{name}", help_text, registry=r)
                           for name, help_text in DOC_CACHE_METRICS.items()}
        self._doc_cache_bytes = Gauge(f"{PREFIX}doc_cache_bytes", "Bytes of the docs the "
                                      "doc cache keeps", registry=r,
                                      multiprocess_mode="livesum")
        self._doc_cache_docs = Gauge(f"{PREFIX}doc_cache_docs", "Docs the doc cache keeps",
                                     registry=r, multiprocess_mode="livesum")
        # the workers share one cache of rankings: the figure the reading worker just read
        # is the one shown (`_sync_kept`)
        self._rankings_kept = Gauge(f"{PREFIX}rankings_kept", "Rankings kept for their "
                                    "callers' later pages", registry=r,
                                    multiprocess_mode="livemostrecent")
        self._rankings_bytes = Gauge(f"{PREFIX}rankings_kept_bytes", "Bytes of the rankings "
                                     "kept for their callers' later pages", registry=r,
                                     multiprocess_mode="livemostrecent")
        self._labelers = labelers
        self._store_of = store
        self._doc_cache_of = doc_cache
        self._rankings_of = rankings
        # (metric, label, the source object's id) -> the source's count already added
        self._seen: dict[tuple[str, str], tuple[int, float]] = {}
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
                 timings: Timings, engine_searches: int, page: str) -> None:
        """One intercepted search answered, fully refined or `degraded`, its page from
        where `page` says (its trace's `page`), its model and engine time from its trace's
        `timings` (calls made at once each count)."""
        (self.degraded if degraded else self.refined).labels(method=method).inc()
        self.pages.labels(came_from=page).inc()
        self.latency.labels(method=method).observe(seconds)
        self.pairs.labels(method=method).inc(pairs)
        self.model_seconds.labels(method=method).inc(timings.model_ms / 1000)
        self.engine_seconds.labels(method=method).inc(timings.engine_ms / 1000)
        self.engine_searches.labels(method=method).inc(engine_searches)
        self.sync()

    def sync(self) -> None:
        """Add what the loaded labelers and the store did since the last sync to this
        process's counters; set the gauges they keep."""
        with self._lock:
            loaded = dict(self._labelers())
            for name, labeler in loaded.items():
                self._add(self._scored.labels(labeler=name), "scored", name, labeler,
                          labeler.pairs_scored)
                self._loaded.labels(labeler=name).set(1)
                if isinstance(labeler, _EmbedsDocs):  # a dual encoder; cross-encoders embed none
                    self._add(self._embedded.labels(labeler=name), "embedded", name, labeler,
                              labeler.docs_embedded)
                    self._queued.labels(labeler=name).set(labeler.queued_docs)
            for (kind, name) in list(self._seen):
                if kind == "scored" and name not in loaded:  # unloaded: its count stays
                    self._loaded.labels(labeler=name).set(0)
                    self._queued.labels(labeler=name).set(0)
            doc_cache = self._doc_cache_of()
            if doc_cache is not None:
                for name, counter in self._doc_cache.items():
                    self._add(counter, "doc_cache", name, doc_cache,
                              getattr(doc_cache.counts, name))
                self._doc_cache_bytes.set(doc_cache.nbytes)
                self._doc_cache_docs.set(len(doc_cache))
            store = self._store_of()
            if store is not None:
                for name, counter in self._store.items():
                    self._add(counter, "store", name, store,
                              getattr(store.counts, name.removeprefix("docs_")))

    def _add(self, counter: Counter, kind: str, name: str, source: object,
             value: float) -> None:
        """Increase `counter` by what `source`'s own count gained since it was last read
        (all of it when the source is new: a labeler loaded again counts from zero)."""
        seen = self._seen.get((kind, name))
        before = seen[1] if seen is not None and seen[0] == id(source) else 0.0
        if value > before:
            counter.inc(value - before)
        self._seen[(kind, name)] = (id(source), max(value, before))

    def loaded_labelers(self) -> list[str]:
        """The labelers some worker has loaded now (this one's alone in a single process)."""
        self.sync()
        family = self._families().get(f"{PREFIX}labeler_loaded")
        return sorted({s.labels["labeler"] for s in (family.samples if family else ())
                       if s.value > 0})

    def serving_workers(self) -> int:
        """How many worker processes serve now: their `workers` gauges, summed."""
        family = self._families().get(f"{PREFIX}workers")
        return int(sum(s.value for s in family.samples)) if family else 0

    def _families(self) -> dict[str, Metric]:
        """Every metric by name: this process's, or under workers every worker's, read
        from their files (where a labelled metric no worker has counted yet is absent, so
        this process's own, all zero, stands for it)."""
        families = {family.name: family for family in self.registry.collect()}
        families.update({family.name: family for family in self._shared().collect()})
        return families

    def _shared(self) -> CollectorRegistry:
        """Every worker's metrics, read from their files; this registry in one process."""
        if self.multiprocess_dir is None:
            return self.registry
        merged = CollectorRegistry()
        MultiProcessCollector(merged, self.multiprocess_dir)  # type: ignore[no-untyped-call]
        return merged

    def _sync_kept(self) -> None:
        """Set the kept rankings' gauges: read where the stats are, never after each search,
        since a shared cache's figures are reads of its database."""
        rankings = self._rankings_of()
        if rankings is not None:
            self._rankings_kept.set(len(rankings))
            self._rankings_bytes.set(rankings.nbytes)

    def prometheus(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        self.sync()
        self._sync_kept()
        return generate_latest(self._shared())

    def to_json(self) -> dict[str, Any]:
        """Every metric, engine-style: `{"timestamp", "es_tour": {name: ...}}`; a labelled
        metric as `{"total", "by_<label>": {value: count}}`, a histogram as `{"count",
        "sum", "buckets"}` per label value; plus the label cache's hit rate."""
        self.sync()
        self._sync_kept()
        out: dict[str, Any] = {}
        for family in self._families().values():
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
        hits, misses = (out[f"doc_cache_{name}"]["total"] for name in ("hits", "misses"))
        out["doc_cache"] = {"hit_rate": _hit_rate(misses, hits + misses)}
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


DOC_CACHE_METRICS = {
    "hits": "Docs a search would have fetched to label, found in the doc cache",
    "misses": "Docs a search fetched to label (the doc cache did not hold them)",
    "read_ahead": "Docs read into the doc cache, as their caller, ahead of its searches",
}
STORE_METRICS = {
    "docs_asked": "Docs a search looked up in the vector store (in no in-process cache)",
    "docs_found": "Docs whose vector the store held: embedding skipped",
    "docs_written": "Doc vectors written to the store",
    "docs_dropped": "Doc vectors not written: the store failed or the write queue was full",
    "failures": "Store reads or writes that failed (each turns the store off for a while)",
    "reads": "Store searches a labelling step waited for (none for what was read ahead)",
    "docs_preloaded": "Doc vectors read from the store into memory ahead of the searches",
}
