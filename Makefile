# es-tour: every target installs what it needs; nothing is installed by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATASETS ?= $(abspath ../shared/datasets)
export ES_TOUR_DATASETS := $(DATASETS)
# The plugin's zips: for OpenSearch 2.19.1 and Elasticsearch 8.19.21 (JDK 17), and for the
# engines' current majors, OpenSearch 3.5.0 and Elasticsearch 9.3.2 (JDK 21+, docs/plugin.md).
OPENSEARCH_ZIP := plugin/target/tour-settings-0.1.0.zip
ELASTICSEARCH_ZIP := plugin/target/tour-settings-es-0.1.0.zip
OPENSEARCH_CURRENT_ZIP := plugin/target/opensearch-3.5.0/tour-settings-0.1.0.zip
ELASTICSEARCH_CURRENT_ZIP := plugin/target/elasticsearch-9.3.2/tour-settings-es-0.1.0.zip
PLUGIN_SOURCES := plugin/pom.xml $(shell find plugin/src -type f)
# Indexes analyse text with the plugin's tour_english analyzer, so every node gets the plugin.
START := $(BIN)/es-tour engine start
OPENSEARCH := --engine opensearch --plugin $(OPENSEARCH_ZIP)
ELASTICSEARCH := --engine elasticsearch --plugin $(ELASTICSEARCH_ZIP)

.PHONY: install runtime models plugin browser test test-frontier test-training unit demo screenshot reranker tuned-labeler bench bench-smoke bench-gate \
	bench-semantics bench-proxy bench-app bench-cost bench-load bench-pages bench-models bench-reliability bench-frontier \
	bench-labelers bench-ensemble bench-scale engines-stop lint typecheck cli-docs \
	clean

# Bytecode is compiled ahead, since an environment with PYTHONDONTWRITEBYTECODE set never
# caches it: every es-tour process would compile scipy, the clients and the package anew
# (seconds each). compileall rewrites only what changed.
install: $(VENV)/.installed
	$(BIN)/python -m compileall -q es_tour onnx_models

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip uv
	$(BIN)/uv pip install --python $(BIN)/python -q --compile-bytecode -e '.[dev]'
	touch $@ $(VENV)/.installed-runtime

# The runtime alone, which is what `make demo` needs: every model it builds is ready ONNX,
# so it installs no PyTorch (the dev extras bring it, and gigabytes of CUDA wheels with it).
runtime: $(VENV)/.installed-runtime
	$(BIN)/python -m compileall -q es_tour onnx_models

$(VENV)/.installed-runtime: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip uv
	$(BIN)/uv pip install --python $(BIN)/python -q --compile-bytecode -e .
	touch $@

# e5-small-v2: the encoder of the foreign-index tests (an index es-tour did not make)
models: install
	$(BIN)/es-tour models build retriever default e5-small-v2

# All four zips. A target that starts nodes depends on the zips of its engines alone: a
# cold `make demo` builds one zip, not four. Each profile compiles in a build directory of its
# own (target/, target/es/, target/<engine>-<version>/build/), so no build removes another's
# zip; Maven runs one at a time (flock), since under make -j builds sharing a cold ~/.m2
# would download the same artifacts at once.
MVN := flock plugin/pom.xml mvn -q -B -f plugin/pom.xml package
JDK_21 := $(BIN)/es-tour engine jdk --engine opensearch --version 3.5.0
BOTH_ZIPS := $(OPENSEARCH_ZIP) $(ELASTICSEARCH_ZIP)
plugin: $(OPENSEARCH_ZIP) $(ELASTICSEARCH_ZIP) $(OPENSEARCH_CURRENT_ZIP) $(ELASTICSEARCH_CURRENT_ZIP)

# touch: Maven may leave a zip whose content did not change as it was
$(OPENSEARCH_ZIP): $(PLUGIN_SOURCES)
	$(MVN)
	touch $@

$(ELASTICSEARCH_ZIP): $(PLUGIN_SOURCES)
	$(MVN) -Pelasticsearch
	touch $@

$(OPENSEARCH_CURRENT_ZIP): $(PLUGIN_SOURCES) | $(VENV)/.installed
	jdk=$$($(JDK_21)) && JAVA_HOME=$$jdk $(MVN) -Pcurrent
	touch $@

$(ELASTICSEARCH_CURRENT_ZIP): $(PLUGIN_SOURCES) | $(VENV)/.installed
	jdk=$$($(JDK_21)) && JAVA_HOME=$$jdk $(MVN) -Pelasticsearch,current
	touch $@

# Headless Chromium and its WebDriver from Debian, for the playground's browser tests
# (Selenium is pointed at /usr/bin/chromium and /usr/bin/chromedriver: nothing is downloaded).
browser:
	command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		(apt-get update && apt-get install -y chromium chromium-driver)

# The set-up steps two at a time: the plugin's Maven builds and the Python checks; then
# every test. The sidecar, security and reliability suites serve OpenSearch through a
# sidecar of two worker processes and Elasticsearch through one
# (docs/sidecar.md#workers-using-every-core).
test: install
	$(MAKE) -j2 --output-sync=target models plugin browser lint typecheck
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=20 tests integration_tests

# tune --apply on all of SciFact reproduces the budget frontier's figure, on both engines:
# ~10 min on 2 cores, so apart from `make test` (CI runs both).
test-frontier: install models $(BOTH_ZIPS)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m frontier -s \
		integration_tests/test_frontier_reproduction.py

# the training runs: a learned agent's policy and a reranker on SciFact, and tune training a
# labeler of an index's own on a small collection: ~6 min on 2 cores, so apart from
# `make test` (CI runs both)
test-training: install models $(BOTH_ZIPS)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m training --durations=5 integration_tests

unit: install
	$(BIN)/python -m pytest -q tests

lint: install
	$(BIN)/ruff check es_tour onnx_models tests integration_tests conftest.py

typecheck: install
	$(BIN)/mypy

# docs/cli.md from the command line itself (tests/test_cli_reference.py keeps it in step)
cli-docs: install
	$(BIN)/python -m es_tour.cli.reference > docs/cli.md

# Sets the budget frontier's 20-pair index.tour.* settings on the index (es_tour/recommended.py),
# shows knn and bm25 against that method on a test query, compares methods, and ends by
# serving the playground on that method (the sidecar on 127.0.0.1:9201), on the compared test
# query with the median nDCG@10 gain over knn among those it changed, until Ctrl-C, which
# ends it with exit status 0 (es-tour serve alike: "sidecar stopped"); its URL is the last
# line printed. `es-tour demo --no-serve` stops after the comparison. It builds only what it
# runs: the retriever, the default labeler and the OpenSearch 2.19.1 zip.
# One step after another: on two cores, embedding SciFact beside OpenSearch's start took as
# long as the two in turn (each slows the other), and hid the indexing's progress bar.
demo: runtime $(OPENSEARCH_ZIP)
	$(BIN)/es-tour models build retriever default
	$(START) $(OPENSEARCH) --heap 1g
	$(BIN)/es-tour demo --dataset $(DATASETS)/scifact --engine opensearch

# docs/img/playground.png, taken by the playground's browser test against the test node.
screenshot: install models $(BOTH_ZIPS) browser
	ES_TOUR_PLAYGROUND_SCREENSHOT=$(abspath docs/img/playground.png) $(BIN)/python -m pytest \
		-q -p no:cacheprovider integration_tests/test_playground.py -k "layout and opensearch"

# Fine-tunes the SciFact reranker (about 25 minutes on two cores) into the model cache,
# <ES_TOUR_HOME>/models/scifact-reranker; see docs/models.md.
reranker: install models $(OPENSEARCH_ZIP)
	$(START) $(OPENSEARCH) --heap 1g
	$(BIN)/es-tour index --dataset $(DATASETS)/scifact --engine opensearch
	$(BIN)/es-tour train-reranker --dataset $(DATASETS)/scifact --engine opensearch

# Tunes bge-small's query tower on SciFact train, cross-fitted over 4 folds (about 15
# minutes on two cores with the corpus vectors cached; 10 more to embed the corpus once)
# into the model cache,
# <ES_TOUR_HOME>/models/bge-small-en-v1.5-scifact-queries; see docs/models.md.
tuned-labeler: install models
	$(BIN)/es-tour train-labeler --dataset $(DATASETS)/scifact

# Everything behind docs/RESULTS.md: both engines, the budget frontier, every method,
# sweeps, models, proxy, ingest (about 2 hours). Trains the reranker first if the model
# cache lacks it.
bench: install models $(BOTH_ZIPS)
	$(BIN)/python -c "import sys; from es_tour.paths import models_dir; \
		sys.exit(not (models_dir() / 'scifact-reranker' / 'manifest.json').is_file())" \
		|| $(MAKE) reranker
	$(MAKE) bench-frontier
	$(BIN)/python -m es_tour.bench --dataset $(DATASETS)/scifact --out docs

# docs/benchmarks/frontier.md: every labelling method at 10, 20 and 40 labeler pairs per
# query, plain and fused (weights fitted on train), with each candidate labeler (an
# ensemble's member weights fitted on train first; the tuned query tower's fusion weights
# on the train queries it held out), on both engines; about 40 minutes a
# labeler on an idle 2-core machine. Then docs/benchmarks/labelers.md and RESULTS.md's
# labelers section (P1a, P1b, P2, cost, robustness) from its runs; P2's learned agent runs a
# policy trained there with the chosen labeler (2.5-7 minutes on 809 train queries), and
# `--only p2,gain` re-measures P2 and the chosen labeler's paired gain alone.
bench-frontier: install models $(BOTH_ZIPS)
	$(BIN)/python -c "import sys; from es_tour.paths import models_dir; \
		sys.exit(not (models_dir() / 'bge-small-en-v1.5-scifact-queries' / 'manifest.json').is_file())" \
		|| $(MAKE) tuned-labeler
	$(START) $(OPENSEARCH) --heap 1g
	$(START) $(ELASTICSEARCH) --heap 1g
	$(BIN)/python -m es_tour.bench.frontier --dataset $(DATASETS)/scifact --out docs/benchmarks
	$(MAKE) bench-labelers

bench-labelers: install models $(OPENSEARCH_ZIP)
	$(START) $(OPENSEARCH) --heap 1g
	$(BIN)/python -m es_tour.bench.labelers --dataset $(DATASETS)/scifact --out docs

# docs/benchmarks/gate.md: which signals tell a query that refining hurts, and the gates
# they support, fitted on SciFact train and reported on test (about 2 minutes)
bench-gate: install models $(OPENSEARCH_ZIP)
	$(START) $(OPENSEARCH) --heap 1g
	$(BIN)/python -m es_tour.bench.gate --dataset $(DATASETS)/scifact

# docs/benchmarks/ensemble.md: each registry encoder's spread, and ensembles reranking one
# labelled pool, standardised per query or by spread (about 15 minutes)
bench-ensemble: install models $(OPENSEARCH_ZIP)
	$(START) $(OPENSEARCH) --heap 1g
	$(BIN)/python -m es_tour.bench.ensemble --dataset $(DATASETS)/scifact

# The same pipeline on 20 queries, written to a scratch directory (make test runs it too,
# as integration_tests/test_bench_smoke.py).
bench-smoke: install models $(BOTH_ZIPS)
	$(START) $(OPENSEARCH) --heap 1g
	$(START) $(ELASTICSEARCH) --heap 1g
	$(BIN)/python -m es_tour.bench --dataset $(DATASETS)/scifact --smoke --labeler retriever \
		--out $${TMPDIR:-/tmp}/es-tour-bench-smoke

# docs/benchmarks/semantics.md, and docs/sidecar.md's table of what is refined: each request shape of
# integration_tests/test_sidecar_semantics.py sent to the engine and to the sidecar, on both
# engines, with its verdict (make test runs the same suite; a few minutes on two cores)
bench-semantics: install models $(BOTH_ZIPS)
	ES_TOUR_SEMANTICS_PAGE=docs/benchmarks/semantics.md $(BIN)/python -m pytest -q -p no:cacheprovider \
		integration_tests/test_sidecar_semantics.py

bench-models: install models
	$(BIN)/python -m es_tour.bench.models --output docs/benchmarks/models.md \
		--json docs/benchmarks/models.json

# Pass-through overhead, then pass-through under 0, 4 and 16 refined clients at 1, 2 and 4
# workers and on one process of PROXY_BASELINE's sidecar (LOAD_BASELINE: main before the
# refined path's cost was cut; older sidecars refuse today's model cache), 3 repeats (about
# 30 min; warming scifact-app's vector store the first time takes longer, see
# docs/benchmarks/cost.md)
PROXY_BASELINE ?= $(LOAD_BASELINE)
bench-proxy: install models $(OPENSEARCH_ZIP)
	$(START) $(OPENSEARCH) --heap 1g
	$(BIN)/es-tour index --dataset $(DATASETS)/scifact --engine opensearch
	$(BIN)/python -m es_tour.bench.proxy --upstream http://127.0.0.1:9200 --index scifact \
		--dataset $(DATASETS)/scifact --workers 1,2,4 --clients 0,4,16 --repeats 3 \
		--baseline $(PROXY_BASELINE) --output docs/benchmarks/proxy.md

# docs/benchmarks/app.md: application-shaped searches (bool filters, aggs, highlight, pages,
# _msearch, query_string) from the SciFact test queries through the sidecar on both engines,
# over the index scifact-app (SciFact with synthetic year/topic, which the bench indexes).
# The first ingest embeds the corpus with the retriever (cached in the model cache after).
bench-app: install models $(BOTH_ZIPS)
	$(START) $(OPENSEARCH) --heap 1g
	$(START) $(ELASTICSEARCH) --heap 1g
	$(BIN)/python -m es_tour.bench.app --dataset $(DATASETS)/scifact --output docs/benchmarks/app.md

# A refined search's cost with no reuse of doc vectors, an empty and a warm vector store,
# against hybrid-linear, over a stream of every SciFact query (docs/benchmarks/cost.md).
# Then the frontier's chosen labeler (an ensemble) and bge-small alone, warm, each against
# hybrid-linear in its own run on OpenSearch: sections of the same page. Their stores are
# seeded from the model cache's corpus vectors where it holds them (else warm embeds).
COST_LABELERS = bge-small-en-v1.5^1+e5-small-v2^0.25 bge-small-en-v1.5
bench-cost: install models $(BOTH_ZIPS)
	$(START) $(OPENSEARCH) --heap 1g
	$(START) $(ELASTICSEARCH) --heap 1g
	$(BIN)/python -m es_tour.bench.cost --dataset $(DATASETS)/scifact --output docs/benchmarks/cost.md
	for labeler in $(COST_LABELERS); do \
		$(BIN)/python -m es_tour.bench.cost --dataset $(DATASETS)/scifact --queries 300 \
			--labeler "$$labeler" --ways warm-store --engines opensearch \
			--seed-from-corpus-cache --output docs/benchmarks/cost.md || exit 1; \
	done

# docs/benchmarks/load.md: what a search costs the cluster per method on both engines
# (engine and sidecar CPU, engine calls and KB, p50/p99, searches/s at 4 and 16 clients),
# the index's method also through LOAD_BASELINE's sidecar (main before the change) in the
# same run (about 20 minutes on two cores); then docs/benchmarks/load-source.md, the same
# rows with the application's search fetching its hits' whole _source (about 15 minutes
# more).
LOAD_BASELINE ?= 2e9867d
LOAD_SOURCE_BASELINE ?= 5c37091
bench-load: install models $(BOTH_ZIPS)
	$(START) $(OPENSEARCH) --heap 1g
	$(START) $(ELASTICSEARCH) --heap 1g
	$(BIN)/python -m es_tour.bench.load --dataset $(DATASETS)/scifact \
		--baseline $(LOAD_BASELINE) --output docs/benchmarks/load.md
	$(BIN)/python -m es_tour.bench.load --dataset $(DATASETS)/scifact \
		--whole-source --baseline $(LOAD_SOURCE_BASELINE) --output docs/benchmarks/load-source.md

# docs/benchmarks/load-scale.md: the plain match and the index's method on scifact-app and
# on it grown 20 times (about 100k docs), on OpenSearch, also through a sidecar whose doc
# cache holds the grown corpus (about 20 minutes; building the grown index the first time
# adds its build time)
bench-scale: install models $(OPENSEARCH_ZIP)
	$(START) $(OPENSEARCH) --heap 1g
	$(BIN)/python -m es_tour.bench.load --dataset $(DATASETS)/scifact --engines opensearch \
		--scale 20 --scale-only --output docs/benchmarks/load-scale.md

# docs/benchmarks/pages.md: pages 1, 2 and 3 of each query, straight to the engine and
# through sidecars that keep a refined search's ranking or none, on both engines (about 10
# minutes)
bench-pages: install models $(BOTH_ZIPS)
	$(START) $(OPENSEARCH) --heap 1g
	$(START) $(ELASTICSEARCH) --heap 1g
	$(BIN)/python -m es_tour.bench.pages --dataset $(DATASETS)/scifact --output docs/benchmarks/pages.md

# Load, engine kill, interrupted ingest and a two-node cluster losing a node, all on
# loopback from RELIABILITY_PORTS (nodes on +0, +5, +20/+21; cluster transport +40/+41): it
# starts the nodes it needs and stops those it started. About 10 minutes on two cores.
RELIABILITY_PORTS ?= 9600
bench-reliability: install models
	$(BIN)/python -m es_tour.bench.reliability --dataset $(DATASETS)/scifact \
		--port-base $(RELIABILITY_PORTS) --output docs/benchmarks/reliability.md

engines-stop: install
	$(BIN)/es-tour engine stop --engine opensearch
	$(BIN)/es-tour engine stop --engine elasticsearch

clean:
	rm -rf $(VENV) plugin/target
