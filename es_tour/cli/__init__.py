"""The `es-tour` command line: thin wrappers that parse options and call the library."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)

# Command modules register themselves on `app`.
from es_tour.cli import engine, models, search, serve  # noqa: E402,F401
