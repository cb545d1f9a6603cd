"""Export Hugging Face encoders to ONNX model directories with a parity-checked manifest.

torch and transformers are imported inside the functions that need them, so the runtime
(`es_tour.models`) never loads them.

The dual-encoder graph returns `last_hidden_state` (b, t, d); pooling (mean or CLS) and
L2 normalisation run in numpy in `DualEncoder`, so exported models and ready-made ONNX
files (which also end at `last_hidden_state`) go through one code path.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from es_tour.errors import ConfigError, ModelError
from es_tour.models._manifest import (
    KINDS,
    MANIFEST,
    POOLINGS,
    Manifest,
    sha256,
    write_manifest,
)
from es_tour.training._parity import cross_parity, dual_parity, parity_pairs
from es_tour.training._samples import PARITY_TEXTS

OPSET = 17
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "merges.txt",
    "vocab.json",
    "sentencepiece.bpe.model",
    "spiece.model",
)
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _export_deps() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise ModelError(
            f"exporting needs torch and transformers ({exc.name} is missing): "
            "`pip install 'es-tour[export]'`"
        ) from exc
    return torch, transformers


def export_model(
    model: str | Path,
    kind: str,
    out: str | Path,
    int8: bool = False,
    max_length: int = 256,
    pooling: str = "mean",
    normalize: bool = True,
    query_prefix: str = "",
    doc_prefix: str = "",
    *,
    name: str | None = None,
    source: str | None = None,
) -> Manifest:
    """Export a BERT-family model (a local HF directory or a hub id) to `out`.

    Writes `model.onnx` (opset 17, dynamic batch and sequence axes), the tokenizer files,
    `manifest.json` with sha256 of every file and parity against PyTorch on fixed sample
    texts, and with `int8` also `model.int8.onnx` (onnxruntime dynamic quantisation)
    with its parity against fp32. `kind` "dual" loads AutoModel (output
    `last_hidden_state` (b, t, d)), "cross" AutoModelForSequenceClassification
    (output `logits` (b, labels)). Returns the manifest written.
    """
    _check_options(kind, max_length, pooling)
    torch, transformers = _export_deps()
    out = Path(out)
    source = source or str(model)
    tokenizer, net = _load(transformers, model, kind)
    inputs = [n for n in _INPUTS if n in tokenizer.model_input_names or n != "token_type_ids"]
    if "token_type_ids" in inputs and not _accepts(net, "token_type_ids"):
        inputs.remove("token_type_ids")
    if tokenizer.pad_token_id is None:
        raise ModelError(f"the tokenizer of [{model}] has no padding token")

    # Reference outputs come first: tracing can leave the PyTorch module in a state
    # whose later outputs differ from the exported graph's.
    if kind == "dual":
        reference = _torch_embeddings(
            torch, tokenizer, net, list(PARITY_TEXTS), max_length, pooling, normalize
        )
        output = "last_hidden_state"
    else:
        reference = _torch_scores(torch, tokenizer, net, parity_pairs(), max_length)
        output = "logits"

    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        staged = Path(tmp)
        _trace(torch, net, tokenizer, inputs, output, staged / "model.onnx")
        tokenizer_files = _copy_tokenizer(model, tokenizer, staged)
        for f in staged.iterdir():
            f.replace(out / f.name)
    config = net.config
    manifest = Manifest(
        kind=kind,
        max_length=max_length,
        models={"fp32": "model.onnx"},
        files={},
        inputs=tuple(inputs),
        output=output,
        pad_id=int(tokenizer.pad_token_id),
        source=source,
        pooling=pooling if kind == "dual" else None,
        normalize=normalize if kind == "dual" else None,
        dimension=int(config.hidden_size) if kind == "dual" else None,
        query_prefix=query_prefix if kind == "dual" else "",
        doc_prefix=doc_prefix if kind == "dual" else "",
        num_labels=int(config.num_labels) if kind == "cross" else None,
        name=name,
    )
    return finalize(out, manifest, ["model.onnx", *tokenizer_files], reference, int8)


def finalize(
    directory: Path,
    manifest: Manifest,
    files: Sequence[str],
    reference: np.ndarray | None,
    int8: bool | str,
) -> Manifest:
    """Hash `files`, quantise when `int8` is True (or copy the given int8 file name when it
    is a str already in `directory`), measure parity and write `manifest.json`."""
    files = list(files)
    models = dict(manifest.models)
    kept_fp32: list[str] | None = None
    if int8 is True:
        kept_fp32 = quantize(directory / models["fp32"], directory / "model.int8.onnx")
        models["int8"] = "model.int8.onnx"
    elif isinstance(int8, str):
        models["int8"] = int8
    if "int8" in models and models["int8"] not in files:
        files.append(models["int8"])
    draft = replace(manifest, models=models, files={f: sha256(directory / f) for f in files})
    write_manifest(directory, draft)
    measure = dual_parity if manifest.kind == "dual" else cross_parity
    parity = measure(directory, reference, sorted(models))
    if kept_fp32 is not None:
        parity["int8"]["method"] = (
            "onnxruntime quantize_dynamic, QInt8 per channel, "
            f"{len(kept_fp32)} feed-forward output MatMuls kept fp32"
        )
    final = replace(draft, parity=parity)
    write_manifest(directory, final)
    return final


def quantize(fp32: Path, int8: Path) -> list[str]:
    """Dynamic int8 quantisation of the weights, per channel; activations stay float.

    The feed-forward output projections (`.../output/dense/MatMul` outside attention) stay
    fp32: their inputs carry the outlier activations that wreck int8 accuracy (MPNet's
    cosine to fp32 drops to ~0.77 with them quantised, ~0.98 without). Returns the
    names of the nodes left in fp32.
    """
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise ModelError(
            f"int8 export needs onnx and onnxruntime ({exc.name} is missing): "
            "`pip install 'es-tour[export]'`"
        ) from exc
    graph = onnx.load(str(fp32), load_external_data=False).graph
    weights = {i.name for i in graph.initializer}
    keep = [
        n.name
        for n in graph.node
        if n.op_type == "MatMul"
        and any(i in weights for i in n.input)
        and n.name.endswith("/output/dense/MatMul")
        and "/attention/" not in n.name
    ]
    logging.disable(logging.WARNING)  # quiets "consider pre-processing" on the root logger
    try:
        quantize_dynamic(
            str(fp32), str(int8), weight_type=QuantType.QInt8, per_channel=True,
            nodes_to_exclude=keep,
        )
    finally:
        logging.disable(logging.NOTSET)
    return keep


def _check_options(kind: str, max_length: int, pooling: str) -> None:
    if kind not in KINDS:
        raise ConfigError(f"kind [{kind}] is not one of {list(KINDS)}")
    if pooling not in POOLINGS:
        raise ConfigError(f"pooling [{pooling}] is not one of {list(POOLINGS)}")
    if max_length < 2:
        raise ConfigError(f"max_length [{max_length}] must be >= 2")


def _load(transformers: Any, model: str | Path, kind: str) -> tuple[Any, Any]:
    auto = (
        transformers.AutoModel
        if kind == "dual"
        else transformers.AutoModelForSequenceClassification
    )
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(model), use_fast=True)
        try:
            net = auto.from_pretrained(str(model), attn_implementation="eager")
        except (TypeError, ValueError):
            net = auto.from_pretrained(str(model))
    except OSError as exc:
        raise ModelError(
            f"cannot load [{model}] with transformers: {exc}. Pass a local model directory, "
            "or a hub id when the hub is reachable."
        ) from exc
    if not getattr(tokenizer, "is_fast", False):
        raise ModelError(f"[{model}] has no fast (tokenizers) tokenizer; it cannot be exported")
    return tokenizer, net.eval()


def _accepts(net: Any, argument: str) -> bool:
    import inspect

    return argument in inspect.signature(net.forward).parameters


def _tensors(torch: Any, tokenizer: Any, texts: Any, max_length: int) -> dict[str, Any]:
    return dict(
        tokenizer(
            texts,
            padding=True,
            truncation=True,
            max_length=max_length,
            return_tensors="pt",
        )
    )


def _torch_embeddings(
    torch: Any,
    tokenizer: Any,
    net: Any,
    texts: list[str],
    max_length: int,
    pooling: str,
    normalize: bool,
) -> np.ndarray:
    """texts -> (n, d) float32 from PyTorch, pooled like sentence-transformers."""
    rows = []
    with torch.no_grad():
        for text in texts:  # one at a time: the reference is free of padding effects
            enc = _tensors(torch, tokenizer, [text], max_length)
            feed = {k: v for k, v in enc.items() if _accepts(net, k)}
            vec = torch_pool(net(**feed).last_hidden_state, enc["attention_mask"], pooling)
            if normalize:
                vec = torch.nn.functional.normalize(vec, p=2, dim=1)
            rows.append(vec[0].float().numpy())
    return np.stack(rows).astype(np.float32)


def torch_pool(hidden: Any, mask: Any, pooling: str | None) -> Any:
    """(b, t, d) hidden states, (b, t) mask -> (b, d): CLS, or the mean over real tokens
    (what `models._runtime.pool` does in numpy)."""
    if pooling == "cls":
        return hidden[:, 0]
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)


def _torch_scores(
    torch: Any, tokenizer: Any, net: Any, pairs: list[tuple[str, str]], max_length: int
) -> np.ndarray:
    """pairs -> (n,) float32 relevance from PyTorch, defined as in CrossEncoder."""
    from es_tour.models._runtime import _relevance

    out = []
    with torch.no_grad():
        for query, doc in pairs:
            enc = dict(
                tokenizer(
                    [query], [doc], truncation=True, max_length=max_length, return_tensors="pt"
                )
            )
            feed = {k: v for k, v in enc.items() if _accepts(net, k)}
            out.append(_relevance(net(**feed).logits.float().numpy())[0])
    return np.array(out, dtype=np.float32)


def _trace(
    torch: Any, net: Any, tokenizer: Any, inputs: list[str], output: str, path: Path
) -> None:
    class _Graph(torch.nn.Module):  # type: ignore[misc]  # torch is imported lazily, untyped
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: Any) -> Any:
            result = self.inner(**dict(zip(inputs, args, strict=True)))
            return getattr(result, output)

    # Two texts of different lengths, so the traced graph sees real padding.
    enc = _tensors(torch, tokenizer, ["a short text", "a somewhat longer example text"], 16)
    if "token_type_ids" in inputs and "token_type_ids" not in enc:
        enc["token_type_ids"] = torch.zeros_like(enc["input_ids"])
    args = tuple(enc[name] for name in inputs)
    axes = {name: {0: "batch", 1: "sequence"} for name in inputs}
    axes[output] = {0: "batch", 1: "sequence"} if output == "last_hidden_state" else {0: "batch"}
    # The TorchScript exporter warns about traced branches and its own deprecation; the
    # parity figures measured right after export are the real check of the graph.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Graph(net),
                args,
                str(path),
                dynamo=False,
                opset_version=OPSET,
                input_names=inputs,
                output_names=[output],
                dynamic_axes=axes,
                do_constant_folding=True,
            )
    except Exception as exc:  # the exporter raises many unrelated types
        raise ModelError(f"torch.onnx.export failed: {exc}") from exc


def _copy_tokenizer(model: str | Path, tokenizer: Any, into: Path) -> list[str]:
    """Copy the tokenizer files of a local directory; always provide tokenizer.json."""
    copied = []
    local = Path(model)
    if local.is_dir():
        for name in TOKENIZER_FILES:
            if (local / name).is_file():
                shutil.copyfile(local / name, into / name)
                copied.append(name)
    if "tokenizer.json" not in copied:
        tokenizer.backend_tokenizer.save(str(into / "tokenizer.json"))
        copied.append("tokenizer.json")
    return copied

