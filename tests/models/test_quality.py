"""The default labeler alone beats the retriever alone on SciFact test (nDCG@10).

Encodes the SciFact corpus with both models the first time (minutes on two cores);
the corpus embeddings are cached in each model's directory, so later runs take seconds.
"""

from __future__ import annotations

from es_tour.datasets import BeirDataset
from es_tour.models import labeler_encoder, query_encoder
from es_tour.training import evaluate_encoder
from onnx_models import DEFAULT_LABELER, RETRIEVER


def test_default_labeler_beats_retriever_on_scifact_test(scifact, minilm_dir,
                                                          default_labeler_dir):
    data = BeirDataset(scifact).split("test")
    labeler = evaluate_encoder(labeler_encoder("default"), data, "test")  # as it labels
    # as the sidecar and es-tour index open it: the corpus embedding the suite's indices share
    retriever = evaluate_encoder(query_encoder(RETRIEVER), data, "test")
    assert labeler.model == DEFAULT_LABELER and retriever.model == RETRIEVER
    assert labeler.queries == retriever.queries == 300
    assert labeler.ndcg_at_10 > retriever.ndcg_at_10, (labeler, retriever)
