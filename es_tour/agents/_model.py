"""The learned policy's model: class-balanced L2 logistic regression, stored with a manifest.

Files live in `models_dir()/agent-policy/`: `policy-v{FORMAT}.npz` (weights, feature means
and scales, threshold) and `manifest.json` (sha256 of the npz, features, training facts).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from es_tour.agents._features import FEATURES
from es_tour.errors import ConfigError, ModelError, NotFoundError
from es_tour.paths import models_dir

FORMAT = 1
MANIFEST = "manifest.json"


DEFAULT_POLICY = "default"
_POLICY_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def check_policy_name(name: object) -> str:
    """name when it can name a policy: lower-case letters, digits, `-` and `_`, so a request
    can never point at a path (and an error never says which paths exist)."""
    if not isinstance(name, str) or not _POLICY_NAME.fullmatch(name):
        raise ConfigError(f"policy must be a registry name ([a-z0-9][a-z0-9_-]*), got {name!r}")
    return name


def policy_dir(name: str = DEFAULT_POLICY) -> Path:
    """Where the policy called `name` lives: `agent-policy/` for the default one,
    `agent-policies/<name>/` for the others, under models_dir()."""
    check_policy_name(name)
    if name == DEFAULT_POLICY:
        return models_dir() / "agent-policy"
    return models_dir() / "agent-policies" / name


@dataclass(frozen=True)
class LogisticPolicy:
    """p(Δq improves A_t) = σ(((x − mean) / scale) · w); the policy acts when p ≥ threshold.

    weights: (F + 1,) float64 with the intercept last; mean, scale: (F,) float64.
    """

    weights: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    threshold: float = 0.5
    features: tuple[str, ...] = FEATURES
    info: Mapping[str, Any] = field(default_factory=dict)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """features: (n, F) -> (n,) probabilities."""
        z = (np.asarray(features, dtype=np.float64) - self.mean) / self.scale
        return 1.0 / (1.0 + np.exp(-(z @ self.weights[:-1] + self.weights[-1])))

    def save(self, directory: Path, info: Mapping[str, Any]) -> Path:
        """Write the npz and its manifest; returns the manifest's path."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"policy-v{FORMAT}.npz"
        with path.open("wb") as out:
            np.savez(out, weights=self.weights, mean=self.mean, scale=self.scale,
                     threshold=np.array(self.threshold))
        manifest = {
            "format": FORMAT, "kind": "logistic", "file": path.name, "sha256": _sha256(path),
            "features": list(self.features), "threshold": self.threshold,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **info,
        }
        (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        return directory / MANIFEST

    @classmethod
    def named(cls, name: str) -> LogisticPolicy:
        """The policy registered as `name`; NotFoundError, naming no path, when none is."""
        directory = policy_dir(name)
        if not (directory / MANIFEST).is_file():
            raise NotFoundError(f"no agent policy [{name}] is trained on this server; train one "
                                "with es_tour.agents.train_policy(...)")
        return cls.load(directory)

    @classmethod
    def load(cls, directory: Path | None = None) -> LogisticPolicy:
        """The stored policy; ModelError when missing, corrupt or built for other features."""
        directory = directory or policy_dir()
        manifest_path = directory / MANIFEST
        if not manifest_path.is_file():
            raise ModelError(f"no agent policy at {directory}; train one with "
                             "es_tour.agents.train_policy(...)")
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("format") != FORMAT:
            raise ModelError(f"agent policy format {manifest.get('format')!r} is not {FORMAT}")
        path = directory / manifest["file"]
        if not path.is_file() or _sha256(path) != manifest["sha256"]:
            raise ModelError(f"agent policy {path} is missing or does not match its sha256")
        if tuple(manifest["features"]) != FEATURES:
            raise ModelError(f"agent policy {path} was trained on other features; retrain it")
        with np.load(path) as stored:
            return cls(stored["weights"], stored["mean"], stored["scale"],
                       float(stored["threshold"]), FEATURES, manifest)


def fit_logistic(X: np.ndarray, y: np.ndarray, l2: float = 1.0,
                 iterations: int = 50) -> LogisticPolicy:
    """Newton's method on class-balanced, L2-penalised log loss.

    X: (n, F) float64, y: (n,) {0, 1}. Constant columns are left unscaled.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    scale[scale < 1e-9] = 1.0
    Z = np.hstack([(X - mean) / scale, np.ones((len(X), 1))])
    positives = max(float(y.sum()), 1.0)
    negatives = max(float(len(y) - y.sum()), 1.0)
    sample = np.where(y > 0, len(y) / (2 * positives), len(y) / (2 * negatives))
    penalty = np.full(Z.shape[1], l2)
    penalty[-1] = 0.0  # the intercept is not shrunk
    w = np.zeros(Z.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(Z @ w)))
        gradient = Z.T @ (sample * (p - y)) + penalty * w
        hessian = (Z * (sample * p * (1 - p))[:, None]).T @ Z + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return LogisticPolicy(w, mean, scale)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
