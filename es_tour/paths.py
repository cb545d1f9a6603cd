"""Where es-tour keeps downloaded engines, built models and engine work directories."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """Root of every cache; `ES_TOUR_HOME` overrides `~/.cache/es-tour`."""
    return Path(os.environ.get("ES_TOUR_HOME", Path.home() / ".cache" / "es-tour"))


def models_dir() -> Path:
    return home() / "models"


def engines_dir() -> Path:
    return home() / "engines"


def work_dir() -> Path:
    """Data, logs and pid files of locally started engines."""
    return home() / "work"
