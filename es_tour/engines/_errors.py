"""The official clients' errors, told apart: the engine answered with an error, or could not
be reached. Callers that must pass the engine's own answer on (the sidecar) use these."""

from __future__ import annotations

from typing import Any

import elastic_transport
import opensearchpy

# Everything either client raises for a failed call.
CLIENT_ERRORS: tuple[type[Exception], ...] = (elastic_transport.ApiError,
                                              elastic_transport.TransportError,
                                              opensearchpy.TransportError)


def engine_answer(exc: Exception) -> tuple[int, Any] | None:
    """(status, body) of the error the engine answered; None when it gave no answer
    (refused connection, timeout)."""
    if isinstance(exc, elastic_transport.ApiError):
        return exc.meta.status, exc.body
    if isinstance(exc, opensearchpy.TransportError) and isinstance(exc.status_code, int):
        return exc.status_code, exc.info
    return None
