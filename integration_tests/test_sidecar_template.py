"""`_search/template` through the sidecar, on OpenSearch: the engine renders the template,
and on an enabled index the rendered body is refined as a `_search` with that body would be.

Elasticsearch's integ-test zip has no mustache module and Maven Central has none to add
(docs/sidecar.md): there a template search passes through, answered as the engine does.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from es_tour.cluster import NodeStatus
from es_tour.datasets import BeirDataset
from es_tour.engines import connect
from es_tour.ingest import ingest
from es_tour.server import PASSTHROUGH_HEADER, BackgroundServer, Models, ServerConfig
from integration_tests.test_dev_tools import DOC, recipes

ENGINE = "opensearch"
PLAIN = "it-template-plain"  # no index.tour.* settings
TOURED = "it-template-tour"  # index.tour.enabled: true
DOCS = 100
QUERY = "vitamin D deficiency"
STORED = "it-template-match"  # a stored template: the text and the page size as params
STORED_SOURCE = '{"query": {"match": {"text": "{{q}}"}}, "size": {{size}}}'
INLINE = {"source": {"query": {"match": {"text": "{{q}}"}}, "size": 3},
          "params": {"q": QUERY}}


@pytest.fixture(scope="module")
async def urls(start_node: Callable[[str], NodeStatus], scifact: BeirDataset,
               retriever: Any, sidecar_models: Models) -> AsyncIterator[tuple[str, str]]:
    """(sidecar, engine) URLs, the engine holding PLAIN and TOURED and the STORED template."""
    direct = start_node(ENGINE).url
    async with connect(ENGINE, direct) as adapter:
        for index in (PLAIN, TOURED):
            await ingest(adapter, scifact, index, retriever, max_docs=DOCS,
                         reuse_embeddings=False, if_missing=True, show_progress=False)
    settings = {"index": {"tour": {"enabled": True, "method": "tour-soft", "k": 5,
                                   "max_rounds": 1}}}
    httpx.put(f"{direct}/{TOURED}/_settings", json=settings).raise_for_status()
    script = {"script": {"lang": "mustache", "source": STORED_SOURCE}}
    httpx.put(f"{direct}/_scripts/{STORED}", json=script).raise_for_status()
    config = ServerConfig(upstream=direct, max_k=50, deadline_ms=120_000)
    with BackgroundServer(config, sidecar_models) as server:
        yield server.url, direct


def _post(url: str, path: str, body: Any, **params: str) -> httpx.Response:
    return httpx.post(url + path, json=body, params=params, timeout=120)


def _ranking(response: httpx.Response) -> list[tuple[str, float]]:
    assert response.status_code == 200, response.text
    return [(hit["_id"], hit["_score"]) for hit in response.json()["hits"]["hits"]]


@pytest.mark.parametrize("template", [{"id": STORED, "params": {"q": QUERY, "size": 3}}, INLINE],
                         ids=["stored", "inline"])
def test_a_template_search_on_an_enabled_index_is_refined_as_its_rendered_search(
        urls: tuple[str, str], template: dict) -> None:
    sidecar, direct = urls
    rendered = _post(direct, "/_render/template", template).json()["template_output"]
    assert rendered == {"query": {"match": {"text": QUERY}}, "size": 3}
    templated = _post(sidecar, f"/{TOURED}/_search/template", template)
    tour = templated.json()["ext"]["tour"]
    assert tour["method"] == "tour-soft" and tour["rounds"]
    assert PASSTHROUGH_HEADER not in templated.headers
    searched = _post(sidecar, f"/{TOURED}/_search", rendered)
    assert len(_ranking(templated)) == 3
    assert _ranking(templated) == _ranking(searched)


@pytest.mark.parametrize("template", [
    {"id": "no-such-template", "params": {"q": QUERY}},  # a stored template that is not there
    {"source": "{{#q}}", "params": {"q": QUERY}},  # an unclosed section
    {"source": INLINE["source"], "params": {"q": QUERY}, "bogus": 1},  # a key it does not take
], ids=["missing", "unclosed", "unknown-key"])
def test_a_bad_template_is_the_engines_own_error(urls: tuple[str, str], template: dict) -> None:
    sidecar, direct = urls
    via = _post(sidecar, f"/{TOURED}/_search/template", template)
    engine = _post(direct, f"/{TOURED}/_search/template", template)
    assert 400 <= engine.status_code < 500, engine.text
    assert via.status_code == engine.status_code, via.text
    assert via.json()["status"] == engine.status_code
    assert via.json()["error"]["type"] == engine.json()["error"]["type"]


def test_a_template_search_on_a_plain_index_passes_through_verbatim(
        urls: tuple[str, str]) -> None:
    sidecar, direct = urls
    via = _post(sidecar, f"/{PLAIN}/_search/template", INLINE)
    engine = _post(direct, f"/{PLAIN}/_search/template", INLINE)
    assert via.headers[PASSTHROUGH_HEADER] == "index.tour.enabled is not true"
    assert "ext" not in via.json()
    assert _ranking(via) == _ranking(engine) and len(_ranking(via)) == 3


@pytest.mark.parametrize("option", ["explain", "profile"])
def test_template_options_the_sidecar_cannot_honour_pass_through_with_a_reason(
        urls: tuple[str, str], option: str) -> None:
    sidecar, _ = urls
    response = _post(sidecar, f"/{TOURED}/_search/template", {**INLINE, option: True})
    assert response.status_code == 200, response.text
    assert response.headers[PASSTHROUGH_HEADER] == f"template option [{option}]"
    payload = response.json()
    assert "ext" not in payload and len(payload["hits"]["hits"]) == 3
    if option == "explain":
        assert all("_explanation" in hit for hit in payload["hits"]["hits"])
    else:
        assert "profile" in payload


def test_a_rendered_body_the_sidecar_cannot_serve_passes_through_with_its_reason(
        urls: tuple[str, str]) -> None:
    sidecar, _ = urls
    template = {"source": {"query": {"match_all": {}}, "size": 2}}
    response = _post(sidecar, f"/{TOURED}/_search/template", template)
    assert response.status_code == 200, response.text
    assert response.headers[PASSTHROUGH_HEADER] == "no query text"
    assert "ext" not in response.json() and len(response.json()["hits"]["hits"]) == 2


def test_the_dev_tools_template_recipe_is_refined(urls: tuple[str, str]) -> None:
    sidecar, _ = urls
    blocks = re.findall(r"```console-opensearch\n(.*?)```", DOC.read_text(), re.DOTALL)
    found = recipes("".join(f"```console\n{block}```" for block in blocks))
    assert [path for _, path, _ in found] == [
        "/_scripts/tour-match", "/scifact/_search/template", "/_render/template"]
    answers = [httpx.request(method, sidecar + path.replace("/scifact", f"/{TOURED}"),
                             json=body, timeout=120) for method, path, body in found]
    assert all(answer.status_code == 200 for answer in answers), [a.text for a in answers]
    assert answers[1].json()["ext"]["tour"]["rounds"] and len(_ranking(answers[1])) == 5
    assert answers[2].json()["template_output"]["query"]["match"]["text"] == \
        found[2][2]["params"]["q"]


def test_on_elasticsearch_without_templates_a_template_search_is_the_engines_to_answer(
        start_node: Callable[[str], NodeStatus], sidecar_models: Models) -> None:
    direct = start_node("elasticsearch").url
    httpx.delete(f"{direct}/{TOURED}")
    httpx.put(f"{direct}/{TOURED}",
              json={"settings": {"index": {"tour": {"enabled": True}}}}).raise_for_status()
    with BackgroundServer(ServerConfig(upstream=direct), sidecar_models) as server:
        via = _post(server.url, f"/{TOURED}/_search/template", INLINE)
    engine = _post(direct, f"/{TOURED}/_search/template", INLINE)
    assert via.headers[PASSTHROUGH_HEADER] == "the engine serves no search templates"
    assert (via.status_code, via.json()) == (engine.status_code, engine.json())
    assert engine.status_code >= 400  # no template route: the engine refuses the search
    httpx.delete(f"{direct}/{TOURED}")
