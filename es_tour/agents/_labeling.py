"""A dual-encoder labeler that reads corpus vectors cached by the model instead of encoding.

φ(q, d) is the same cosine `DualEncoderLabeler` computes, but each doc of the corpus is a
row lookup: what makes oracle sessions over hundreds of training queries affordable on a
CPU. Texts outside the corpus are encoded as usual.
"""

from __future__ import annotations

import numpy as np

from es_tour.datasets import BeirDataset
from es_tour.models import (
    DualEncoder,
    DualEncoderLabeler,
    EnsembleLabeler,
    Labeler,
    unit_corpus_embeddings,
)
from es_tour.models._labelers import DocKey


class CorpusLabeler(DualEncoderLabeler):
    """φ = cosine(query, doc) over `dataset`'s cached corpus vectors: (n, d) float32."""

    def __init__(self, encoder: DualEncoder, dataset: BeirDataset, name: str | None = None):
        super().__init__(encoder, name)
        texts = [doc.contents for doc in dataset.corpus()]
        self._vectors = unit_corpus_embeddings(encoder, dataset.root / "corpus.jsonl", texts)
        self._rows = {text: row for row, text in enumerate(texts)}

    def _score_new(self, query: str, keys: list[DocKey], texts: list[str]) -> np.ndarray:
        rows = [self._rows.get(text) for text in texts]
        unknown = [(key, text) for key, text, row in zip(keys, texts, rows, strict=True)
                   if row is None]
        if unknown:  # the parent encodes them (and embeds and caches the query)
            encoded = iter(super()._score_new(
                query, [key for key, _ in unknown], [text for _, text in unknown]).tolist())
        q = self.query_vector(query)
        return np.array([float(self._vectors[row] @ q) if row is not None else next(encoded)
                         for row in rows], dtype=np.float32)


def corpus_labeler(labeler: Labeler, dataset: BeirDataset) -> Labeler:
    """The same φ as `labeler` with each dual encoder over `dataset`'s cached corpus vectors
    (an ensemble's members each over theirs); a cross-encoder is kept as it is."""
    if isinstance(labeler, EnsembleLabeler):
        return EnsembleLabeler([(corpus_labeler(member, dataset), weight) for member, weight
                                in zip(labeler.members, labeler.member_weights, strict=True)])
    if isinstance(labeler, DualEncoderLabeler):
        return CorpusLabeler(labeler.encoder, dataset, labeler.name)
    return labeler
