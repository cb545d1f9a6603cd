"""The playground page in a real headless Chromium, in front of both engines.

Chromium and its WebDriver are Debian's (`make browser`); Selenium is given both paths, so
Selenium Manager never runs and nothing is downloaded. The sidecar runs in-process on a
free loopback port per engine, over the shared SciFact index with its judgements stored by
`es-tour index --qrels`.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from typer.testing import CliRunner

from es_tour.cli import app
from es_tour.cluster import NodeStatus
from es_tour.engines import IndexSpec, connect
from es_tour.judgements import qrels_index
from es_tour.server import BackgroundServer, Models, ServerConfig

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ENGINES = ("opensearch", "elasticsearch")
SERVER_METHOD = "tour-soft"  # the sidecar's default, so the right side's default is visible
CONFIGURED = "it-playground-configured"  # a small index whose settings name rocchio
# A judged SciFact test query (qid 94): kNN ranks its relevant doc third, TOUR first.
QUERY = "Albendazole is used to treat lymphatic filariasis."
FAST = "k=5 max_rounds=2"  # the labeler runs on a shared CPU
SCREENSHOT = os.environ.get("ES_TOUR_PLAYGROUND_SCREENSHOT")  # `make screenshot` sets it
WAIT_S = 180

pytestmark = pytest.mark.skipif(
    not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()),
    reason="Debian's chromium and chromium-driver are missing: run `make browser`")


@dataclass
class Sidecar:
    engine: str
    url: str

    def page(self, **state: str) -> str:
        return f"{self.url}/_tour/playground" + (f"?{urlencode(state)}" if state else "")

    def search(self, index: str, body: Any) -> httpx.Response:
        return httpx.post(f"{self.url}/{index}/_search", json=body, timeout=WAIT_S)


@pytest.fixture(scope="module", params=ENGINES)
async def sidecar(request: pytest.FixtureRequest, nodes: dict[str, NodeStatus], scifact,
                  scifact_index: str, sidecar_models: Models) -> AsyncIterator[Sidecar]:
    engine, url = request.param, nodes[request.param].url
    arguments = ["index", "--dataset", str(scifact.root), "--engine", engine, "--url", url,
                 "--index", scifact_index, "--qrels"]
    stored = await asyncio.to_thread(CliRunner().invoke, app, arguments)  # it runs a loop
    assert stored.exit_code == 0, stored.output
    assert f"in {qrels_index(scifact_index)}" in stored.output
    async with connect(engine, url) as adapter:
        hits = await adapter.bool_search(scifact_index, {"match_all": {}}, 20)
        await adapter.create_index(IndexSpec(CONFIGURED, dimension=384), replace=True)
        await adapter.bulk_index(CONFIGURED, [{"_id": h.id, **h.source} for h in hits])
        await adapter.refresh(CONFIGURED)
    put = httpx.put(f"{url}/{CONFIGURED}/_settings", json={"index.tour.method": "rocchio"})
    assert put.status_code == 200, put.text
    # no deadline to speak of: a degraded (round-0) answer would make runs differ
    config = ServerConfig(upstream=url, method=SERVER_METHOD, settings_ttl_s=0.0,
                          deadline_ms=600_000, playground=True)
    with BackgroundServer(config, sidecar_models) as server:
        yield Sidecar(engine, server.url)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # belt and braces: Selenium Manager stays off
    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=1280,800", "--lang=en-US"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


# --- helpers ------------------------------------------------------------------------------

def viewport(driver: Any, width: int, height: int) -> None:
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})


def wait_for(driver: Any, script: str, timeout: float = WAIT_S) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.2).until(
        lambda d: d.execute_script(script))


def open_page(driver: Any, url: str) -> None:
    driver.get(url)
    wait_for(driver, "return document.body.dataset.ready === 'true'", 60)


def run_search(driver: Any, url: str) -> None:
    """Open a permalink (which runs its search) and wait for both columns."""
    open_page(driver, url)
    wait_for(driver, "return Boolean(document.body.dataset.ran)")


def column(driver: Any, side: str) -> dict[str, Any]:
    """What a column shows, read from the DOM."""
    return driver.execute_script("""
        const c = document.getElementById(arguments[0]);
        const error = c.querySelector('.error');
        const hits = [...c.querySelectorAll('li.hit')];
        return {
          title: c.querySelector('h2').textContent,
          error: error && !error.hidden ? error.textContent : null,
          ids: hits.map(h => h.dataset.id),
          rounds: [...c.querySelectorAll('table.rounds tbody tr')].map(
            tr => [...tr.cells].map(td => td.textContent)),
          measure: (c.querySelector('th.measure') || {}).textContent,
          origins: hits.map(h => [h.dataset.round, h.dataset.retrievedBy]),
          labels: hits.map(h => (h.querySelector('.badge.label') || {}).textContent || null),
          relevant: hits.filter(h => h.classList.contains('relevant')).map(h => h.dataset.id),
          titles: hits.map(h => h.querySelector('.hit-title').textContent),
          snippets: hits.map(h => h.querySelector('.snippet').textContent),
          chart: (c.querySelector('.chart svg') || {outerHTML: null}).outerHTML,
          caption: (c.querySelector('.chart figcaption') || {}).textContent,
        };""", side)


def severe_console_errors(driver: Any) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser")
            if entry["level"] == "SEVERE" and "favicon" not in entry["message"]]


def judged(sidecar: Sidecar) -> dict[str, int]:
    answer = sidecar.search(qrels_index("scifact"), {"query": {"term": {"query": QUERY}}})
    assert answer.status_code == 200, answer.text
    relevance: dict[str, int] = {}
    for hit in answer.json()["hits"]["hits"]:
        relevance.update(hit["_source"]["judgements"])
    return relevance


# --- the tests ----------------------------------------------------------------------------

def test_the_page_loads_with_labelled_inputs_and_the_default_methods(sidecar, browser) -> None:
    viewport(browser, 1280, 800)
    browser.get_log("browser")  # forget what earlier tests logged (their 400s, on purpose)
    open_page(browser, sidecar.page())
    form = browser.execute_script("""
        const controls = [...document.querySelectorAll('input, select, textarea')];
        return {
          unlabelled: controls.filter(c => !c.labels || !c.labels.length).map(c => c.id),
          left: document.getElementById('left-method').value,
          right: document.getElementById('right-method').value,
          methods: [...document.getElementById('left-method').options].map(o => o.value),
          focused: document.activeElement.id,
        };""")
    assert form["unlabelled"] == []
    assert form["left"] == "knn" and form["right"] == SERVER_METHOD
    assert {"knn", "bm25", "tour-hard", "tour-soft", "rocchio", "hre"} <= set(form["methods"])
    assert form["focused"] == "index"  # nothing to run yet: the first field has the focus
    # an index whose settings name a method makes it the right side's default
    from selenium.webdriver.common.keys import Keys

    browser.find_element("id", "index").send_keys(CONFIGURED, Keys.TAB)
    wait_for(browser, "return document.getElementById('right-method').value === 'rocchio'", 30)
    assert browser.execute_script("return document.activeElement.id") == "query"
    assert severe_console_errors(browser) == []  # no CSP violation, no failed asset


def test_a_query_typed_and_submitted_by_keyboard_renders_both_columns(sidecar, browser,
                                                                      tmp_path) -> None:
    from selenium.webdriver.common.keys import Keys

    viewport(browser, 1280, 800)
    open_page(browser, sidecar.page())
    find = browser.find_element
    find("id", "index").send_keys("scifact")
    find("id", "right-options").send_keys(FAST)
    find("id", "query").send_keys(QUERY, Keys.ENTER)
    wait_for(browser, "return Boolean(document.body.dataset.ran)")
    browser.save_screenshot(str(tmp_path / f"playground-{sidecar.engine}.png"))
    left, right = column(browser, "left"), column(browser, "right")
    assert left["error"] is None and right["error"] is None, (left["error"], right["error"])
    assert left["title"].endswith("knn") and right["title"].endswith(SERVER_METHOD)
    assert len(left["ids"]) == len(right["ids"]) == 10
    assert all(left["titles"]) and all(left["snippets"]) and all(right["titles"])
    # per round: knn is round 0 alone; TOUR is round 0 then up to max_rounds more
    assert len(left["rounds"]) == 1 and 1 <= len(right["rounds"]) <= 3
    assert [row[0] for row in right["rounds"]] == [str(i) for i in range(len(right["rounds"]))]
    assert right["rounds"][0][1] == "5" and right["rounds"][0][2] == "5"  # new docs, pairs
    if len(right["rounds"]) > 1:
        assert right["rounds"][0][3].startswith("‖Δq‖")
    # where each hit came from, and its labeler score (knn runs no labeler)
    assert {retriever for _, retriever in left["origins"]} == {"knn"}
    assert {r for r, _ in left["origins"]} == {"0"} and set(left["labels"]) == {None}
    labelled = [label for label in right["labels"] if label]
    assert labelled and all(label.startswith("φ ") for label in labelled)
    # the query is judged: nDCG@10 per round, relevant hits marked as the qrels say
    relevance = judged(sidecar)
    assert relevance and left["measure"] == right["measure"] == "nDCG@10"
    for side in (left, right):
        assert side["relevant"] == [d for d in side["ids"] if relevance.get(d, 0) > 0]
        assert side["chart"] and "<circle" in side["chart"]
    assert right["relevant"], "TOUR should find the relevant doc for this query"
    assert "judged query" in browser.find_element("id", "status").text
    # the page agrees with the sidecar asked directly for the same search
    direct = sidecar.search("scifact", {"size": 10, "query": {"multi_match": {"query": QUERY}},
                                        "ext": {"tour": {"method": "knn"}}}).json()
    assert [h["_id"] for h in direct["hits"]["hits"]] == left["ids"]


def test_a_bad_option_shows_the_engine_shaped_error_inline(sidecar, browser) -> None:
    viewport(browser, 1280, 800)
    run_search(browser, sidecar.page(index="scifact", q=QUERY, right="tour-hard",
                                     right_options="k=0 max_rounds=1"))
    left, right = column(browser, "left"), column(browser, "right")
    expected = sidecar.search("scifact", {"size": 10, "query": {"multi_match": {"query": QUERY}},
                                          "ext": {"tour": {"method": "tour-hard", "k": 0,
                                                           "max_rounds": 1}}})
    assert expected.status_code == 400
    error = expected.json()["error"]
    assert right["error"] is not None and right["ids"] == []
    assert f"400 {error['type']}" in right["error"] and error["reason"] in right["error"]
    assert left["error"] is None and len(left["ids"]) == 10  # the other side still runs
    assert browser.execute_script(
        "return document.getElementById('right-options').getAttribute('aria-invalid')") is None
    # an unknown option is the sidecar's 400 too, naming the supported ones
    run_search(browser, sidecar.page(index="scifact", q=QUERY, left="bm25",
                                     left_options="bogus=1", right_options=FAST))
    assert "supported" in column(browser, "left")["error"]
    # what the page cannot even send is said in the same place
    run_search(browser, sidecar.page(index="scifact", q=QUERY, left_options="k",
                                     right_options=FAST))
    assert "key=value" in column(browser, "left")["error"]


def test_the_permalink_restores_the_state_and_the_results(sidecar, browser) -> None:
    from selenium.webdriver.common.keys import Keys

    viewport(browser, 1280, 800)
    open_page(browser, sidecar.page())
    browser.find_element("id", "index").send_keys("scifact")
    browser.find_element("id", "size").send_keys(Keys.CONTROL, "a")
    browser.find_element("id", "size").send_keys("6")
    left = browser.find_element("id", "left-method")
    left.send_keys("bm25")  # a select takes typed letters
    wait_for(browser, "return document.getElementById('left-method').value === 'bm25'", 10)
    browser.find_element("id", "right-options").send_keys(FAST)
    browser.find_element("id", "query").send_keys(QUERY, Keys.ENTER)
    wait_for(browser, "return Boolean(document.body.dataset.ran)")
    before = {side: column(browser, side)["ids"] for side in ("left", "right")}
    link = browser.find_element("id", "permalink").get_attribute("href")
    assert browser.current_url == link
    browser.get("about:blank")
    run_search(browser, link)
    state = browser.execute_script("""
        const v = id => document.getElementById(id).value;
        return [v('index'), v('query'), v('size'), v('left-method'), v('left-options'),
                v('right-method'), v('right-options')];""")
    assert state == ["scifact", QUERY, "6", "bm25", "", SERVER_METHOD, FAST]
    after = {side: column(browser, side)["ids"] for side in ("left", "right")}
    assert after == before and len(after["left"]) == 6
    assert {r for _, r in column(browser, "left")["origins"]} == {"bm25"}
    # another search is another history entry; Back brings the first one back
    browser.find_element("id", "size").send_keys(Keys.CONTROL, "a")
    browser.find_element("id", "size").send_keys("3", Keys.ENTER)
    wait_for(browser, "return document.querySelectorAll('#left li.hit').length === 3")
    assert "size=3" in browser.current_url
    browser.back()
    wait_for(browser, "return document.querySelectorAll('#left li.hit').length === 6")
    assert browser.current_url == link
    assert browser.find_element("id", "left-method").get_attribute("value") == "bm25"


def test_the_dev_tools_request_reproduces_the_right_side(sidecar, browser) -> None:
    from selenium.webdriver.common.keys import Keys

    viewport(browser, 1280, 800)
    run_search(browser, sidecar.page(index="scifact", q=QUERY, right="tour-hard",
                                     right_options=f"{FAST} lambda=0.5"))
    shown = column(browser, "right")["ids"]
    button = browser.find_element("id", "copy-devtools")
    browser.execute_script("arguments[0].focus()", button)
    button.send_keys(Keys.ENTER)  # keyboard, as a person would
    text = wait_for(browser, "return document.getElementById('devtools').value", 10)
    request_line, body = text.split("\n", 1)
    assert request_line == "GET /scifact/_search"
    body = json.loads(body)
    assert body["ext"]["tour"] == {"method": "tour-hard", "k": 5, "max_rounds": 2, "lambda": 0.5}
    answer = sidecar.search("scifact", body)
    assert answer.status_code == 200, answer.text
    assert [hit["_id"] for hit in answer.json()["hits"]["hits"]] == shown
    assert answer.json()["ext"]["tour"]["hits"][0]["retrieved_by"] == ["knn"]


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)])
def test_layout_holds_at_desktop_and_phone_sizes(sidecar, browser, tmp_path, width,
                                                 height) -> None:
    viewport(browser, width, height)
    run_search(browser, sidecar.page(index="scifact", q=QUERY, size="5", right="tour-hard",
                                     right_options=FAST))
    geometry = browser.execute_script("""
        const box = id => document.getElementById(id).getBoundingClientRect();
        return {scroll: document.documentElement.scrollWidth, inner: window.innerWidth,
                left: [box('left').left, box('left').top], right: [box('right').left,
                box('right').top], query: box('query').width};""")
    assert geometry["scroll"] <= geometry["inner"], geometry  # no horizontal overflow
    if width >= 1000:  # side by side
        assert geometry["left"][1] == geometry["right"][1]
        assert geometry["left"][0] < geometry["right"][0]
    else:  # stacked, and the query field still usable
        assert geometry["left"][1] < geometry["right"][1]
        assert geometry["query"] >= 300
    shot = tmp_path / f"playground-{sidecar.engine}-{width}x{height}.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    if SCREENSHOT and width >= 1000 and sidecar.engine == "opensearch":
        full = browser.execute_script("return document.documentElement.scrollHeight")
        viewport(browser, width, min(int(full), 1500))
        browser.save_screenshot(str(tmp_path / "readme.png"))
        from PIL import Image  # matplotlib's dependency; 128 colours keep the file small

        with Image.open(tmp_path / "readme.png") as image:
            image.convert("RGB").quantize(128, method=Image.Quantize.MEDIANCUT,
                                          dither=Image.Dither.NONE).save(SCREENSHOT,
                                                                         optimize=True)
