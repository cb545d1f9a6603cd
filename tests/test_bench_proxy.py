"""make bench-proxy's page under refined load: the rows, the spread over the repeats and
the bar's verdict, from synthetic phases."""

from __future__ import annotations

from es_tour.bench._load import Phase
from es_tour.bench.proxy import WorkerRun, load_markdown


def _phase(clients: int, sidecar: float, engine: float, rate: float = 0.0) -> Phase:
    return Phase(clients, [sidecar] * 10, [engine] * 10, rate, 0)


def test_the_bar_holds_only_where_every_repeat_is_within_1_5x_of_the_engine() -> None:
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
    assert "- 1 worker(s): bar NOT met" in page
    assert "- 2 worker(s): bar met; memory after the load, models loaded: RSS 564 MiB in all " \
           "(280, 284 per process), PSS 476 MiB" in page
