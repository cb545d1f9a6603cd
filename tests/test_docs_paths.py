"""No tracked doc names a path of the machine that wrote it: a reader cannot follow one."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from es_tour import paths

REPO = Path(__file__).resolve().parents[1]
# Documented defaults that describe where es-tour caches, not where one machine did:
# (file, the exact text allowed there). Nothing else may name these locations.
DOCUMENTED_DEFAULTS = {
    ("README.md", "`~/.cache/es-tour`, or `/var/cache/es-tour` when run as root"),
}


def machine_prefixes() -> list[str]:
    """Absolute paths of this machine's work and temporary directories, the repository and
    the cache (both defaults and ES_TOUR_HOME)."""
    prefixes = ["/work/", "/tmp/", "/root/", "/home/", "/var/tmp", tempfile.gettempdir() + "/",
                str(REPO), str(REPO.resolve()), str(paths.home()), "/var/cache/es-tour",
                str(Path.home() / ".cache" / "es-tour")]
    return sorted({prefix for prefix in prefixes if prefix not in ("", "/")})


def machine_paths(text: str, allowed: frozenset[str] = frozenset()) -> list[str]:
    """The machine paths `text` names once each `allowed` fragment is taken out; a prefix
    counts where a path starts (after a space, quote, `=`, `(` or `file://`), not inside a
    URL's path or a relative path."""
    for fragment in allowed:
        text = text.replace(fragment, "")
    pattern = re.compile(r"(?<![\w.~-])(?:" + "|".join(map(re.escape, machine_prefixes()))
                         + r")\S*")
    return pattern.findall(text)


def tracked_docs() -> list[str]:
    try:
        listed = subprocess.run(["git", "ls-files", "*.md"], cwd=REPO, check=True,
                                capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return listed


@pytest.mark.parametrize("line", [
    "python -m es_tour.bench --dataset /work/shared/datasets/scifact --out docs",
    "written to `/tmp/scifact-1400`",
    "install --batch file:///work/main/plugin/target/tour-settings-0.1.0.zip",
    "a model at /var/cache/es-tour/models/scifact-reranker",
    "see /home/someone/notes and /root/x",
    "scratch under /var/tmp/x",
])
def test_machine_paths_are_found(line: str) -> None:
    assert machine_paths(line)


@pytest.mark.parametrize("line", [
    "--dataset ../shared/datasets/scifact",
    "<ES_TOUR_HOME>/models/scifact-reranker",
    "https://github.com/x/y/work/z and engines/work/opensearch-9200",
    "file:///abs/path/plugin/target/tour-settings-0.1.0.zip",
])
def test_portable_paths_pass(line: str) -> None:
    assert machine_paths(line) == []


def test_cache_path_only_in_its_documented_default() -> None:
    _, fragment = next(iter(DOCUMENTED_DEFAULTS))
    assert machine_paths(fragment, frozenset({fragment})) == []
    assert machine_paths(f"models live in {paths.home()}/models")
    assert machine_paths("the cache is /var/cache/es-tour here")


def test_repository_path_is_found() -> None:
    assert machine_paths(f"cd {REPO}{os.sep}docs")


def test_no_tracked_doc_names_a_machine_path() -> None:
    found = {}
    for name in tracked_docs():
        allowed = frozenset(text for file, text in DOCUMENTED_DEFAULTS if file == name)
        for number, line in enumerate((REPO / name).read_text().splitlines(), 1):
            if hits := machine_paths(line, allowed):
                found[f"{name}:{number}"] = hits
    assert found == {}, "tracked docs name machine paths (write them relative to the repo, "\
        "../shared/... for data, <ES_TOUR_HOME>/... for the cache)"
