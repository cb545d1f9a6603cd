"""The playground: one static page, served by the sidecar, that compares two methods.

The page is plain HTML, CSS and JavaScript shipped in the package (no build step, nothing
fetched from elsewhere). It talks to the sidecar's own REST API from the same origin —
`_search` with `ext.tour`, `_settings`, the judgements' side index — so it runs with the
caller's own credentials, as any other client would, and its errors are the engine's.
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from es_tour.judgements import QRELS_SUFFIX
from es_tour.server._config import ServerConfig
from es_tour.server._options import method_names

PATH = "/_tour/playground"
PAGE = "playground.html"
ASSETS = {"playground.css": "text/css; charset=utf-8",
          "playground.js": "text/javascript; charset=utf-8"}
# Everything the page loads comes from the sidecar itself.
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
                               "form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _static(name: str) -> bytes:
    return (resources.files("es_tour.server") / "static" / name).read_bytes()


def playground_routes(config: ServerConfig) -> list[Route]:
    """GET /_tour/playground (the page), its assets, and /defaults (the server's defaults)."""
    files = {name: _static(name) for name in (PAGE, *ASSETS)}
    defaults = {"method": config.method, "methods": method_names(), "labeler": config.labeler,
                "options": dict(config.options), "qrels_suffix": QRELS_SUFFIX}

    async def page(_: Request) -> Response:
        return Response(files[PAGE], media_type="text/html; charset=utf-8", headers=HEADERS)

    async def slash(_: Request) -> Response:
        return RedirectResponse("../playground", status_code=308)

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name == "defaults":
            return JSONResponse(defaults, headers=HEADERS)
        if name not in ASSETS:
            error = {"error": {"type": "resource_not_found_exception",
                               "reason": f"the playground has no file [{name}]"}, "status": 404}
            return JSONResponse(error, status_code=404)
        return Response(files[name], media_type=ASSETS[name], headers=HEADERS)

    return [Route(PATH, page, methods=["GET", "HEAD"]),
            Route(f"{PATH}/", slash, methods=["GET", "HEAD"]),
            Route(PATH + "/{name}", asset, methods=["GET", "HEAD"])]
