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


def test_torch_is_imported_only_by_training_and_the_model_bench():
    # neither is on the query path, which runs ONNX models only
    assert all(path.startswith(("training/", "bench/models.py"))
               for path in modules_importing("torch"))


# The flow, bottom to top: a package may import only from its own rank or below.
# Rank 0 holds the leaf helpers every layer shares.
LAYERS = {
    "errors": 0, "paths": 0, "options": 0, "datasets": 0, "metrics": 0, "tls": 0,
    "plugin_settings": 0,  # reads the plugin's Java source; imports nothing of es_tour
    "recommended": 0,  # the budget frontier's index settings, for the CLI and the benches
    "models": 1,
    "engines": 2, "cluster": 2,
    "tour": 3,
    "pipeline": 4, "ingest": 4, "judgements": 4,
    "agents": 5,
    "evaluation": 6, "tuning": 6,  # tuning: the frontier's fit, for `es-tour tune` and the bench
    "server": 7,
    "training": 8, "bench": 8,
    "cli": 9, "__main__": 9,
}


def es_tour_imports(path: Path) -> set[str]:
    """The es_tour sub-packages and modules `path` imports, at any depth in the file."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        modules = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                   else [node.module] if isinstance(node, ast.ImportFrom) and node.module
                   and node.level == 0 else [])
        names.update(m.split(".")[1] for m in modules if m.startswith("es_tour."))
    return names


def test_every_package_has_a_layer():
    packages = {path.relative_to(PACKAGE).parts[0].removesuffix(".py")
                for path in PACKAGE.rglob("*.py")} - {"__init__"}
    assert packages == set(LAYERS)


def test_no_import_runs_against_the_layer_order():
    against = []
    for path in PACKAGE.rglob("*.py"):
        package = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        if package == "__init__":
            continue
        against += [f"{path.relative_to(PACKAGE)} imports es_tour.{name}"
                    for name in es_tour_imports(path) if LAYERS[name] > LAYERS[package]]
    assert against == []
