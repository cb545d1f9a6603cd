"""es-tour: test-time query refinement for Elasticsearch and OpenSearch."""

__version__ = "0.1.0"
