"""Where es-tour keeps downloaded engines, built models and engine work directories."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """Root of every cache; `ES_TOUR_HOME` overrides the default.

    Engines refuse to run as root, so under root they run as an unprivileged account
    that cannot enter /root: the default then is a world-readable /var/cache/es-tour.
    """
    if "ES_TOUR_HOME" in os.environ:
        return Path(os.environ["ES_TOUR_HOME"])
    if os.geteuid() == 0:
        return Path("/var/cache/es-tour")
    return Path.home() / ".cache" / "es-tour"


def models_dir() -> Path:
    return home() / "models"


def engines_dir() -> Path:
    """Downloaded artifacts and unpacked engine distributions."""
    return home() / "engines"


def work_dir() -> Path:
    """Config, data, logs and pid files of locally started engines."""
    return home() / "work"
