"""`_search/template` on an index the sidecar serves: the engine renders the template (as the
caller, with its own mustache), and the rendered body is then served as a `_search`.

The engine renders it, not the sidecar, so a template means exactly what it means to the
engine: stored templates, mustache's sections, `toJson` and the engine's own errors.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from es_tour.errors import ConfigError, EngineError
from es_tour.server._passthrough import Passthrough, Reason
from es_tour.server._request import search_target
from es_tour.server._upstream import Upstream, identity

RENDER_PATH = "/_render/template"
# Template options whose answer the sidecar's own search has no room for (an explanation
# per hit, a profile per shard): the engine runs these template searches itself.
UNHONOURED = ("explain", "profile")
# What both engines answer for a route they lack: an engine without the mustache module
# (Elasticsearch's integ-test zip) serves no templates, and answers the search itself.
_NO_HANDLER = "no handler found for uri"


def template_target(method: str, raw_path: str) -> str | None:
    """The index part of a `_search/template` path ("" for `/_search/template`), or None
    for any other call; read as `search_target` reads a `_search` path."""
    head, _, tail = raw_path.rstrip("/").rpartition("/")
    return search_target(method, head) if tail == "template" else None


async def rendered_search(upstream: Upstream, body: Mapping[str, Any],
                          headers: Mapping[str, str]) -> dict[str, Any]:
    """The `_search` body that the engine renders the template request `body` into.

    Raises Passthrough for what the engine should answer itself (an option in UNHONOURED,
    an engine without templates, a caller the engine lets search but not render), and
    EngineError with the engine's status and body when the engine refuses the template."""
    for option in UNHONOURED:
        if body.get(option) not in (None, False):
            raise Passthrough(Reason.TEMPLATE_OPTION, option=option)
    return rendered_body(*await upstream.read_json(RENDER_PATH, body, identity(headers)))


def rendered_body(status: int, answer: Any) -> dict[str, Any]:
    """The search body in the engine's `_render/template` answer `(status, answer)`."""
    if status == 403:  # rendering is a permission of its own; the template search may pass
        raise Passthrough(Reason.MAY_NOT_RENDER)
    if status != 200:
        if _NO_HANDLER in json.dumps(answer):
            raise Passthrough(Reason.NO_TEMPLATES)
        raise EngineError(status, answer)
    output = answer.get("template_output") if isinstance(answer, dict) else None
    if not isinstance(output, dict):
        raise ConfigError("the template rendered no search body (a JSON object)")
    return output
