"""Encoders behind two verbs: `encode` (dual) and `predict` / `rank` (cross), and labelers.

The query-path runtime: it imports onnxruntime (lazily) and tokenizers, never torch.
Exporting, building registry models and training live in `es_tour.training`.
"""

from __future__ import annotations

from es_tour.models._corpus_cache import (
    corpus_embeddings,
    has_corpus_embeddings,
    unit_corpus_embeddings,
)
from es_tour.models._labelers import (
    CrossEncoderLabeler,
    DocKey,
    DualEncoderLabeler,
    Labeler,
    doc_key,
    labeler_encoder,
    load_labeler,
    model_path,
)
from es_tour.models._manifest import Manifest, read_manifest
from es_tour.models._runtime import CrossEncoder, DualEncoder, Ranked, available_providers

__all__ = [
    "CrossEncoder",
    "CrossEncoderLabeler",
    "DocKey",
    "DualEncoder",
    "DualEncoderLabeler",
    "Labeler",
    "Manifest",
    "Ranked",
    "available_providers",
    "corpus_embeddings",
    "doc_key",
    "has_corpus_embeddings",
    "labeler_encoder",
    "load_labeler",
    "model_path",
    "read_manifest",
    "unit_corpus_embeddings",
]
