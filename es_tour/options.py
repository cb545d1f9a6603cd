"""Building frozen option dataclasses from user mappings, rejecting unknown keys."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, TypeVar

from es_tour.errors import ConfigError

T = TypeVar("T")


def from_options(cls: type[T], options: Mapping[str, Any], prefix: str = "") -> T:
    """cls(**options), or ConfigError naming the unknown keys and the supported ones. A key
    may be the user-facing name that `cls.USER_NAMES` maps to a field (the index setting's
    name, e.g. `lambda` for TOUR's `lam`), so a method string and ext.tour take the names
    the index settings use."""
    user_names: Mapping[str, str] = getattr(cls, "USER_NAMES", {})
    options = field_names(options, user_names)
    supported = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(options) - set(supported))
    if unknown:
        raise ConfigError(f"unknown {prefix}options {unknown}; supported: "
                          f"{supported}{_also(user_names)}")
    return cls(**options)


def field_names(options: Mapping[str, Any], user_names: Mapping[str, str]) -> dict[str, Any]:
    """`options` with each user-facing name replaced by its field's; one option given
    under both names is an error."""
    out: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    for key, value in options.items():
        name = user_names.get(key, key)
        if name in out:
            raise ConfigError(f"option [{name}] given twice, as [{given_as[name]}] and [{key}]")
        out[name], given_as[name] = value, key
    return out


def _also(user_names: Mapping[str, str]) -> str:
    if not user_names:
        return ""
    return " (also " + ", ".join(f"{user} for {name}" for user, name in user_names.items()) + ")"


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
