"""Labelers score each (query, index, doc id, text) once and count the work."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from es_tour.errors import ConfigError
from es_tour.models import (
    CrossEncoder,
    CrossEncoderLabeler,
    DualEncoder,
    DualEncoderLabeler,
    Labeler,
)
from es_tour.models._labelers import DocKey, _CachedLabeler, doc_key

DOCS = [("d1", "Vitamin D and bone fractures."), ("d2", "Elasticsearch shards."),
        ("d3", "BRCA1 and breast cancer risk.")]


def test_cross_labeler_scoring_same_doc_twice_costs_one_pair(tiny_cross_dir):
    labeler = CrossEncoderLabeler(CrossEncoder(tiny_cross_dir))
    assert isinstance(labeler, Labeler)
    first = labeler.score("vitamin d", DOCS[:1])
    again = labeler.score("vitamin d", DOCS[:1])
    assert labeler.pairs_scored == 1
    assert first.tolist() == again.tolist()


def test_dual_labeler_scoring_same_doc_twice_costs_one_doc(minilm_dir):
    labeler = DualEncoderLabeler(DualEncoder(minilm_dir))
    assert isinstance(labeler, Labeler)
    labeler.score("vitamin d", DOCS[:1])
    labeler.score("vitamin d", DOCS[:1])
    assert labeler.pairs_scored == 1


def test_only_new_docs_are_scored_and_order_is_kept(minilm_dir):
    labeler = DualEncoderLabeler(DualEncoder(minilm_dir))
    some = labeler.score("bone fractures", DOCS[:2])
    everything = labeler.score("bone fractures", [DOCS[2], DOCS[0], DOCS[1], DOCS[0]])
    assert labeler.pairs_scored == 3
    assert everything.shape == (4,) and everything.dtype == np.float32
    assert everything[1] == everything[3] == some[0]
    assert everything[2] == some[1]
    assert int(np.argmax(everything)) in (1, 3)  # the vitamin D doc fits the query best


def test_cache_is_per_query(minilm_dir, tiny_cross_dir):
    for labeler in (DualEncoderLabeler(DualEncoder(minilm_dir)),
                    CrossEncoderLabeler(CrossEncoder(tiny_cross_dir))):
        labeler.score("q1", DOCS)
        labeler.score("q2", DOCS)
        assert labeler.pairs_scored == 6


def test_dual_labeler_score_is_cosine(minilm_dir):
    encoder = DualEncoder(minilm_dir)
    labeler = DualEncoderLabeler(encoder)
    scores = labeler.score("bone fractures", DOCS)
    expected = encoder.encode_docs([t for _, t in DOCS]) @ encoder.encode_queries(
        ["bone fractures"])[0]
    assert np.allclose(scores, expected, atol=1e-5)


def test_the_same_doc_id_in_two_indices_is_scored_by_its_own_text(minilm_dir):
    labeler = DualEncoderLabeler(DualEncoder(minilm_dir))
    in_a = labeler.score("bone fractures", [("d1", DOCS[0][1])], "index-a")
    in_b = labeler.score("bone fractures", [("d1", DOCS[1][1])], "index-b")
    assert labeler.pairs_scored == 2
    assert in_a[0] != in_b[0]
    assert in_b[0] == labeler.score("bone fractures", [("d1", DOCS[1][1])], "index-b")[0]
    assert labeler.pairs_scored == 2


def test_a_doc_whose_text_changed_is_scored_again(minilm_dir):
    labeler = DualEncoderLabeler(DualEncoder(minilm_dir))
    before = labeler.score("bone fractures", [("d1", DOCS[0][1])], "index-a")
    after = labeler.score("bone fractures", [("d1", DOCS[2][1])], "index-a")
    assert labeler.pairs_scored == 2 and before[0] != after[0]


class _CountingLabeler(_CachedLabeler):
    """φ = the text's length; counts the texts it was asked to score."""

    def __init__(self, cached_pairs: int):
        super().__init__("counting", cached_pairs=cached_pairs)

    def _score_new(self, query: str, keys: list[DocKey], texts: list[str]) -> np.ndarray:
        return np.array([len(t) for t in texts], dtype=np.float32)


def test_the_score_cache_holds_at_most_cached_pairs_keeping_the_latest_query() -> None:
    labeler = _CountingLabeler(cached_pairs=5)
    docs = [(f"d{i}", "x" * i) for i in range(4)]
    labeler.score("q1", docs[:3])
    labeler.score("q2", docs[:3])  # 6 held: q1's scores go
    assert labeler.pairs_scored == 6
    labeler.score("q2", docs[:3])
    assert labeler.pairs_scored == 6  # q2's are kept
    labeler.score("q1", docs[:3])
    assert labeler.pairs_scored == 9  # q1's were dropped, and are scored again
    labeler.score("q3", docs)  # one query past the cap keeps all of its own
    assert labeler.score("q3", docs).tolist() == [0, 1, 2, 3] and labeler.pairs_scored == 13


class _CountingDualEncoder(DualEncoder):
    """Records every batch of docs, and of queries, the model is asked to embed."""

    def __init__(self, path):
        super().__init__(path)
        self.doc_batches: list[list[str]] = []
        self.query_batches: list[list[str]] = []

    def encode_docs(self, texts):
        self.doc_batches.append(list(texts))
        return super().encode_docs(texts)

    def encode_queries(self, texts):
        self.query_batches.append(list(texts))
        return super().encode_queries(texts)


def test_a_second_query_over_the_same_docs_embeds_nothing_new(minilm_dir):
    encoder = _CountingDualEncoder(minilm_dir)
    labeler = DualEncoderLabeler(encoder)
    labeler.score("vitamin d", DOCS, "index-a")
    assert len(encoder.doc_batches) == 1 and labeler.docs_embedded == 3
    labeler.score("breast cancer", DOCS, "index-a")
    labeler.score("shards", list(reversed(DOCS)), "index-a")
    assert len(encoder.doc_batches) == 1 and labeler.docs_embedded == 3
    assert labeler.pairs_scored == 9  # pairs are still counted per query
    labeler.score("shards", DOCS[:1], "index-b")  # another index: its own vector
    assert encoder.doc_batches[-1] == [DOCS[0][1]] and labeler.docs_embedded == 4


def test_reused_doc_vectors_give_the_phi_a_fresh_labeler_gives(minilm_dir):
    warm = DualEncoderLabeler(DualEncoder(minilm_dir))
    warm.score("vitamin d", DOCS)
    for query in ("bone fractures", "BRCA1 risk"):
        fresh = DualEncoderLabeler(DualEncoder(minilm_dir)).score(query, DOCS)
        assert warm.score(query, DOCS).tolist() == fresh.tolist()
    assert warm.docs_embedded == 3


def test_the_doc_vector_cache_is_bounded_and_drops_the_least_recent(minilm_dir):
    encoder = _CountingDualEncoder(minilm_dir)
    labeler = DualEncoderLabeler(encoder, cached_docs=2)
    labeler.score("q1", DOCS)  # three embedded, two kept: d2 and d3 (d1 least recent)
    labeler.score("q2", DOCS[1:])
    assert labeler.docs_embedded == 3
    labeler.score("q3", DOCS[:1])
    assert labeler.docs_embedded == 4 and encoder.doc_batches[-1] == [DOCS[0][1]]


def test_clear_cache_forgets_doc_vectors(minilm_dir):
    labeler = DualEncoderLabeler(DualEncoder(minilm_dir))
    labeler.score("q1", DOCS)
    labeler.clear_cache()
    labeler.score("q2", DOCS)
    assert labeler.docs_embedded == 6


def test_vectors_remembered_from_elsewhere_give_the_scores_embedding_gives(minilm_dir):
    encoder = DualEncoder(minilm_dir)
    embedding = DualEncoderLabeler(encoder)
    scores = embedding.score("bone fractures", DOCS, "idx")
    keys = [doc_key("idx", doc_id, text) for doc_id, text in DOCS]
    reading = DualEncoderLabeler(encoder)
    reading.remember(embedding.held(keys))
    np.testing.assert_array_equal(reading.score("bone fractures", DOCS, "idx"), scores)
    assert reading.docs_embedded == 0 and reading.pairs_scored == 3


def test_the_fingerprint_names_the_model_and_its_precision(minilm_dir):
    fp32 = DualEncoderLabeler(DualEncoder(minilm_dir))
    assert fp32.fingerprint == DualEncoderLabeler(DualEncoder(minilm_dir)).fingerprint
    int8 = DualEncoderLabeler(DualEncoder(minilm_dir, "int8"))
    assert int8.fingerprint != fp32.fingerprint


def test_an_int8_doc_vector_does_not_depend_on_the_docs_embedded_beside_it(minilm_dir):
    """int8 scales activations per model run: batched, a doc's vector moves with its
    batch-mates; run one doc at a time (int8's default) it is the same alone or in company,
    so φ is identical whether a doc was embedded, cached or read from the store."""
    texts = [text for _, text in DOCS] + [" ".join(["bone density in older adults"] * 30)]
    default, batched = DualEncoder(minilm_dir, "int8"), DualEncoder(minilm_dir, "int8",
                                                                     batch_size=8)
    alone = np.vstack([default.encode_docs([t]) for t in texts])
    np.testing.assert_array_equal(default.encode_docs(texts), alone)
    assert np.abs(batched.encode_docs(texts) - alone).max() > 1e-4
    assert default.batch_independent and not batched.batch_independent
    assert DualEncoderLabeler(default).fingerprint != DualEncoderLabeler(batched).fingerprint


def test_a_shorter_max_length_cuts_long_docs_only_and_keys_their_vectors_apart(minilm_dir):
    """max_length truncates the doc encoding: a short doc keeps its vector, a long one's
    changes, and the labeler's fingerprint (the store's key) tells the two apart."""
    full, cut = DualEncoder(minilm_dir), DualEncoder(minilm_dir, max_length=16)
    long_doc = " ".join(["vitamin d deficiency raises the risk of bone fractures"] * 20)
    short_doc = "Elasticsearch shards."
    assert np.allclose(full.encode_docs([short_doc]), cut.encode_docs([short_doc]), atol=1e-5)
    assert not np.allclose(full.encode_docs([long_doc]), cut.encode_docs([long_doc]), atol=1e-3)
    assert DualEncoderLabeler(full).fingerprint != DualEncoderLabeler(cut).fingerprint


def test_a_max_length_beyond_the_models_is_refused(minilm_dir):
    with pytest.raises(ConfigError, match="max_length"):
        DualEncoder(minilm_dir, max_length=10_000)
    with pytest.raises(ConfigError, match="max_length"):
        DualEncoder(minilm_dir, max_length=1)



def test_the_default_labeler_is_served_as_the_benches_label_with(default_labeler_dir):
    """What is served (load_labeler) and what the benches and quality tests label with
    (labeler_encoder) are the same encoding: precision and doc length."""
    from es_tour.models import labeler_encoder, load_labeler

    served = load_labeler("default")
    assert isinstance(served, DualEncoderLabeler)
    assert DualEncoderLabeler(labeler_encoder("default")).fingerprint == served.fingerprint


class _HeldEncoder(DualEncoder):
    """MiniLM whose first doc batch waits for `release`, so other threads queue behind it;
    `batches` records the size of each batch the model ran."""

    def __init__(self, path) -> None:
        super().__init__(path)
        self.started, self.release = threading.Event(), threading.Event()
        self.batches: list[int] = []

    def encode_docs(self, texts):  # type: ignore[no-untyped-def]
        self.batches.append(len(texts))
        if len(self.batches) == 1:
            self.started.set()
            assert self.release.wait(30)
        return super().encode_docs(texts)


def _threads_labelling(labeler: DualEncoderLabeler, work: list[list[tuple[str, str]]],
                       encoder: _HeldEncoder) -> list[np.ndarray]:
    """The first of `work` starts the held batch; the rest are queued behind it; then it
    is released and every thread's scores returned in order."""
    results: list[np.ndarray] = [np.zeros(0)] * len(work)

    def label(i: int) -> None:
        results[i] = labeler.score(f"query {i}", work[i], "idx")

    threads = [threading.Thread(target=label, args=(i,)) for i in range(len(work))]
    threads[0].start()
    assert encoder.started.wait(30)
    for thread in threads[1:]:
        thread.start()
    deadline = time.monotonic() + 30
    while labeler.queued_docs < len({doc for docs in work[1:] for doc in docs} - set(work[0])):
        assert time.monotonic() < deadline, "the other threads never queued their docs"
        time.sleep(0.01)
    encoder.release.set()
    for thread in threads:
        thread.join(30)
    return results


def test_threads_labelling_at_once_share_one_batch_and_embed_a_doc_once(minilm_dir):
    encoder = _HeldEncoder(minilm_dir)
    labeler = DualEncoderLabeler(encoder)
    texts = [f"doc {i} about vitamin D and bone density, sample {i}" for i in range(12)]
    docs = [(f"d{i}", text) for i, text in enumerate(texts)]
    # three searches queued behind the first; each shares docs with another
    work = [docs[0:4], docs[2:8], docs[6:10], docs[8:12]]
    _threads_labelling(labeler, work, encoder)
    assert encoder.batches == [4, 8]  # the three queued searches' 8 new docs in one run
    assert labeler.docs_embedded == 12
    assert labeler.queued_docs == 0


def test_shared_batches_give_the_phi_labelling_alone_gives(minilm_dir):
    encoder = _HeldEncoder(minilm_dir)
    shared = DualEncoderLabeler(encoder)
    docs = [(f"d{i}", DOCS[i % 3][1] + f" (part {i})") for i in range(9)]
    work = [docs[0:3], docs[3:6], docs[5:9]]
    together = _threads_labelling(shared, work, encoder)
    alone = DualEncoderLabeler(DualEncoder(minilm_dir))
    for i, docs_of_search in enumerate(work):
        np.testing.assert_allclose(together[i], alone.score(f"query {i}", docs_of_search, "idx"),
                                   atol=1e-5)


def test_an_error_in_a_shared_batch_reaches_every_thread_waiting_on_it(minilm_dir):
    class Failing(_HeldEncoder):
        def encode_docs(self, texts):  # type: ignore[no-untyped-def]
            if len(self.batches) == 1:  # the queued searches' batch
                self.batches.append(len(texts))
                raise RuntimeError("model failed")
            return super().encode_docs(texts)

    encoder = Failing(minilm_dir)
    labeler = DualEncoderLabeler(encoder)
    errors: list[BaseException] = []
    docs = [(f"d{i}", f"text {i}") for i in range(6)]

    def label(i: int, docs_of_search: list[tuple[str, str]]) -> None:
        try:
            labeler.score(f"q{i}", docs_of_search, "idx")
        except RuntimeError as exc:
            errors.append(exc)

    first = threading.Thread(target=label, args=(0, docs[:2]))
    first.start()
    assert encoder.started.wait(30)
    queued = [threading.Thread(target=label, args=(i, docs[2 * i: 2 * i + 2])) for i in (1, 2)]
    for thread in queued:
        thread.start()
    while labeler.queued_docs < 4:
        time.sleep(0.01)
    encoder.release.set()
    for thread in (first, *queued):
        thread.join(30)
    assert [str(e) for e in errors] == ["model failed"] * 2
    assert labeler.queued_docs == 0
    # the failed docs are not stuck as in flight: the next search embeds them
    assert labeler.score("q3", docs[2:4], "idx").shape == (2,)


def test_idle_model_threads_sleep_rather_than_spin(minilm_dir):
    # a spinning pool burns a core for ms after each short query run: CPU the engine needs
    encoder = DualEncoder(minilm_dir)
    options = encoder._session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


async def test_the_labelers_query_is_embedded_ahead_once_and_labelling_reuses_it(minilm_dir):
    """The sidecar embeds a labelling search's query for its labeler while the first round
    runs: on a labelling thread, once, and the labels then embed no query."""
    from es_tour.pipeline import ModelPool, SearchContext

    encoder = _CountingDualEncoder(minilm_dir)
    labeler = DualEncoderLabeler(encoder)
    pool = ModelPool(1)
    try:
        context = SearchContext(None, "index-a", encoder, labeler, pool=pool)
        await context.embed_labeler_query("vitamin d")
        assert encoder.query_batches == [["vitamin d"]]
        labeler.score("vitamin d", DOCS, "index-a")
        assert encoder.query_batches == [["vitamin d"]]
    finally:
        pool.close()


def test_score_held_answers_without_the_model_only_when_every_vector_is_in_memory(minilm_dir):
    labeler = DualEncoderLabeler(DualEncoder(minilm_dir))
    assert labeler.score_held("bone fractures", DOCS[:2]) is None  # no query vector yet
    labeler.query_vector("bone fractures")
    assert labeler.score_held("bone fractures", DOCS[:2]) is None  # no doc vector yet
    vectors = np.eye(2, labeler.encoder.dimension, dtype=np.float32)
    labeler.remember({doc_key("", doc_id, text): vector
                      for (doc_id, text), vector in zip(DOCS[:2], vectors, strict=True)})
    held = labeler.score_held("bone fractures", DOCS[:2])
    assert held is not None
    assert np.allclose(held, vectors @ labeler.query_vector("bone fractures"))
    assert labeler.pairs_scored == 2 and labeler.docs_embedded == 0
    assert labeler.score("bone fractures", DOCS[:2]).tolist() == held.tolist()  # now cached
    assert labeler.pairs_scored == 2
