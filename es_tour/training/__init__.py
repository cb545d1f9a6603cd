"""Offline tooling, on top of the runtime: ONNX export and registry builds, reranker
fine-tuning, mining candidates from the engine, corpus evaluation of encoders, and
cloning the agents' policy from oracle sessions. Only this package imports torch."""

from __future__ import annotations

from es_tour.training._agents import TrainReport, sample_queries, train_policy
from es_tour.training._build import Built, build, build_all
from es_tour.training._corpus import EncoderEvaluation, evaluate_encoder
from es_tour.training._export import export_model

__all__ = [
    "Built",
    "EncoderEvaluation",
    "TrainReport",
    "build",
    "build_all",
    "evaluate_encoder",
    "export_model",
    "sample_queries",
    "train_policy",
]
