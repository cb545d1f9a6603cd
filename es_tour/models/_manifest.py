"""`manifest.json`: what a model directory holds and how to run it, checked once on load."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from es_tour.errors import ModelError

MANIFEST = "manifest.json"
CACHE = "cache"  # per-model derived data (corpus embeddings); not listed in the manifest
FORMAT = 1
KINDS = ("dual", "cross")
POOLINGS = ("mean", "cls")
PRECISIONS = ("fp32", "int8")


@dataclass(frozen=True)
class Manifest:
    """The contents of `manifest.json`.

    `models` maps a precision ("fp32", "int8") to its ONNX file; `files` maps every
    file in the directory that the model needs to its sha256. `parity` holds the
    figures measured when the directory was written (see docs/models.md).
    Pooling and normalisation run in numpy on the graph's `last_hidden_state`;
    `pooling`, `normalize` and `dimension` are None for cross models.

    A dual model whose query tower was tuned apart from its doc tower (`es-tour
    train-labeler`) names its query graphs in `query_models` and the registry model its doc
    graphs are a copy of in `docs_from`, so its doc vectors are that model's.
    """

    kind: str
    max_length: int
    models: dict[str, str]
    files: dict[str, str]
    inputs: tuple[str, ...]
    output: str
    pad_id: int
    source: str
    pooling: str | None = None
    normalize: bool | None = None
    dimension: int | None = None
    query_prefix: str = ""
    doc_prefix: str = ""
    num_labels: int | None = None
    tokenizer: str = "tokenizer.json"
    parity: dict[str, Any] = field(default_factory=dict)
    name: str | None = None
    query_models: dict[str, str] = field(default_factory=dict)
    docs_from: str | None = None
    format: int = FORMAT

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["inputs"] = list(self.inputs)
        return out


_REQUIRED = ("kind", "max_length", "models", "files", "inputs", "output", "pad_id", "source")


def read_manifest(directory: str | Path) -> Manifest:
    """Parse and validate `<directory>/manifest.json`; ModelError says what is wrong."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ModelError(
            f"model directory [{directory}] does not exist; build it with "
            "`es-tour models build NAME` or export one with `es-tour export`"
        )
    path = directory / MANIFEST
    if not path.is_file():
        raise ModelError(f"[{directory}] has no {MANIFEST}; it is not an es-tour model directory")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"cannot read [{path}]: {exc}") from exc
    if not isinstance(raw, dict):
        raise ModelError(f"[{path}] must hold a JSON object, got {type(raw).__name__}")
    return _validate(raw, path)


def _validate(raw: dict[str, Any], path: Path) -> Manifest:
    missing = [key for key in _REQUIRED if key not in raw]
    if missing:
        raise ModelError(f"[{path}] lacks the keys {missing}")
    known = set(Manifest.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ModelError(f"[{path}] has unknown keys {unknown}; supported: {sorted(known)}")
    if raw.get("format", FORMAT) != FORMAT:
        raise ModelError(f"[{path}] has format {raw.get('format')}, this es-tour reads {FORMAT}")
    if raw["kind"] not in KINDS:
        raise ModelError(f"[{path}] kind [{raw['kind']}] is not one of {list(KINDS)}")
    if not isinstance(raw["max_length"], int) or raw["max_length"] < 2:
        raise ModelError(f"[{path}] max_length [{raw['max_length']}] must be an integer >= 2")
    models = raw["models"]
    if not isinstance(models, dict) or "fp32" not in models:
        raise ModelError(f"[{path}] models must map precisions to files and include fp32")
    bad = sorted(set(models) - set(PRECISIONS))
    if bad:
        raise ModelError(f"[{path}] unknown precisions {bad}; supported: {list(PRECISIONS)}")
    if not isinstance(raw["files"], dict):
        raise ModelError(f"[{path}] files must map file names to sha256")
    query_models = raw.get("query_models", {})
    if query_models and (raw["kind"] != "dual" or not isinstance(query_models, dict)
                         or set(query_models) != set(models)):
        raise ModelError(f"[{path}] query_models must map the precisions of models "
                         f"{sorted(models)} to files, and only for a dual model")
    for needed in [*models.values(), *query_models.values(),
                   raw.get("tokenizer", "tokenizer.json")]:
        if needed not in raw["files"]:
            raise ModelError(f"[{path}] does not list [{needed}] under files")
    if raw["kind"] == "dual":
        if raw.get("pooling") not in POOLINGS:
            raise ModelError(
                f"[{path}] pooling [{raw.get('pooling')}] is not one of {list(POOLINGS)}"
            )
        if not isinstance(raw.get("normalize"), bool):
            raise ModelError(f"[{path}] normalize must be true or false for a dual model")
        if not isinstance(raw.get("dimension"), int):
            raise ModelError(f"[{path}] dimension must be an integer for a dual model")
    elif not isinstance(raw.get("num_labels"), int) or raw["num_labels"] < 1:
        raise ModelError(f"[{path}] num_labels must be a positive integer for a cross model")
    try:
        return Manifest(**{**raw, "inputs": tuple(raw["inputs"])})
    except TypeError as exc:
        raise ModelError(f"[{path}] is malformed: {exc}") from exc


def write_manifest(directory: Path, manifest: Manifest) -> Path:
    """Write `manifest.json` atomically (write then rename)."""
    path = directory / MANIFEST
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest.to_json(), indent=2, sort_keys=True) + "\n", "utf-8")
    tmp.replace(path)
    return path


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_files(directory: Path, manifest: Manifest) -> list[str]:
    """Files whose sha256 differs from the manifest, or that are missing; [] when intact."""
    bad = []
    for name, expected in manifest.files.items():
        path = directory / name
        if not path.is_file() or sha256(path) != expected:
            bad.append(name)
    return bad
