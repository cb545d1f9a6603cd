"""Command lines and paths as the generated docs record them: usable on any checkout.

A page that names `/work/shared/...` or the cache of the machine that ran the benchmark
cannot be followed by a reader, so paths are written relative to the repository (data
beside it as `../shared/...`) and model cache paths under `<ES_TOUR_HOME>`.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from es_tour import paths

REPO = Path(__file__).resolve().parents[2]
HOME_PLACEHOLDER = "<ES_TOUR_HOME>"


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def portable_path(path: str | os.PathLike[str], repo: Path = REPO) -> str:
    """`path` under `<ES_TOUR_HOME>` when it is in the cache, relative to `repo` when it
    lies in or beside it, else unchanged (nothing better to say of it)."""
    absolute = os.path.abspath(path)
    home = os.path.abspath(paths.home())
    if _under(absolute, home):
        return HOME_PLACEHOLDER + absolute[len(home):]
    for root in {str(repo), str(repo.resolve())}:
        if _under(absolute, os.path.dirname(root)):
            return os.path.relpath(absolute, root)
    return os.fspath(path)


def _portable_argument(argument: str, repo: Path) -> str:
    option, equals, value = argument.partition("=") if argument.startswith("--") else (
        "", "", argument)
    # only what names a path: absolute, or a relative path that exists from here
    if value and (os.path.isabs(value) or (os.sep in value and os.path.exists(value))):
        value = portable_path(value, repo)
    return option + equals + value


def portable_command(program: str, arguments: Sequence[str], repo: Path = REPO) -> str:
    """`program arguments…` with every path argument made portable (`portable_path`)."""
    return " ".join([program, *(_portable_argument(a, repo) for a in arguments)])


def parsed_command(program: str, args: argparse.Namespace,
                   parser: argparse.ArgumentParser) -> str:
    """The command line that reproduces a run of `program` parsed into `args`: options
    left at their defaults omitted, paths as `portable_path` writes them (make passes
    absolute ones)."""
    words = [program]
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if not action.option_strings or action.dest == "help" or value == action.default:
            continue
        if isinstance(value, Path):
            value = portable_path(value)
        words.append(action.option_strings[0] if value is True else
                     f"{action.option_strings[0]} {value}")
    return " ".join(words)


def write_report(page: Path, markdown: str, report: Mapping[str, Any]) -> None:
    """A bench's page, and its figures as JSON beside it."""
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(markdown)
    page.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {page} and {page.with_suffix('.json')}")


DEV_NODES = {"opensearch": "http://127.0.0.1:9200", "elasticsearch": "http://127.0.0.1:9210"}


def bench_parser(doc: str, engines: Sequence[str] = tuple(DEV_NODES),
                 choose_engines: bool = False) -> argparse.ArgumentParser:
    """A benchmark's command line: its dataset and each engine's URL (`es-tour engine
    start`'s nodes by default), and with `choose_engines` the --engines it runs on."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--dataset", type=Path, required=True)
    for engine in engines:
        parser.add_argument(f"--{engine}", default=DEV_NODES[engine])
    if choose_engines:
        parser.add_argument("--engines", default=",".join(engines))
    return parser
