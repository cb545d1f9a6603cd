"""`es-tour export` and `es-tour models ...` print errors as one line and exit 1."""

from __future__ import annotations

from typer.testing import CliRunner

import es_tour.cli.models  # noqa: F401  (registers the commands)
from es_tour.cli import app

runner = CliRunner()


def test_export_of_missing_model_fails_cleanly(tmp_path):
    result = runner.invoke(app, ["export", "--model", str(tmp_path / "none"), "--kind", "dual",
                                 "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "error:" in result.output and "Traceback" not in result.output


def test_export_with_bad_kind_fails_cleanly(tmp_path):
    result = runner.invoke(app, ["export", "--model", "x", "--kind", "triple",
                                 "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "['dual', 'cross']" in result.output


def test_models_build_of_unknown_name_fails_cleanly():
    result = runner.invoke(app, ["models", "build", "no-such-model"])
    assert result.exit_code == 1
    assert "unknown model [no-such-model]" in result.output


def test_models_list_shows_registry_and_roles(minilm_dir):
    result = runner.invoke(app, ["models", "list"])
    assert result.exit_code == 0, result.output
    assert "minilm-l6 [retriever]: dual, built" in result.output
    assert "[default]" in result.output


def test_export_writes_a_loadable_cross_model(tiny_cross_hf, tmp_path):
    out = tmp_path / "cross"
    result = runner.invoke(app, ["export", "--model", str(tiny_cross_hf), "--kind", "cross",
                                 "--out", str(out), "--max-length", "32"])
    assert result.exit_code == 0, result.output
    assert (out / "manifest.json").is_file() and (out / "model.onnx").is_file()
    assert not (out / "model.int8.onnx").exists()


def test_models_embed_fills_the_cache_es_tour_index_reads_and_then_has_nothing_to_do(
        minilm_dir, tmp_path):
    from es_tour.datasets import BeirDataset
    from es_tour.models import has_corpus_embeddings, query_encoder

    model = tmp_path / "minilm"  # the vectors of a throwaway corpus stay out of the cache
    model.mkdir()
    for part in minilm_dir.iterdir():
        if part.is_file():
            (model / part.name).symlink_to(part)
    data = tmp_path / "tiny"
    data.mkdir()
    (data / "corpus.jsonl").write_text(
        '{"_id": "d1", "title": "Aspirin", "text": "Aspirin and heart attacks."}\n'
        '{"_id": "d2", "title": "Sleep", "text": "Short sleep and blood pressure."}\n')
    texts = [doc.contents for doc in BeirDataset(data).corpus()]
    # ingest looks its vectors up through the encoder `es-tour index` opens
    assert not has_corpus_embeddings(query_encoder(str(model)), data / "corpus.jsonl", texts)
    first = runner.invoke(app, ["models", "embed", str(model), "--dataset", str(data)])
    assert first.exit_code == 0, first.output
    assert "embedded the 2 docs of tiny" in first.output
    assert has_corpus_embeddings(query_encoder(str(model)), data / "corpus.jsonl", texts)
    again = runner.invoke(app, ["models", "embed", str(model), "--dataset", str(data)])
    assert again.exit_code == 0 and "embedded already" in again.output
