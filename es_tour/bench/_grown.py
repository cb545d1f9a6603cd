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
from es_tour.models import doc_key
from es_tour.pipeline import DEFAULT_TEXT_FIELDS, doc_text
from es_tour.pipeline._vector_store import decode_vector, record, record_id
from es_tour.recommended import FRONTIER_20

COPIED_SETTINGS = ("index.analysis.", "index.knn", "index.number_of_shards",
                   "index.number_of_replicas", "index.similarity.")
BULK_DOCS = 500


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
    """`<index>-x<copies>`: each doc of `index` `copies` times (the doc, then
    copies under `copy_id`), its `embedding` perturbed, with `index`'s mappings and
    analysis and the frontier's settings; and each copy's labeler vector in `store`, the
    original's perturbed under the copy's key. Skipped when both are complete."""
    target = f"{index}-x{copies}"
    with httpx.Client(timeout=600) as client:
        docs = client.post(f"{url}/{index}/_search", json={
            "size": _count(client, url, index), "sort": ["_doc"],
            "query": {"match_all": {}}}).json()["hits"]["hits"]
        want = len(docs) * copies
        on = {"term": {"index": target}}
        found = {"index": target, "copies": copies, "docs": want, "noise": noise,
                 "source_docs": len(docs), "source_bytes": disk_bytes(client, url, index)}
        if _count(client, url, target) == want and _count(client, url, store, on) == want:
            meta = client.get(f"{url}/{target}/_mapping").json()[target]["mappings"]
            return {**found, **meta.get("_meta", {}).get("bench_load", {}), "rebuilt": False,
                    "bytes": disk_bytes(client, url, target)}
        started = time.perf_counter()
        client.delete(f"{url}/{target}")
        flat = client.get(f"{url}/{index}/_settings", params={"flat_settings": "true"}
                          ).json()[index]["settings"]
        settings = {k: v for k, v in flat.items() if k.startswith(COPIED_SETTINGS)}
        mappings = client.get(f"{url}/{index}/_mapping").json()[index]["mappings"]
        client.put(f"{url}/{target}", json={
            "settings": {**settings, **FRONTIER_20, "index.refresh_interval": "-1"},
            "mappings": mappings}).raise_for_status()
        rng = np.random.default_rng(seed)
        keys = {hit["_id"]: doc_key(index, hit["_id"], doc_text(hit["_source"],
                                                               DEFAULT_TEXT_FIELDS))
                for hit in docs}
        held: dict[str, np.ndarray] = {}
        ids = [record_id(key) for key in keys.values()]
        for i in range(0, len(ids), BULK_DOCS):
            answer = client.post(f"{url}/{store}/_mget", json={"ids": ids[i:i + BULK_DOCS]})
            for doc in answer.json()["docs"]:
                if doc.get("found"):
                    held[doc["_id"]] = decode_vector(doc["_source"]["vector"])
        for start in range(0, len(docs), BULK_DOCS // copies or 1):
            batch, records = {}, {}
            for hit in docs[start:start + (BULK_DOCS // copies or 1)]:
                source, key = hit["_source"], keys[hit["_id"]]
                for copy in range(copies):
                    new_id = copy_id(hit["_id"], copy)
                    vector = np.asarray(source["embedding"], dtype=np.float32)
                    batch[new_id] = {**source, "embedding": (
                        vector if copy == 0 else perturbed(vector, rng, noise)).tolist()}
                    if (labeler := held.get(record_id(key))) is not None:
                        new_key = (target, new_id, key[2])  # the same text, so its digest
                        records[record_id(new_key)] = record(
                            new_key, labeler if copy == 0 else perturbed(labeler, rng, noise))
            _bulk(client, url, target, batch)
            if records:
                _bulk(client, url, store, records)
        client.put(f"{url}/{target}/_settings", json={"index.refresh_interval": None})
        client.post(f"{url}/{target}/_refresh")
        client.post(f"{url}/{store}/_refresh")
        seconds = round(time.perf_counter() - started, 1)
        built = {"build_seconds": seconds, "built": now(),
                 "labeler_vectors": len(held) * copies}
        client.put(f"{url}/{target}/_mapping",
                   json={"_meta": {**mappings.get("_meta", {}), "bench_load": built}})
        return {**found, **built, "rebuilt": True, "bytes": disk_bytes(client, url, target)}
