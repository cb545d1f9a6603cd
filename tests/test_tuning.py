"""tune's pure parts: where each step's queries come from (fit, guard, report), which
candidate it chooses, and the settings that make an index run the choice (no engine)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from es_tour.datasets import BeirDataset
from es_tour.errors import ConfigError
from es_tour.evaluation import MethodSpec
from es_tour.recommended import FRONTIER_20, FRONTIER_LABEL
from es_tour.server._options import index_settings, resolve, settings_for
from es_tour.tuning import (
    CANDIDATES,
    HELD_OUT_SEED,
    HELD_OUT_SHARE,
    VALIDATION_SHARE,
    Fitted,
    choose,
    fused_spec,
    plain_spec,
    splits,
)


def _collection(root: Path, split_queries: dict[str, int]) -> BeirDataset:
    """A BEIR directory whose splits judge `n` queries each (ids <split>-<i>)."""
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text('{"_id": "d1", "title": "", "text": "a doc"}\n')
    ids = {split: [f"{split}-{i}" for i in range(n)] for split, n in split_queries.items()}
    (root / "queries.jsonl").write_text("".join(
        f'{{"_id": "{qid}", "text": "query {qid}"}}\n' for qids in ids.values() for qid in qids))
    for split, qids in ids.items():
        (root / "qrels" / f"{split}.tsv").write_text(
            "query-id\tcorpus-id\tscore\n" + "".join(f"{qid}\td1\t1\n" for qid in qids))
    return BeirDataset(root)


def test_train_fits_and_guards_and_test_only_reports_when_both_are_judged(tmp_path):
    data = _collection(tmp_path, {"train": 10, "test": 3})
    divided = splits(data)
    assert (divided.fit, divided.report) == ("train", "test")
    fit, guard = divided.queries(data, "fit"), divided.queries(data, "validation")
    assert not set(fit) & set(guard)
    assert set(fit) | set(guard) == {f"train-{i}" for i in range(10)}
    assert len(guard) == round(10 * VALIDATION_SHARE)
    assert set(divided.queries(data, "report")) == {f"test-{i}" for i in range(3)}
    assert splits(data) == divided  # the same validation queries on every run
    assert divided.describe() == (
        "fitted on 7 train queries, the guard against rerank-hybrid and the labeler-free "
        "candidates decided on 3 other train queries (seed 0), reported on the 3 test queries, "
        "which no decision reads")


def test_one_judged_split_is_divided_into_fit_guard_and_report_with_fixed_seeds(tmp_path):
    data = _collection(tmp_path, {"test": 40})
    divided = splits(data)
    parts = [set(divided.queries(data, part)) for part in ("fit", "validation", "report")]
    fit, guard, report = parts
    assert not fit & guard and not fit & report and not guard & report
    assert fit | guard | report == {f"test-{i}" for i in range(40)}
    assert len(report) == round(40 * HELD_OUT_SHARE)
    assert len(guard) == round((40 - len(report)) * VALIDATION_SHARE)
    assert splits(data) == divided  # the same queries in each part on every run
    assert report != {f"test-{i}" for i in range(len(report))}  # drawn, not the first N
    assert divided.describe() == (
        "fitted on 20 test queries, the guard against rerank-hybrid and the labeler-free "
        "candidates decided on 8 other test queries (seed 0), reported on the other 12 (held "
        "out with seed 0), which no decision reads")


def test_one_split_holds_out_for_the_report_what_it_held_out_before_the_guard(tmp_path):
    # the report's part is the old held-out part: the fit and the guard divide the rest
    data = _collection(tmp_path, {"test": 40})
    ids = sorted(f"test-{i}" for i in range(40))
    random.Random(HELD_OUT_SEED).shuffle(ids)
    assert set(splits(data).queries(data, "report")) == set(ids[:12])


@pytest.mark.parametrize("judged", [{}, {"dev": 4, "test": 4}, {"test": 1}, {"test": 2},
                                    {"train": 1, "test": 4}])
def test_a_collection_tune_cannot_divide_is_a_clear_error(tmp_path, judged):
    with pytest.raises(ConfigError, match=r"tune needs a train split|too few to hold"):
        splits(_collection(tmp_path, judged))


def test_the_best_fitted_candidate_is_chosen_and_the_earlier_on_a_tie():
    fitted = [Fitted(plain_spec(name, 20), 0.1, 0.0, ndcg)
              for name, ndcg in zip(CANDIDATES[:4], (0.70, 0.75, 0.75, 0.60), strict=True)]
    assert choose(fitted) is fitted[1]


@pytest.mark.parametrize("budget", [10, 20, 40])
@pytest.mark.parametrize("candidate", CANDIDATES)
def test_the_settings_of_a_choice_resolve_to_its_method_and_options(candidate, budget):
    spec = fused_spec(plain_spec(candidate, budget), 0.3, 0.1)
    settings = settings_for(spec.name, spec.options)
    # the engine hands settings back as strings
    flat = {key: str(value).lower() if isinstance(value, bool) else str(value)
            for key, value in settings.items()}
    defaults = {"method": "knn", "labeler": "default", "encoder": "retriever",
                "vector_field": "embedding", "text_fields": ("title", "text")}
    resolved = resolve({}, index_settings(flat), defaults)
    assert (resolved.method, resolved.options) == (spec.name, spec.options)
    assert index_settings(flat)["enabled"] is True


def test_the_frontier_settings_are_its_label_as_settings():
    spec = MethodSpec.parse(f"{FRONTIER_LABEL}:w_dense=0.0")
    assert settings_for(spec.name, spec.options) == FRONTIER_20


def test_an_option_only_a_request_can_give_is_refused():
    with pytest.raises(ConfigError, match=r"\['scale'\] have no index.tour"):
        settings_for("tour-hard", {"k": 10, "scale": 2.0})


def test_member_weights_are_fitted_on_phi_alone_and_named_back() -> None:
    import numpy as np

    from es_tour.tuning import Pool, fit_members, weighted_labeler

    # the first member ranks the relevant doc last, the second first: the second's
    # weight must outweigh the first's 0.6 margin, and the grid's least such is 0.75
    pools = {f"q{i}": Pool(["rel", "other"], np.zeros(2), np.zeros(2), np.zeros(2), [],
                           np.array([[0.0, 1.0], [0.6, 0.0]], dtype=np.float32))
             for i in range(3)}
    qrels = {qid: {"rel": 1} for qid in pools}
    weights, ndcg = fit_members(pools, qrels)
    assert weights == (1.0, 0.75) and ndcg == 1.0
    assert weighted_labeler("a+b", weights) == f"a^1+b^{weights[1]:g}"
    assert weighted_labeler("a+b+c", (1.0, 0.0, 0.5)) == "a^1+c^0.5"  # a 0 leaves it out
    assert weighted_labeler("a+b", (1.0, 0.0)) == "a"


def test_member_weights_need_an_ensembles_pools() -> None:
    import numpy as np

    from es_tour.tuning import Pool, fit_members

    with pytest.raises(ConfigError, match="ensemble"):
        fit_members({"q": Pool(["d"], np.zeros(1), np.zeros(1), np.zeros(1), [])}, {})
