"""One error hierarchy; each error knows its HTTP status and engine-style error type.

This is the one table of what a client sees: the sidecar renders every error, its own
crashes included, through `to_engine_error`, in the engine's shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class EsTourError(Exception):
    """Base of every error es-tour raises on purpose."""

    status = 500
    error_type = "es_tour_exception"
    headers: Mapping[str, str] = {}  # extra response headers (Retry-After, ...)

    def to_engine_error(self) -> dict[str, Any]:
        """The engine's own error shape: {"error": {"root_cause", "type", "reason"},
        "status"}, the root cause being the error itself, as the engines write one."""
        cause = {"type": self.error_type, "reason": str(self)}
        return {"error": {"root_cause": [cause], **cause}, "status": self.status}


class InternalError(EsTourError):
    """What a client is told about a bug: no exception text, no stack trace."""

    def __init__(self) -> None:
        super().__init__("the es-tour sidecar failed on this request; its log has the details")


class ConfigError(EsTourError, ValueError):
    """A bad setting, option or request parameter (a ValueError, as numpy's callers expect)."""

    status = 400
    error_type = "illegal_argument_exception"


class VectorUnreadableError(ConfigError):
    """Stored vectors a method reads, none of which the caller's search can read (field-level
    security hides the field from this caller). The sidecar then answers with the engine's
    own ranking (`ext.tour.degraded_reason`)."""


class NotFoundError(EsTourError):
    """A named resource (an agent policy) that does not exist."""

    status = 404
    error_type = "resource_not_found_exception"


class MethodNotAllowedError(EsTourError):
    """An HTTP method a sidecar endpoint of its own does not take."""

    status = 405
    error_type = "method_not_allowed_exception"


class BodyTooLargeError(EsTourError):
    status = 413
    error_type = "content_too_long_exception"


class OverloadedError(EsTourError):
    """Refinement capacity is full and the server is set to refuse rather than queue."""

    status = 429
    error_type = "es_rejected_execution_exception"

    def __init__(self, reason: str, retry_after_s: int):
        super().__init__(reason)
        self.headers = {"Retry-After": str(retry_after_s)}


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


class UpstreamTimeoutError(UpstreamError):
    """The engine did not answer within the time the sidecar allows it."""

    status = 504
    error_type = "timeout_exception"


class EngineError(EsTourError):
    """The engine answered an error: it goes back to the caller with its own status and body."""

    error_type = "engine_exception"

    def __init__(self, status: int, body: object):
        self.status = status
        self.body = body
        super().__init__(f"the engine answered {status}")

    def to_engine_error(self) -> dict[str, Any]:
        if isinstance(self.body, dict) and "error" in self.body:
            return self.body
        return {"error": {"type": self.error_type, "reason": str(self.body)},
                "status": self.status}
