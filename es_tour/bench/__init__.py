"""Benchmarks behind `make bench`: quality and cost, models, proxy, ingest; RESULTS.md."""
