"""docs/cli.md is what `make cli-docs` writes from the command line, so it cannot drift."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from es_tour.cli import app
from es_tour.cli.reference import reference

CLI_MD = Path(__file__).parents[1] / "docs" / "cli.md"


def test_docs_cli_md_is_the_generated_reference() -> None:
    assert CLI_MD.read_text() == reference(), "docs/cli.md is stale: run `make cli-docs`"


def test_every_command_has_a_section_and_old_option_names_stay_hidden() -> None:
    text = reference()
    for title in ("`es-tour serve`", "`es-tour eval`", "`es-tour engine start`",
                  "`es-tour models evaluate`"):
        assert f"## {title}" in text or f"### {title}" in text, title
    assert "`--playground` / `--no-playground` | `--no-playground`" in text
    assert "`--model-threads` | `2`" in text
    for old in ("--model-workers", "--label-once"):
        assert old not in text, old


def test_serve_help_shows_the_playground_switch_and_the_thread_option() -> None:
    result = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "--playground" in result.output and "--no-playground" in result.output
    assert "--model-threads" in result.output and "--model-workers" not in result.output
