"""The engine adapter's search batch: what one turn of the event loop asks for goes in one
round trip, each answer and each error to its own caller."""

from __future__ import annotations

import asyncio

import pytest
from opensearchpy import AuthorizationException, RequestError
from opensearchpy import ConnectionError as OpenSearchConnectionError

from es_tour.engines._batch import SearchBatch, identity
from es_tour.engines._opensearch import OpenSearchEngine
from es_tour.errors import EngineError, UpstreamError


class Calls:
    """Stands for the client: answers each body with its own `n`, or the error it names."""

    def __init__(self, fail_whole: bool = False):
        self.trips: list[list[str]] = []
        self.fail_whole = fail_whole

    async def one(self, index, body, named_scores=False):
        self.trips.append([index + "+named" * named_scores])
        return {"n": body["n"]}

    async def many(self, searches, named_scores=False):
        self.trips.append([index + "+named" * named_scores for index, _ in searches])
        if self.fail_whole:
            raise ConnectionError("engine down")
        return [EngineError(400, {"error": "bad", "status": 400}) if body.get("bad")
                else {"n": body["n"]} for _, body in searches]


async def test_searches_gathered_together_go_in_one_round_trip():
    calls = Calls()
    batch = SearchBatch(calls.one, calls.many)
    answers = await asyncio.gather(batch.search("a", {"n": 1}), batch.search("b", {"n": 2}),
                                   batch.search("a", {"n": 3}))
    assert [answer["n"] for answer in answers] == [1, 2, 3]
    assert calls.trips == [["a", "b", "a"]]


async def test_searches_asking_named_queries_scores_go_in_a_round_trip_of_their_own():
    """`include_named_queries_score` is a URL parameter of the whole `_msearch`: a search
    that does not ask it (the page, whose `matched_queries` the caller reads) goes apart."""
    calls = Calls()
    batch = SearchBatch(calls.one, calls.many)
    answers = await asyncio.gather(batch.search("a", {"n": 1}, named_scores=True),
                                   batch.search("b", {"n": 2}),
                                   batch.search("c", {"n": 3}, named_scores=True))
    assert [answer["n"] for answer in answers] == [1, 2, 3]
    assert sorted(calls.trips) == [["a+named", "c+named"], ["b"]]


async def test_a_search_alone_is_sent_as_a_search_and_later_ones_apart():
    calls = Calls()
    batch = SearchBatch(calls.one, calls.many)
    assert (await batch.search("a", {"n": 1}))["n"] == 1
    assert (await batch.search("b", {"n": 2}))["n"] == 2
    assert calls.trips == [["a"], ["b"]]


async def test_each_search_gets_its_own_error_and_the_others_their_answers():
    batch = SearchBatch(Calls().one, Calls().many)
    good, bad = await asyncio.gather(batch.search("a", {"n": 1}),
                                     batch.search("a", {"n": 2, "bad": True}),
                                     return_exceptions=True)
    assert good == {"n": 1}
    assert isinstance(bad, EngineError) and bad.status == 400


async def test_a_failed_round_trip_fails_every_search_in_it():
    calls = Calls(fail_whole=True)
    batch = SearchBatch(calls.one, calls.many)
    answers = await asyncio.gather(batch.search("a", {"n": 1}), batch.search("a", {"n": 2}),
                                   return_exceptions=True)
    assert all(isinstance(answer, ConnectionError) for answer in answers)


async def test_a_cancelled_caller_leaves_the_others_their_answers():
    calls = Calls()
    batch = SearchBatch(calls.one, calls.many)
    first = asyncio.ensure_future(batch.search("a", {"n": 1}))
    second = asyncio.ensure_future(batch.search("a", {"n": 2}))
    await asyncio.sleep(0)
    first.cancel()
    assert (await second)["n"] == 2
    with pytest.raises(asyncio.CancelledError):
        await first


class RefusingClient:
    """An OpenSearch client whose engine refuses `_msearch` to one caller, as OpenSearch
    Security does to a reader without the cluster permission it checks it as."""

    def __init__(self):
        self.msearches = 0
        self.searches = 0

    async def msearch(self, body, headers=None, params=None):
        self.msearches += 1
        if headers and headers.get("authorization") == "reader":
            raise AuthorizationException(403, "security_exception",
                                         {"error": {"type": "security_exception"},
                                          "status": 403})
        return {"responses": [{"n": line["n"]} for line in body[1::2]]}

    async def search(self, index, body, headers=None, params=None):
        self.searches += 1
        if body.get("bad"):
            raise RequestError(400, "parsing_exception", {"error": "bad", "status": 400})
        return {"n": body["n"]}


async def test_a_caller_refused_msearch_gets_each_search_alone_and_is_not_asked_again():
    engine = OpenSearchEngine("http://127.0.0.1:1")
    client = RefusingClient()
    engine._client = engine._raw = client
    reader = engine.with_headers({"authorization": "reader"})
    for _ in range(2):
        answers = await reader.msearch([("a", {"n": 1}), ("a", {"n": 2, "bad": True})])
        assert answers[0] == {"n": 1}
        assert isinstance(answers[1], EngineError) and answers[1].status == 400
    assert client.msearches == 1 and client.searches == 4  # refused once, then never asked
    # another identity is not taken for the one refused
    admin = engine.with_headers({"authorization": "admin"})
    assert await admin.msearch([("a", {"n": 3}), ("a", {"n": 4})]) == [{"n": 3}, {"n": 4}]
    assert client.msearches == 2


class UnreachableClient:
    """opensearch-py's client with its engine down: a ConnectionError, a TransportError
    whose status is the string "N/A"."""

    async def msearch(self, body, headers=None, params=None):
        raise OpenSearchConnectionError("N/A", "connection refused", OSError("refused"))

    async def search(self, index, body, headers=None, params=None):
        raise OpenSearchConnectionError("N/A", "connection refused", OSError("refused"))


@pytest.mark.parametrize("refused", [False, True])
async def test_an_engine_not_reached_mid_msearch_is_a_502_not_a_refusal(refused: bool):
    engine = OpenSearchEngine("http://127.0.0.1:1")
    engine._client = engine._raw = UnreachableClient()
    reader = engine.with_headers({"authorization": "reader"})
    if refused:  # a caller refused `_msearch` before: its searches go one by one
        reader._refused["_msearch", identity(reader._headers)] = True
    with pytest.raises(UpstreamError) as raised, reader.engine_errors():
        await reader.msearch([("a", {"n": 1}), ("a", {"n": 2})])
    assert raised.value.status == 502
    assert len(reader._refused) == refused  # an engine not reached refused no one
