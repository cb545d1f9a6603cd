"""A SciFact index grown N times without re-embedding, to see how a search's cost follows
the corpus: each doc again under new ids, its stored vectors (the index's `embedding` and
the labeler store's) slightly perturbed, so kNN and the labeler see near copies."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import httpx
import numpy as np

from es_tour.bench._machine import now
from es_tour.models import DocKey, doc_key
from es_tour.pipeline import DEFAULT_TEXT_FIELDS, doc_text
from es_tour.pipeline._vector_store import decode_vector, record, record_id
from es_tour.recommended import FRONTIER_20

COPIED_SETTINGS = ("index.analysis.", "index.knn", "index.number_of_shards",
                   "index.number_of_replicas", "index.similarity.")
BULK_DOCS = 500

# the doc cache of the grown corpus's sidecar that holds all of it: about 3 KiB a SciFact
# doc kept (`GET /_tour/stats` doc_cache_bytes over the docs read), and a margin
SIZED_KIB_PER_DOC = 4
SIZED_TTL_S = 3600.0


def perturbed(vector: np.ndarray, rng: np.random.Generator, noise: float) -> np.ndarray:
    """`vector` plus gaussian noise of about `noise` times its norm, scaled back to its
    norm: a near copy, as another doc on the same subject would be. (d,) float32."""
    v = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    moved = v + rng.normal(0.0, noise * norm / np.sqrt(v.size), v.size).astype(np.float32)
    return (moved * (norm / np.linalg.norm(moved))).astype(np.float32)


def copy_id(doc_id: str, copy: int) -> str:
    """The id of copy `copy` of a doc; copy 0 is the doc itself."""
    return doc_id if copy == 0 else f"{doc_id}~c{copy}"


def _bulk(client: httpx.Client, url: str, index: str, docs: Mapping[str, Mapping[str, Any]]
          ) -> None:
    lines = [line for doc_id, source in docs.items()
             for line in (json.dumps({"index": {"_index": index, "_id": doc_id}}),
                          json.dumps(source))]
    response = client.post(f"{url}/_bulk", content=("\n".join(lines) + "\n").encode(),
                           headers={"Content-Type": "application/x-ndjson"})
    response.raise_for_status()
    if response.json().get("errors"):
        failed = next(i for i in response.json()["items"] if "error" in i["index"])
        raise RuntimeError(f"bulk into {index} failed: {failed['index']['error']}")


def _count(client: httpx.Client, url: str, index: str, query: Mapping[str, Any] | None = None
           ) -> int:
    response = client.post(f"{url}/{index}/_count", json={"query": query or {"match_all": {}}})
    return int(response.json().get("count", -1)) if response.status_code == 200 else -1


def disk_bytes(client: httpx.Client, url: str, index: str) -> int:
    rows = client.get(f"{url}/_cat/indices/{index}",
                      params={"bytes": "b", "format": "json", "expand_wildcards": "all"}).json()
    return int(rows[0]["store.size"])


def grow(url: str, index: str, copies: int, store: str, noise: float = 0.05, seed: int = 0
         ) -> dict[str, Any]:
    """`<index>-x<copies>`: each doc of `index` `copies` times (the doc, then copies under
    `copy_id`), its `embedding` perturbed, with `index`'s mappings and the frontier's
    settings; and in `store`, each copy's labeler vector: its original's, perturbed, under
    the copy's key. Either part is skipped when complete; each records its build time in
    the index's `_meta`."""
    target = f"{index}-x{copies}"
    with httpx.Client(timeout=600) as client:
        docs = client.post(f"{url}/{index}/_search", json={
            "size": _count(client, url, index), "sort": ["_doc"],
            "query": {"match_all": {}}}).json()["hits"]["hits"]
        want = len(docs) * copies
        found = {"index": target, "copies": copies, "docs": want, "noise": noise,
                 "source_docs": len(docs), "source_bytes": disk_bytes(client, url, index)}
        index_ready = _count(client, url, target) == want
        store_ready = _count(client, url, store, {"term": {"index": target}}) == want
        built: dict[str, Any] = {}
        if index_ready:
            meta = client.get(f"{url}/{target}/_mapping").json()[target]["mappings"]
            built = meta.get("_meta", {}).get("bench_load", {})
        if not index_ready or not store_ready:
            started = time.perf_counter()
            if not index_ready:
                _create_like(client, url, index, target)
            keys = {hit["_id"]: doc_key(index, hit["_id"], doc_text(hit["_source"],
                                                                   DEFAULT_TEXT_FIELDS))
                    for hit in docs}
            held = {} if store_ready else _stored(client, url, store, list(keys.values()))
            doc_noise, vector_noise = np.random.default_rng(seed), np.random.default_rng(seed + 1)
            step = max(BULK_DOCS // copies, 1)
            for start in range(0, len(docs), step):
                batch, records = {}, {}
                for hit in docs[start:start + step]:
                    source, key = hit["_source"], keys[hit["_id"]]
                    vector = np.asarray(source["embedding"], dtype=np.float32)
                    labeler = held.get(record_id(key))
                    for copy in range(copies):
                        new_id = copy_id(hit["_id"], copy)
                        if not index_ready:
                            batch[new_id] = {**source, "embedding": (vector if copy == 0 else
                                             perturbed(vector, doc_noise, noise)).tolist()}
                        if labeler is not None:
                            new_key = (target, new_id, key[2])  # the same text: its digest
                            records[record_id(new_key)] = record(new_key, labeler if copy == 0
                                                                 else perturbed(labeler,
                                                                                vector_noise,
                                                                                noise))
                if batch:
                    _bulk(client, url, target, batch)
                if records:
                    _bulk(client, url, store, records)
            client.put(f"{url}/{target}/_settings", json={"index.refresh_interval": None})
            for name in (target, store):
                client.post(f"{url}/{name}/_refresh")
            seconds = round(time.perf_counter() - started, 1)
            built = {**built, **({} if index_ready else {"build_seconds": seconds,
                                                         "built": now()}),
                     **({} if store_ready or not held else {"store_seconds": seconds,
                                                "labeler_vectors": len(held) * copies})}
            meta = client.get(f"{url}/{target}/_mapping").json()[target]["mappings"]
            client.put(f"{url}/{target}/_mapping", json={
                "_meta": {**meta.get("_meta", {}), "bench_load": built}}).raise_for_status()
        return {**found, **built, "rebuilt": not index_ready,
                "bytes": disk_bytes(client, url, target)}


def _create_like(client: httpx.Client, url: str, index: str, target: str) -> None:
    """`target` afresh with `index`'s mappings and analysis, the frontier's settings, and
    no refresh until it is filled."""
    client.delete(f"{url}/{target}")
    flat = client.get(f"{url}/{index}/_settings",
                      params={"flat_settings": "true"}).json()[index]["settings"]
    settings = {k: v for k, v in flat.items() if k.startswith(COPIED_SETTINGS)}
    mappings = client.get(f"{url}/{index}/_mapping").json()[index]["mappings"]
    client.put(f"{url}/{target}", json={
        "settings": {**settings, **FRONTIER_20, "index.refresh_interval": "-1"},
        "mappings": mappings}).raise_for_status()


def _stored(client: httpx.Client, url: str, store: str, keys: list[DocKey]
            ) -> dict[str, np.ndarray]:
    """record id -> the labeler vector `store` holds for each of `keys` it has."""
    held: dict[str, np.ndarray] = {}
    ids = [record_id(key) for key in keys]
    for i in range(0, len(ids), BULK_DOCS):
        answer = client.post(f"{url}/{store}/_mget", json={"ids": ids[i:i + BULK_DOCS]})
        for doc in answer.json().get("docs", []):  # none: no store yet
            if doc.get("found"):
                held[doc["_id"]] = decode_vector(doc["_source"]["vector"])
    return held


def sized_cache(docs: int) -> dict[str, Any]:
    """`es-tour serve`'s doc cache settings that hold `docs` docs of SciFact's size read
    ahead: `SIZED_KIB_PER_DOC` each, in the three quarters of the cache a read ahead fills,
    read once for the whole run (`SIZED_TTL_S`): a read of the corpus again mid-run would
    cost the engine and the cores every row shares."""
    return {"doc_cache_mib": -(-docs * SIZED_KIB_PER_DOC * 4 // (3 * 1024)),
            "doc_cache_preload_docs": docs, "doc_cache_ttl_s": SIZED_TTL_S}
