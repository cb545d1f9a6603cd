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
from es_tour.models._ensemble import (
    WEIGHT_MARK,
    EnsembleLabeler,
    Member,
    ensemble_name,
    is_ensemble,
    load_labeler,
    parse_ensemble,
    vector_labelers,
)
from es_tour.models._labelers import (
    CrossEncoderLabeler,
    DocKey,
    DualEncoderLabeler,
    Labeler,
    doc_key,
    labeler_encoder,
    model_path,
    query_encoder,
)
from es_tour.models._manifest import Manifest, read_manifest
from es_tour.models._runtime import (
    QUERY_THREADS,
    CrossEncoder,
    DualEncoder,
    Ranked,
    available_providers,
)

__all__ = [
    "QUERY_THREADS",
    "WEIGHT_MARK",
    "CrossEncoder",
    "CrossEncoderLabeler",
    "DocKey",
    "DualEncoder",
    "DualEncoderLabeler",
    "EnsembleLabeler",
    "Labeler",
    "Manifest",
    "Member",
    "Ranked",
    "available_providers",
    "corpus_embeddings",
    "doc_key",
    "ensemble_name",
    "has_corpus_embeddings",
    "is_ensemble",
    "labeler_encoder",
    "load_labeler",
    "model_path",
    "parse_ensemble",
    "query_encoder",
    "read_manifest",
    "unit_corpus_embeddings",
    "vector_labelers",
]
