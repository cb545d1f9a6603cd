"""The engine adapters against real OpenSearch and Elasticsearch nodes."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
from dataclasses import replace

import httpx
import numpy as np
import pytest

from es_tour.datasets import BeirDataset
from es_tour.engines import ClientEngine, IndexSpec, key_seq_no, text_query
from es_tour.engines._batch import identity
from es_tour.ingest import IngestError, index_spec, ingest
from es_tour.pipeline import SearchContext, build_method

DIM = 64
N_DOCS = 300


def hashed_embedding(text: str, dim: int = DIM) -> np.ndarray:
    """A fixed bag-of-words embedding: no model needed to exercise vector search."""
    vector = np.zeros(dim, dtype=np.float32)
    for token in text.lower().split():
        digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
        vector[int.from_bytes(digest[:4], "little") % dim] += 1.0 if digest[4] & 1 else -1.0
    norm = np.linalg.norm(vector)
    return vector / norm if norm else vector


@pytest.fixture(scope="module")
def sample(scifact: BeirDataset) -> list[dict]:
    docs = itertools.islice(scifact.corpus(), N_DOCS)
    return [
        {
            "_id": d.id,
            "title": d.title,
            "text": d.text,
            "embedding": hashed_embedding(d.contents).tolist(),
        }
        for d in docs
    ]


@pytest.fixture
async def sample_index(engine: ClientEngine, sample: list[dict]) -> str:
    spec = IndexSpec("it-engines", DIM)
    await engine.create_index(spec, replace=True)
    report = await engine.bulk_index(spec.name, sample)
    assert report.failed == []
    await engine.refresh(spec.name)
    return spec.name


async def test_bulk_indexes_every_doc_and_rerun_does_not_duplicate(engine, sample_index, sample):
    assert await engine.count(sample_index) == len(sample)
    await engine.bulk_index(sample_index, sample[:50])
    await engine.refresh(sample_index)
    assert await engine.count(sample_index) == len(sample)


async def test_knn_with_a_docs_own_vector_returns_that_doc_first(engine, sample_index, sample):
    for doc in sample[:20]:
        hits = await engine.knn(sample_index, np.array(doc["embedding"]), k=5, num_candidates=50)
        assert hits[0].id == doc["_id"]
        np.testing.assert_allclose(hits[0].vector, doc["embedding"], atol=1e-6)


async def test_bm25_on_a_docs_exact_title_ranks_it_in_top3(engine, sample_index, sample):
    titled = [doc for doc in sample if len(doc["title"].split()) >= 4][:30]
    misses = [
        d["_id"]
        for d in titled
        if d["_id"] not in [h.id for h in await engine.bm25(sample_index, d["title"], 3)]
    ]
    assert misses == []


async def test_ids_filter_restricts_bm25_and_knn(engine, sample_index, sample):
    allowed = [doc["_id"] for doc in sample[100:110]]
    query = sample[0]
    bm25 = await engine.bm25(sample_index, query["title"], 10, ids=allowed)
    knn = await engine.knn(sample_index, np.array(query["embedding"]), 10, ids=allowed)
    assert bm25 and {h.id for h in bm25} <= set(allowed)
    assert {h.id for h in knn} == set(allowed)


async def test_scores_of_known_ids_are_read_without_their_ids_and_match_the_full_search(
        engine, sample_index, sample):
    # ids-only searches restricted to known docs name each hit by a filter, not by `_id`
    query, allowed = sample[0], [doc["_id"] for doc in sample[:40]]
    vector = np.array(query["embedding"])
    full_bm25 = {h.id: h.score for h in await engine.bm25(sample_index, query["title"], 200)}
    full_knn = {h.id: h.score for h in await engine.knn(sample_index, vector, 40,
                                                        ids=allowed, returns="text")}
    bm25, knn = await asyncio.gather(
        engine.bm25(sample_index, query["title"], 40, ids=allowed, ids_only=True),
        engine.knn(sample_index, vector, 40, ids=allowed, returns="ids"))
    assert bm25 and {h.id for h in bm25} <= set(allowed)
    assert {h.id: h.score for h in bm25} == pytest.approx(
        {doc: score for doc, score in full_bm25.items() if doc in set(allowed)})
    assert {h.id: h.score for h in knn} == pytest.approx(full_knn)
    assert all(h.source == {} and h.index == sample_index for h in [*bm25, *knn])


async def test_settings_report_bm25_parameters(engine, sample_index):
    settings = await engine.settings(sample_index)
    assert float(settings["index.similarity.default.k1"]) == pytest.approx(0.9)
    assert float(settings["index.similarity.default.b"]) == pytest.approx(0.4)


async def test_text_is_analysed_in_english_with_the_plugins_analyzer(engine, sample_index):
    tokens = await engine.analyzed_tokens(sample_index, "The patients' STUDIES were running")
    assert tokens == ["patient", "studi", "were", "run"]


async def test_vector_rerank_reads_each_hits_q_c_from_its_one_bm25_search(
        engine, sample_index, sample):
    """Where the vector field's similarity is known (as the sidecar reads it), vector-rerank's
    one BM25 search brings each hit's q·c from a script: the engine sends doc keys and
    scores, no source and no stored vector, and the ranking is the stored vectors' own."""
    text = sample[5]["title"]
    plain = SearchContext(engine, sample_index, None, None,
                          query_vectors={text: hashed_embedding(text)})
    field = await engine.vector_field(sample_index, "embedding")
    scripted = replace(plain, vector_similarity=field.similarity)
    by_vectors, by_script = [
        await build_method("vector-rerank", context, {"k": 30}).search(text, 30)
        for context in (plain, scripted)]
    assert [h.id for h in by_script.hits] == [h.id for h in by_vectors.hits]
    # the script computes in float32
    assert [h.score for h in by_script.hits] == pytest.approx(
        [h.score for h in by_vectors.hits], abs=1e-6)
    assert by_script.engine_calls == by_vectors.engine_calls == 1
    assert not any(h.source for h in by_script.hits) and all(h.source for h in by_vectors.hits)


async def test_term_stats_read_every_doc_in_one_call_or_one_each_where_refused(
        engine, sample_index, sample):
    """One `_mtermvectors` reads every doc's terms; an identity the engine refused it
    (OpenSearch Security's `read` lacks it) gets one `_termvectors` per doc, and the same
    statistics. A doc that does not exist is left out either way."""
    docs = [doc["_id"] for doc in sample[:12]] + ["no-such-doc"]
    singles: list[str] = []
    termvectors = engine._client.termvectors

    async def counted(**kwargs):
        singles.append(kwargs["id"])
        return await termvectors(**kwargs)

    engine._client.termvectors = counted
    together = await engine.term_stats(sample_index, docs)
    assert singles == []
    engine._refused["_mtermvectors", identity(engine._headers)] = True
    one_each = await engine.term_stats(sample_index, docs)
    assert sorted(singles) == sorted(docs)
    assert together == one_each
    assert set(together.tf) == set(docs[:12]) and together.doc_count == len(sample)
    assert all(together.df[term] >= 1 for counts in together.tf.values() for term in counts)


@pytest.mark.parametrize("text", [
    "The patients' STUDIES were running",
    "vitamin D, vitamin d deficiency: the D-vitamin's role in vitamin D deficiency",
    "no-stopword THE the a an and",
    "",
])
async def test_analyzed_tokens_are_what_analyze_gives_in_order(engine, sample_index, text):
    """Read from an artificial doc's term vectors (what the `read` action group grants),
    the tokens are `_analyze`'s, repeats and order included."""
    analyzed = await engine._client.indices.analyze(
        index=sample_index, body={"text": text, "field": "text"})
    expected = [token["token"] for token in analyzed["tokens"]]
    assert await engine.analyzed_tokens(sample_index, text, field="text") == expected


async def test_index_matches_only_its_own_analysis_and_bm25(engine, sample_index):
    spec = IndexSpec(sample_index, DIM)
    assert await engine.index_matches(spec)
    assert not await engine.index_matches(replace(spec, text_analyzer="standard"))
    assert not await engine.index_matches(replace(spec, bm25_k1=1.2))
    assert not await engine.index_matches(replace(spec, dimension=DIM * 2))


async def test_ingest_rebuilds_an_index_made_with_other_mappings(engine, scifact, retriever):
    older = IndexSpec("it-engines-older", retriever.dimension, text_analyzer="standard")
    await engine.create_index(older, replace=True)
    options = {"if_missing": True, "reuse_embeddings": False, "max_docs": 20,
               "show_progress": False}
    report = await ingest(engine, scifact, older.name, retriever, **options)
    assert report.rebuilt and report.indexed == 20
    assert await engine.index_matches(index_spec(older.name, retriever))
    again = await ingest(engine, scifact, older.name, retriever, **options)
    assert again.skipped and not again.rebuilt
    await engine.delete_index(older.name)


async def test_ingest_never_rebuilds_an_index_es_tour_did_not_make(engine, scifact, retriever,
                                                                   nodes):
    name = "it-engines-users"
    url = nodes[engine.name].url
    httpx.delete(f"{url}/{name}")
    made = httpx.put(f"{url}/{name}", json={"mappings": {"properties": {
        "note": {"type": "keyword"}}}})
    assert made.status_code == 200, made.text
    httpx.put(f"{url}/{name}/_doc/precious?refresh=true", json={"note": "keep me"})
    options = {"reuse_embeddings": False, "max_docs": 5, "show_progress": False}
    with pytest.raises(IngestError, match=r"index \[it-engines-users\] exists with mappings"):
        await ingest(engine, scifact, name, retriever, **options)
    assert httpx.get(f"{url}/{name}/_doc/precious").json()["found"]
    report = await ingest(engine, scifact, name, retriever, replace=True, **options)
    assert report.indexed == 5 and await engine.made_by_es_tour(name)
    await engine.delete_index(name)


async def test_version_matches_pinned_distribution(engine, nodes):
    assert await engine.version() == nodes[engine.name].version


@pytest.mark.parametrize("shards", [1, 2])
async def test_pool_legs_name_docs_by_doc_key_on_one_shard_and_by_id_on_several(
        engine, sample, shards):
    """A keyed leg loads no `_id` where one shard holds the index: the same docs and scores
    as the `_id`-loading leg, named `_seq_no:N`, each resolved to its own `_id` (by the
    text fetch that reads it, or by `doc_ids`) and read back by key in a score-only call.
    Across two shards a sequence number names no single doc: the leg names them by `_id`."""
    spec = IndexSpec(f"it-keys-{shards}", DIM, shards=shards)
    await engine.create_index(spec, replace=True)
    await engine.bulk_index(spec.name, sample)
    await engine.refresh(spec.name)
    view = engine.with_filters([])  # a request's own view, remembering its own keys
    vector = np.asarray(sample[3]["embedding"], dtype=np.float32)
    by_id = await view.knn(spec.name, vector, 20, returns="ids")
    keyed = await view.knn(spec.name, vector, 20, returns="keys")
    lexical = await view.bm25(spec.name, sample[5]["title"], 20, keyed=True)
    assert [h.score for h in keyed] == pytest.approx([h.score for h in by_id])
    if shards == 2:
        assert [h.id for h in keyed] == [h.id for h in by_id]
        assert all(key_seq_no(h.id) is None for h in lexical)
        return
    assert all(key_seq_no(h.id) is not None for h in [*keyed, *lexical])
    texts = await view.docs_by_id(spec.name, [h.id for h in keyed[:5]], include=["title"])
    assert [h.id for h in texts] == [h.id for h in keyed[:5]]  # named as asked
    titles = {doc["_id"]: doc["title"] for doc in sample}
    assert [h.source["title"] for h in texts] == [titles[h.id] for h in by_id[:5]]
    assert await view.doc_ids(spec.name, [h.id for h in keyed]) == [h.id for h in by_id]
    # a score-only call restricted to keys reads each hit's key back from its `_seq_no`
    rescored = await view.knn(spec.name, vector, 20, ids=[h.id for h in keyed[::2]],
                              returns="keys")
    assert {h.id: h.score for h in rescored} == pytest.approx(
        {h.id: h.score for h in keyed[::2]})
    # a fresh view has met no key: it resolves them in one search of its own
    assert await engine.with_filters([]).doc_ids(spec.name, [keyed[0].id]) == [by_id[0].id]


async def test_a_one_shard_index_pages_its_docs_in_doc_key_order(engine, sample):
    """What the doc cache reads ahead: every doc once, named by its doc key, as a fetch by
    key gives it (whole source, stored vector), its name known to the view, page after
    page by sequence number; a doc written again comes back under its new key."""
    spec = IndexSpec("it-key-pages", DIM)
    await engine.create_index(spec, replace=True)
    await engine.bulk_index(spec.name, sample)
    await engine.refresh(spec.name)
    view = engine.with_filters([]).with_vector_field("embedding").own_view()
    pages, after = [], None
    while page := await view.docs_in_key_order(spec.name, 7, after):
        pages.append(page)
        after = page[-1].id
    hits = [hit for page in pages for hit in page]
    assert [len(page) for page in pages[:-1]] == [7] * (len(pages) - 1)
    seq_nos = [key_seq_no(hit.id) for hit in hits]
    assert None not in seq_nos and seq_nos == sorted(set(seq_nos))
    by_id = {doc["_id"]: doc for doc in sample}
    assert sorted(view.known_id(hit.id) for hit in hits) == sorted(by_id)
    fetched = await engine.with_filters([]).with_vector_field("embedding").docs_by_id(
        spec.name, [hit.id for hit in hits[:5]])
    for hit, same in zip(hits, fetched, strict=False):
        assert hit.source == same.source and np.array_equal(hit.vector, same.vector)
        assert view.known_name(hit.id)["_id"] == by_id[view.known_id(hit.id)]["_id"]
    rewritten = view.known_id(hits[0].id)
    await engine.bulk_index(spec.name, [by_id[rewritten]])
    await engine.refresh(spec.name)
    last = await view.docs_in_key_order(spec.name, 50, hits[-1].id)
    assert [view.known_id(hit.id) for hit in last] == [rewritten]
    await engine.delete_index(spec.name)


async def _index_of(engine: ClientEngine, sample: list[dict], name: str, similarity: str
                    ) -> tuple[IndexSpec, list[dict], float]:
    """The sample indexed as `name` with a vector field of `similarity`: its docs, their
    vectors scaled off unit length on a cosine field, and that scale."""
    spec = IndexSpec(name, DIM, similarity=similarity)
    scale = 2.0 if similarity == "cosine" else 1.0
    docs = [{**doc, "embedding": [scale * x for x in doc["embedding"]]} for doc in sample]
    await engine.create_index(spec, replace=True)
    await engine.bulk_index(spec.name, docs)
    await engine.refresh(spec.name)
    return spec, docs, scale


@pytest.mark.parametrize("similarity", ["dot_product", "cosine"])
async def test_stored_vectors_come_in_the_whole_source_that_holds_them(
        engine, sample, similarity):
    """A view that knows its vector field reads the vectors of the docs it fetches from
    their `_source`, each the source's own float32s, asking no source filter (it would make
    the engine parse and write every source again) and no script. A doc without a vector
    comes without one, beside those with theirs."""
    spec, docs, scale = await _index_of(
        engine, sample, f"it-stored-vectors-{similarity.replace('_', '-')}", similarity)
    stored = {doc["_id"]: np.asarray(doc["embedding"], dtype=np.float32) for doc in docs}
    ids = [doc["_id"] for doc in docs[3:9]]
    view = engine.with_filters([]).with_vector_field("embedding", similarity=similarity)
    assert view._asking_vectors(spec.name, {}, "embedding") == ({}, None)

    fetched = await view.docs_by_id(spec.name, ids)
    assert [hit.id for hit in fetched] == ids
    for hit in fetched:
        assert np.array_equal(hit.vector, stored[hit.id])
        assert hit.source["embedding"] == pytest.approx(stored[hit.id].tolist())
        assert hit.source["text"]
    alone = await view.docs_by_id(spec.name, ids, exclude=spec.text_fields)
    assert all(np.array_equal(hit.vector, stored[hit.id]) and "text" not in hit.source
               for hit in alone)
    nearest = await view.knn(spec.name, stored[ids[0]] / scale, 3, returns="vectors")
    assert nearest[0].id == ids[0]
    assert all(np.array_equal(hit.vector, stored[hit.id]) for hit in nearest)

    await engine.bulk_index(spec.name, [{"_id": "no-vector", "title": "t", "text": "t"}])
    await engine.refresh(spec.name)
    mixed = await view.docs_by_id(spec.name, [ids[0], "no-vector"])
    assert [hit.id for hit in mixed] == [ids[0], "no-vector"]
    assert np.array_equal(mixed[0].vector, stored[ids[0]]) and mixed[1].vector is None
    assert view._plugin_reads(spec.name)  # no script read none: the legs keep the plugin
    await engine.delete_index(spec.name)


@pytest.mark.parametrize("script", ["plugin", "without-plugin"])
@pytest.mark.parametrize("similarity", ["dot_product", "cosine"])
async def test_hybrid_legs_bring_each_others_scores_in_one_round_trip(engine, sample,
                                                                      similarity, script):
    """BM25's and kNN's legs, asked together, are the legs asked apart, and each kNN hit
    brings its BM25 as a call restricted to it gives it (0 where no term matches). With the
    es-tour plugin's script, on either engine, each BM25 hit brings its q·c, cosine on a
    cosine field (whose vectors here are not unit length), and each kNN hit's score is its
    q·c; without it, OpenSearch's painless gives the same, and Elasticsearch none. Asked
    again for a BM25 top it has, either engine scores no BM25 again (the scores it was
    given come back as given) and brings their q·c (on Elasticsearch without the plugin,
    their kNN scores, as a kNN restricted to them gives them). Across two shards neither
    engine asks them together. A doc without a vector in a leg leaves the plugin's script
    for that caller's later searches of the index."""
    spec, docs, _ = await _index_of(
        engine, sample, f"it-hybrid-{similarity.replace('_', '-')}-{script}", similarity)
    view = engine.with_filters([])
    field = await view.vector_field(spec.name, "embedding")
    vector = np.asarray(sample[3]["embedding"], dtype=np.float32) + 0.05
    vector /= np.linalg.norm(vector)
    text = sample[5]["title"]
    if script == "without-plugin":  # as where the engine lacks it: its script failed once
        view._untoured[spec.name] = True

    def legs(index: str, lexical_top: list | None = None):
        return view.hybrid_legs(index, vector, text_query(text, spec.text_fields), 20,
                                field="embedding", similarity=similarity, num_candidates=100,
                                lexical_top=lexical_top)

    assert field.similarity == similarity
    sparse, dense = await legs(spec.name)
    apart_sparse = await view.bm25(spec.name, text, 20, keyed=True)
    apart_dense = await view.knn(spec.name, vector, 20, returns="keys")
    assert [(h.id, h.score) for h in sparse] == [(h.id, pytest.approx(h.score))
                                                 for h in apart_sparse]
    assert {h.id for h in dense} == {h.id for h in apart_dense}
    # a BM25 top known already, its scores marked so that a BM25 asked again would show
    known = [replace(h, score=h.score + 100.0, other_score=None) for h in sparse]
    again, _ = await legs(spec.name, known)
    assert [(h.id, h.score) for h in again] == [(h.id, h.score) for h in known]
    if engine.name == "elasticsearch" and script == "without-plugin":
        assert all(h.other_score is None for h in sparse)
        restricted_knn = await view.knn(spec.name, vector, 20, ids=[h.id for h in sparse],
                                        returns="keys")
        assert {h.id: h.other_score for h in again} == pytest.approx(
            {h.id: h.score for h in restricted_knn})
        assert [h.score for h in dense] == pytest.approx([h.score for h in apart_dense])
    else:
        assert (spec.name in view._untoured) == (script == "without-plugin")
        assert {h.id: h.other_score for h in again} == pytest.approx(
            {h.id: h.other_score for h in sparse})
        ids = await view.doc_ids(spec.name, [h.id for h in [*sparse, *dense]])
        stored = {doc["_id"]: np.asarray(doc["embedding"]) for doc in docs}
        expected = {key: float(vector @ stored[i]) / (np.linalg.norm(stored[i]) if similarity
                                                     == "cosine" else 1.0)
                    for key, i in zip([h.id for h in [*sparse, *dense]], ids, strict=True)}
        assert {h.id: h.other_score for h in sparse} == pytest.approx(
            {h.id: expected[h.id] for h in sparse}, abs=1e-5)
        assert [h.score for h in dense] == pytest.approx([expected[h.id] for h in dense],
                                                         abs=1e-5)
    assert [h.score for h in dense] == sorted((h.score for h in dense), reverse=True)
    restricted = await view.bm25(spec.name, text, 20, ids=[h.id for h in dense], keyed=True)
    bm25 = {h.id: h.score for h in restricted}
    assert {h.id: h.other_score for h in dense} == pytest.approx(
        {h.id: bm25.get(h.id, 0.0) for h in dense})
    assert any(h.other_score == 0.0 for h in dense) or len(bm25) == len(dense)
    # a doc without a vector, the BM25 leg's best: it has no q·c, and the index's next legs
    # go without the plugin's script, as they answer still
    await engine.bulk_index(spec.name, [{"_id": "no-vector", "title": text, "text": text}])
    await engine.refresh(spec.name)
    sparse, _ = await legs(spec.name)
    assert [h.other_score for h in sparse if h.id not in {d.id for d in again}] == [None]
    assert not view._plugin_reads(spec.name)
    # for this caller alone: another's field-level security may differ
    another = view.with_headers({"x-caller": "another"})._plugin_reads(spec.name)
    assert another == (script == "plugin")
    assert len((await legs(spec.name))[0]) == 20
    sharded = IndexSpec(f"{spec.name}-2", DIM, similarity=similarity, shards=2)
    await engine.create_index(sharded, replace=True)
    await engine.bulk_index(sharded.name, docs)
    await engine.refresh(sharded.name)
    assert await legs(sharded.name) is None
    for name in (spec.name, sharded.name):
        await engine.delete_index(name)
