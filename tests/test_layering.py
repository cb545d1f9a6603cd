"""The package's layering rules, checked on the source so they cannot drift."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "es_tour"


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def modules_importing(top_level: str) -> list[str]:
    return sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if top_level in imported_modules(path)
    )


def test_official_clients_are_imported_only_by_the_engine_adapters():
    for client in ("elasticsearch", "opensearchpy"):
        assert all(path.startswith("engines/") for path in modules_importing(client)), client


def test_tour_math_imports_nothing_but_numpy_and_its_own_config():
    for path in (PACKAGE / "tour").glob("*.py"):
        assert imported_modules(path) <= {"__future__", "collections", "dataclasses", "math",
                                          "typing", "numpy", "es_tour"}, path.name


def test_torch_is_imported_only_by_the_exporter_the_trainer_and_the_model_bench():
    # none of them is on the query path, which runs ONNX models only
    allowed = {"models/_export.py", "models/_train.py", "bench/models.py"}
    assert set(modules_importing("torch")) <= allowed
