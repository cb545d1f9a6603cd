"""The docs a caller's searches fetched to label, kept by doc version, so that its next
searches label them without fetching them again.

A refined search's pool legs name each hit of a one-shard index by its `_seq_no` (a doc
key), and a doc's every change gives it a new one: within one index (its `index.uuid`, so
that a new index under the old name shares nothing), a doc key names one version of one
doc. What the caller was shown of that version (its `_source`, as its field-level
security left it; its stored vector; its `_id`) cannot change while the version lives, so
the sidecar keeps it, per caller and index, for `ttl_s`: a later search that labels the
doc, or shows it on a page of plain hits, asks the engine nothing for it.

Nothing is ever shared between callers (their identity headers' digests key it) or
indices. A doc only comes out for a doc key the caller's own search just returned, so
document-level security still decides which docs it labels; `ttl_s` bounds how long a
change of the caller's field-level security takes to reach its labels. Entries are
bounded by their size in bytes, least recently used dropped first.

**Read ahead.** A search labels about 20 docs, and one that finds them all kept fetches
nothing: its rounds cost the engine their legs alone. So once a caller's search of an
index has fetched a doc, the cache reads that caller's docs of the index ahead, in the
background: pages of a plain search as the caller (`read` grants it), so its document-
and field-level security shape them as a fetch's, up to `preload_docs` docs and three
quarters of the cache's bytes, one read at a time per worker and once per caller and index
within `ttl_s` (the docs it keeps live that long).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from cachetools import TTLCache

from es_tour.engines import key_seq_no
from es_tour.errors import EsTourError

log = logging.getLogger("es_tour.pipeline")

DOC_CACHE_MIB = 64  # per worker: about 20,000 SciFact docs with their 384-d vectors
DOC_CACHE_TTL_S = 300.0
DOC_PRELOAD_DOCS = 15_000  # per caller and index (3/4 of DOC_CACHE_MIB bounds it too)
# docs per read-ahead search: its answer is parsed on the loop that refines, between searches
DOC_PRELOAD_PAGE = 100
READ_AHEAD_KEPT = 4096  # (caller, index) read ahead within the TTL, remembered


@dataclass(frozen=True, slots=True)
class FetchedDoc:
    """One doc version as a caller's search fetched it."""

    name: Mapping[str, Any]  # its `_id`, and `_routing` where it has one (`hit_name`)
    source: Mapping[str, Any]  # its `_source` less the vector field
    vector: np.ndarray | None  # its stored vector, where the fetch read it
    index: str | None = None  # the concrete index the fetch met it in
    # the vector field and its value in `_source` as the engine sent it (a list of floats
    # kept as an array, every number as it came: `kept_source_value`), for `whole_source`;
    # None where it had none
    source_vector: tuple[str, Any] | None = None

    def whole_source(self) -> dict[str, Any]:
        """Its `_source` as the engine sent it: the same fields and values."""
        if self.source_vector is None:
            return dict(self.source)
        field, value = self.source_vector
        return {**self.source, field: value.tolist() if isinstance(value, np.ndarray)
                else value}


def kept_source_value(value: Any, vector: np.ndarray | None = None) -> Any:
    """A vector field's `_source` value to keep: a list of floats as the doc's float32
    `vector` itself where each number is exactly that float32 (as es-tour writes them: one
    array for both), else as a float64 array (the same numbers in a fifth of the memory of
    Python floats); anything else as it is."""
    if isinstance(value, list) and value and all(type(item) is float for item in value):
        numbers = np.asarray(value, dtype=np.float64)
        if (vector is not None and vector.dtype == np.float32
                and np.array_equal(vector, numbers)):
            return vector
        return numbers
    return value


def doc_bytes(doc: FetchedDoc) -> int:
    """About what `doc` holds: its source as JSON, its name and its vectors (an array
    shared by the vector and the source's value counted once)."""
    size = len(orjson.dumps(doc.source, default=str)) + len(orjson.dumps(doc.name))
    if doc.source_vector is not None and doc.source_vector[1] is not doc.vector:
        value = doc.source_vector[1]
        size += value.nbytes if isinstance(value, np.ndarray) else len(
            orjson.dumps(value, default=str))
    return size + (0 if doc.vector is None else doc.vector.nbytes)


@dataclass
class DocCacheCounts:
    """Docs a search wanted fetched and found kept (`hits`), or fetched (`misses`)."""

    hits: int = 0
    misses: int = 0
    read_ahead: int = 0  # docs read in ahead of the searches that label them


class DocCache:
    """One worker's kept docs, over every caller and index; `view` gives a caller's own."""

    def __init__(self, max_bytes: int = DOC_CACHE_MIB << 20, ttl_s: float = DOC_CACHE_TTL_S,
                 timer: Any = None, preload_docs: int = DOC_PRELOAD_DOCS):
        extra = {} if timer is None else {"timer": timer}
        self._docs: TTLCache[tuple[str, str, int], FetchedDoc] = TTLCache(
            max(max_bytes, 1), ttl_s, getsizeof=doc_bytes, **extra)
        self.counts = DocCacheCounts()
        self._preload_docs = preload_docs
        # (caller, index uuid) read ahead within the TTL: not read again until it ends
        self._read_ahead: TTLCache[tuple[str, str], bool] = TTLCache(
            READ_AHEAD_KEPT, ttl_s, **extra)
        self._reading: asyncio.Task[None] | None = None

    @property
    def nbytes(self) -> int:
        return int(self._docs.currsize)

    def __len__(self) -> int:
        """The docs kept now, over every caller and index."""
        return len(self._docs)

    def view(self, caller: str, index_uuid: str) -> CallerDocs:
        """The docs kept for `caller` (a digest of its identity) on the index `index_uuid`."""
        return CallerDocs(self, caller, index_uuid)

    def lookup(self, key: tuple[str, str, int]) -> FetchedDoc | None:
        return self._docs.get(key)

    def keep(self, key: tuple[str, str, int], doc: FetchedDoc) -> None:
        try:
            self._docs[key] = doc
        except ValueError:  # larger than the whole cache: not kept
            pass

    def read_ahead(self, docs: CallerDocs,
                   pages: Callable[[int], AsyncIterator[Mapping[str, FetchedDoc]]]) -> None:
        """Start reading `docs`' caller's docs of its index into the cache in the
        background, from `pages` (given the docs per page: each page's docs by doc key, as
        that caller's fetch would keep them); nothing where one is being read, or this
        caller's index was read within the TTL, or `preload_docs` is 0."""
        key = (docs.caller, docs.index_uuid)
        if (not self._preload_docs or key in self._read_ahead
                or (self._reading is not None and not self._reading.done())):
            return
        self._read_ahead[key] = True
        self._reading = asyncio.get_running_loop().create_task(self._read(docs, pages))

    async def _read(self, docs: CallerDocs,
                    pages: Callable[[int], AsyncIterator[Mapping[str, FetchedDoc]]]) -> None:
        room, read = int(self._docs.maxsize) * 3 // 4, 0
        try:
            async for page in pages(min(DOC_PRELOAD_PAGE, self._preload_docs)):
                for doc, fetched in page.items():
                    docs.put(doc, fetched)
                    room -= doc_bytes(fetched)
                read += len(page)
                self.counts.read_ahead += len(page)
                if read >= self._preload_docs or room <= 0:
                    return
        except EsTourError as exc:  # its searches fetch what they label, as before
            log.warning("reading a caller's docs of index [%s] ahead failed (%s); its "
                        "searches fetch the docs they label", docs.index_uuid, exc)

    async def read_ahead_done(self) -> None:
        """Wait for the read ahead running now, if any, to end."""
        if self._reading is not None:
            await asyncio.gather(self._reading, return_exceptions=True)

    async def close(self) -> None:
        """Stop reading ahead."""
        if self._reading is not None:
            self._reading.cancel()
            await asyncio.gather(self._reading, return_exceptions=True)


@dataclass
class CallerDocs:
    """One caller's kept docs of one index, by doc key; `missed`, whether a doc key was
    looked up and not found (a fetch follows: the index has doc keys, and the caller's
    docs are worth reading ahead)."""

    cache: DocCache
    caller: str
    index_uuid: str
    missed: bool = False

    def get(self, doc: str, *, vector: bool) -> FetchedDoc | None:
        """The kept version `doc` names; None for an `_id` (no version), or one not kept
        (a miss), or kept without the stored `vector` asked for."""
        seq_no = key_seq_no(doc)
        if seq_no is None:
            return None
        found = self.cache.lookup((self.caller, self.index_uuid, seq_no))
        if found is None or (vector and found.vector is None):
            self.cache.counts.misses += 1
            self.missed = True
            return None
        self.cache.counts.hits += 1
        return found

    def put(self, doc: str, fetched: FetchedDoc) -> None:
        """Keep what the caller's fetch gave for the version `doc` names (not an `_id`)."""
        if (seq_no := key_seq_no(doc)) is not None:
            self.cache.keep((self.caller, self.index_uuid, seq_no), fetched)
