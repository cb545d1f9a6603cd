"""Turn es-tour errors, and the engine client's, into one clear line and a non-zero exit,
never a stack trace."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NoReturn, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from es_tour.errors import EsTourError

P = ParamSpec("P")
R = TypeVar("R")
err_console = Console(stderr=True)
# the packages whose errors mean the engine said no or could not be reached
CLIENT_PACKAGES = frozenset({"elasticsearch", "elastic_transport", "opensearchpy", "aiohttp"})
MAX_MESSAGE = 400  # characters of a client error shown


def clean_errors(command: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except EsTourError as exc:
            _fail(str(exc))
        except Exception as exc:
            if not (isinstance(exc, OSError)
                    or type(exc).__module__.split(".")[0] in CLIENT_PACKAGES):
                raise  # a bug of ours: its traceback is what a report needs
            _fail(f"{type(exc).__name__}: {str(exc)[:MAX_MESSAGE]}")

    return wrapper


def _fail(message: str) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=1) from None
