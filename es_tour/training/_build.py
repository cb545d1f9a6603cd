"""Build registry models into `models_dir()/<name>/`, once; opening them never builds."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from es_tour.errors import ModelError
from es_tour.models import model_path
from es_tour.models._manifest import CACHE, MANIFEST, Manifest, read_manifest, verify_files
from es_tour.paths import models_dir
from onnx_models import MODELS, ModelSpec, spec


class Built(NamedTuple):
    """What `build` did for one model."""

    name: str
    path: Path
    rebuilt: bool
    seconds: float


def build(name: str, force: bool = False) -> Built:
    """Build one registry model unless an intact, up-to-date copy is already there.

    Intact: every file the manifest lists has its sha256. Up to date: kind, source,
    max_length, pooling, normalisation, prefixes and int8 match the registry entry.
    """
    recipe = spec(name)
    target = model_path(recipe.name)
    started = time.monotonic()
    if not force and is_current(recipe):
        return Built(recipe.name, target, False, time.monotonic() - started)
    root = models_dir()
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".build-{recipe.name}-", dir=root) as tmp:
        work = Path(tmp)
        staged = work / "model"
        fetched = recipe.source.fetch(work / "source")
        if recipe.source.ready_onnx:
            _from_onnx(recipe, fetched, staged)
        else:
            _export(recipe, fetched, staged)
        _swap_in(staged, target)
    return Built(recipe.name, target, True, time.monotonic() - started)


def build_all(force: bool = False) -> list[Built]:
    """Build every registry model (see `build`)."""
    return [build(name, force) for name in MODELS]


def is_current(recipe: ModelSpec) -> bool:
    """True when `models_dir()/<name>` is intact and matches the registry entry."""
    directory = model_path(recipe.name)
    try:
        manifest = read_manifest(directory)
    except ModelError:
        return False
    wanted = (
        recipe.kind,
        recipe.source.describe(),
        recipe.max_length,
        recipe.pooling,
        recipe.normalize,
        recipe.query_prefix,
        recipe.doc_prefix,
        recipe.int8,
    )
    found = (
        manifest.kind,
        manifest.source,
        manifest.max_length,
        manifest.pooling,
        manifest.normalize,
        manifest.query_prefix,
        manifest.doc_prefix,
        "int8" in manifest.models,
    )
    return wanted == found and not verify_files(directory, manifest)


def _export(recipe: ModelSpec, hf_dir: Path, staged: Path) -> None:
    from es_tour.training._export import export_model

    export_model(
        hf_dir,
        recipe.kind,
        staged,
        int8=recipe.int8,
        max_length=recipe.max_length,
        pooling=recipe.pooling,
        normalize=recipe.normalize,
        query_prefix=recipe.query_prefix,
        doc_prefix=recipe.doc_prefix,
        name=recipe.name,
        source=recipe.source.describe(),
    )


def _from_onnx(recipe: ModelSpec, fetched: Path, staged: Path) -> None:
    """Copy ready-made ONNX files and write their manifest; parity is measured without a
    PyTorch reference (padding invariance, and int8 against fp32)."""
    from es_tour.models._runtime import _onnxruntime
    from es_tour.training._export import finalize

    staged.mkdir(parents=True)
    files = ["model.onnx", "tokenizer.json"]
    for name in files:
        shutil.copyfile(fetched / name, staged / name)
    int8: bool | str = False
    if recipe.int8:
        if (fetched / "model.int8.onnx").is_file():
            shutil.copyfile(fetched / "model.int8.onnx", staged / "model.int8.onnx")
            int8 = "model.int8.onnx"
        else:
            int8 = True
    ort = _onnxruntime()
    session = ort.InferenceSession(str(staged / "model.onnx"), providers=["CPUExecutionProvider"])
    outputs = session.get_outputs()
    output = outputs[0]
    if recipe.kind == "dual":
        # the per-token hidden states: `last_hidden_state`, or an exporter's own name for
        # them (a graph that also outputs its pooled vector, say)
        output = next((o for o in outputs if o.name == "last_hidden_state"), None) or next(
            (o for o in outputs if len(o.shape) == 3), output)
    dimension = output.shape[-1]
    if recipe.kind == "dual" and (len(output.shape) != 3 or not isinstance(dimension, int)):
        raise ModelError(
            f"{recipe.name}: expected a (batch, tokens, width) hidden-state output with a "
            f"fixed width, got {[(o.name, o.shape) for o in outputs]}"
        )
    manifest = Manifest(
        kind=recipe.kind,
        max_length=recipe.max_length,
        models={"fp32": "model.onnx"},
        files={},
        inputs=tuple(i.name for i in session.get_inputs()),
        output=output.name,
        pad_id=_pad_id(staged / "tokenizer.json"),
        source=recipe.source.describe(),
        pooling=recipe.pooling if recipe.kind == "dual" else None,
        normalize=recipe.normalize if recipe.kind == "dual" else None,
        dimension=int(dimension) if recipe.kind == "dual" else None,
        query_prefix=recipe.query_prefix,
        doc_prefix=recipe.doc_prefix,
        num_labels=int(dimension) if recipe.kind == "cross" else None,
        name=recipe.name,
    )
    del session
    finalize(staged, manifest, files, None, int8)


def _pad_id(tokenizer_json: Path) -> int:
    """The padding token id of a tokenizer.json: its padding config, else [PAD] or <pad>."""
    data = json.loads(tokenizer_json.read_text("utf-8"))
    padding = data.get("padding") or {}
    if "pad_id" in padding:
        return int(padding["pad_id"])
    tokens = {t["content"]: t["id"] for t in data.get("added_tokens", [])}
    vocab = data.get("model", {}).get("vocab", {})
    for name in ("[PAD]", "<pad>"):
        if name in tokens:
            return int(tokens[name])
        if isinstance(vocab, dict) and name in vocab:
            return int(vocab[name])
    raise ModelError(f"[{tokenizer_json}] names no padding token ([PAD] or <pad>)")


def _swap_in(staged: Path, target: Path) -> None:
    """Replace `target` by `staged` so readers never see a half-written directory."""
    if not (staged / MANIFEST).is_file():
        raise ModelError(f"build of [{target.name}] wrote no {MANIFEST}")
    old = target.with_name(f".old-{target.name}-{time.time_ns()}")
    if target.exists():
        if (target / CACHE).is_dir() and not (staged / CACHE).exists():
            # Corpus embeddings are keyed by the model file's sha256, so they stay valid
            # or are simply never hit again.
            (target / CACHE).rename(staged / CACHE)
        target.rename(old)
    staged.rename(target)
    shutil.rmtree(old, ignore_errors=True)
