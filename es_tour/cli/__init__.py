"""The `es-tour` command line (`app`): one module per command family, each registering its
commands on `app` when imported here."""

from __future__ import annotations

# isort: off
# `es-tour --help` lists the commands in the order these modules register them.
from es_tour.cli import engine, models  # noqa: F401
from es_tour.cli import index, eval, tune, train_agent, train_labeler, demo  # noqa: F401
from es_tour.cli import serve  # noqa: F401
# isort: on
from es_tour.cli._app import app

__all__ = ["app"]
