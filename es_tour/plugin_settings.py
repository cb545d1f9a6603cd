"""The plugin's `index.tour.*` declarations, read from its Java source, and docs/plugin.md's table.

One source for the settings' facts: `TourSettings.java` declares each setting's type, bounds
and default; the parity test (tests/test_plugin_parity.py) checks them against the Python
options, and `render_table()` writes docs/plugin.md's table from the same parse, so neither
can drift from the plugin. Run from a checkout (the Java source is not installed):

    python -m es_tour.plugin_settings            # prints the table
    python -m es_tour.plugin_settings --write    # rewrites it in docs/plugin.md
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[1]
JAVA = ROOT / "plugin/src/main/java/org/estour/plugin"
DOC = ROOT / "docs/plugin.md"
# docs/plugin.md's table lies between these two lines
TABLE_START = "<!-- settings table: python -m es_tour.plugin_settings --write -->"
TABLE_END = "<!-- end of settings table -->"

# what the table says beside a setting's bounds: what the value means where that is not
# obvious from its name (the Javadoc says more)
NOTES = {
    "method": "(exact, lower-case)",
    "threshold": "(the nucleus mass p; the learned agent's acting threshold)",
    "first_stage": "(what `rerank` labels the top `k` of)",
    "pool": "(how `hybrid-tour` picks each round's docs from BM25 ∪ kNN)",
    "lexical": "(`hybrid-tour`'s Lucene query: RM3's Δq, or its own text throughout)",
    "budget": "(labeler pairs per query of TOUR, `rocchio`, `relevance-feedback`, the agents "
              "and `hybrid-tour`; the rerankers' is their `k`)",
    "window": "(the first hits es-tour orders; pages past them are in the engine's order)",
    "lexical_weight": "(z(BM25)'s weight beside z(q·c) in `hybrid-linear`, and in "
                      "`hybrid-tour`'s `hybrid-linear` pool)",
    "bm25_weight": "(final-score fusion: z(BM25)'s weight beside the labeler's z(φ))",
    "dense_weight": "(final-score fusion: z(q·c)'s weight beside z(φ))",
    "labeler": "(dual or cross; a directory `es-tour export` or `train-reranker` wrote; an "
               "ensemble's scores are each member's over its spread, weighted and summed)",
    "encoder": "(a dual model of the vector field's dimension, checked at first use)",
    "vector_store_shards": "(primary shards of a labeler vector store this index's docs are "
                           "the first to fill; unset, the index's own `number_of_shards`)",
}


@dataclass(frozen=True)
class PluginSetting:
    """One declaration: `kind` is int, double, boolean, enum, string, model, labeler or list."""

    name: str
    kind: str
    default: str | None  # as the engine reports it; None: the plugin declares none
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()


def settings_source() -> str:
    return (JAVA / "TourSettings.java").read_text()


def constant(source: str, name: str) -> float:
    """A numeric `static final` of TourSettings, or a literal."""
    if re.fullmatch(r"[-0-9.eE]+", name):
        return float(name)
    match = re.search(rf"static final (?:int|double) {name} = ([-0-9.eE]+);", source)
    if not match:
        raise ValueError(f"TourSettings declares no numeric constant {name}")
    return float(match.group(1))


def choices(source: str, name: str) -> tuple[str, ...]:
    """A `List.of(...)` constant of TourSettings."""
    declared = re.search(rf"{name} = List\.of\(([^)]*)\)", source)
    if not declared:
        raise ValueError(f"TourSettings declares no list {name}")
    return tuple(re.findall(r'"([a-z0-9-]+)"', declared.group(1)))


def methods() -> tuple[str, ...]:
    """TourMethod's setting values, in declaration order."""
    return tuple(re.findall(r'^\s+[A-Z0-9_]+\("([a-z0-9-]+)"\)[,;]',
                            (JAVA / "TourMethod.java").read_text(), re.M))


def _declarations(source: str) -> dict[str, str]:
    """constant name -> the text of its `Setting` declaration, up to its `;`."""
    return dict(re.findall(r"public static final Setting<[^=]+> ([A-Z0-9_]+) = ([^;]+);",
                           source))


def _parse(constant_name: str, text: str, source: str) -> PluginSetting:
    flat = " ".join(text.split())
    if match := re.search(r'intSetting\( PREFIX \+ "(\w+)", ([-0-9]+), (\w+), (\w+)', flat):
        name, default, low, high = match.groups()
        return PluginSetting(name, "int", default, constant(source, low), constant(source, high))
    if match := re.search(r'boundedDouble\("(\w+)", ([-0-9.eE]+), ([\w.]+), \w+, ([\w.]+)\)',
                          flat):
        name, default, low, high = match.groups()
        return PluginSetting(name, "double", default, constant(source, low),
                             constant(source, high))
    if match := re.search(r'choice\("(\w+)", "([a-z0-9-]+)", (\w+)\)', flat):
        name, default, options = match.groups()
        return PluginSetting(name, "enum", default, choices=choices(source, options))
    if match := re.search(r'boolSetting\( PREFIX \+ "(\w+)", (true|false)', flat):
        return PluginSetting(match.group(1), "boolean", match.group(2),
                             choices=("true", "false"))
    if match := re.search(r'PREFIX \+ "method", TourMethod\.(\w+)\.settingValue\(\)', flat):
        default = methods()[_enum_constants().index(match.group(1))]
        return PluginSetting("method", "enum", default, choices=methods())
    if match := re.search(r'listSetting\( PREFIX \+ "(\w+)", List\.of\(([^)]*)\)', flat):
        items = re.findall(r'"([^"]+)"', match.group(2))
        return PluginSetting(match.group(1), "list", "[" + ", ".join(items) + "]")
    if match := re.search(r'^model\("(\w+)", "([^"]*)"\)$', flat):
        return PluginSetting(match.group(1), "model", match.group(2))
    if match := re.search(r'simpleString\( PREFIX \+ "(\w+)", "([^"]*)", '
                          r'TourSettings::requireLabeler', flat):
        return PluginSetting(match.group(1), "labeler", match.group(2))
    if match := re.search(r'simpleString\( PREFIX \+ "(\w+)", "([^"]*)"', flat):
        return PluginSetting(match.group(1), "string", match.group(2))
    raise ValueError(f"cannot read the declaration of TourSettings.{constant_name}")


def _enum_constants() -> list[str]:
    return re.findall(r'^\s+([A-Z0-9_]+)\("[a-z0-9-]+"\)[,;]',
                      (JAVA / "TourMethod.java").read_text(), re.M)


def plugin_settings() -> list[PluginSetting]:
    """Every setting in the order `TourSettings.all()` lists them."""
    source = settings_source()
    declared = _declarations(source)
    order = re.search(r"List<Setting<\?>> ALL = List\.of\(([^)]*)\)", source)
    if not order:
        raise ValueError("TourSettings declares no ALL list")
    return [_parse(name, declared[name], source) for name in re.findall(r"\w+", order.group(1))]


def by_name() -> dict[str, PluginSetting]:
    return {setting.name: setting for setting in plugin_settings()}


def _number(value: float, kind: str) -> str:
    if kind == "int" or value == int(value):
        return str(int(value))
    return re.sub(r"e([-+])0*(\d)", r"e\1\2", f"{value:g}")  # 1e-6, as Java writes it


def _allowed(setting: PluginSetting) -> str:
    if setting.kind in ("int", "double"):
        assert setting.low is not None and setting.high is not None
        text = f"[{_number(setting.low, setting.kind)}, {_number(setting.high, setting.kind)}]"
    elif setting.kind == "boolean":
        text = "`true` / `false`"
    elif setting.kind == "enum":
        text = ", ".join(f"`{choice}`" for choice in setting.choices)
    elif setting.name == "text_fields":
        text = "at least one entry; no blank entries"
    elif setting.kind == "model":
        text = "a registry name or a model directory's path, matching `" + model_pattern() + "`"
    elif setting.kind == "labeler":
        text = (f"a registry name or a model directory's path, or an ensemble of up to "
                f"{constant(settings_source(), 'ENSEMBLE_MAX'):.0f} joined by `+`, each with an "
                f"optional `^weight` (`bge-small-en-v1.5^1+e5-small-v2^0.5`)")
    else:
        text = "any non-blank field name"
    note = NOTES.get(setting.name)
    return f"{text} {note}" if note else text


def model_pattern() -> str:
    match = re.search(r'MODEL_PATTERN = Pattern\.compile\("([^"]+)"\)', settings_source())
    if not match:
        raise ValueError("TourSettings declares no MODEL_PATTERN")
    return match.group(1)


def _default(setting: PluginSetting) -> str:
    if setting.default is None:
        return "none"
    if setting.kind == "list":
        items = setting.default.strip("[]").split(", ")
        return "`[" + ", ".join(f'"{item}"' for item in items) + "]`"
    return f"`{setting.default}`"


TYPES = {"int": "int", "double": "double", "boolean": "boolean", "enum": "enum",
         "string": "string", "model": "string", "labeler": "string",
         "list": "list of strings"}


def render_table() -> str:
    """docs/plugin.md's settings table, from the declarations."""
    lines = ["| setting | type | allowed values | declared default |", "|---|---|---|---|"]
    for setting in plugin_settings():
        lines.append(f"| `index.tour.{setting.name}` | {TYPES[setting.kind]} | "
                     f"{_allowed(setting)} | {_default(setting)} |")
    return "\n".join(lines)


def documented_table(doc: str) -> str:
    """The table docs/plugin.md holds now, between its markers."""
    start, end = doc.index(TABLE_START) + len(TABLE_START), doc.index(TABLE_END)
    return doc[start:end].strip()


def write_table(path: Path = DOC) -> bool:
    """Rewrite the table in `path`; True when it changed."""
    doc = path.read_text()
    old = documented_table(doc)
    if old == render_table():
        return False
    path.write_text(doc.replace(old, render_table(), 1))
    return True


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        print("docs/plugin.md: " + ("table rewritten" if write_table() else "table unchanged"))
    else:
        print(render_table())
