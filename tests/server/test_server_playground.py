"""The playground's routes on the sidecar: the page, its assets and the server defaults.

The page itself is driven in a real browser by integration_tests/test_playground.py.
"""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from es_tour.server import ServerConfig, create_app
from es_tour.server._options import method_names

STATIC = Path(__file__).parents[2] / "es_tour" / "server" / "static"


@pytest.fixture
def client() -> TestClient:
    config = ServerConfig(upstream="http://127.0.0.1:1", method="tour-soft", preload=False,
                          playground=True)
    return TestClient(create_app(config))


def test_the_playground_is_off_unless_asked_for() -> None:
    config = ServerConfig(upstream="http://127.0.0.1:1", preload=False)
    with TestClient(create_app(config)) as client:
        for path in ("/_tour/playground", "/_tour/playground/defaults"):
            # not answered by the sidecar: sent on to the engine, here unreachable
            answer = client.get(path)
            assert answer.status_code == 502 and answer.json()["error"]["type"], path


def test_the_page_and_its_assets_come_from_the_sidecar_itself(client: TestClient) -> None:
    page = client.get("/_tour/playground")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assets = re.findall(r'<(?:script|link)[^>]*\b(?:src|href)="([^"]+)"', page.text)
    assert sorted(assets) == ["playground/playground.css", "playground/playground.js"]
    for asset in assets:  # relative to /_tour/playground, so a path prefix keeps working
        answer = client.get(f"/_tour/{asset}")
        assert answer.status_code == 200 and answer.text == (STATIC / Path(asset).name).read_text()
    moved = client.get("/_tour/playground/", follow_redirects=False)
    assert moved.status_code == 308 and moved.headers["location"] == "../playground"


def test_nothing_is_fetched_from_elsewhere() -> None:
    for path in STATIC.iterdir():
        text = path.read_text().replace("http://www.w3.org/2000/svg", "")  # a name, not a URL
        assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", text), path.name


def test_every_input_has_a_label() -> None:
    page = (STATIC / "playground.html").read_text()
    controls = re.findall(r'<(?:input|select|textarea)[^>]*\bid="([^"]+)"', page)
    labelled = set(re.findall(r'<label[^>]*\bfor="([^"]+)"', page))
    assert controls and set(controls) <= labelled


def test_defaults_name_the_server_method_and_every_method(client: TestClient) -> None:
    defaults = client.get("/_tour/playground/defaults").json()
    assert defaults["method"] == "tour-soft" and defaults["methods"] == method_names()
    assert defaults["qrels_suffix"] == "-qrels"


def test_an_unknown_asset_is_an_engine_shaped_404(client: TestClient) -> None:
    missing = client.get("/_tour/playground/nothing.js")
    assert missing.status_code == 404 and missing.json()["error"]["type"]
    assert client.get("/_tour/playground/playground.html").status_code == 404


def test_the_static_files_ship_in_the_package() -> None:
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"]["package-data"]["es_tour.server"]
    for path in STATIC.iterdir():
        assert any(fnmatch(f"static/{path.name}", p) for p in patterns), path.name
