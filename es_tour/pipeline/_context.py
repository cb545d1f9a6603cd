"""Everything a search method needs: the engine and index, the query encoder, the labeler."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from es_tour.engines import ClientEngine, Hit, KnnReturns
from es_tour.models import DualEncoder, Labeler
from es_tour.pipeline._types import Timings
from es_tour.tour import LabelCache


@dataclass
class SearchContext:
    engine: ClientEngine
    index: str
    encoder: DualEncoder
    labeler: Labeler
    text_fields: tuple[str, ...] = ("title", "text")
    vector_field: str = "embedding"

    def doc_text(self, source: dict[str, Any]) -> str:
        return " ".join(str(source.get(name, "")) for name in self.text_fields).strip()

    def embed_query(self, query: str, timings: Timings) -> np.ndarray:
        with timings.model():
            return self.encoder.encode_queries([query])[0]

    def label(
        self, query: str, hits: Sequence[Hit], timings: Timings, labels: LabelCache
    ) -> tuple[np.ndarray, int]:
        """φ(query, hit) for each hit, and how many pairs were newly scored.

        `labels` is the search's own cache, so the pairs counted are this search's cost
        even when the labeler remembers the query from an earlier search.
        """
        missing = set(labels.missing([h.id for h in hits]))
        if missing:
            new = [(h.id, self.doc_text(dict(h.source))) for h in hits if h.id in missing]
            new = list(dict(new).items())
            with timings.model():
                scores = self.labeler.score(query, new, self.index)
            labels.update([doc_id for doc_id, _ in new], scores)
        return labels.get([h.id for h in hits]).astype(np.float32), len(missing)

    async def knn(
        self, vector: np.ndarray, k: int, timings: Timings, ids: Sequence[str] | None = None,
        returns: KnnReturns = "vectors",
    ) -> list[Hit]:
        # A positive rescale leaves the ranking by q·c unchanged, and Elasticsearch's
        # dot_product similarity rejects query vectors that are not unit length (TOUR's are not).
        unit = vector / max(float(np.linalg.norm(vector)), 1e-12)
        with timings.engine():
            return await self.engine.knn(
                self.index,
                unit,
                k,
                num_candidates=max(100, 2 * k),
                field=self.vector_field,
                ids=ids,
                returns=returns,
            )

    async def bm25(
        self, query: str, k: int, timings: Timings, ids: Sequence[str] | None = None
    ) -> list[Hit]:
        with timings.engine():
            return await self.engine.bm25(
                self.index, query, k, fields=self.text_fields, ids=ids, exclude=[self.vector_field]
            )


def open_context(
    engine: str, url: str, index: str, *, encoder: str = "retriever", labeler: str = "default"
) -> SearchContext:
    """A context over a running engine with registry models (built by `es-tour models build`)."""
    from es_tour.engines import connect
    from es_tour.models import load_labeler, model_path
    from onnx_models import spec

    return SearchContext(
        connect(engine, url),
        index,
        DualEncoder(model_path(spec(encoder).name)),
        load_labeler(labeler),
    )
