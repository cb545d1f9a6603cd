"""The sidecar's models: resolved by name as `eval --labeler` resolves them, loaded once on
first use, a bounded number kept, and a bad one a 400 naming it."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from es_tour.errors import ConfigError
from es_tour.models import model_path
from es_tour.server._models import Models, _Loaded, check_model


def _cross_manifest(directory: Path) -> Path:
    """A cross model's manifest whose ONNX file is missing: a directory that is not a
    usable model."""
    directory.mkdir()
    (directory / "manifest.json").write_text(json.dumps({
        "kind": "cross", "max_length": 16, "models": {"fp32": "model.onnx"},
        "files": {"model.onnx": "0", "tokenizer.json": "0"}, "inputs": ["input_ids"],
        "output": "logits", "pad_id": 0, "source": "test", "num_labels": 1}))
    return directory


def test_a_missing_directory_or_one_that_is_no_model_is_a_400_naming_it(tmp_path):
    missing, empty = tmp_path / "missing", tmp_path / "empty"
    empty.mkdir()
    for name, why in ((missing, "does not exist"), (empty, "not an es-tour model directory")):
        for load in (Models().labeler, Models().query_encoder, check_model):
            with pytest.raises(ConfigError, match=why) as raised:
                load(str(name))
            assert str(name) in str(raised.value) and raised.value.status == 400
    with pytest.raises(ConfigError, match=r"unknown model \[nope\]"):
        Models().labeler("nope")


def test_a_cross_model_is_no_query_encoder_and_a_broken_one_no_labeler(tmp_path):
    cross = str(_cross_manifest(tmp_path / "reranker"))
    assert check_model(cross).kind == "cross"
    with pytest.raises(ConfigError, match=r"model \[.*reranker\] is a cross-encoder"):
        Models().query_encoder(cross)
    with pytest.raises(ConfigError, match=r"labeler \[.*reranker\] cannot be loaded.*missing"):
        Models().labeler(cross)


def test_a_model_directory_serves_as_labeler_and_encoder_as_its_registry_name_does():
    directory = model_path("minilm-l6")
    if not directory.is_dir():
        pytest.skip("minilm-l6 is not built (`es-tour models build minilm-l6`)")
    models = Models()
    by_path = models.labeler(str(directory)).score("heart attack", [("1", "myocardial infarct")])
    by_name = models.labeler("minilm-l6").score("heart attack", [("1", "myocardial infarct")])
    assert by_path == pytest.approx(by_name)
    assert models.query_encoder(str(directory)).dimension == 384


def test_models_load_once_per_name_and_keep_a_bounded_number():
    loads: list[str] = []

    def load(name: str) -> str:
        loads.append(name)
        time.sleep(0.05)  # long enough for the other threads to ask meanwhile
        return f"model {name}"

    cache = _Loaded(2, load)
    threads = [threading.Thread(target=cache.get, args=("a",)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loads == ["a"]
    assert [cache.get(name) for name in ("b", "c")] == ["model b", "model c"]
    assert len(cache) == 2 and loads == ["a", "b", "c"]
    cache.get("a")  # dropped as the least recently used: loaded again
    assert loads == ["a", "b", "c", "a"] and len(cache) == 2


def test_a_failed_load_is_not_kept_and_is_tried_again():
    calls = []

    def load(name: str) -> str:
        calls.append(name)
        if len(calls) == 1:
            raise ConfigError(f"model [{name}] cannot be used")
        return name

    cache = _Loaded(2, load)
    with pytest.raises(ConfigError):
        cache.get("x")
    assert cache.get("x") == "x" and calls == ["x", "x"]
