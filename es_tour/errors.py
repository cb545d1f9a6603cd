"""One error hierarchy; each error knows its HTTP status and engine-style error type."""

from __future__ import annotations


class EsTourError(Exception):
    """Base of every error es-tour raises on purpose."""

    status = 500
    error_type = "es_tour_exception"

    def to_engine_error(self) -> dict:
        """The engine's own error shape: {"error": {"type", "reason"}, "status"}."""
        return {"error": {"type": self.error_type, "reason": str(self)}, "status": self.status}


class ConfigError(EsTourError):
    """A bad setting, option or request parameter."""

    status = 400
    error_type = "illegal_argument_exception"


class ModelError(EsTourError):
    """A model is missing, its manifest is bad, or it is the wrong kind."""

    status = 500
    error_type = "model_exception"


class EngineSetupError(EsTourError):
    """A local engine could not be fetched, configured or started."""

    error_type = "engine_setup_exception"


class UpstreamError(EsTourError):
    """The search engine could not be reached or answered with an error."""

    status = 502
    error_type = "upstream_exception"


class EngineError(EsTourError):
    """The engine answered an error: it goes back to the caller with its own status and body."""

    error_type = "engine_exception"

    def __init__(self, status: int, body: object):
        self.status = status
        self.body = body
        super().__init__(f"the engine answered {status}")

    def to_engine_error(self) -> dict:
        if isinstance(self.body, dict) and "error" in self.body:
            return self.body
        return {"error": {"type": self.error_type, "reason": str(self.body)},
                "status": self.status}
