"""The models every request shares: one retriever, and labelers loaded once per name."""

from __future__ import annotations

import threading

from es_tour.errors import NotFoundError
from es_tour.models import DualEncoder, Labeler, load_labeler, model_path


class Models:
    """Loaded lazily (or by `preload`) and kept for the server's lifetime."""

    def __init__(self, encoder: str = "retriever"):
        self._encoder_name = encoder
        self._encoder: DualEncoder | None = None
        self._labelers: dict[str, Labeler] = {}
        self._lock = threading.Lock()

    @property
    def encoder(self) -> DualEncoder:
        with self._lock:
            if self._encoder is None:
                from onnx_models import spec

                self._encoder = DualEncoder(model_path(spec(self._encoder_name).name))
            return self._encoder

    def labeler(self, name: str) -> Labeler:
        """The labeler of a registry model; an unknown name is a ConfigError (400).

        Names come from requests and index settings, so only registry names are taken:
        `load_labeler` also opens any model directory by path, which a client must not pick.
        """
        with self._lock:
            if name not in self._labelers:
                self._labelers[name] = load_labeler(built_labeler(name))
            return self._labelers[name]

    def loaded(self) -> dict[str, Labeler]:
        """The labelers loaded so far, by name. Read without the lock, which a load holds for
        seconds: copying the dict is one step under the GIL."""
        return dict(self._labelers)

    @property
    def encoder_loaded(self) -> bool:
        return self._encoder is not None

    def preload(self, labeler: str) -> None:
        _ = self.encoder
        self.labeler(labeler)


def built_labeler(name: str) -> str:
    """The registry name of the labeler `name`; a ConfigError when the registry has none, a
    NotFoundError when it is not built here."""
    from onnx_models import spec

    registry_name = spec(name).name
    if not model_path(registry_name).is_dir():
        raise NotFoundError(f"labeler [{name}] is not built on this server")
    return registry_name
