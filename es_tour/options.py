"""Building frozen option dataclasses from user mappings, rejecting unknown keys."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, TypeVar

from es_tour.errors import ConfigError

T = TypeVar("T")


def from_options(cls: type[T], options: Mapping[str, Any], prefix: str = "") -> T:
    """cls(**options), or ConfigError naming the unknown keys and the supported ones."""
    supported = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(options) - set(supported))
    if unknown:
        raise ConfigError(f"unknown {prefix}options {unknown}; supported: {supported}")
    return cls(**options)


def check_int(name: str, value: Any, low: int, high: int) -> int:
    """value when it is an integer in [low, high] (bools are not integers here)."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ConfigError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    return value


def check_bool(name: str, value: Any) -> bool:
    """value when it is true or false (not 0, 1 or a string)."""
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false, got {value!r}")
    return value


def check_number(name: str, value: Any, low: float, high: float) -> float:
    """value when it is a finite number in [low, high]; NaN and infinities never are."""
    if (not isinstance(value, (int, float)) or isinstance(value, bool)
            or not math.isfinite(value) or not low <= value <= high):
        raise ConfigError(f"{name} must be a number in [{low}, {high}], got {value!r}")
    return float(value)
