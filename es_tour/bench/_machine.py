"""What a benchmark ran on, for the header of every table it writes."""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from pathlib import Path


def _cpuinfo(field: str) -> str | None:
    """The first `field` of /proc/cpuinfo (Linux)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return None
    return next((line.split(":", 1)[1].strip() for line in lines
                 if line.split(":", 1)[0].strip() == field), None)


def cpu_model() -> str:
    """The CPU model from /proc/cpuinfo, which platform.processor() often lacks."""
    return _cpuinfo("model name") or platform.processor() or "unknown CPU"


def int8_instructions() -> str | None:
    """The CPU's int8 dot-product instructions, which an int8 model's speed hangs on: two
    machines named just "AMD EPYC" ran these benchmarks, one with VNNI, one without."""
    flags = set((_cpuinfo("flags") or "").split())
    if flags & {"avx512_vnni", "avx_vnni", "amx_int8"}:
        return "VNNI"
    return "AVX2, no VNNI" if "avx2" in flags else None


def machine() -> str:
    instructions = int8_instructions()
    cpu = f"{cpu_model()} ({instructions})" if instructions else cpu_model()
    return (f"{cpu}, {os.cpu_count()} cores, {platform.machine()}, "
            f"Python {platform.python_version()}")


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
