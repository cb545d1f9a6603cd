"""The runtime path never imports torch."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
from es_tour.models import DualEncoder, load_labeler
encoder = DualEncoder(sys.argv[1])
assert encoder.encode_queries(["hello"]).shape == (1, 384)
load_labeler("retriever").score("hello", [("1", "world")])
assert "torch" not in sys.modules, "torch was imported"
assert "transformers" not in sys.modules, "transformers was imported"
print("ok")
"""


def test_runtime_does_not_import_torch(minilm_dir):
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(minilm_dir)],
                            check=False, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
