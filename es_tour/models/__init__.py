"""Encoders behind two verbs: `encode` (dual) and `predict` / `rank` (cross), and labelers.

Runtime code here imports onnxruntime (lazily) and tokenizers, never torch; only
`export_model` (and `build` of models that need exporting) imports torch, inside the call.
"""

from __future__ import annotations

from es_tour.models._build import Built, build, build_all, model_path
from es_tour.models._export import export_model
from es_tour.models._labelers import (
    CrossEncoderLabeler,
    DualEncoderLabeler,
    Labeler,
    load_labeler,
)
from es_tour.models._manifest import Manifest, read_manifest
from es_tour.models._runtime import CrossEncoder, DualEncoder, Ranked, available_providers
from es_tour.models._select import Evaluation, evaluate, load_beir

__all__ = [
    "Built",
    "CrossEncoder",
    "CrossEncoderLabeler",
    "DualEncoder",
    "DualEncoderLabeler",
    "Evaluation",
    "Labeler",
    "Manifest",
    "Ranked",
    "available_providers",
    "build",
    "build_all",
    "evaluate",
    "export_model",
    "load_beir",
    "load_labeler",
    "model_path",
    "read_manifest",
]
