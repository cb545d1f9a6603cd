# es-tour: every target installs what it needs; nothing is installed by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATASETS ?= $(abspath ../shared/datasets)
export ES_TOUR_DATASETS := $(DATASETS)

.PHONY: install models plugin test unit demo bench-proxy engines-stop lint clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip uv
	$(BIN)/uv pip install --python $(BIN)/python -q -e '.[dev]'
	touch $@

models: install
	$(BIN)/es-tour models build retriever default

plugin:
	mvn -q -B -f plugin/pom.xml package
	mvn -q -B -f plugin/pom.xml package -Pelasticsearch

test: install models plugin lint
	$(BIN)/python -m pytest -q -p no:cacheprovider tests integration_tests

unit: install
	$(BIN)/python -m pytest -q tests

lint: install
	$(BIN)/ruff check es_tour onnx_models tests integration_tests

demo: install models
	$(BIN)/es-tour engine start --engine opensearch --heap 1g
	$(BIN)/es-tour demo --dataset $(DATASETS)/scifact --engine opensearch

bench-proxy: install models
	$(BIN)/es-tour engine start --engine opensearch
	$(BIN)/es-tour index --dataset $(DATASETS)/scifact --engine opensearch
	$(BIN)/python -m es_tour.server.bench --upstream http://127.0.0.1:9200 --index scifact \
		--output docs/benchmarks/proxy.md

engines-stop: install
	$(BIN)/es-tour engine stop --engine opensearch
	$(BIN)/es-tour engine stop --engine elasticsearch

clean:
	rm -rf $(VENV) plugin/target
