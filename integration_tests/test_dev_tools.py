"""Every Dev Tools recipe in docs/dev-tools.md, run through the sidecar on both engines.

Recipes are the ```console blocks: `METHOD /path` lines, each followed by an optional JSON
body. The doc's `scifact` index is swapped for a small copy so the shared index is left
alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from es_tour.cluster import NodeStatus
from es_tour.datasets import BeirDataset, synthetic_metadata
from es_tour.engines import connect
from es_tour.ingest import index_spec
from es_tour.server import BackgroundServer, Models, ServerConfig
from integration_tests.conftest import remember_scifact

DOC = Path(__file__).parents[1] / "docs" / "dev-tools.md"
COPY = "it-sidecar-devtools"
BLOCK = re.compile(r"```console\n(.*?)```", re.DOTALL)
REQUEST_LINE = re.compile(r"^(GET|POST|PUT|DELETE|HEAD) (/\S*)$", re.MULTILINE)


def recipes(markdown: str) -> list[tuple[str, str, Any]]:
    """(method, path, body or None) for every request of every console block, in order."""
    out = []
    for block in BLOCK.findall(markdown):
        lines = list(REQUEST_LINE.finditer(block))
        for i, line in enumerate(lines):
            end = lines[i + 1].start() if i + 1 < len(lines) else len(block)
            raw = block[line.end():end].strip()
            if line.group(2).endswith("/_msearch"):  # NDJSON: a header and a body per search
                out.append((line.group(1), line.group(2),
                            [json.loads(part) for part in raw.splitlines()]))
            else:
                out.append((line.group(1), line.group(2), json.loads(raw) if raw else None))
    return out


def test_the_doc_has_recipes_for_each_step() -> None:
    found = recipes(DOC.read_text())
    assert len(found) >= 6
    assert any(m == "PUT" and body and body.get("index.tour.enabled") for m, _, body in found)
    assert any(body and "ext" in body for _, _, body in found)


@pytest.fixture(scope="module", params=["opensearch", "elasticsearch"])
async def sidecar_url(request: pytest.FixtureRequest, nodes: dict[str, NodeStatus],
                      scifact: BeirDataset, scifact_index: str, sidecar_models: Models
                      ) -> AsyncIterator[str]:
    url = nodes[request.param].url
    remember_scifact(sidecar_models, scifact, COPY)
    async with connect(request.param, url) as adapter:
        hits = await adapter.bool_search(scifact_index, {"match_all": {}}, 200)
        # the year and topic the application recipes filter and facet on
        await adapter.create_index(index_spec(COPY, sidecar_models.encoder, metadata=True),
                                   replace=True)
        await adapter.bulk_index(COPY, [{"_id": h.id, **h.source, **synthetic_metadata(h.id)}
                                        for h in hits])
        await adapter.refresh(COPY)
    with BackgroundServer(ServerConfig(upstream=url, settings_ttl_s=0.0), sidecar_models) as server:
        yield server.url


def test_every_recipe_succeeds_through_the_sidecar(sidecar_url: str) -> None:
    enabled = False
    for method, path, body in recipes(DOC.read_text()):
        path = path.replace("/scifact", f"/{COPY}")
        settings = json.dumps(body or {})
        if path.endswith("/_msearch"):
            # the header lines name the doc's index too: the copy, as in the path
            lines = "".join(json.dumps({**part, "index": COPY} if part.get("index") == "scifact"
                                       else part) + "\n" for part in body)
            response = httpx.request(method, sidecar_url + path, content=lines.encode(),
                                     headers={"content-type": "application/x-ndjson"},
                                     timeout=300)
            assert response.status_code < 300, f"{method} {path}: {response.text}"
            answers = response.json()["responses"]
            assert len(answers) == len(body) // 2 and enabled
            for answer in answers:  # every search of the recipe has a text to refine
                assert answer["ext"]["tour"]["rounds"] and answer["hits"]["hits"], answer
            continue
        response = httpx.request(method, sidecar_url + path, json=body, timeout=120)
        assert response.status_code < 300, f"{method} {path}: {response.text}"
        if "index.tour.enabled" in settings:
            enabled = bool(body["index.tour.enabled"])
        if path.endswith("/_search"):
            served = enabled or "ext" in (body or {})
            has_text = "query" in (body or {})  # the recipes without one pass through
            payload = response.json()
            if served and has_text:
                assert payload["ext"]["tour"]["rounds"], f"{method} {path}: no trace"
                assert payload["hits"]["hits"]
                if "aggs" in body:
                    assert payload["aggregations"], f"{method} {path}: no aggregations"
            else:
                assert "ext" not in payload
