"""The files the local gateway serves beside the API: the page widget (/widget.js), the operator
console (/console/, both built into ui/dist by `make ui`) and the example documentation site
(/example/, pages of samples/ that embed the widget). In AWS, CloudFront serves ui/dist
(infra/constructs/web_hosting.py); nothing here runs there.
"""

from __future__ import annotations

import json
import mimetypes
import os
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from citegate.platform.errors import error_body
from citegate.runtime import example_site

UI_DIST = Path(__file__).resolve().parents[3] / "ui" / "dist"


def ui_dist() -> Path:
    """Where the built UI is: CITEGATE_UI_DIST, else ui/dist of this checkout."""
    return Path(os.environ.get("CITEGATE_UI_DIST") or UI_DIST)


def _missing(what: str) -> Response:
    message = f"{what} is not built: run `make ui` (Node.js and npm), then reload"
    body = error_body("not_found", message, str(uuid.uuid4()), {"path": what})
    return Response(json.dumps(body), status_code=404, media_type="application/json")


def _file(path: Path, cache: str) -> FileResponse:
    media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if media_type in ("application/javascript", "text/javascript", "text/css", "text/html"):
        media_type += "; charset=utf-8"
    return FileResponse(
        path, media_type=media_type, headers={"cache-control": cache, "x-content-type-options": "nosniff"}
    )


async def widget(request: Request) -> Response:
    path = ui_dist() / "widget.js"
    # Short cache: a page picks up a new build within minutes, without versioned file names.
    return _file(path, "public, max-age=300") if path.is_file() else _missing("widget.js")


async def console(request: Request) -> Response:
    root = (ui_dist() / "console").resolve()
    relative = request.path_params.get("path", "") or "index.html"
    target = (root / relative).resolve()
    if not target.is_relative_to(root):  # "../" in the path: nothing outside the console's folder
        body = error_body("not_found", "no such file", str(uuid.uuid4()), {})
        return Response(json.dumps(body), status_code=404, media_type="application/json")
    if not target.is_file():
        # Deep links of the single-page console come back to its index.
        target = root / "index.html"
        if not target.is_file():
            return _missing("console")
    cache = "no-cache" if target.suffix == ".html" else "public, max-age=300"
    return _file(target, cache)


async def example(request: Request) -> Response:
    slug = request.path_params.get("slug")
    page = example_site.page_for(slug) if slug else None
    headers = {"content-security-policy": example_site.content_security_policy(), "cache-control": "no-cache"}
    if slug and page is None:
        return HTMLResponse(example_site.render(None), status_code=404, headers=headers)
    return HTMLResponse(example_site.render(page), headers=headers)


def _redirect(to: str) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        return RedirectResponse(to, status_code=308)

    return endpoint


def static_routes() -> list[BaseRoute]:
    get = ["GET", "HEAD"]
    return [
        Route("/widget.js", widget, methods=get),
        Route("/console", _redirect("/console/"), methods=get),
        Route("/console/{path:path}", console, methods=get),
        Route(f"/{example_site.SECTION}", _redirect(f"/{example_site.SECTION}/"), methods=get),
        Route(f"/{example_site.SECTION}/", example, methods=get),
        Route(f"/{example_site.SECTION}/{{slug}}", _redirect_slug, methods=get),
        Route(f"/{example_site.SECTION}/{{slug}}/", example, methods=get),
    ]


async def _redirect_slug(request: Request) -> Response:
    return RedirectResponse(f"{request.url.path}/", status_code=308)
