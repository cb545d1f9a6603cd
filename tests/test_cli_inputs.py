"""The CLI checks its inputs before any model load, ingest or engine call."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from es_tour.cli import app
from es_tour.datasets import BeirDataset
from es_tour.errors import ConfigError
from es_tour.server import ServerConfig

runner = CliRunner()
CLOSED = "http://127.0.0.1:9"  # nothing listens: an engine call would fail otherwise


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "tiny"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": "t", "text": "x"}))
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "x"}))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return root


@pytest.mark.parametrize(("args", "message"), [
    (["--engine", "foo"], "--engine must be one of ['opensearch', 'elasticsearch']"),
    (["--url", "ftp://127.0.0.1:9200"], "--url must be an http:// or https:// URL"),
    (["--methods", " , "], "--methods names no method"),
    (["--split", "dev"], "no qrels for split [dev]"),
    (["--output", "/nonexistent/dir/r.json"], "/nonexistent/dir is not a directory"),
    (["--plot", "/"], "/ is a directory"),
    (["--label-once", "--cold-labels"], "contradicts --cold-labels"),
])
def test_eval_refuses_bad_input_before_any_work(dataset, args, message):
    result = runner.invoke(app, ["eval", "--dataset", str(dataset), "--url", CLOSED, *args])
    assert result.exit_code == 1, result.output
    assert message in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("option", ["--max-queries", "--max-queries=-3"])
def test_a_query_count_below_one_is_a_usage_error(dataset, option):
    args = [option, "0"] if "=" not in option else [option]
    result = runner.invoke(app, ["eval", "--dataset", str(dataset), "--url", CLOSED, *args])
    assert result.exit_code == 2 and "Invalid value" in result.output


@pytest.mark.parametrize(("name", "text", "message"), [
    ("corpus.jsonl", "{not json", "corpus.jsonl line 1 is not JSON"),
    ("queries.jsonl", '{"_id": "q1"}', "queries.jsonl line 1 must be an object with"),
    ("qrels/test.tsv", "q\tc\ts\nq1\td1\t1\n", "must have the columns"),
    ("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\thigh\n", "score 'high' is not"),
])
def test_a_malformed_dataset_file_is_a_config_error_naming_it(dataset, name, text, message):
    (dataset / name).write_text(text)
    data = BeirDataset(dataset)
    with pytest.raises(ConfigError, match=re.escape(message)):
        list(data.corpus()), data.queries("test")


def test_a_dataset_path_that_is_no_directory_says_so(tmp_path):
    result = runner.invoke(app, ["eval", "--dataset", str(tmp_path / "absent"), "--url", CLOSED])
    assert result.exit_code == 1 and "is not a directory" in result.output


def test_serve_refuses_an_unknown_log_level_before_it_listens():
    result = runner.invoke(app, ["serve", "--upstream", CLOSED, "--log-level", "bogus",
                                 "--listen", "127.0.0.1:0"])
    assert result.exit_code == 1 and "--log-level must be one of" in result.output
    assert "sidecar on" not in result.output


@pytest.mark.parametrize("option", ["--model-threads", "--model-workers"])
def test_serve_takes_model_threads_by_its_old_name_too(option):
    result = runner.invoke(app, ["serve", "--upstream", CLOSED, option, "0",
                                 "--listen", "127.0.0.1:0"])
    assert result.exit_code == 1 and "model_threads must be an integer >= 1, got 0" in (
        result.output)
    assert ("--model-workers is now --model-threads" in result.output) == (
        option == "--model-workers")


def test_serve_refuses_a_negative_store_preload_before_it_listens():
    result = runner.invoke(app, ["serve", "--upstream", CLOSED, "--store-preload-docs", "-1",
                                 "--listen", "127.0.0.1:0"])
    assert result.exit_code != 0 and "--store-preload-docs" in result.output
    assert "sidecar on" not in result.output
    with pytest.raises(ConfigError, match="store_preload_docs must be an integer >= 0"):
        ServerConfig(upstream=CLOSED, store_preload_docs=-1)


def test_models_evaluate_checks_every_name_before_it_encodes(dataset):
    result = runner.invoke(app, ["models", "evaluate", "--dataset", str(dataset),
                                 "--split", "test", "minilm-l6", "nosuch"])
    assert result.exit_code == 1 and "unknown model [nosuch]" in result.output
    assert "| model |" not in result.output  # no table was started


def test_a_method_option_given_twice_is_refused(dataset):
    result = runner.invoke(app, ["eval", "--dataset", str(dataset), "--url", CLOSED,
                                 "--methods", "rerank:k=5:k=7"])
    assert result.exit_code == 1
    assert "method option [k] given twice in [rerank:k=5:k=7]" in result.output


def test_logs_of_a_port_no_node_ran_on_say_so(tmp_path, monkeypatch):
    monkeypatch.setenv("ES_TOUR_HOME", str(tmp_path))
    result = runner.invoke(app, ["engine", "logs", "--port", "9399"])
    assert result.exit_code == 1 and "no node ran on port 9399" in result.output


@pytest.mark.parametrize(("command", "args"), [
    ("serve", ["--upstream", "https://127.0.0.1:9"]),
    ("index", ["--dataset", "DATASET", "--url", "https://127.0.0.1:9"]),
    ("eval", ["--dataset", "DATASET", "--url", "https://127.0.0.1:9"]),
    ("train-agent", ["--dataset", "DATASET", "--url", "https://127.0.0.1:9"]),
    ("demo", ["--dataset", "DATASET", "--url", "https://127.0.0.1:9"]),
    ("train-reranker", ["--dataset", "DATASET", "--url", "https://127.0.0.1:9"]),
])
def test_every_command_that_talks_to_an_engine_checks_its_tls_files_first(
        dataset, command, args):
    args = [str(dataset) if arg == "DATASET" else arg for arg in args]
    (dataset / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    missing = runner.invoke(app, [command, *args, "--ca-certs", "/no/such/ca.pem"])
    assert missing.exit_code == 1, missing.output
    assert "ca_certs [/no/such/ca.pem] is not a readable file" in missing.output
    alone = runner.invoke(app, [command, *args, "--client-key", str(dataset / "corpus.jsonl")])
    assert alone.exit_code == 1 and "needs its client certificate" in alone.output


def test_cli_credentials_come_from_the_environment_only(dataset, monkeypatch):
    monkeypatch.setenv("ES_TOUR_USER", "reader-a")
    monkeypatch.delenv("ES_TOUR_PASSWORD", raising=False)
    result = runner.invoke(app, ["index", "--dataset", str(dataset), "--url", CLOSED])
    assert result.exit_code == 1 and "ES_TOUR_PASSWORD" in result.output
    usage = runner.invoke(app, ["index", "--help"])
    assert "--password" not in usage.output and "--user " not in usage.output


@pytest.mark.parametrize(("flags", "given"), [
    ([], None), (["--corpus-vectors"], True), (["--no-corpus-vectors"], False)])
def test_eval_decides_on_corpus_vectors_unless_told(dataset, monkeypatch, flags, given):
    from es_tour.cli import eval as eval_cli

    seen = {}

    async def evaluate(*args):
        seen["corpus_vectors"] = args[-1]
        raise ConfigError("stop here")

    monkeypatch.setattr(eval_cli, "_evaluate", evaluate)
    result = runner.invoke(app, ["eval", "--dataset", str(dataset), "--url", CLOSED, *flags])
    assert "stop here" in result.output
    assert seen == {"corpus_vectors": given}  # None: eval weighs the cost itself
