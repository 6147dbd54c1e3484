"""The web inspector: static files served at ``/ui`` by the service itself, no build step, no CDN.

``helix-dbos serve`` is all an operator needs to watch runs live, answer approvals and steer
sessions from a browser. The page is plain ES modules and CSS shipped in the package
(``helix_dbos/service/inspector_ui/``), so it works offline and behind any proxy that serves the API.

The files hold no data and no secret, so they are served without credentials (a browser's
navigation cannot carry a bearer header); every byte of data the page shows comes from the
authenticated ``/v1`` routes, called with the token the operator types once. The page keeps the
token in ``sessionStorage`` (gone with the tab) and sends it only as an ``Authorization`` header,
never in a URL: that is also why it reads SSE with ``fetch`` rather than ``EventSource``, which
cannot send headers, and resumes a dropped stream itself with ``Last-Event-ID``.

A strict Content-Security-Policy (scripts, styles and connections from this origin only, no
inline script) keeps text from models and tools, which the page renders, from ever running.
"""

from __future__ import annotations

from importlib import resources

from fastapi import HTTPException
from fastapi.responses import RedirectResponse, Response
from fastapi.routing import APIRouter

__all__ = ["UI_FILES", "ui_router"]

UI_FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "sse.js": "text/javascript; charset=utf-8",
    "render.js": "text/javascript; charset=utf-8",
    "fork.js": "text/javascript; charset=utf-8",
    "model_view.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
"""Every file the inspector is made of, with its media type: nothing else under ``/ui`` is served."""

UI_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        "form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _read(name: str) -> bytes:
    return resources.files("helix_dbos.service").joinpath("inspector_ui", name).read_bytes()


def ui_router() -> APIRouter:
    """``GET /ui`` (the page) and ``GET /ui/{file}`` (its modules and styles); not in the OpenAPI schema."""
    router = APIRouter()

    @router.get("/ui", include_in_schema=False)
    async def page() -> Response:
        return Response(_read("index.html"), media_type=UI_FILES["index.html"], headers=UI_HEADERS)

    @router.get("/ui/", include_in_schema=False)
    async def slash() -> RedirectResponse:
        return RedirectResponse("../ui", status_code=308)

    @router.get("/ui/{name}", include_in_schema=False)
    async def asset(name: str) -> Response:
        if name not in UI_FILES:
            raise HTTPException(status_code=404)
        return Response(_read(name), media_type=UI_FILES[name], headers=UI_HEADERS)

    return router
