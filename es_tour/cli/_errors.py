"""Turn es-tour errors into one clear line and a non-zero exit, never a stack trace."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from es_tour.errors import EsTourError

P = ParamSpec("P")
R = TypeVar("R")
err_console = Console(stderr=True)


def clean_errors(command: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except EsTourError as exc:
            err_console.print(
                f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True
            )
            raise typer.Exit(code=1) from None

    return wrapper
