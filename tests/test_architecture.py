"""The package's shape, checked on the source: no import cycle between its modules, and no
module too long to read (issue 41). `test_layering.py` orders the packages; these rules
hold inside them too."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "es_tour"

MAX_LINES = 600

# Modules over MAX_LINES that this change could not split, each with why and the issue
# that will. Exact: a module that shrinks below the limit must leave the list.
LONG_MODULES_ALLOWED: dict[str, str] = {}

# Import cycles this change could not break, each as its sorted modules, with why and the
# issue that will. Exact: a cycle that is broken must leave the list.
CYCLES_ALLOWED: dict[tuple[str, ...], str] = {}


def module_names(root: Path) -> dict[str, Path]:
    """Dotted name -> file of every module of the package at `root` (a package is its
    `__init__.py`)."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imports(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package's modules that module `name` imports, anywhere in the file: at the top,
    in a function, under `if TYPE_CHECKING:`. `from p import x` imports the module p.x
    when there is one, else p; importing a module is not counted as importing its parent
    packages (their `__init__` runs, but a package that imports its own modules to
    re-export them is the usual shape, not a cycle)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
    return {module for module in found if module in modules and module != name}


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports."""
    names = module_names(root)
    return {name: imports(name, path, set(names)) for name, path in names.items()}


def cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one module, each sorted (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(tuple(sorted(component)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def long_modules(root: Path, limit: int = MAX_LINES) -> dict[str, int]:
    """Module -> its line count, for the package's modules longer than `limit` lines.
    Python source only: the static assets (the playground's page) are not modules."""
    counts = {name: len(path.read_text().splitlines())
              for name, path in module_names(root).items()}
    return {name: count for name, count in counts.items() if count > limit}


def test_no_import_cycle_between_the_packages_modules():
    found = cycles(import_graph(PACKAGE))
    assert [cycle for cycle in found if cycle not in CYCLES_ALLOWED] == [], \
        "modules that import each other: move what both need into a module of its own"
    assert [cycle for cycle in CYCLES_ALLOWED if cycle not in found] == [], \
        "broken cycles: remove them from CYCLES_ALLOWED"


def test_no_module_is_longer_than_600_lines():
    found = long_modules(PACKAGE)
    assert {name: lines for name, lines in found.items()
            if name not in LONG_MODULES_ALLOWED} == {}, f"split them: over {MAX_LINES} lines"
    assert [name for name in LONG_MODULES_ALLOWED if name not in found] == [], \
        f"at most {MAX_LINES} lines now: remove them from LONG_MODULES_ALLOWED"


# --- the checkers themselves, on a tiny package --------------------------------------------

def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    package = _package(tmp_path, {
        "__init__.py": "from pkg.a import f\n",
        "a.py": "from pkg.b import g\n\ndef f():\n    return g()\n",
        "b.py": "def g():\n    from pkg import a\n    return a\n",
        "c.py": "import pkg.a\n",
    })
    graph = import_graph(package)
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"},
                     "pkg.c": {"pkg.a"}}
    assert cycles(graph) == [("pkg.a", "pkg.b")]


def test_a_cycle_through_the_package_or_a_type_checking_import_is_found(tmp_path):
    package = _package(tmp_path, {
        "__init__.py": "from pkg.sub._one import One\n",
        "sub/__init__.py": "from pkg.sub._one import One\n",
        "sub/_one.py": ("from typing import TYPE_CHECKING\n"
                        "if TYPE_CHECKING:\n    from ._two import Two\n"),
        "sub/_two.py": "from pkg.sub import One\n",
    })
    assert cycles(import_graph(package)) == [("pkg.sub", "pkg.sub._one", "pkg.sub._two")]


def test_a_package_that_only_re_exports_its_modules_has_no_cycle(tmp_path):
    package = _package(tmp_path, {
        "__init__.py": "from pkg._a import A\nfrom pkg._b import B\n",
        "_a.py": "A = 1\n",
        "_b.py": "from pkg._a import A\nB = A\n",
    })
    assert cycles(import_graph(package)) == []


def test_a_module_over_the_limit_is_found(tmp_path):
    package = _package(tmp_path, {"__init__.py": "", "short.py": "x = 1\n" * MAX_LINES,
                                  "long.py": "x = 1\n" * (MAX_LINES + 1),
                                  "page.html": "<p>\n" * 2 * MAX_LINES})
    assert long_modules(package) == {"pkg.long": MAX_LINES + 1}
