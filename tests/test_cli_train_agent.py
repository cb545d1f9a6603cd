"""`es-tour train-agent` refuses what must never train a policy, before touching an engine."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from es_tour.cli import app

runner = CliRunner()


@pytest.mark.parametrize(("args", "message"), [
    (["--split", "test"], "test stays unseen"),
    (["--name", "../etc"], "registry name"),
])
def test_train_agent_refuses_the_test_split_and_path_like_names(tmp_path, args, message):
    # the port is closed: an engine call would fail with another error
    result = runner.invoke(app, ["train-agent", "--dataset", str(tmp_path),
                                 "--url", "http://127.0.0.1:9", *args])
    assert result.exit_code != 0
    assert message in result.output and "Traceback" not in result.output
