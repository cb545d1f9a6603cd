"""docs/plugin.md's settings table is what `es_tour.plugin_settings` renders from the plugin."""

from __future__ import annotations

from pathlib import Path

from es_tour.plugin_settings import (
    DOC,
    documented_table,
    plugin_settings,
    render_table,
    write_table,
)


def test_the_documented_table_is_the_rendered_one():
    assert documented_table(DOC.read_text()) == render_table(), \
        "run: python -m es_tour.plugin_settings --write"


def test_every_declared_setting_has_a_row_with_its_bounds():
    table = render_table()
    for setting in plugin_settings():
        assert f"| `index.tour.{setting.name}` |" in table
    assert "| `index.tour.k` | int | [1, 1000] | `10` |" in table
    assert "[1e-6, 10]" in table  # bounds as the Java declares them, not 1e-06


def test_write_table_replaces_a_stale_table_only(tmp_path: Path):
    stale = tmp_path / "plugin.md"
    stale.write_text(DOC.read_text().replace("[1, 1000]", "[1, 999]", 1))
    assert write_table(stale) is True
    assert stale.read_text() == DOC.read_text()
    assert write_table(stale) is False
