"""make bench-proxy's page under refined load: the rows, the spread over the repeats and
each worker count's memory, from synthetic phases."""

from __future__ import annotations

import re

from es_tour.bench._load import Phase
from es_tour.bench.proxy import WorkerRun, load_markdown


def _phase(clients: int, sidecar: float, engine: float, rate: float = 0.0) -> Phase:
    return Phase(clients, [sidecar] * 10, [engine] * 10, rate, 0)


def test_the_page_gives_each_row_its_ratios_and_each_worker_count_its_memory() -> None:
    memory = [{"rss": 280, "pss": 240}, {"rss": 284, "pss": 236}]
    runs = [
        WorkerRun(1, [[_phase(0, 2, 2), _phase(4, 8, 2, 10.0)],
                      [_phase(0, 2, 2), _phase(4, 3, 2, 11.0)]], memory[:1]),
        WorkerRun(2, [[_phase(0, 2, 2), _phase(4, 2.5, 2, 12.0)],
                      [_phase(0, 2, 2), _phase(4, 3, 2, 13.0)]], memory),
    ]
    page = load_markdown(runs, 20)
    assert "| 1 | 1 | 4 | 8.0 / 2.0 | 4.00 | 8.0 / 2.0 | 4.00 | 10.0 | 0 |" in page
    assert "| 1 | 4 | 1.50 – 4.00 | 1.50 – 4.00 | 10.00 – 11.00 |" in page
    assert "- 1 worker(s): memory after the load, models loaded: RSS 280 MiB in all " \
           "(280 per process), PSS 240 MiB" in page
    assert "- 2 worker(s): memory after the load, models loaded: RSS 564 MiB in all " \
           "(280, 284 per process), PSS 476 MiB" in page
    assert not re.search(r"\bbar\b|\bmet\b", page, re.IGNORECASE)


def test_refined_throughput_is_set_against_the_baseline_revision_in_the_same_run() -> None:
    memory = [{"rss": 280, "pss": 240}]
    runs = [
        WorkerRun(2, [[_phase(16, 2, 2, 12.0)], [_phase(16, 2, 2, 14.0)],
                      [_phase(16, 2, 2, 30.0)]], memory * 2),
        WorkerRun(1, [[_phase(16, 2, 2, 10.0)], [_phase(16, 2, 2, 7.0)],
                      [_phase(16, 2, 2, 7.0)]], memory, revision="036aa75"),
    ]
    page = load_markdown(runs, 20)
    assert "| 1 at 036aa75 | 2 | 16 |" in page
    assert "Refined throughput under 16 clients, median of the repeats:" in page
    assert "- 2 worker(s): 14.00/s (2.00× the baseline)" in page
    assert "- 1 at 036aa75 worker(s): 7.00/s" in page
