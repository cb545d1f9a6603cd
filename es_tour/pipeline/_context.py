"""Everything a search method needs: the engine and index, the query encoder, the labeler."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np

from es_tour.engines import (
    ClientEngine,
    Hit,
    KnnReturns,
    Overview,
    Similarity,
    first_of_each,
    key_seq_no,
    text_query,
)
from es_tour.errors import ConfigError, VectorUnreadableError
from es_tour.models import DualEncoder, DualEncoderLabeler, Labeler, vector_labelers
from es_tour.pipeline._doc_cache import CallerDocs, FetchedDoc, kept_source_value
from es_tour.pipeline._types import Timings
from es_tour.pipeline._vector_store import VectorStore
from es_tour.tls import UpstreamTls
from es_tour.tour import MAX_K, LabelCache

T = TypeVar("T")
DEFAULT_LABEL_BATCH = 16
DEFAULT_TEXT_FIELDS = ("title", "text")  # what es-tour index writes


class ModelPool:
    """Model inference off the event loop, on a bounded number of threads.

    Labeler batches share `workers` threads; query embeddings have a thread of their own,
    so a search that must fall back to its round-0 ranking never waits behind labelling.
    onnxruntime releases the GIL while it runs, so the loop keeps serving meanwhile.
    """

    def __init__(self, workers: int):
        self._labels = ThreadPoolExecutor(workers, thread_name_prefix="es-tour-labeler")
        self._queries = ThreadPoolExecutor(1, thread_name_prefix="es-tour-encoder")

    async def label(self, work: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._labels, work)

    async def embed(self, work: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._queries, work)

    def close(self, wait: bool = False) -> None:
        """Drop queued work; `wait` for the batches already running to finish."""
        for executor in (self._labels, self._queries):
            executor.shutdown(wait=wait, cancel_futures=True)


def doc_text(source: Mapping[str, Any], fields: Sequence[str]) -> str:
    """What the labeler reads of a doc: its text fields' values, joined, each read as the
    engine reads the field (`field_values`)."""
    return " ".join(value for name in fields for value in field_values(source, name)).strip()


def field_values(source: Mapping[str, Any], name: str) -> list[str]:
    """The values the engine indexes for field `name` of a `_source`, in order: `name` may
    be dotted (`meta.title`), written flat (`{"meta.title": ...}`) or as objects (`{"meta":
    {"title": ...}}`, through arrays of objects too); an array gives each of its values; an
    object field gives every value beneath it (as the engine's `meta.*` would); null and
    empty values give nothing, numbers and booleans their text."""
    found: list[Any] = []
    _collect(source, name.split("."), found)
    values: list[str] = []
    for value in found:
        _leaves(value, values)
    return values


def _collect(value: Any, path: list[str], found: list[Any]) -> None:
    """Append to `found` what `path` names under `value`, each way the engine would read it:
    `a.b.c` as `a` → `b.c`, `a.b` → `c` or `a.b.c` keys alike."""
    if isinstance(value, list):
        for item in value:
            _collect(item, path, found)
        return
    if not isinstance(value, Mapping):
        return
    for cut in range(1, len(path) + 1):
        key = ".".join(path[:cut])
        if key in value:
            if cut == len(path):
                found.append(value[key])
            else:
                _collect(value[key], path[cut:], found)


def _leaves(value: Any, out: list[str]) -> None:
    if value is None:
        return
    if isinstance(value, Mapping):
        for item in value.values():
            _leaves(item, out)
    elif isinstance(value, list):
        for item in value:
            _leaves(item, out)
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif str(value).strip():
        out.append(str(value))


@dataclass
class SearchContext:
    """`pool` None runs the models inline (the CLI, evaluation, benchmarks); the sidecar
    gives one, and then labelling goes in batches of `label_batch` docs, so a cancelled
    search stops after the batch that is running. `lexical_query`, when given, is the BM25
    leg's query for the search's own text (a request's query string, run as written).
    `store`, when given, keeps a dual-encoder labeler's doc vectors in the engine."""

    engine: ClientEngine
    index: str
    encoder: DualEncoder
    labeler: Labeler
    text_fields: tuple[str, ...] = DEFAULT_TEXT_FIELDS
    vector_field: str = "embedding"
    pool: ModelPool | None = None
    label_batch: int = DEFAULT_LABEL_BATCH
    lexical_query: Mapping[str, Any] | None = None
    store: VectorStore | None = None
    # query text -> its vector: across an evaluation's methods when latency is not measured;
    # in the sidecar, one request's own (the vector it brought, or its one embedding)
    query_vectors: dict[str, np.ndarray] | None = None
    # how the vector field's kNN compares vectors, where known (`ClientEngine.vector_field`):
    # hybrid pools then ask both legs with each other's scores in one round trip
    vector_similarity: Similarity | None = None
    # told, as a method's last round starts to fetch the text it labels, every doc its answer
    # will rank above the ones it did not label: the sidecar's page of them then goes in
    # that round trip (`es_tour.server._fetch.PageAhead`), and where its hits hold each
    # doc's whole source, their answer to come, for `with_text` to read the text from
    page_ahead: Callable[[Sequence[str]], asyncio.Future[dict[str, Any]] | None] | None = None
    # the docs this caller's earlier searches fetched, by doc version (the sidecar's):
    # `with_text` fetches only those it lacks
    fetched_docs: CallerDocs | None = None
    # the request's total, for its first lexical leg to count where that leg runs the
    # request's own query (the sidecar's, where the overview can go there)
    overview: Overview | None = None
    # whether a stored vector came through this context: then docs without any are docs
    # indexed without one (a 400), not a caller whose field-level security hides them
    read_a_vector: bool = field(default=False, init=False, repr=False)
    # where given (the sidecar's, one search's), the docs it fetched, or found kept, to
    # label, by doc key: a page of plain hits is answered from them (`_fetch.PageAhead`)
    held: dict[str, FetchedDoc] | None = None

    def doc_text(self, source: Mapping[str, Any]) -> str:
        return doc_text(source, self.text_fields)

    async def embed_query(self, query: str, timings: Timings) -> np.ndarray:
        if self.query_vectors is not None and query in self.query_vectors:
            return self.query_vectors[query].copy()  # a copy: TOUR moves the vector it gets
        with timings.model():
            if self.pool is None:
                vector = np.asarray(self.encoder.encode_queries([query])[0])
            else:
                vector = await self.pool.embed(lambda: self.encoder.encode_queries([query])[0])
        if self.query_vectors is not None:
            self.query_vectors[query] = vector.copy()
        return vector

    async def embed_labeler_query(self, query: str) -> None:
        """Embed `query` for each dual-encoder labeler (itself, or an ensemble's members)
        on a labelling thread, where labelling later finds it: a search that labels starts
        this with its first round, so its two query embeddings run side by side rather than
        one after the other. Nothing for a cross-encoder, or with no model pool."""
        labelers = vector_labelers(self.labeler)
        if labelers and self.pool is not None:
            await self.pool.label(lambda: [labeler.query_vector(query) for labeler in labelers])

    def embed_ahead(self, queries: Sequence[str]) -> None:
        """Embed an offline run's queries before its searches start, one at a time as a
        search would (the same vectors): the encoder's into `query_vectors`, each dual-encoder
        labeler's into its query cache, as many as that holds. Run mid-search instead, each
        waits for the cores behind the engine's work and the other searches'."""
        if self.query_vectors is not None:
            for query in queries:
                if query not in self.query_vectors:
                    self.query_vectors[query] = self.encoder.encode_queries([query])[0]
        for labeler in vector_labelers(self.labeler):  # itself, or an ensemble's members
            for query in queries[:labeler.cached_queries]:
                labeler.query_vector(query)

    async def label(
        self, query: str, hits: Sequence[Hit], timings: Timings, labels: LabelCache
    ) -> tuple[np.ndarray, int]:
        """φ(query, hit) for each hit, and how many pairs were newly scored.

        `labels` is the search's own cache, so the pairs counted are this search's cost
        even when the labeler remembers the query from an earlier search.
        """
        missing = set(labels.missing([h.id for h in hits]))
        if missing:
            # a pool leg's hits come without their text: read it for those to label
            fetched = {hit.id: hit for hit in await self.with_text(
                [hit for hit in hits if hit.id in missing], timings)}
            hits = [fetched.get(hit.id, hit) for hit in hits]
            # per concrete index (the hit's `_index`): an alias and its index share labels
            # and stored vectors; the text is what this caller's search fetched
            by_index: dict[str, dict[str, str]] = {}
            for hit in hits:
                if hit.id in missing:
                    by_index.setdefault(hit.index or self.index, {}).setdefault(
                        hit.id, self.doc_text(dict(hit.source)))
            for index, docs in by_index.items():
                await self._label_index(query, index, list(docs.items()), timings, labels)
        return labels.get([h.id for h in hits]).astype(np.float32), len(missing)

    async def _label_index(self, query: str, index: str, new: list[tuple[str, str]],
                           timings: Timings, labels: LabelCache) -> None:
        step = len(new) if self.pool is None else self.label_batch
        store = self.store
        # the labeler and its store know docs by `_id`; the text fetch met each doc key's
        named = [(doc if key_seq_no(doc) is None else self.engine.known_id(doc), text)
                 for doc, text in new]
        lacked = [] if store is None else await store.fill(self.labeler, index, named)
        try:
            with timings.model():
                for start in range(0, len(new), step):
                    labels.update([doc for doc, _ in new[start: start + step]],
                                  await self._score(query, named[start: start + step], index))
        finally:  # what was embedded is kept, even by a search cut at its deadline
            if store is not None:
                store.keep(lacked)

    async def _score(self, query: str, docs: list[tuple[str, str]], index: str) -> np.ndarray:
        if self.pool is None:
            return self.labeler.score(query, docs, index)
        if isinstance(self.labeler, DualEncoderLabeler):
            held = self.labeler.score_held(query, docs, index)  # the store's vectors, say
            if held is not None:
                return held
        return await self.pool.label(lambda: self.labeler.score(query, docs, index))

    def stored_vectors_of(self, hits: Sequence[Hit], *, required: bool = True
                          ) -> dict[str, np.ndarray]:
        """Each hit's stored vector, by id: the hit's own (a kNN hit's, or one the engine
        read from Lucene or doc values), else read from its source (BM25 and docs_by_id hits
        carry it there unless the call excluded it). The method needs every doc's vector: a
        doc without one, beside docs with theirs, is a ConfigError (400) that names it; where
        no hit has one, the caller cannot read the field (field-level security hides it),
        a VectorUnreadableError, unless this search has read one already. Not `required`,
        those the hits carry, and no error."""
        vectors = {hit.id: _stored_vector(hit, self.vector_field) for hit in hits}
        lacking = [doc for doc, vector in vectors.items() if vector is None]
        self.read_a_vector |= len(lacking) < len(vectors)
        if not required:
            return {doc: vector for doc, vector in vectors.items() if vector is not None}
        if lacking and len(lacking) == len(vectors) and not self.read_a_vector:
            raise VectorUnreadableError(
                f"no doc of [{self.index}] that this search read has a [{self.vector_field}] "
                "it can read (field-level security may hide the field from this caller), and "
                "this method reads every doc's stored vector")
        if lacking:
            raise ConfigError(
                f"doc [{lacking[0]}] of [{self.index}] has no [{self.vector_field}] in its "
                "_source, and this method reads every doc's stored vector: index one for each "
                "doc")
        return {doc: vector for doc, vector in vectors.items() if vector is not None}

    async def stored_vectors(self, ids: Sequence[str], timings: Timings
                             ) -> dict[str, np.ndarray]:
        """The stored vectors of the docs of `ids` that exist, in one ids search (none for no
        ids): what a TOUR step reads of the docs it has labelled, fetched for them alone
        (whole sources, as `_fetch_docs` reads them)."""
        if not ids:
            return {}
        with timings.engine():
            hits = await self.engine.docs_by_id(self.index, ids)
        return self.stored_vectors_of(hits)

    async def with_text(self, hits: Sequence[Hit], timings: Timings, *, vectors: bool = False,
                        page: asyncio.Future[dict[str, Any]] | None = None) -> list[Hit]:
        """`hits` holding their text fields (and, with `vectors`, their stored vectors):
        those a pool leg found without a source, and this caller's doc cache lacks, are
        fetched in one ids search, as this caller sees them (field-level security applies),
        in the same call as any vectors; or read from `page`, the answer to come of a
        search of them that returns whole sources (`page_ahead`), where no vector is asked.
        Pool legs return ids and scores only; the text of the few docs labelled is all a
        search reads. A doc the fetch no longer finds (deleted since the leg met it) is
        left out: there is no text to label, and the engine's page would not show it."""
        wanted = [hit for hit in hits
                  if not hit.source or (vectors and hit.vector is None
                                        and self.vector_field not in hit.source)]
        if not wanted:
            return list(hits)
        kept = self._kept_docs(wanted, vectors)
        unkept = [hit.id for hit in wanted if hit.id not in kept]
        found: dict[str, FetchedDoc] = dict(kept)
        if self.held is not None:
            self.held.update(kept)
        if unkept:
            found |= await self._fetch_docs(unkept, timings, vectors,
                                            None if vectors else page)
        self.read_a_vector |= any(doc.vector is not None for doc in found.values())
        gone = {hit.id for hit in wanted} - found.keys()
        filled = []
        for hit in hits:
            doc = found.get(hit.id)
            if doc is None:
                if hit.id not in gone:
                    filled.append(hit)
                continue
            vector = hit.vector if hit.vector is not None or not vectors else doc.vector
            filled.append(replace(hit, source={**hit.source, **doc.source}, vector=vector))
        return filled

    def _kept_docs(self, hits: Sequence[Hit], vectors: bool) -> dict[str, FetchedDoc]:
        """The docs of `hits` the caller's earlier fetches kept (`fetched_docs`), each
        with its stored vector where `vectors` asks one the hit lacks; their `_id`s are
        then known to this search's view, as a fetch would have made them."""
        if self.fetched_docs is None:
            return {}
        kept = {}
        for hit in hits:
            doc = self.fetched_docs.get(hit.id, vector=vectors and hit.vector is None)
            if doc is not None:
                kept[hit.id] = doc
                self.engine.remember_name(hit.id, doc.name)
        return kept

    async def _fetch_docs(self, ids: Sequence[str], timings: Timings, vectors: bool,
                          page: asyncio.Future[dict[str, Any]] | None = None
                          ) -> dict[str, FetchedDoc]:
        """The docs of `ids`, as this caller sees them, read from `page` where it holds
        them, the rest in one ids search; kept for its next searches (`fetched_docs`):
        each doc's source less its vector, and the vector."""
        # whole sources, the vector's floats too even where no step reads them: the engine
        # sends a stored source as it is, but parses and writes again one it filters, which
        # costs it more than the bytes cost anyone (docs/benchmarks/load.md)
        with timings.engine():
            hits = await self._docs_in_page(ids, page) if page is not None else []
            read = {hit.id for hit in hits}
            missing = [doc for doc in ids if doc not in read]
            if missing:
                hits += await self.engine.docs_by_id(self.index, missing, vectors=vectors)
        found = {}
        for hit in hits:
            # a doc key's name as the fetch met it; a hit named by `_id` is its own name
            name = self.engine.known_name(hit.id) if key_seq_no(hit.id) is not None else None
            found[hit.id] = doc = self._fetched(hit, name)
            if name is not None and self.held is not None:  # named as its page hit is
                self.held[hit.id] = doc
            if self.fetched_docs is not None:
                self.fetched_docs.put(hit.id, doc)
        return found

    def _fetched(self, hit: Hit, name: Mapping[str, Any] | None) -> FetchedDoc:
        """What a fetch of `hit` keeps: its source less its vector, the vector, and its
        `name` (None: the hit's `_id` names it)."""
        vector = _stored_vector(hit, self.vector_field)
        source = {key: value for key, value in hit.source.items() if key != self.vector_field}
        in_source = self.vector_field in hit.source
        return FetchedDoc(name or {"_id": hit.id}, source, vector, hit.index,
                          (self.vector_field, kept_source_value(
                              hit.source[self.vector_field], vector)) if in_source else None)

    async def docs_ahead(self, size: int) -> AsyncIterator[dict[str, FetchedDoc]]:
        """Every doc of the search's one-shard index that its caller may read, `size` at a
        time in doc-key order, by doc key, each as `_fetch_docs` keeps it: what the doc
        cache reads ahead (`DocCache.read_ahead`), over a view of its own."""
        engine, after = self.engine.own_view(), None
        while hits := await engine.docs_in_key_order(self.index, size, after):
            yield {hit.id: self._fetched(hit, engine.known_name(hit.id)) for hit in hits}
            if len(hits) < size:
                return
            after = hits[-1].id

    async def _docs_in_page(self, ids: Sequence[str], page: asyncio.Future[dict[str, Any]]
                            ) -> list[Hit]:
        """The docs of `ids` that `page`'s answer holds with a source, each once; none where
        that search failed (the page's own fetch meets its error again)."""
        await asyncio.wait([page])
        if page.cancelled() or page.exception() is not None:
            return []
        wanted = set(ids)
        return list(first_of_each(hit for hit in self.engine.hits_as_asked(page.result(), ids)
                                  if hit.id in wanted and hit.source).values())

    async def knn(
        self, vector: np.ndarray, k: int, timings: Timings, ids: Sequence[str] | None = None,
        returns: KnnReturns = "vectors",
    ) -> list[Hit]:
        with timings.engine():
            return await self.engine.knn(
                self.index,
                _unit(vector),
                k,
                num_candidates=knn_candidates(k),
                field=self.vector_field,
                ids=ids,
                returns=returns,
            )

    async def hybrid_legs(self, vector: np.ndarray, lexical: Mapping[str, Any], k: int,
                          timings: Timings, lexical_top: Sequence[Hit] | None = None,
                          dense: bool = True) -> tuple[list[Hit], list[Hit]] | None:
        """The query DSL `lexical`'s and the kNN's top k for `vector`, each hit with the
        other's score where the engine can bring it (`ClientEngine.hybrid_legs`; a hit
        without one, the pool asks after); `lexical_top`, `lexical`'s top k known already;
        `dense` False, `lexical`'s leg alone, each hit with its q·c. None where the engine
        cannot, and the caller asks its legs apart. The first legs that run the request's
        own query count its `overview` too."""
        if self.vector_similarity is None:
            return None
        with timings.engine():
            return await self.engine.hybrid_legs(
                self.index, _unit(vector), lexical, k, field=self.vector_field,
                similarity=self.vector_similarity, num_candidates=knn_candidates(k),
                lexical_top=lexical_top,
                overview=self._overview_for(lexical) if lexical_top is None else None,
                dense=dense)

    def _overview_for(self, lexical: Mapping[str, Any]) -> Overview | None:
        """The request's `overview`, for the first lexical search of the whole index that
        runs the request's own query (`lexical`) to count."""
        overview = self.overview
        if overview is None or overview.asked or lexical != self.lexical_query:
            return None
        return overview

    def lexical_dsl(self, query: str) -> Mapping[str, Any]:
        """The BM25 leg's query DSL for the search's text `query`: the request's own
        lexical query when it has one, else the text over the text fields."""
        if self.lexical_query is not None:
            return self.lexical_query
        return text_query(query, self.text_fields)

    def lexical_search(self, query: str, k: int, *, ids: Sequence[str] | None = None,
                       exclude: Sequence[str] = (), ids_only: bool = False,
                       keyed: bool = False) -> Awaitable[list[Hit]]:
        """The engine's BM25 call for the search's text `query` (untimed): the request's
        own lexical query when it has one, else the text over the text fields. A keyed
        search of the whole index counts the request's `overview` first."""
        if self.lexical_query is not None:
            overview = self._overview_for(self.lexical_query) if keyed and ids is None else None
            return self.engine.bool_search(self.index, self.lexical_query, k, ids=ids,
                                           exclude=exclude, ids_only=ids_only, keyed=keyed,
                                           overview=overview)
        return self.engine.bm25(self.index, query, k, fields=self.text_fields, ids=ids,
                                exclude=exclude, ids_only=ids_only, keyed=keyed)

    async def bm25(
        self, query: str, k: int, timings: Timings, ids: Sequence[str] | None = None,
        with_vectors: bool = False, keyed: bool = False,
    ) -> list[Hit]:
        """BM25 hits: ids and scores (`with_text` reads the text of those labelled), or
        `with_vectors` their whole sources, stored vectors too; `keyed`, doc keys and
        scores (`ClientEngine.keyed_search`)."""
        with timings.engine():
            return await self.lexical_search(query, k, ids=ids, ids_only=not with_vectors,
                                             keyed=keyed)


def _stored_vector(hit: Hit, field: str) -> np.ndarray | None:
    if hit.vector is not None:
        return hit.vector
    if field not in hit.source:
        return None
    return np.asarray(hit.source[field], dtype=np.float32)


def _unit(vector: np.ndarray) -> np.ndarray:
    """A kNN's query vector: a positive rescale leaves the ranking by q·c unchanged, and
    Elasticsearch's dot_product similarity rejects query vectors that are not unit length
    (TOUR's are not)."""
    return vector / max(float(np.linalg.norm(vector)), 1e-12)


def knn_candidates(k: int) -> int:
    """The candidates an HNSW search of `k` visits (OpenSearch's `ef_search`,
    Elasticsearch's `num_candidates`): OpenSearch's default, k and at least 100. Twice k
    cost each 100-deep pool leg 0.8 ms more engine CPU on SciFact, for the same nDCG@10 on
    its test queries to within 0.0002 (`es-tour eval`)."""
    return min(max(100, k), MAX_K)  # Elasticsearch's cap


def open_context(
    engine: str, url: str, index: str, *, encoder: str = "retriever", labeler: str = "default",
    tls: UpstreamTls | None = None, auth: tuple[str, str] | None = None,
) -> SearchContext:
    """A context over a running engine with registry models (built by `es-tour models build`);
    `tls` and `auth` as `es_tour.engines.connect` takes them."""
    from es_tour.engines import connect
    from es_tour.models import load_labeler, query_encoder

    return SearchContext(connect(engine, url, tls, auth), index, query_encoder(encoder),
                         load_labeler(labeler))
