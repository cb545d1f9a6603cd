"""The models every request shares: query encoders and labelers, each loaded by name on
first use and a bounded number of each kept.

A name is what `eval --labeler` takes: a registry name or alias, or a model directory
that `es-tour export` or `train-reranker` wrote (`es_tour.models.model_directory`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from cachetools import LRUCache

from es_tour.errors import ConfigError, ModelError
from es_tour.models import (
    DualEncoder,
    Labeler,
    Manifest,
    Member,
    is_ensemble,
    load_labeler,
    parse_ensemble,
    query_encoder,
    read_manifest,
)
from es_tour.models._labelers import model_directory

T = TypeVar("T")
# models of each kind kept loaded; one small model holds ~100-500 MB of onnxruntime memory
# (an ensemble holds its members, which count too)
MAX_LOADED = 6


class Models:
    """Loaded on first use (or by `preload`), off the event loop: callers run these
    methods on a thread. `encoder` is the server's default query encoder."""

    def __init__(self, encoder: str = "retriever", max_loaded: int = MAX_LOADED):
        self.default_encoder = encoder
        self._encoders = _Loaded(max_loaded, _open_encoder)
        self._labelers = _Loaded(max_loaded, self._open_labeler)

    @property
    def encoder(self) -> DualEncoder:
        return self.query_encoder(self.default_encoder)

    def query_encoder(self, name: str) -> DualEncoder:
        """The dual model `name` as a query encoder; a ConfigError (400) naming it when it
        is unknown, not built, not a model, or a cross model."""
        return self._encoders.get(name)

    def labeler(self, name: str) -> Labeler:
        """The labeler `name` names: one model, dual or cross, or an ensemble of them whose
        members are the labelers those names load alone (their caches and counters shared);
        a ConfigError (400) naming it when it is unknown, not built or not a model."""
        return self._labelers.get(name)

    def _open_labeler(self, name: str) -> Labeler:
        if is_ensemble(name):
            return load_labeler(name, load_member=self.labeler)
        check_model(name)
        try:
            return load_labeler(name)
        except ModelError as exc:
            raise ConfigError(f"labeler [{name}] cannot be loaded: {exc}") from None

    def loaded(self) -> dict[str, Labeler]:
        """The labelers loaded now, by name (never waits for a load)."""
        return self._labelers.loaded()

    @property
    def encoder_loaded(self) -> bool:
        """Whether the default encoder is loaded now."""
        return self.default_encoder in self._encoders.loaded()

    def preload(self, labeler: str) -> None:
        _ = self.encoder
        self.labeler(labeler)


class _Loaded(Generic[T]):
    """Models by name, each loaded once however many threads ask at once; past `size`,
    the least recently used is dropped (requests holding it keep it until they finish)."""

    def __init__(self, size: int, load: Callable[[str], T]):
        self._cache: LRUCache[str, T] = LRUCache(maxsize=size)
        self._load = load
        self._lock = threading.Lock()  # guards the two dicts, never held while loading
        self._loading: dict[str, threading.Lock] = {}

    def get(self, name: str) -> T:
        with self._lock:
            if name in self._cache:
                return self._cache[name]
            gate = self._loading.setdefault(name, threading.Lock())
        with gate:  # one load per name; a name's other askers wait for it
            with self._lock:
                if name in self._cache:
                    return self._cache[name]
            try:
                model = self._load(name)
            finally:
                with self._lock:
                    self._loading.pop(name, None)
            with self._lock:
                self._cache[name] = model
            return model

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)

    def loaded(self) -> dict[str, T]:
        """The models loaded now, by name; the lock is never held while one loads."""
        with self._lock:
            return dict(self._cache.items())


def check_model(name: str) -> Manifest:
    """The manifest of the model `name`, resolved as `eval --labeler` resolves it; a
    ConfigError (400) naming it when it is unknown, not built, or not a model directory."""
    try:
        return read_manifest(model_directory(name)[0])
    except ModelError as exc:
        raise ConfigError(f"model [{name}] cannot be used: {exc}") from None


def check_labeler(name: str) -> None:
    """`check_model` of the labeler's model, or of each member of an ensemble."""
    for member in parse_ensemble(name) if is_ensemble(name) else (Member(name),):
        check_model(member.model)


def _open_encoder(name: str) -> DualEncoder:
    if check_model(name).kind != "dual":
        raise ConfigError(f"model [{name}] is a cross-encoder; a query encoder must be a dual "
                          "model (a registry name such as e5-small-v2, or an exported one)")
    try:
        return query_encoder(name)
    except ModelError as exc:
        raise ConfigError(f"encoder [{name}] cannot be loaded: {exc}") from None

