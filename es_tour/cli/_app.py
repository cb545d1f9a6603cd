"""The `es-tour` command line: thin wrappers that parse options and call the library."""

from __future__ import annotations

import typer

# The command modules register their commands on it; `es_tour.cli` imports them in order.
app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
