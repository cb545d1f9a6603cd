"""Opening a model fails with a ModelError that says what is wrong."""

from __future__ import annotations

import json
import shutil

import pytest

from es_tour.errors import ConfigError, ModelError
from es_tour.models import CrossEncoder, DualEncoder, load_labeler, model_path


def test_missing_directory_raises_model_error(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        DualEncoder(tmp_path / "nowhere")


def test_directory_without_manifest_raises_model_error(tmp_path):
    with pytest.raises(ModelError, match=r"manifest\.json"):
        DualEncoder(tmp_path)


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "cannot read"),
        ("[1, 2]", "JSON object"),
        (json.dumps({"kind": "dual"}), "lacks the keys"),
    ],
)
def test_bad_manifest_raises_model_error(tmp_path, content, message):
    (tmp_path / "manifest.json").write_text(content)
    with pytest.raises(ModelError, match=message):
        DualEncoder(tmp_path)


def _copy_with_manifest(src, dst, **changes):
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("cache", "*.onnx"))
    manifest = json.loads((dst / "manifest.json").read_text())
    manifest.update(changes)
    (dst / "manifest.json").write_text(json.dumps(manifest))
    return dst


def test_unknown_manifest_key_and_bad_pooling_are_rejected(tmp_path, minilm_dir):
    with pytest.raises(ModelError, match="unknown keys"):
        DualEncoder(_copy_with_manifest(minilm_dir, tmp_path / "a", colour="blue"))
    with pytest.raises(ModelError, match="pooling"):
        DualEncoder(_copy_with_manifest(minilm_dir, tmp_path / "b", pooling="max"))


def test_missing_model_file_raises_model_error(tmp_path, minilm_dir):
    with pytest.raises(ModelError, match="missing"):
        DualEncoder(_copy_with_manifest(minilm_dir, tmp_path / "c"))


def test_wrong_kind_raises_model_error(minilm_dir, tiny_cross_dir):
    with pytest.raises(ModelError, match="open it with DualEncoder"):
        CrossEncoder(minilm_dir)
    with pytest.raises(ModelError, match="open it with CrossEncoder"):
        DualEncoder(tiny_cross_dir)


def test_unknown_precision_lists_the_options(minilm_dir):
    with pytest.raises(ConfigError, match=r"\['fp32', 'int8'\]"):
        DualEncoder(minilm_dir, precision="fp16")


def test_unknown_registry_name_lists_the_models():
    with pytest.raises(ConfigError, match="minilm-l6"):
        model_path("no-such-model")
    with pytest.raises(ConfigError, match="default"):
        load_labeler("no-such-model")
