"""What a benchmark ran on, for the header of every table it writes."""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from pathlib import Path


def cpu_model() -> str:
    """The CPU model from /proc/cpuinfo (Linux), which platform.processor() often lacks."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "unknown CPU"
    return next((line.split(":", 1)[1].strip() for line in lines
                 if line.startswith("model name")), "unknown CPU")


def machine() -> str:
    return (f"{cpu_model()}, {os.cpu_count()} cores, {platform.machine()}, "
            f"Python {platform.python_version()}")


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
