"""ONNX encoders agree with PyTorch (fp32) and with fp32 (int8)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from es_tour.errors import ConfigError
from es_tour.models import (
    QUERY_THREADS,
    CrossEncoder,
    DualEncoder,
    query_encoder,
    read_manifest,
)
from es_tour.training._parity import rank_average, row_cosines, spearman


def _sentence_transformers_embeddings(hf_dir: Path, texts: list[str], max_length: int):
    """Mean pooling over real tokens, then L2 normalisation, as sentence-transformers does."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(hf_dir))
    model = AutoModel.from_pretrained(str(hf_dir)).eval()
    with torch.no_grad():
        enc = tokenizer(texts, padding=True, truncation=True, max_length=max_length,
                        return_tensors="pt")
        hidden = model(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).float()
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2, dim=1).numpy()


def test_minilm_fp32_matches_pytorch_on_scifact_sample(minilm_dir, minilm_hf_dir, scifact_docs):
    texts = [text for _, text in scifact_docs[:32]]
    reference = _sentence_transformers_embeddings(minilm_hf_dir, texts, 256)
    onnx = DualEncoder(minilm_dir).encode_docs(texts)
    assert onnx.shape == (32, 384) and onnx.dtype == np.float32
    cosines = row_cosines(onnx, reference)
    assert cosines.min() >= 0.999, cosines.min()
    assert np.allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-5)


def test_minilm_int8_close_to_fp32_per_text(minilm_dir, scifact_docs):
    texts = [text for _, text in scifact_docs[:32]]
    fp32 = DualEncoder(minilm_dir, "fp32").encode_docs(texts)
    int8 = DualEncoder(minilm_dir, "int8").encode_docs(texts)
    assert row_cosines(int8, fp32).min() >= 0.98


def test_minilm_int8_keeps_doc_ranking(minilm_dir, scifact_docs, scifact_queries):
    texts = [text for _, text in scifact_docs]
    assert len(texts) == 100
    fp32, int8 = DualEncoder(minilm_dir, "fp32"), DualEncoder(minilm_dir, "int8")
    d32, d8 = fp32.encode_docs(texts), int8.encode_docs(texts)
    q32, q8 = fp32.encode_queries(scifact_queries[:4]), int8.encode_queries(scifact_queries[:4])
    for i in range(4):
        assert spearman(d8 @ q8[i], d32 @ q32[i]) >= 0.99


def test_manifest_records_parity_measured_at_build(minilm_dir):
    """Ready ONNX has no PyTorch reference at build (test_models_registry compares it with
    the exported weights): int8 is measured against fp32, padding against single texts."""
    manifest = read_manifest(minilm_dir)
    assert manifest.parity["int8"]["reference"] == "fp32"
    assert manifest.parity["int8"]["cosine_min"] >= 0.98
    assert manifest.parity["padding"]["cosine_min"] >= 0.9999


def test_tiny_cross_encoder_matches_pytorch(tiny_cross_hf, tiny_cross_dir):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    pairs = [("what is bm25", "BM25 is a ranking function used by search engines."),
             ("x", "a much longer document " * 20),
             ("query expansion", "pseudo relevance feedback adds terms"),
             ("", "empty query")]
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_cross_hf))
    model = AutoModelForSequenceClassification.from_pretrained(str(tiny_cross_hf)).eval()
    with torch.no_grad():
        enc = tokenizer([q for q, _ in pairs], [d for _, d in pairs], padding=True,
                        truncation=True, max_length=64, return_tensors="pt")
        reference = model(**enc).logits[:, 0].numpy()
    encoder = CrossEncoder(tiny_cross_dir)
    scores = encoder.predict(pairs)
    assert scores.shape == (4,) and scores.dtype == np.float32
    assert np.abs(scores - reference).max() < 1e-4
    assert read_manifest(tiny_cross_dir).parity["fp32"]["max_abs_diff"] < 1e-4


def test_cross_rank_is_predict_sorted(tiny_cross_dir):
    encoder = CrossEncoder(tiny_cross_dir)
    docs = ["alpha beta", "gamma", "delta epsilon zeta", "eta"]
    scores = encoder.score("alpha", docs)
    ranked = encoder.rank("alpha", docs)
    assert [r.index for r in ranked] == list(np.argsort(-scores, kind="stable"))
    assert [r.score for r in ranked] == pytest.approx(sorted(scores.tolist(), reverse=True))
    assert len(encoder.rank("alpha", docs, top_k=2)) == 2


def test_batching_restores_input_order(minilm_dir):
    texts = ["short", "a rather longer text about proteins and cells", "mid length text", "z"]
    batched = DualEncoder(minilm_dir, batch_size=2).encode(texts)
    single = np.vstack([DualEncoder(minilm_dir).encode([t]) for t in texts])
    assert row_cosines(batched, single).min() > 0.99999


def test_empty_input_gives_empty_arrays(minilm_dir, tiny_cross_dir):
    assert DualEncoder(minilm_dir).encode_queries([]).shape == (0, 384)
    assert CrossEncoder(tiny_cross_dir).predict([]).shape == (0,)


def test_spearman_uses_average_ranks_for_ties():
    assert rank_average(np.array([3.0, 1.0, 3.0])).tolist() == [2.5, 1.0, 2.5]
    assert spearman(np.arange(5.0), np.arange(5.0) ** 3) == pytest.approx(1.0)


def test_prefixes_come_from_manifest_unless_overridden(minilm_dir):
    plain = DualEncoder(minilm_dir)
    prefixed = DualEncoder(minilm_dir, query_prefix="query: ", doc_prefix="passage: ")
    assert (plain.query_prefix, plain.doc_prefix) == ("", "")
    assert np.allclose(prefixed.encode_queries(["cells"]), plain.encode(["query: cells"]))
    assert np.allclose(prefixed.encode_docs(["cells"]), plain.encode(["passage: cells"]))


def test_queries_run_one_thread_on_their_own_session_and_embed_as_docs_do(minilm_dir):
    model = DualEncoder(minilm_dir, threads=2)
    query_session, doc_session = model._query_session, model._session
    assert query_session is not doc_session
    assert query_session.get_session_options().intra_op_num_threads == QUERY_THREADS == 1
    assert doc_session.get_session_options().intra_op_num_threads == 2
    assert np.allclose(model.encode_queries(["cells divide"]), model.encode(["cells divide"]),
                       atol=1e-6)
    one_thread = DualEncoder(minilm_dir, threads=QUERY_THREADS)
    assert one_thread._query_session is one_thread._session  # no second copy of the model


def test_the_retriever_embeds_queries_and_docs_on_its_int8_graph_one_at_a_time(
        minilm_dir, scifact_queries):
    encoder = query_encoder("minilm-l6")
    fp32 = DualEncoder(minilm_dir, threads=QUERY_THREADS)
    int8 = DualEncoder(minilm_dir, "int8", threads=QUERY_THREADS)
    assert (encoder.precision, encoder.query_precision) == ("int8", "int8")
    texts = scifact_queries[:3]  # as docs, each alone as the int8 graph gives it
    docs = encoder.for_corpus().encode_docs(texts)
    assert np.allclose(docs, np.concatenate([int8.encode_docs([t]) for t in texts]), atol=1e-6)
    assert not np.allclose(docs, fp32.encode_docs(texts), atol=1e-4)
    queries = encoder.encode_queries(scifact_queries)
    # each query alone, as the int8 graph gives it (its activations scale per run)
    assert np.allclose(queries, np.concatenate([int8.encode_queries([q])
                                                for q in scifact_queries]), atol=1e-6)
    assert not np.allclose(queries, fp32.encode_queries(scifact_queries), atol=1e-4)
    assert np.min(np.sum(queries * fp32.encode_queries(scifact_queries), axis=1)) > 0.98


def test_a_model_without_the_query_precision_asked_is_a_config_error(minilm_dir):
    with pytest.raises(ConfigError, match="has no fp16 query model"):
        DualEncoder(minilm_dir, query_precision="fp16")
