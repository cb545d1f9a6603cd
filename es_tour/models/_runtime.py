"""ONNX runtime encoders: `DualEncoder.encode_*` and `CrossEncoder.predict` / `rank`.

Nothing here imports torch. onnxruntime is imported when the first model is opened.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from es_tour.errors import ConfigError, ModelError
from es_tour.models._manifest import PRECISIONS, Manifest, read_manifest

DEFAULT_BATCH_SIZE = 32
# int8 models quantize their activations with one scale per model run, so an input's
# output would depend on its batch-mates; they run one input at a time unless told.
# On CPU that costs nothing: one SciFact doc of ~300 tokens already fills both cores.
INT8_BATCH_SIZE = 1
# A query is one short input: a second intra-op thread saves ~1 ms of its run and costs ~2
# ms more CPU (bge-small int8, 12 tokens, 2 cores: 5.8 ms CPU alone, 7.6 with two)
QUERY_THREADS = 1


def _onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError as exc:
        raise ModelError(
            "onnxruntime is not installed: `pip install onnxruntime` "
            "(or `pip install 'es-tour[gpu]'` for CUDA)"
        ) from exc
    return onnxruntime


def available_providers() -> list[str]:
    """Execution providers to use, best first: CUDA when onnxruntime offers it, then CPU."""
    offered = _onnxruntime().get_available_providers()
    return [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in offered]


class _OnnxModel:
    """Shared loading, tokenisation and length-bucketed batching of both encoder kinds."""

    kind: str

    def __init__(
        self,
        path: str | Path,
        precision: str = "fp32",
        threads: int | None = None,
        batch_size: int | None = None,
        providers: Sequence[str] | None = None,
        max_length: int | None = None,
    ) -> None:
        """`max_length` truncates inputs below the manifest's (a cheaper doc encoding);
        `batch_size` defaults to DEFAULT_BATCH_SIZE, or INT8_BATCH_SIZE for int8."""
        if batch_size is None:
            batch_size = INT8_BATCH_SIZE if precision == "int8" else DEFAULT_BATCH_SIZE
        if precision not in PRECISIONS:
            raise ConfigError(f"precision [{precision}] is not one of {list(PRECISIONS)}")
        if threads is not None and threads < 1:
            raise ConfigError(f"threads [{threads}] must be >= 1 (or None for all cores)")
        if batch_size < 1:
            raise ConfigError(f"batch_size [{batch_size}] must be >= 1")
        self.path = Path(path)
        manifest = read_manifest(self.path)
        if manifest.kind != self.kind:
            other = "CrossEncoder" if manifest.kind == "cross" else "DualEncoder"
            raise ModelError(
                f"[{self.path}] holds a {manifest.kind} model; open it with {other}, "
                f"not {type(self).__name__}"
            )
        if precision not in manifest.models:
            raise ModelError(
                f"[{self.path}] has no {precision} model; it has {sorted(manifest.models)}"
            )
        self.manifest: Manifest = manifest
        self.max_length = manifest.max_length if max_length is None else max_length
        if not 2 <= self.max_length <= manifest.max_length:
            raise ConfigError(f"max_length [{self.max_length}] must be between 2 and the "
                              f"model's [{manifest.max_length}]")
        self.precision = precision
        self.batch_size = batch_size
        model_file = self.path / manifest.models[precision]
        tokenizer_file = self.path / manifest.tokenizer
        for needed in (model_file, tokenizer_file):
            if not needed.is_file():
                raise ModelError(f"[{needed}] is missing; rebuild the model directory")
        self._tokenizer = _load_tokenizer(tokenizer_file, self.max_length)
        self._providers = providers
        self._threads = threads
        self._session = self._open(model_file, threads)

    def _open(self, model_file: Path, threads: int | None) -> Any:
        """An onnxruntime session on `model_file` running `threads` intra-op threads
        (default: one per core), checked for the manifest's output and for inputs this
        runtime feeds."""
        ort = _onnxruntime()
        options = ort.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # idle pool threads sleep rather than spin: a spinning pool burns a core for ms after
        # each short query run (measured: 58 ms CPU a search's two query embeddings, 22 ms
        # without), CPU the engine beside it would use
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            session = ort.InferenceSession(
                str(model_file),
                sess_options=options,
                providers=list(self._providers) if self._providers else available_providers(),
            )
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise ModelError(f"onnxruntime cannot load [{model_file}]: {exc}") from exc
        outputs = [o.name for o in session.get_outputs()]
        if self.manifest.output not in outputs:
            raise ModelError(
                f"[{model_file}] has no output [{self.manifest.output}]; it has {outputs}"
            )
        unknown = {i.name for i in session.get_inputs()} - {
            "input_ids", "attention_mask", "token_type_ids"}
        if unknown:
            raise ModelError(f"[{model_file}] expects unsupported inputs {sorted(unknown)}")
        return session

    @property
    def providers(self) -> list[str]:
        return list(self._session.get_providers())

    @property
    def batch_independent(self) -> bool:
        """Whether an input's output is the same whatever inputs share its model run: padding
        is masked, but int8 activations are scaled per run (INT8_BATCH_SIZE)."""
        return self.precision != "int8" or self.batch_size == 1

    def _run(self, encodings: list[Any], session: Any = None, batch_size: int | None = None
             ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Yield (rows, outputs[0], attention_mask) per batch of `batch_size` (default: the
        model's), longest inputs first, from `session` (default: the model's).

        Sorting by token length keeps padding small; `rows` says where each output row
        belongs in the caller's order.
        """
        lengths = np.array([len(e.ids) for e in encodings])
        order = np.argsort(-lengths, kind="stable")
        pad = self.manifest.pad_id
        batch_size = batch_size or self.batch_size
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            width = int(lengths[rows].max())
            ids = np.full((len(rows), width), pad, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            types = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                e = encodings[i]
                n = len(e.ids)
                ids[r, :n] = e.ids
                mask[r, :n] = e.attention_mask
                types[r, :n] = e.type_ids
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            run = session or self._session
            out = run.run([self.manifest.output],
                          {i.name: feed[i.name] for i in run.get_inputs()})
            yield rows, out[0], mask


def _load_tokenizer(path: Path, max_length: int) -> Any:
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception on bad files
        raise ModelError(f"cannot read tokenizer [{path}]: {exc}") from exc
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length, strategy="longest_first")
    return tokenizer


class DualEncoder(_OnnxModel):
    """A bi-encoder: queries and documents map to (d,) vectors compared by dot product.

    Prefixes, pooling (mean or CLS over `last_hidden_state`, in numpy) and L2
    normalisation come from the directory's manifest.
    """

    kind = "dual"

    def __init__(
        self,
        path: str | Path,
        precision: str = "fp32",
        threads: int | None = None,
        batch_size: int | None = None,
        providers: Sequence[str] | None = None,
        query_prefix: str | None = None,
        doc_prefix: str | None = None,
        max_length: int | None = None,
        query_precision: str | None = None,
    ) -> None:
        """`query_prefix` / `doc_prefix` replace the manifest's when given (ablations);
        `query_precision` (default: `precision`) is the graph queries run on."""
        super().__init__(path, precision, threads, batch_size, providers, max_length)
        self.query_prefix = self.manifest.query_prefix if query_prefix is None else query_prefix
        self.doc_prefix = self.manifest.doc_prefix if doc_prefix is None else doc_prefix
        self.query_precision = query_precision or precision
        graphs = self.manifest.query_models or self.manifest.models
        if self.query_precision not in graphs:
            raise ConfigError(f"[{self.path}] has no {self.query_precision} query model; it "
                              f"has {sorted(graphs)}")
        # queries run on a session of their own, one thread each, unless the model runs
        # one thread anyway (a query encoder) on the same graph
        self._query_session = self._session
        query_file = self.path / graphs[self.query_precision]
        if not query_file.is_file():
            raise ModelError(f"[{query_file}] is missing; rebuild the model directory")
        if (self.manifest.query_models or threads != QUERY_THREADS
                or self.query_precision != precision):
            self._query_session = self._open(query_file, QUERY_THREADS)
        # int8 queries one at a time: their activations' scale is per model run
        self._query_batch = INT8_BATCH_SIZE if self.query_precision == "int8" else batch_size

    def for_corpus(self) -> DualEncoder:
        """This model with its doc graph on every core, for embedding a whole corpus (a
        query encoder, `query_encoder`, runs one thread: 8 against 13 SciFact docs/s on
        two cores); itself when it already runs on every core."""
        if self._threads is None:
            return self
        return DualEncoder(self.path, self.precision, None, self.batch_size, self._providers,
                           self.query_prefix, self.doc_prefix, self.max_length,
                           self.query_precision)

    @property
    def dimension(self) -> int:
        assert self.manifest.dimension is not None
        return self.manifest.dimension

    @property
    def normalized(self) -> bool:
        return bool(self.manifest.normalize)

    @property
    def doc_encoding(self) -> list[Any]:
        """What a doc's vector depends on besides its text: the model file, precision,
        max_length, doc prefix, pooling, normalisation and whether batch-mates change it
        (the keys of kept doc vectors)."""
        m = self.manifest
        return [m.files[m.models[self.precision]], self.precision, self.max_length,
                self.doc_prefix, m.pooling, m.normalize, self.batch_independent]

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """texts: n queries -> (n, d) float32, unit length when the manifest normalises."""
        return self._encode([self.query_prefix + t for t in texts], self._query_session,
                            self._query_batch)

    def encode_docs(self, texts: Sequence[str],
                    on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        """texts: n documents -> (n, d) float32, unit length when the manifest normalises;
        `on_batch` is told the texts of each batch done."""
        return self.encode([self.doc_prefix + t for t in texts], on_batch)

    def encode(self, texts: Sequence[str], on_batch: Callable[[int], None] | None = None
               ) -> np.ndarray:
        """texts (prefixes already applied): n strings -> (n, d) float32, by the doc graph."""
        return self._encode(texts, self._session, on_batch=on_batch)

    def _encode(self, texts: Sequence[str], session: Any, batch_size: int | None = None,
                on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        if isinstance(texts, str):
            raise ConfigError("encode takes a sequence of strings, not one string")
        result = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return result
        encodings = self._tokenizer.encode_batch(list(texts))
        for rows, hidden, mask in self._run(encodings, session, batch_size):
            result[rows] = pool(hidden, mask, self.manifest.pooling or "mean")
            if on_batch is not None:
                on_batch(len(rows))
        if self.manifest.normalize:
            result = l2_normalize(result)
        return result


def pool(hidden: np.ndarray, mask: np.ndarray, pooling: str) -> np.ndarray:
    """hidden: (b, t, d), mask: (b, t) -> (b, d) float32 by mean over real tokens, or CLS."""
    if pooling == "cls":
        return np.asarray(hidden[:, 0], dtype=np.float32)
    m = mask[..., None].astype(np.float32)
    summed = (hidden * m).sum(axis=1)
    return np.asarray(summed / np.clip(m.sum(axis=1), 1e-9, None), dtype=np.float32)


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """x: (n, d) -> (n, d) float32 with unit rows (zero rows stay zero)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.asarray(x / np.clip(norms, 1e-12, None), dtype=np.float32)


@dataclass(frozen=True)
class Ranked:
    """One document in a `CrossEncoder.rank` answer: its index in the input and its score."""

    index: int
    score: float


class CrossEncoder(_OnnxModel):
    """A cross-encoder: (query, document) pairs in, one relevance score per pair out.

    The score is the logit for single-label models and the log-probability of the last
    label for multi-label ones; higher is more relevant.
    """

    kind = "cross"

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """pairs: n (query, doc) -> (n,) float32 scores."""
        scores = np.zeros(len(pairs), dtype=np.float32)
        if not pairs:
            return scores
        encodings = self._tokenizer.encode_batch([(q, d) for q, d in pairs])
        for rows, logits, _ in self._run(encodings):
            scores[rows] = _relevance(logits)
        return scores

    def score(self, query: str, docs: Sequence[str]) -> np.ndarray:
        """query and n docs -> (n,) float32 scores in the docs' order."""
        return self.predict([(query, d) for d in docs])

    def rank(self, query: str, docs: Sequence[str], top_k: int | None = None) -> list[Ranked]:
        """Docs sorted by `predict` score, best first; the top_k best when given."""
        scores = self.score(query, docs)
        order = np.argsort(-scores, kind="stable")[:top_k]
        return [Ranked(int(i), float(scores[i])) for i in order]


def _relevance(logits: np.ndarray) -> np.ndarray:
    """logits: (b, labels) -> (b,) float32."""
    if logits.shape[1] == 1:
        return np.asarray(logits[:, 0], dtype=np.float32)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return np.asarray(log_probs[:, -1], dtype=np.float32)
