"""The page `python -m es_tour.bench.load` writes (docs/benchmarks/load.md), from its
report: a table per engine, the calls by request, and the corpus growth."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from es_tour.bench._sidecar import server_stack

INDEX = "scifact-app"  # make bench-app's (es_tour.bench.app.INDEX, without its imports)
# the grown corpus's row through a sidecar whose doc cache holds all of it
SIZED_ROW = "index's method, doc cache holding the corpus"


def cell(value: Any, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def ratio(rows: Sequence[Mapping[str, Any]], index: str, label: str = "index's method"
          ) -> float | None:
    """Row `label`'s engine CPU per search over the plain match's, on `index`."""
    cpu = {r["label"]: r["engine_cpu_ms"] for r in rows if r["index"] == index}
    refined, plain = cpu.get(label), cpu.get("plain match")
    return refined / plain if refined is not None and plain else None


def kept_bytes(engine: Mapping[str, Any]) -> float:
    """The doc cache's bytes a doc kept, in the sidecar holding the grown corpus."""
    return float(engine.get("sized_bytes", 0)) / max(int(engine.get("sized_docs_kept", 0)), 1)


def sized_flags(engine: Mapping[str, Any]) -> str:
    """The doc cache flags of the sidecar holding the grown corpus."""
    return " ".join(f"`--{name.removesuffix('_s').replace('_', '-')} {value:g}`"
                    for name, value in (engine.get("sized_cache") or {}).items())


def table(rows: Sequence[Mapping[str, Any]], with_index: bool = False) -> list[str]:
    plain = {r["index"]: r["engine_cpu_ms"] for r in rows if r["label"] == "plain match"}
    lead = "| index " if with_index else ""
    out = [f"{lead}| row | engine CPU ms / search | × plain match | sidecar CPU ms / search "
           "| engine calls / search | KB from engine / search | p50 ms | p99 ms "
           "| searches/s, 4 clients | 16 clients | degraded |",
           "|---" * (11 + with_index) + "|"]
    for r in rows:
        base = plain.get(r["index"])
        times = None if r["engine_cpu_ms"] is None or not base else r["engine_cpu_ms"] / base
        rates = r["per_s"]
        sat = r["saturation"]
        out.append(
            (f"| `{r['index']}` " if with_index else "") + f"| {r['label']} | "
            f"{cell(r['engine_cpu_ms'], 2)} | {cell(times, 2)} | "
            f"{cell(r['sidecar_cpu_ms'], 2)} | {cell(r['engine_calls'], 2)} | "
            f"{cell(r['kb_received'])} | {cell(r['p50_ms'])} | {cell(r['p99_ms'])} | "
            f"{cell(rates.get('4'))} | {cell(rates.get('16'))} | "
            f"{r['degraded']} + {sat['degraded']} of {r['latency_searches']} + "
            f"{sat['answered']} |")
    return out


def read_ahead_line(rows: Sequence[Mapping[str, Any]]) -> str:
    """What the index's method's read ahead cost on the wire, in the counting pass."""
    for row in rows:
        read = row.get("read_ahead")
        if row["side"] == "index" and read:
            return (f"Its counting sidecar's read ahead (its vector store and the caller's "
                    f"docs, by the workers its searches reached, with the uncounted searches "
                    f"that waited for it) took {read['engine_calls']} engine calls and "
                    f"{read['mb_received']} MB from the engine. ")
    return ""


def read_ahead_costs(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """What each row's read ahead cost on the wire, in the counting pass."""
    read = [(row, row["read_ahead"]) for row in rows if row.get("read_ahead")]
    if not read:
        return []
    return ["Each sidecar's read ahead in the counting pass (its vector store and the "
            "caller's docs, by every worker its searches reached, with the uncounted "
            "searches that waited for it):", "",
            *[f"- `{row['index']}`, {row['label']}: {cost['engine_calls']:,} engine calls, "
              f"{cost['mb_received']:,} MB from the engine" for row, cost in read], ""]


def time_split(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Where the one-client p50 goes, for the rows a sidecar answered."""
    split = [r for r in rows if r.get("p50_parts")]
    if not split:
        return []
    out = ["Where the time goes, one client (medians, ms):", "",
           "| row | p50 | sidecar's answer (`took`) | its rounds | engine calls in them "
           "| models in them |", "|---" * 6 + "|"]
    for r in split:
        parts = r["p50_parts"]
        out.append(f"| {r['label']} | {cell(r['p50_ms'])} | {cell(parts['took_ms'])} | "
                   f"{cell(parts['total_ms'])} | {cell(parts['engine_ms'])} | "
                   f"{cell(parts['model_ms'])} |")
    return [*out, ""]


def markdown(report: Mapping[str, Any]) -> str:
    q = report["plan"]
    lines = [
        ("# How a search's cost grows with the corpus" if report.get("scale_only") else
         "# What a search costs the cluster"
         + (", when the application fetches its hits' source" if report.get("whole_source")
            else "")), "",
        "Written by `python -m es_tour.bench.load` (and `make "
        + ("bench-scale" if report.get("scale_only") else "bench-load")
        + "`); never edited by "
        "hand.", "",
        f"- command: `{report['command']}`",
        f"- date: {report['date']}; machine: {report['machine']}; 1-minute load average "
        f"{report['load_average'][0]:.1f} at the start, {report['load_average'][1]:.1f} at "
        "the end; engines on the same machine",
        f"- index `{INDEX}` (`make bench-app`'s SciFact, 5,183 docs), its own method the "
        "budget frontier's 20 labeler pairs: `"
        + ", ".join(f"{k.removeprefix('index.tour.')}={v}"
                    for k, v in report["settings"].items()) + "`; labeler store warm",
        "- every search is the application's `{\"query\":{\"match\":{\"text\": QUERY}},"
        + ("\"size\":10}`, its hits with their whole `_source` (the engine's default)"
           if report.get("whole_source") else "\"size\":10,\"_source\":false}`")
        + ", asking for no compressed answer as the engines' own clients do; "
        "**plain match** sends it to the engine, the other "
        "rows to a sidecar (" + server_stack() + ", `es-tour serve`'s defaults: "
        f"{report['workers']} worker processes, one per core, 10 s deadline; no ranking "
        "kept for a later page, `--ranking-cache-ttl 0`, so that a text sent again runs "
        "its rounds again) with "
        "`\"ext\":{\"tour\":{\"method\": ...}}`, or no `ext` for the "
        "**index's method**; **tour-soft** (TOUR alone) and **tour-agent** (an agent in "
        "the BM25 ∪ kNN environment) take the index's `k`, `budget` and fusion weights; "
        + (f"the **index's method, {report['baseline']}** row is the sidecar of main "
           f"before this change (`--baseline {report['baseline']}`), in the same run"
           if report["baseline"] else "no baseline revision"),
        "- **engine CPU**: `_nodes/stats/process` `cpu.total_in_millis` over a row's "
        "saturation passes, less the engine's idle rate measured between passes "
        "(per engine below), over the searches answered (rows in order at 4 clients, reversed "
        "at 16: a drift weighs on each alike); **× plain match**: over its index's plain match",
        "- **sidecar CPU**: user + system time of the sidecar's processes over the same "
        "passes",
        f"- **engine calls** (HTTP requests) and **KB from the engine** (response bytes, "
        f"headers included): {q['counted']} searches per row, after {q['warmup']} "
        "uncounted and once its workers have read their vector store ahead (a cost of their "
        "start), through a counting TCP relay in the bench's process, the upstream of fresh "
        "sidecars (its callers' calls and its own vector store reads, on the wire)",
        f"- **p50 / p99**: {q['latency']} searches per row after {q['warmup']} warm-up, one "
        "client, the rows interleaved query by query (so p99 is about the slowest)",
        "- **where the time goes**: for the sidecar's rows, the medians over those searches "
        "of each answer's `took` (the sidecar, from the request read to the answer written) "
        "and of its trace's `ext.tour.timings`: the method's rounds (`total_ms`) and, within "
        "them, the time its engine calls took (`engine_ms`) and its models (`model_ms`: the "
        "query embedding, labelling), each summed over the calls, so calls made at once each "
        "count; the p50 less `took` is the HTTP to and from the sidecar",
        f"- **searches/s**: 4, then 16 clients send back to back for {q['seconds']:.0f} s "
        "from a process of their own; the searches still running then are waited for and "
        "counted, over the time to the last answer; **degraded**: answers that gave up "
        "refining (one-client + saturation, of all answered)",
        "- before measuring, the bench force-merges each index it searches to one segment, "
        "as a read-mostly index is kept (a bulk load leaves as many segments as the engine "
        "flushed, each with a kNN graph of its own that every kNN leg searches), and waits "
        "until the engine runs no merge",
        "- query texts: SciFact's distinct test, then train queries; each sidecar takes "
        "them in order and never repeats one within the labeler's score cache (256 "
        "queries), and the labelling rows run on separate sidecars, so no answer is a "
        "cached one",
        "- **doc cache**: the index's method's sidecar keeps the docs its searches fetched "
        "to label, per caller and doc version (`--doc-cache-mib`, `--doc-cache-ttl`), and "
        "after a caller's first search reads that caller's docs of the index ahead "
        "(`--doc-cache-preload-docs`), so a search that labels docs read or fetched before "
        "fetches nothing for them; before the counted, one-client and saturation passes "
        "the bench sends uncounted searches until each sidecar's workers have read ahead; "
        "**no doc cache** is the same method on a sidecar with `--doc-cache-mib 0`, every "
        "doc fetched",
        "",
    ]
    for e in (e for e in report["engines"] if e["rows"]):
        lines += [f"## {e['engine']} {e['version']}", "",
                  f"Engine idle: {e['idle_cpu_ms_per_s']:.1f} ms of CPU per second. "
                  "The index's method's doc cache answered "
                  f"{cell(100 * (e.get('doc_cache_hit_rate') or 0), 0)}% of the docs its "
                  "searches labelled, over the run (`GET /_tour/stats`), and its workers "
                  f"read {e.get('docs_read_ahead', 0):,} docs ahead. " + read_ahead_line(
                      e["rows"]) + "Segments before "
                  "the bench merged them: " + ", ".join(
                      f"`{index}` {n}" for index, n in
                      (e.get("segments_before_merge") or {}).items()) + ".", "",
                  *table(e["rows"]), "", *time_split(e["rows"]),
                  "Engine calls per search, by request:", "",
                  *[f"- {r['label']}: " + ", ".join(f"{n:g} × `{call}`"
                                                     for call, n in r["calls"].items())
                    for r in e["rows"]], ""]
    grown = [e for e in report["engines"] if e.get("scale")]
    if grown:
        lines += ["## Corpus growth", "",
                  "The index's method and the plain match again, on `scifact-app` and on a "
                  "copy grown N times: each doc again under ids `<id>~c<n>`, its `embedding` "
                  "and its labeler vector in the store perturbed (gaussian noise of "
                  f"{grown[0]['scale']['noise']:g} × the norm, renormalised; no "
                  "re-embedding), the same mappings and `index.tour.*` settings. Copies "
                  "share their original's text, so BM25 ties them.", ""]
    for e in grown:
        s = e["scale"]
        refined_1x, refined_n = ratio(e["scale_rows"], INDEX), ratio(e["scale_rows"], s["index"])
        lines += [f"### {e['engine']} {e['version']}", "",
                  f"`{s['index']}`: {s['docs']:,} docs, "
                  f"{s['bytes'] / 2**20:.0f} MiB on disk against {s['source_bytes'] / 2**20:.0f} "
                  f"MiB for `{INDEX}`; docs copied in {s.get('build_seconds', 0):.0f} s, "
                  f"{s.get('labeler_vectors', 0):,} labeler vectors in "
                  f"{s.get('store_seconds', 0):.0f} s ("
                  + ("by this run" if s["rebuilt"] else f"by an earlier run, "
                     f"{s.get('built', 'unknown date')}: this one found them complete")
                  + ").", "",
                  *table(e["scale_rows"], with_index=True), "",
                  *read_ahead_costs(e["scale_rows"]),
                  f"Refined engine CPU / plain engine CPU: {cell(refined_1x, 2)}× at 1x, "
                  f"{cell(refined_n, 2)}× at {s['copies']}x"
                  + (f", {cell(sized, 2)}× at {s['copies']}x with a doc cache holding the "
                     f"corpus ({sized_flags(e)}; it answered "
                     f"{cell(100 * (e.get('sized_hit_rate') or 0), 0)}% of the docs its "
                     f"searches labelled, and kept {e.get('sized_bytes', 0) / 2**20:.0f} MiB "
                     "over both workers for the "
                     f"{e.get('sized_docs_kept', 0):,} docs they read ahead or fetched, "
                     f"{kept_bytes(e):,.0f} bytes a doc)"
                     if (sized := ratio(e["scale_rows"], s["index"], SIZED_ROW)) is not None
                     else "") + ".", ""]
    return "\n".join(lines)
