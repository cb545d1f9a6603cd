"""Generated docs record commands a reader can run on their own checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from es_tour.bench._commands import portable_command, portable_path


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with data beside it and a cache elsewhere, the shell in the repo."""
    repo = tmp_path / "work" / "main"
    (repo / "docs").mkdir(parents=True)
    (tmp_path / "work" / "shared" / "datasets" / "scifact").mkdir(parents=True)
    monkeypatch.setenv("ES_TOUR_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(repo)
    return repo


def test_data_beside_the_repository_is_relative_to_it(checkout: Path) -> None:
    data = checkout.parent / "shared" / "datasets" / "scifact"
    assert portable_path(data, checkout) == "../shared/datasets/scifact"
    assert portable_path(checkout / "docs" / "benchmarks", checkout) == "docs/benchmarks"


def test_a_cached_model_is_named_under_es_tour_home(checkout: Path) -> None:
    model = checkout.parent.parent / "cache" / "models" / "scifact-reranker"
    assert portable_path(model, checkout) == "<ES_TOUR_HOME>/models/scifact-reranker"


def test_command_lines_keep_options_and_rewrite_only_paths(checkout: Path) -> None:
    data = checkout.parent / "shared" / "datasets" / "scifact"
    command = portable_command("python -m es_tour.bench", [
        "--dataset", str(data), f"--out={checkout / 'docs'}",
        "--opensearch", "http://127.0.0.1:9250", "--methods", "bm25,knn"], checkout)
    assert command == ("python -m es_tour.bench --dataset ../shared/datasets/scifact "
                       "--out=docs --opensearch http://127.0.0.1:9250 --methods bm25,knn")


def test_a_relative_path_given_from_the_repository_stays_as_given(checkout: Path) -> None:
    command = portable_command("python -m es_tour.bench.frontier",
                               ["--dataset", "../shared/datasets/scifact"], checkout)
    assert command.endswith("--dataset ../shared/datasets/scifact")
