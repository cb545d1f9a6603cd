"""make bench-load's pure parts: the relay's request framing, the query streams that keep
the labeler's cache cold, the per-search figures, the grown corpus's copies, and the page."""

from __future__ import annotations

import socket
import threading
from collections import Counter
from concurrent.futures import Future

import httpx
import numpy as np
import pytest

from es_tour.bench._grown import copy_id, perturbed, sized_cache
from es_tour.bench._load_page import SIZED_ROW, ratio, time_split
from es_tour.bench._relay import CountingRelay, FramingError, RequestCounter, Traffic
from es_tour.bench.load import (
    INDEX,
    Burst,
    Plan,
    Row,
    RowRun,
    Side,
    TextStream,
    main_rows,
    markdown,
    per_search,
    read_ahead,
    saturation_pass,
    scale_rows,
    search_body,
)

POST = (b"POST /scifact-app/_search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 13\r\n\r\n{\"size\": 10}\n")
GET = b"GET /_cluster/health HTTP/1.1\r\nHost: x\r\n\r\n"
CHUNKED = (b"POST /_bulk HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")


def test_pipelined_requests_split_at_every_byte_are_each_counted_once() -> None:
    stream = POST + GET + CHUNKED + POST
    counter = RequestCounter()
    completed = [counter.feed(stream[i:i + 1]) for i in range(len(stream))]
    assert counter.requests == 4
    assert [c for c in completed if c] == [["POST /scifact-app/_search"],
                                           ["GET /_cluster/health"], ["POST /_bulk"],
                                           ["POST /scifact-app/_search"]]
    # each request completes on its own last byte, not before
    assert [i for i, c in enumerate(completed) if c] == [
        len(POST) - 1, len(POST + GET) - 1, len(POST + GET + CHUNKED) - 1, len(stream) - 1]


def test_a_request_split_inside_its_body_waits_for_the_rest() -> None:
    counter = RequestCounter()
    assert counter.feed(POST[:-5]) == []
    assert len(counter.feed(POST[-5:] + GET[:10])) == 1
    assert counter.feed(GET[10:]) == ["GET /_cluster/health"]


def test_a_chunked_request_without_trailers_ends_at_its_empty_line() -> None:
    counter = RequestCounter()
    assert counter.feed(b"POST /_bulk?refresh=false HTTP/1.1\r\nTransfer-Encoding: chunked"
                        b"\r\n\r\n3\r\nabc\r\n0\r\n\r\n") == ["POST /_bulk"]


def test_bytes_that_are_not_http_framing_are_refused() -> None:
    with pytest.raises(FramingError):
        RequestCounter().feed(b"POST / HTTP/1.1\r\nContent-Length: ten\r\n\r\n")
    with pytest.raises(FramingError):
        RequestCounter().feed(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")


def test_the_relay_counts_requests_and_the_bytes_coming_back() -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    engine = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        connection, _ = engine.accept()
        with connection:
            received = b""
            while received.count(b"{\"size\": 10}\n") < 2:
                received += connection.recv(4096)
            connection.sendall(answer * 2)

    thread = threading.Thread(target=serve)
    thread.start()
    relay = CountingRelay(f"http://127.0.0.1:{engine.getsockname()[1]}")
    with relay as url, socket.create_connection(
            ("127.0.0.1", int(url.rsplit(":", 1)[1]))) as client:
        client.sendall(POST + POST)
        got = b""
        while len(got) < 2 * len(answer):
            got += client.recv(4096)
        thread.join()
        traffic = relay.reset()
    engine.close()
    assert traffic == Traffic(requests=2, bytes_sent=2 * len(POST),
                              bytes_received=2 * len(answer),
                              calls=Counter({"POST /scifact-app/_search": 2}))


def test_a_stream_never_repeats_a_text_within_the_labelers_cache() -> None:
    texts = [f"q{i}" for i in range(10)]
    stream = TextStream(texts, gap=4)
    sent = stream.take(3)
    handed = stream.take(8)
    sent += handed[:6]
    stream.skip(6 - len(handed))  # a burst answered 6 of the 8 texts it was handed
    sent += stream.take(6)
    assert sent == [*texts, "q0", "q1", "q2", "q3", "q4"]
    assert all(len(set(sent[i:i + 5])) == 5 for i in range(len(sent) - 4))
    with pytest.raises(ValueError):
        TextStream(texts, gap=10)


def test_the_index_method_row_sends_no_ext_and_the_methods_name_theirs() -> None:
    rows = {row.label: row for row in main_rows("abc1234")}
    assert "ext" not in search_body("q", rows["index's method"].tour)
    assert search_body("q", rows["rerank-hybrid k 20"].tour)["ext"] == {
        "tour": {"method": "rerank-hybrid", "k": 20}}
    assert search_body("q", None) == {"query": {"match": {"text": "q"}}, "size": 10,
                                      "_source": False}
    assert rows["index's method, abc1234"].side == "baseline"
    assert rows["index's method"].side not in {rows["rerank-hybrid k 20"].side, "baseline"}
    # each labelling row on a sidecar of its own: no answer is another row's cached one
    labelling = ["rerank-hybrid k 20", "tour-soft", "tour-agent", "index's method"]
    assert len({rows[label].side for label in labelling}) == len(labelling)


def test_whole_source_rows_send_the_application_search_that_fetches_its_hits_source() -> None:
    rows = main_rows("abc1234", whole_source=True)
    assert rows and all(row.whole_source for row in rows)
    assert not any(row.whole_source for row in main_rows("abc1234"))
    assert all(row.whole_source for row in scale_rows(f"{INDEX}-x20", whole_source=True))
    index_method = {row.label: row for row in rows}["index's method"]
    body = search_body("q", index_method.tour, index_method.whole_source)
    assert body == {"query": {"match": {"text": "q"}}, "size": 10}


def test_engine_cpu_per_search_takes_the_engines_idle_rate_off() -> None:
    run = RowRun(Row("index's method", "index"), latencies_ms=[10.0] * 99 + [50.0],
                 traffic=Traffic(60, 30 * 1024, 200 * 1024), counted=20,
                 bursts=[Burst(4, 50, 1, 0, 12.5), Burst(16, 50, 0, 2, 10.0)],
                 engine_cpu_ms=1_300.0, engine_wall_s=30.0, sidecar_cpu_s=20.0)
    figures = per_search(run, idle_ms_per_s=10.0)
    assert figures["engine_cpu_ms"] == 10.0  # (1300 - 10 × 30) / 100
    assert figures["sidecar_cpu_ms"] == 200.0
    assert (figures["engine_calls"], figures["kb_received"], figures["kb_sent"]) == (
        3.0, 10.0, 1.5)
    assert figures["p50_ms"] == 10.0 and figures["per_s"] == {"4": 4.0, "16": 5.0}
    assert figures["saturation"]["failed"] == 2
    assert figures["p50_parts"] is None  # no sidecar answered: no time split


def test_the_time_split_is_each_part_s_median_over_the_sidecar_s_answers() -> None:
    parts = [{"took_ms": 10.0 + i, "total_ms": 8.0 + i, "engine_ms": 4.0 + 2 * i,
              "model_ms": 3.0, "own_ms": 1.0} for i in range(5)]
    run = RowRun(Row("index's method", "index"), latencies_ms=[12.0] * 5, time_parts=parts)
    figures = per_search(run, idle_ms_per_s=0.0)
    assert figures["p50_parts"] == {"took_ms": 12.0, "total_ms": 10.0, "engine_ms": 8.0,
                                    "model_ms": 3.0}
    rows = [_figures("plain match", INDEX, 1.0),
            {**_figures("index's method", INDEX, 3.0), "p50_parts": figures["p50_parts"]}]
    assert time_split(rows)[-2] == "| index's method | 3.0 | 12.0 | 10.0 | 8.0 | 3.0 |"
    assert not any(line.startswith("| plain match") for line in time_split(rows))


def test_a_copy_keeps_its_norm_and_stays_near_its_original() -> None:
    rng = np.random.default_rng(0)
    vector = rng.normal(size=384).astype(np.float32)
    vector /= np.linalg.norm(vector)
    copy = perturbed(vector, rng, 0.05)
    assert copy.dtype == np.float32
    assert abs(float(np.linalg.norm(copy)) - 1.0) < 1e-5
    assert 0.99 < float(copy @ vector) < 0.9999
    assert [copy_id("31715818", n) for n in (0, 1, 19)] == [
        "31715818", "31715818~c1", "31715818~c19"]


def _figures(label: str, index: str, cpu: float) -> dict[str, object]:
    return {"label": label, "side": "x", "index": index, "tour": None, "engine_cpu_ms": cpu,
            "sidecar_cpu_ms": None, "engine_calls": 1.0, "kb_received": 1.5, "kb_sent": 0.3,
            "p50_ms": 3.0, "p99_ms": 9.0, "latency_searches": 60, "degraded": 0,
            "per_s": {"4": 100.0, "16": 120.0}, "calls": {f"POST /{index}/_search": 1.0},
            "saturation": {"answered": 2000, "degraded": 0, "failed": 0}}


def test_the_page_sets_refined_cpu_against_the_plain_match_at_each_scale() -> None:
    grown = f"{INDEX}-x20"
    rows = [_figures("plain match", INDEX, 2.0), _figures("index's method", INDEX, 9.0),
            _figures("plain match", grown, 4.0), _figures("index's method", grown, 12.0)]
    assert ratio(rows, INDEX) == 4.5 and ratio(rows, grown) == 3.0
    report = {
        "command": "python -m es_tour.bench.load --dataset ../shared/datasets/scifact",
        "date": "today", "machine": "m", "baseline": "abc1234", "load_average": [1.0, 2.0],
        "plan": {"warmup": 5, "latency": 60, "counted": 20, "seconds": 10.0},
        "settings": {"index.tour.method": "hybrid-tour"}, "workers": 2,
        "engines": [{"engine": "opensearch", "version": "2.19.1", "idle_cpu_ms_per_s": 5.0,
                     "rows": rows[:2], "scale_rows": rows,
                     "scale": {"index": grown, "copies": 20, "docs": 103_660, "noise": 0.05,
                               "source_docs": 5183, "bytes": 2**30, "source_bytes": 2**26,
                               "build_seconds": 300.0, "built": "yesterday",
                               "labeler_vectors": 103_660, "rebuilt": False}}]}
    page = markdown(report)
    assert "| index's method | 9.00 | 4.50 | – | 1.00 | 1.5 | 3.0 | 9.0 | 100.0 | 120.0 " \
           "| 0 + 0 of 60 + 2000 |" in page
    assert f"| `{grown}` | index's method | 12.00 | 3.00 |" in page
    assert "4.50× at 1x, 3.00× at 20x" in page
    assert f"- index's method: 1 × `POST /{INDEX}/_search`" in page
    assert "1024 MiB on disk against 64 MiB" in page and "an earlier run" in page
    assert '"_source":false}`' in page and "whole `_source`" not in page
    whole = markdown({**report, "whole_source": True})
    assert "with their whole `_source` (the engine's default)" in whole
    assert '"_source":false' not in whole


def test_the_grown_corpus_has_a_row_whose_doc_cache_holds_all_of_it() -> None:
    grown = f"{INDEX}-x20"
    sized = [row for row in scale_rows(grown) if row.label == SIZED_ROW]
    assert [(row.side, row.index) for row in sized] == [("sized", grown)]
    flags = sized_cache(103_660)
    assert flags["doc_cache_preload_docs"] == 103_660
    # the three quarters of the cache a read ahead fills hold every doc at 3 KiB each
    assert flags["doc_cache_mib"] * 1024 * 3 // 4 >= 103_660 * 3
    rows = [_figures("plain match", INDEX, 2.0), _figures("index's method", INDEX, 9.0),
            _figures("plain match", grown, 4.0), _figures("index's method", grown, 12.0),
            {**_figures(SIZED_ROW, grown, 8.0),
             "read_ahead": {"engine_calls": 2369, "mb_received": 2395.7}}]
    report = {
        "command": "python -m es_tour.bench.load --scale-only", "scale_only": True,
        "date": "today", "machine": "m", "baseline": None, "load_average": [1.0, 2.0],
        "plan": {"warmup": 5, "latency": 60, "counted": 20, "seconds": 10.0},
        "settings": {"index.tour.method": "hybrid-tour"}, "workers": 2,
        "engines": [{"engine": "opensearch", "version": "2.19.1", "idle_cpu_ms_per_s": 5.0,
                     "rows": [], "scale_rows": rows, "sized_cache": flags,
                     "sized_hit_rate": 0.99, "sized_bytes": 300 * 2**20,
                     "sized_docs_kept": 100_000,
                     "scale": {"index": grown, "copies": 20, "docs": 103_660, "noise": 0.05,
                               "source_docs": 5183, "bytes": 2**30, "source_bytes": 2**26,
                               "build_seconds": 300.0, "built": "yesterday",
                               "labeler_vectors": 103_660, "rebuilt": False}}]}
    page = markdown(report)
    assert page.startswith("# How a search's cost grows with the corpus")
    assert "(and `make bench-scale`)" in page
    assert "\n## opensearch" not in page  # no table of the methods: none ran
    assert (f"- `{grown}`, {SIZED_ROW}: 2,369 engine calls, 2,395.7 MB from the engine"
            in page)
    assert (f"2.00× at 20x with a doc cache holding the corpus (`--doc-cache-mib "
            f"{flags['doc_cache_mib']}` `--doc-cache-preload-docs 103660` `--doc-cache-ttl "
            "3600`; it answered 99% "
            "of the docs its searches labelled, and kept 300 MiB over both workers for the "
            "100,000 docs they read ahead or fetched, 3,146 bytes a doc)") in page


def test_a_counting_pass_starts_once_the_sidecars_read_ahead_is_over(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The sidecar reads its store ahead over its first searches (here 1,000 records a
    stats read); the pass waits, searching uncounted, until three reads find the count still."""
    preloaded, searches = iter([1000.0, 2000.0, 3000.0, 3000.0, 3000.0, 3000.0]), []
    monkeypatch.setattr("es_tour.bench.load.time.sleep", lambda _: None)

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/_search"):
            searches.append(request)
            return httpx.Response(200, json={"hits": {"hits": []}, "ext": {"tour": {}}})
        return httpx.Response(200, json={"es_tour": {
            "store_docs_preloaded": {"total": next(preloaded)}}})

    side = Side("http://sidecar", lambda: 0.0, TextStream([f"q{i}" for i in range(300)]))
    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        read_ahead(client, side, Row("index's method", "method"))
    assert len(searches) == 6  # the count grew for 3 reads, then stood still for 3
    # each on a connection of its own: the next may reach a worker not yet asked
    assert all(search.headers["connection"] == "close" for search in searches)


def test_saturation_passes_reverse_the_rows_at_every_other_client_count() -> None:
    """A machine that slows over the run weighs on every row alike: the rows go in order
    at 4 clients and in reverse at 16, and each row's CPU is read around its own bursts."""
    sent: list[tuple[str, int]] = []

    class Pool:  # runs each burst at once, as the bench's one-process pool does in turn
        def submit(self, _saturate: object, url: str, row: Row, texts: object,
                   clients: int, seconds: float) -> Future[Burst]:
            sent.append((row.index, clients))
            done: Future[Burst] = Future()
            done.set_result(Burst(clients, 10, 0, 0, 1.0))
            return done

    class Clock:  # the engine's CPU grows by 1 ms at each read
        ms = 0.0

        def read(self) -> tuple[float, float]:
            self.ms += 1.0
            return self.ms, self.ms

        def idle(self) -> tuple[float, float]:
            return self.read()

    runs = [RowRun(Row(name, "engine", index=name)) for name in ("a", "b", "c")]
    sides = {"engine": Side("http://engine", None, TextStream([f"q{i}" for i in range(2000)]))}
    saturation_pass(runs, sides, Clock(), Pool(), Plan(seconds=0.0))  # type: ignore[arg-type]
    assert sent == [("a", 4), ("b", 4), ("c", 4), ("c", 16), ("b", 16), ("a", 16)]
    assert all(run.engine_cpu_ms == 2.0 for run in runs)  # 1 ms around each of its 2 bursts
    assert [[burst.clients for burst in run.bursts] for run in runs] == [[4, 16]] * 3
