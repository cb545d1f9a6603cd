"""Dual-encoder labelers' doc vectors kept in the engine, so that any number of sidecars,
and a restarted one, embed each doc once.

One hidden index per dual encoder (`store_index`, `index.hidden: true`: no wildcard names
it; an ensemble's members each have theirs), holding one record per (index, doc id, text
digest). The index is the concrete one that
holds the doc (a hit's `_index`), so an alias and the index behind it share their records.
The key's digest comes from the text the caller's own search fetched, so a record is only
ever read for a doc that caller was just shown, with the text it was shown: a caller whose
field-level security hides a field is labelled from the text it sees, and never reads a
vector made from text it may not see (another digest), and document-level security's
hidden docs are never asked for. The store is read and written with the sidecar's own
identity (its service credentials, its client certificate), which callers lack: an
embedding leaks its text. Reads are bounded by `READ_TIMEOUT_S`; writes go in batches off
the request path. A sidecar also reads an index's records into memory, off the request
path, at its first search there (`preload_docs` of them, by record id), so that warm searches
ask the engine for none: a record is still only used for a key made from the text the
caller was shown. A store that is missing, slow, unreachable or refused costs speed,
never an error. A store is made with the primary shards of the index whose docs first fill
it: its `index.tour.vector_store_shards` when set, else its own `index.number_of_shards`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from cachetools import LRUCache

from es_tour.engines import ClientEngine
from es_tour.errors import EngineError, EsTourError
from es_tour.models import DocKey, DualEncoderLabeler, Labeler, doc_key, vector_labelers

log = logging.getLogger("es_tour.store")

STORE_PREFIX = "es-tour-vectors-"
STORE_FIELDS = {"index": {"type": "keyword"}, "doc_id": {"type": "keyword"},
                "vector": {"type": "binary"}}
# a source index's explicit shard count for the store its docs are the first to fill
SHARDS_SETTING = "index.tour.vector_store_shards"
READ_TIMEOUT_S = 1.0  # past it the docs are embedded: a slow store must not slow searches
RETRY_AFTER_S = 30.0  # a store that failed is left alone this long
FLUSH_DOCS = 256  # vectors waiting that wake the writer before its next tick
FLUSH_EVERY_S = 1.0
MAX_PENDING = 20_000  # vectors waiting to be written; past it new ones are dropped (counted)
# records a sidecar reads into memory ahead of its searches, over every index, by default:
# ~2 KiB each in memory at 384-d (230 MiB per worker); a corpus of 120,000 docs then asks
# the store nothing
PRELOAD_DOCS = 120_000
PRELOAD_BATCH = 1_000

Lacked = tuple[DualEncoderLabeler, list[DocKey]]  # a labeler, and the keys its store lacked


def store_index(labeler: DualEncoderLabeler) -> str:
    """The store of `labeler`'s vectors: its store name and fingerprint, in index-name
    characters."""
    slug = re.sub(r"[^a-z0-9]+", "-", labeler.store_name.lower()).strip("-")[:80] or "labeler"
    return f"{STORE_PREFIX}{slug}-{labeler.fingerprint}"


def record_id(key: DocKey) -> str:
    index, doc_id, digest = key
    return hashlib.blake2b(f"{index}\0{doc_id}\0".encode() + digest, digest_size=16).hexdigest()


def record(key: DocKey, vector: np.ndarray) -> dict[str, str]:
    return {"index": key[0], "doc_id": key[1], "vector": encode_vector(vector)}


def encode_vector(vector: np.ndarray) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float32)


@dataclass
class StoreCounts:
    """What the store did: docs asked for and found, vectors written, dropped and failed."""

    asked: int = 0
    found: int = 0
    written: int = 0
    dropped: int = 0
    failures: int = 0
    reads: int = 0  # store searches a labelling step waited for
    preloaded: int = 0  # records read into memory ahead of the searches that use them


class VectorStore:
    """The store on one cluster, through `engine` bound to the sidecar's service identity
    (its credentials, if any), over the sidecar's own connections (its client certificate,
    if any: `ClientEngine.as_own_identity`). `preload_docs`: how many records, over every
    index, it reads into memory ahead of the searches (0: none; each search reads its own),
    `preload_batch` per store search.
    """

    def __init__(self, engine: ClientEngine, preload_docs: int = 0,
                 preload_batch: int = PRELOAD_BATCH):
        self._engine = engine.as_own_identity()
        self.counts = StoreCounts()
        self._preload_docs, self._preload_batch = preload_docs, preload_batch
        # (store, record id) -> vector read ahead; a search takes out what it uses
        self._preloaded: LRUCache[tuple[str, str], np.ndarray] = LRUCache(
            max(self._preload_docs, 1))
        self._preloads: dict[tuple[str, str], asyncio.Task[None]] = {}  # (store, index)
        self._pending: dict[str, dict[str, dict[str, str]]] = {}  # store -> id -> record
        self._created: set[str] = set()
        self._down_until = 0.0
        self._wake = asyncio.Event()

    @property
    def available(self) -> bool:
        return time.monotonic() >= self._down_until

    async def fill(self, labeler: Labeler, index: str, docs: Sequence[tuple[str, str]]
                   ) -> list[Lacked]:
        """Give each dual encoder of `labeler` (itself, or an ensemble's members) the store's
        vectors of `docs` ((doc id, text) of the concrete `index` that holds them, as the
        caller fetched them) that it lacks, each from its own store, concurrently; returns
        the keys each store lacked too. A cross-encoder has nothing to reuse."""
        members = vector_labelers(labeler)
        lacked = await asyncio.gather(*(self._fill(member, index, docs) for member in members))
        return list(zip(members, lacked, strict=True))

    async def _fill(self, labeler: DualEncoderLabeler, index: str,
                    docs: Sequence[tuple[str, str]]) -> list[DocKey]:
        keys = [doc_key(index, doc_id, text) for doc_id, text in docs]
        held = labeler.held(keys)
        wanted = [key for key in keys if key not in held]
        if not wanted or not self.available:
            return wanted
        store = store_index(labeler)
        self._start_preload(store, index)
        self.counts.asked += len(wanted)
        by_id = {record_id(key): key for key in wanted}
        found = {i: vector for i in by_id
                 if (vector := self._preloaded.pop((store, i), None)) is not None}
        unread = [i for i in by_id if i not in found]
        if unread:
            self.counts.reads += 1
            try:
                found |= await asyncio.wait_for(self.read(store, unread), READ_TIMEOUT_S)
            except (EsTourError, TimeoutError) as exc:
                self._failed("read", exc)
        labeler.remember({by_id[i]: vector for i, vector in found.items()})
        self.counts.found += len(found)
        return [key for i, key in by_id.items() if i not in found]

    def _start_preload(self, store: str, index: str) -> None:
        """Read `index`'s records of `store` into memory in the background, once per
        sidecar, while preload_docs are left."""
        if (store, index) in self._preloads or self.counts.preloaded >= self._preload_docs:
            return
        task = asyncio.get_running_loop().create_task(self._preload(store, index))
        self._preloads[(store, index)] = task

    async def _preload(self, store: str, index: str) -> None:
        # pages of plain searches, which the store's role grants (a scroll's clearing is a
        # cluster action on OpenSearch), each after the last one's sort values: no result
        # window bounds them. Records of one doc id in two shards that share a _seq_no may
        # be skipped, which only costs a store read.
        page: dict[str, Any] = {"query": {"term": {"index": index}},
                                "sort": [{"doc_id": "asc"}, {"_seq_no": "asc"}]}
        try:
            with self._engine.engine_errors():
                while (size := min(self._preload_batch,
                                   self._preload_docs - self.counts.preloaded)) > 0:
                    answer = await self._engine.search(store, {**page, "size": size})
                    vectors = _vectors(answer)
                    for record_key, vector in vectors.items():
                        self._preloaded[(store, record_key)] = vector
                    self.counts.preloaded += len(vectors)
                    if len(vectors) < size:
                        return
                    page["search_after"] = answer["hits"]["hits"][-1]["sort"]
        except EsTourError as exc:
            if not (isinstance(exc, EngineError) and exc.status == 404):  # no store yet
                log.warning("reading [%s]'s vectors of [%s] ahead failed (%s); its searches "
                            "read the store", store, index, _reason(exc))

    async def close(self) -> None:
        """Stop reading ahead."""
        for task in self._preloads.values():
            task.cancel()
        await asyncio.gather(*self._preloads.values(), return_exceptions=True)

    def keep(self, lacked: Sequence[Lacked]) -> None:
        """Queue the vectors each labeler now holds for the keys `fill` found its store
        lacked, to be written; never waits."""
        if not self.available:
            return
        queued = sum(map(len, self._pending.values()))
        for labeler, keys in lacked:
            # a search cut before its labeler ran holds none: no empty batch to write
            if not (held := labeler.held(keys)):
                continue
            pending = self._pending.setdefault(store_index(labeler), {})
            for key, vector in held.items():
                if queued >= MAX_PENDING:
                    self.counts.dropped += 1
                    continue
                queued += record_id(key) not in pending  # a key queued again replaces it
                pending[record_id(key)] = record(key, vector)
        if queued >= FLUSH_DOCS:
            self._wake.set()

    async def run_writer(self) -> None:
        """Write what is queued, every FLUSH_EVERY_S or sooner when FLUSH_DOCS wait; runs
        until cancelled (the sidecar's lifespan), then writes what is left."""
        try:
            while True:
                try:
                    await asyncio.wait_for(self._wake.wait(), FLUSH_EVERY_S)
                except TimeoutError:
                    pass
                self._wake.clear()
                await self.flush()
        finally:
            await asyncio.shield(self.flush())

    async def flush(self) -> None:
        """Write every queued vector now."""
        while self._pending:
            store, records = self._pending.popitem()
            if not self.available:
                self.counts.dropped += len(records)
                continue
            written = self.counts.written
            try:
                await self.write(store, records)
            except EsTourError as exc:  # what the bulk wrote before failing is not dropped
                self.counts.dropped += len(records) - (self.counts.written - written)
                self._failed("write", exc)

    async def read(self, store: str, ids: list[str]) -> dict[str, np.ndarray]:
        """Record id -> vector of those of `ids` that `store` holds; an engine error or an
        unreachable engine raises."""
        # an ids search, not mget: it needs index permissions only; the whole (small) source,
        # which the engine copies rather than parses
        body = {"size": len(ids), "query": {"ids": {"values": ids}}}
        try:
            with self._engine.engine_errors():
                answer = await self._engine.search(store, body)
        except EngineError as exc:
            if exc.status == 404:
                return {}  # nothing stored yet: not a failure
            raise
        return _vectors(answer)

    async def write(self, store: str, records: Mapping[str, Mapping[str, str]]) -> None:
        """Index `records` (record id -> record) into `store`, made on first use; raises
        when any is not written."""
        with self._engine.engine_errors():
            if store not in self._created:
                if not await self._engine.exists(store):
                    source = next(iter(records.values()))["index"]
                    await self._engine.create_side_index(
                        store, STORE_FIELDS, hidden=True, shards=await self.shards_for(source))
                self._created.add(store)
            report = await self._engine.bulk_index(
                store, [{"_id": i, **record} for i, record in records.items()], max_retries=1)
        self.counts.written += report.indexed
        if report.failed:
            raise EngineError(500, {"error": report.failed[0]})

    async def shards_for(self, source: str) -> int:
        """Primary shards of a store that `source`'s docs are the first to fill: its
        SHARDS_SETTING when set, else its own shard count; 1 when the sidecar's identity
        may not read its settings (the store is then made as before the setting existed)."""
        try:
            with self._engine.engine_errors():
                settings = await self._engine.settings(source)
        except EngineError as exc:
            log.warning("cannot read the settings of [%s] (%s): its vector store gets one "
                        "shard", source, _reason(exc))
            return 1
        return int(settings.get(SHARDS_SETTING) or settings.get("index.number_of_shards", 1))

    def _failed(self, what: str, exc: BaseException) -> None:
        self.counts.failures += 1
        if self.available:
            log.warning("labeler vector store %s failed (%s); searches embed their docs, and "
                        "the store is tried again in %.0f s", what, _reason(exc), RETRY_AFTER_S)
        self._down_until = time.monotonic() + RETRY_AFTER_S


def _vectors(answer: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Record id -> vector of a store search's hits."""
    return {hit["_id"]: decode_vector(hit["_source"]["vector"]) for hit in answer["hits"]["hits"]}


def _reason(exc: BaseException) -> str:
    if isinstance(exc, EngineError):
        return f"engine status {exc.status}"
    return type(exc).__name__
