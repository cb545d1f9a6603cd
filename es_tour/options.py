"""Building frozen option dataclasses from user mappings, rejecting unknown keys."""

from __future__ import annotations

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
