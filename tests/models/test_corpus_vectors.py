"""Corpus vectors are a faster route to the same dual-encoder φ, which `es-tour eval`
takes by itself when it pays."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from es_tour.agents import CorpusLabeler, _labeling
from es_tour.cli import _shared
from es_tour.datasets import BeirDataset
from es_tour.evaluation import CORPUS_VECTORS_BREAK_EVEN
from es_tour.models import DualEncoder, DualEncoderLabeler
from es_tour.models._runtime import l2_normalize

DOCS = {
    "d1": ("Aspirin", "Aspirin lowers the risk of a second heart attack."),
    "d2": ("Vitamin D", "Vitamin D deficiency is common in northern winters."),
    "d3": ("Sleep", "Short sleep is associated with higher blood pressure."),
    "d4": ("Statins", "Statins reduce LDL cholesterol in most adults."),
    "d5": ("Exercise", "Regular exercise improves insulin sensitivity."),
    "d6": ("Smoking", "Smoking cessation lowers lung cancer incidence over time."),
}
QUERIES = ["does aspirin prevent heart attacks", "what lowers cholesterol"]


@pytest.fixture
def collection(tmp_path: Path) -> BeirDataset:
    root = tmp_path / "tiny"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": i, "title": title, "text": text}) + "\n"
        for i, (title, text) in DOCS.items()))
    (root / "queries.jsonl").write_text("".join(
        json.dumps({"_id": f"q{n}", "text": text}) + "\n" for n, text in enumerate(QUERIES)))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td1\t1\n")
    return BeirDataset(root)


@pytest.fixture
def encoder(minilm_dir: Path, monkeypatch: pytest.MonkeyPatch) -> DualEncoder:
    # the vectors of a throwaway corpus stay out of the shared model cache
    monkeypatch.setattr(_labeling, "unit_corpus_embeddings",
                        lambda enc, path, texts: l2_normalize(enc.encode_docs(texts)))
    return DualEncoder(minilm_dir)


def test_corpus_vectors_give_the_phi_of_encoding_each_doc(collection: BeirDataset,
                                                         encoder: DualEncoder) -> None:
    live = DualEncoderLabeler(encoder, "minilm")
    corpus = CorpusLabeler(encoder, collection, "minilm")
    docs = [(doc.id, doc.contents) for doc in collection.corpus()]
    for query in QUERIES:
        # a query's handful at a time, as a search labels them, against the whole corpus
        for window in (docs[:2], docs[1:5], docs):
            assert np.allclose(corpus.score(query, window), live.score(query, window),
                               atol=1e-5), (query, [i for i, _ in window])
    assert not np.allclose(live.score(QUERIES[0], docs), live.score(QUERIES[1], docs))


def test_eval_chooses_by_the_pairs_it_will_label(collection: BeirDataset, encoder: DualEncoder,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    labeler = DualEncoderLabeler(encoder, "minilm")
    even = int(np.ceil(CORPUS_VECTORS_BREAK_EVEN * len(DOCS)))
    assert _shared._corpus_vectors_pay(labeler, collection, even)
    assert "labelling by corpus vectors" in capsys.readouterr().err
    assert not _shared._corpus_vectors_pay(labeler, collection, even - 1)
    assert "labelling by encoding each labelled doc" in capsys.readouterr().err


def test_cached_corpus_vectors_are_always_taken(collection: BeirDataset, encoder: DualEncoder,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(_shared, "has_corpus_embeddings", lambda *args: True)
    assert _shared._corpus_vectors_pay(DualEncoderLabeler(encoder, "minilm"), collection, 1)
    assert "cached for this corpus" in capsys.readouterr().err


def test_a_labeler_without_vectors_labels_live_and_says_nothing(
        collection: BeirDataset, capsys: pytest.CaptureFixture[str]) -> None:
    class CrossLike:  # scores (query, doc) pairs jointly: no corpus vectors exist
        name = "cross"

    assert not _shared._corpus_vectors_pay(CrossLike(), collection, 10_000)  # type: ignore[arg-type]
    assert capsys.readouterr().err == ""


def test_a_copy_of_the_corpus_finds_its_vectors_and_a_changed_one_does_not(
        collection: BeirDataset, minilm_dir: Path, tmp_path: Path) -> None:
    from es_tour.models._corpus_cache import _cache_files

    encoder, texts = DualEncoder(minilm_dir), ["a", "b"]
    original = collection.root / "corpus.jsonl"
    copy = tmp_path / "elsewhere" / "corpus.jsonl"
    copy.parent.mkdir()
    copy.write_bytes(original.read_bytes())  # another path, another mtime: a remount
    assert _cache_files(encoder, copy, texts) == _cache_files(encoder, original, texts)
    copy.write_bytes(original.read_bytes() + b"\n")
    assert _cache_files(encoder, copy, texts) != _cache_files(encoder, original, texts)


def test_a_corpus_is_embedded_on_every_core_though_its_encoder_runs_one_thread(
        collection: BeirDataset, minilm_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from es_tour.models._corpus_cache import corpus_embeddings

    model = tmp_path / "minilm"  # its vectors' cache goes here, not to the shared one
    model.mkdir()
    for part in minilm_dir.iterdir():
        if part.is_file():
            (model / part.name).symlink_to(part)
    query_like = DualEncoder(model, threads=1)  # as `query_encoder` opens the retriever
    threads: list[int] = []
    encode_docs = DualEncoder.encode_docs

    def recording(self: DualEncoder, texts: list[str], on_batch=None) -> np.ndarray:
        threads.append(self._session.get_session_options().intra_op_num_threads)
        return encode_docs(self, texts, on_batch)

    monkeypatch.setattr(DualEncoder, "encode_docs", recording)
    texts = [doc.contents for doc in collection.corpus()]
    vectors, _ = corpus_embeddings(query_like, collection.root / "corpus.jsonl", texts)
    assert threads == [0]  # onnxruntime's default: a thread per core
    assert np.allclose(vectors, encode_docs(query_like, texts), atol=1e-5)


def test_the_retriever_labelling_at_int8_reads_the_corpus_vectors_ingest_cached(
        minilm_dir: Path) -> None:
    from es_tour.models import labeler_encoder, query_encoder

    retriever = query_encoder("retriever")
    at_int8 = labeler_encoder("retriever", precision="int8")
    assert at_int8.doc_encoding == retriever.doc_encoding  # one cache key: no embedding again
    assert labeler_encoder("retriever").doc_encoding != retriever.doc_encoding  # fp32's own


def test_encoding_a_corpus_tells_each_batch_done_and_gives_the_same_vectors(
        encoder: DualEncoder) -> None:
    texts = [f"{title} {text}" for title, text in DOCS.values()] * 10
    batches: list[int] = []
    vectors = encoder.encode_docs(texts, batches.append)
    assert sum(batches) == len(texts) and len(batches) > 1
    assert np.allclose(vectors, encoder.encode_docs(texts), atol=1e-6)
