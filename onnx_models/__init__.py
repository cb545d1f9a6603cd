"""The registry of named ONNX models: what each is, where it comes from, how it is built.

`es_tour.models.build(name)` turns an entry into `models_dir()/<name>/`.
"""

from __future__ import annotations

from onnx_models._registry import (
    ALIASES,
    DEFAULT_LABELER,
    LABELER_CANDIDATES,
    MODELS,
    RETRIEVER,
    ModelSpec,
    resolve,
    spec,
)
from onnx_models._sources import MavenOnnx, PypiSplitZip, SitePackagesDir, Source

__all__ = [
    "ALIASES",
    "DEFAULT_LABELER",
    "LABELER_CANDIDATES",
    "MODELS",
    "RETRIEVER",
    "MavenOnnx",
    "ModelSpec",
    "PypiSplitZip",
    "SitePackagesDir",
    "Source",
    "resolve",
    "spec",
]
