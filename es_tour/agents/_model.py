"""The learned policy's model: gradient-boosted trees (scikit-learn), stored with a manifest.

Files live in `models_dir()/agent-policy/` (or `agent-policies/<name>/`): `policy-v{FORMAT}.pkl`
(the fitted classifier and the act threshold) and `manifest.json` (sha256 of the pickle,
features, training facts). The pickle is read only after its sha256 matches the manifest's:
the policy directory is as trusted as the rest of the model cache, and the hash catches a
file that was truncated or swapped.
"""

from __future__ import annotations

import functools
import hashlib
import json
import pickle
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from es_tour.agents._features import FEATURES
from es_tour.errors import ConfigError, ModelError, NotFoundError
from es_tour.paths import models_dir

if TYPE_CHECKING:  # sklearn takes seconds to import: only fitting a policy needs it
    from sklearn.ensemble import HistGradientBoostingClassifier

FORMAT = 2
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
class TreePolicy:
    """p(Δq improves A_t) from gradient-boosted trees; the policy acts when p ≥ threshold.

    `model` None is the policy of a training run where no trial improved: it never acts.
    """

    model: HistGradientBoostingClassifier | None
    threshold: float = 0.5
    features: tuple[str, ...] = FEATURES
    info: Mapping[str, Any] = field(default_factory=dict)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """features: (n, F) -> (n,) probabilities."""
        features = np.asarray(features, dtype=np.float64)
        if self.model is None:
            return np.zeros(len(features))
        return np.asarray(self.model.predict_proba(features)[:, 1])

    @property
    def takes_tour_step(self) -> bool:
        """Whether it was trained with TOUR's step among the candidates."""
        return bool(self.info.get("training", {}).get("tour_action", False))

    def with_threshold(self, threshold: float) -> TreePolicy:
        return replace(self, threshold=threshold)

    def save(self, directory: Path, info: Mapping[str, Any]) -> Path:
        """Write the pickle and its manifest; returns the manifest's path."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"policy-v{FORMAT}.pkl"
        path.write_bytes(pickle.dumps({"model": self.model, "threshold": self.threshold}))
        manifest = {
            "format": FORMAT, "kind": "gradient-boosted-trees", "file": path.name,
            "sha256": _sha256(path), "features": list(self.features),
            "threshold": self.threshold,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **info,
        }
        (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        return directory / MANIFEST

    @classmethod
    def named(cls, name: str) -> TreePolicy:
        """The policy registered as `name`, read from disk once per version of its manifest
        (retraining writes a new one); NotFoundError, naming no path, when none is."""
        manifest = policy_dir(name) / MANIFEST
        if not manifest.is_file():
            raise NotFoundError(f"no agent policy [{name}] is trained on this server; train one "
                                "with es-tour train-agent --name " + name)
        stamp = manifest.stat()
        return _loaded(manifest.parent, stamp.st_mtime_ns, stamp.st_size)

    @classmethod
    def load(cls, directory: Path | None = None) -> TreePolicy:
        """The stored policy; ModelError when missing, corrupt or built for other features."""
        directory = directory or policy_dir()
        manifest_path = directory / MANIFEST
        if not manifest_path.is_file():
            raise ModelError(f"no agent policy at {directory}; train one with "
                             "es-tour train-agent")
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("format") != FORMAT:
            raise ModelError(f"agent policy format {manifest.get('format')!r} is not {FORMAT}; "
                             "retrain it with es-tour train-agent")
        path = directory / manifest["file"]
        if not path.is_file() or _sha256(path) != manifest["sha256"]:
            raise ModelError(f"agent policy {path} is missing or does not match its sha256")
        if tuple(manifest["features"]) != FEATURES:
            raise ModelError(f"agent policy {path} was trained on other features; retrain it")
        stored = pickle.loads(path.read_bytes())  # the sha256 matched above
        return cls(stored["model"], float(stored["threshold"]), FEATURES, manifest)


@functools.lru_cache(maxsize=8)
def _loaded(directory: Path, mtime_ns: int, size: int) -> TreePolicy:
    """TreePolicy.load, kept for the few policies a server serves; the manifest's stamp is
    part of the key, so a retrained policy is read afresh."""
    return TreePolicy.load(directory)


def tree_classifier(seed: int = 13) -> HistGradientBoostingClassifier:
    """Class-balanced gradient-boosted trees, unfitted: few, shallow and regularised, since
    a few thousand trials are all there is to learn from."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(
        learning_rate=0.05, max_iter=200, max_leaf_nodes=15, min_samples_leaf=20,
        l2_regularization=1.0, class_weight="balanced", random_state=seed)


def fit_trees(X: np.ndarray, y: np.ndarray, seed: int = 13) -> HistGradientBoostingClassifier:
    """`tree_classifier` fitted on (n, F) features and (n,) {0, 1} labels."""
    return tree_classifier(seed).fit(np.asarray(X, dtype=np.float64), np.asarray(y, dtype=int))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
