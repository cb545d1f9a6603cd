# The es-tour sidecar: `es-tour serve` in front of an Elasticsearch or OpenSearch node.
#   docker build -t es-tour-sidecar .
#   docker run -p 9201:9201 -v ~/.cache/es-tour/models:/var/cache/es-tour/models:ro \
#     es-tour-sidecar --upstream http://opensearch:9200
# Models are not baked in: build them on the host (`es-tour models build retriever default`,
# or `make models`) and mount the model cache, or pass --build-arg BUILD_MODELS=1 to build
# them in the image. Both are ready ONNX in Maven Central jars, so building them needs Maven,
# not PyTorch: BUILD_MODELS=1 installs it (and the JRE it runs on), a larger image.
FROM python:3.11-slim

ARG BUILD_MODELS=0
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 ES_TOUR_HOME=/var/cache/es-tour

WORKDIR /app
COPY pyproject.toml README.md ./
COPY es_tour ./es_tour
COPY onnx_models ./onnx_models
RUN pip install --no-cache-dir . starlette uvicorn \
    && if [ "$BUILD_MODELS" = "1" ]; then \
        apt-get update && apt-get install -y --no-install-recommends maven \
        && rm -rf /var/lib/apt/lists/* \
        && es-tour models build retriever default; \
    fi \
    && useradd --system --uid 10001 es-tour \
    && mkdir -p "$ES_TOUR_HOME/models" && chown -R es-tour "$ES_TOUR_HOME"

USER es-tour
EXPOSE 9201
# /_tour/health answers 200 while the sidecar serves and its engine answers, 503 when the
# engine does not (it waits up to 5 s for it); urlopen raises on a 503 or a refused
# connection, so python exits 1: unhealthy. The slim image has no curl.
HEALTHCHECK --interval=10s --timeout=10s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9201/_tour/health', timeout=8)"]
ENTRYPOINT ["es-tour", "serve", "--listen", "0.0.0.0:9201"]
CMD ["--upstream", "http://opensearch:9200"]
