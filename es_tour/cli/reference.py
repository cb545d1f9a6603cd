"""docs/cli.md, written from the command line itself: every command and subcommand, with its
arguments and options, their help and defaults. Hidden options (old names kept working)
are left out.

    python -m es_tour.cli.reference > docs/cli.md    (or: make cli-docs)

tests/test_cli_reference.py fails when docs/cli.md is not what this writes.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import typer
import typer.main

from es_tour.cli import app

PROGRAM = "es-tour"
HEADER = f"""# `{PROGRAM}` command reference

Every command and its options, with their help and defaults, as `{PROGRAM} COMMAND --help`
shows them. This page is generated from the command line itself; do not edit it by hand:

```
python -m es_tour.cli.reference > docs/cli.md    # or: make cli-docs
```
"""


def reference() -> str:
    """The whole reference, as Markdown."""
    root = typer.main.get_command(app)
    sections = [HEADER, *_sections(root, typer.Context(root, info_name=PROGRAM), [PROGRAM])]
    return "\n".join(sections)


def _sections(command: Any, context: typer.Context, path: list[str]
              ) -> Iterator[str]:
    if len(path) > 1:
        yield _section(command, context, path)
    if _is_group(command):
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            if sub is None or sub.hidden:
                continue
            yield from _sections(sub, typer.Context(sub, parent=context, info_name=name),
                                 [*path, name])


def _section(command: Any, context: typer.Context, path: list[str]) -> str:
    title = " ".join(path)
    lines = [f"{'#' * min(len(path), 4)} `{title}`", ""]
    if command.help:
        lines += [inspect.cleandoc(command.help), ""]
    if _is_group(command):
        return "\n".join(lines)
    lines += ["```", f"{title} {' '.join(command.collect_usage_pieces(context))}", "```", ""]
    params = [p for p in command.get_params(context)
              if not getattr(p, "hidden", False) and p.name != "help"]
    if params:
        lines += ["| argument or option | default | what it is |", "|---|---|---|"]
        lines += [_row(param) for param in params]
        lines.append("")
    return "\n".join(lines)


def _row(param: Any) -> str:
    names = " / ".join(f"`{name}`" for name in [*param.opts, *param.secondary_opts])
    if param.param_type_name == "argument":
        names = f"`{param.name.upper()}`" + (" (repeatable)" if param.nargs == -1 else "")
    help_text = " ".join((getattr(param, "help", None) or "").split())
    if param.envvar:
        envvars = [param.envvar] if isinstance(param.envvar, str) else param.envvar
        help_text += f" (environment: {', '.join(f'`{name}`' for name in envvars)})"
    return f"| {names} | {_default(param)} | {_cell(help_text)} |"


def _default(param: Any) -> str:
    if param.required:
        return "required"
    if param.param_type_name == "option" and param.show_default is False:
        return ""
    default = param.default
    if default is None:  # a switch left unset: its help says what that does
        return ""
    if param.param_type_name == "option" and param.is_flag:
        if param.secondary_opts:
            return f"`{param.opts[0] if default else param.secondary_opts[0]}`"
        return "on" if default else "off"
    if default == () or default == []:
        return ""
    if default == "":
        return '`""`'
    if isinstance(default, (list, tuple)):
        default = ",".join(str(item) for item in default)
    return f"`{_cell(str(default))}`"


def _is_group(command: Any) -> bool:
    # Typer's commands are its own copy of Click's, so they are told apart by what they do
    return hasattr(command, "list_commands")


def _cell(text: str) -> str:
    """`text` inside a table cell: a pipe would end it, and <name> would read as HTML."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


if __name__ == "__main__":
    print(reference(), end="")
