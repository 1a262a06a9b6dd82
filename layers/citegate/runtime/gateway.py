"""The local API gateway: HTTP in, API Gateway payload-format-2.0 events to our handlers, HTTP out.

It does what the deployed HTTP API does for each request: match the route table, run the
authorizer (the same Lambda function as in AWS) unless the route is public, hand its context to
the integration, and return the handler's response (streamed when the handler streams).
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route as StarletteRoute

from citegate.api import routes
from citegate.api.events import authorizer_event, payload_event
from citegate.api.streaming import deliver
from citegate.governance.identity.sigv4 import (
    LocalIamIdentity,
    SigV4Error,
    load_local_iam_credentials,
    verify_sigv4,
)
from citegate.platform import resources
from citegate.platform.errors import (
    CitegateError,
    Forbidden,
    InvalidRequest,
    PayloadTooLarge,
    RouteNotFound,
    Unauthorized,
    error_body,
    error_code,
    error_details,
    error_status,
)
from citegate.platform.observability import logger
from citegate.platform.settings import get_settings
from citegate.runtime.functions import (
    ENVIRONMENT_WAIT_SECONDS,
    TooManyRequestsException,
    invoke,
    is_stream,
    max_environments,
)
from citegate.runtime.static import static_routes

MAX_PAYLOAD_BYTES = 10 * 1024 * 1024  # API Gateway's limit
# Lambda refuses a synchronous invocation whose event is larger, before the handler runs.
MAX_EVENT_BYTES = 6 * 1024 * 1024
_ROUTE_ARN_PREFIX = "arn:aws:execute-api:local:000000000000:local/$default/"


class MethodNotAllowed(CitegateError):
    kind, status = "method_not_allowed", 405


class ServiceUnavailable(CitegateError):
    kind, status = "service_unavailable", 503


def _error(error: CitegateError, family: routes.Family, request_id: str) -> Response:
    """The gateway's own refusal in the family's codes (routes.family_of_path for unmatched paths):
    spec 001's routes answer NOT_FOUND, METHOD_NOT_ALLOWED, PAYLOAD_TOO_LARGE... here too."""
    body = error_body(
        error_code(error, family), error.message, request_id, error_details(error, family), family=family
    )
    return Response(
        json.dumps(body),
        status_code=error_status(error, family),
        media_type="application/json",
        headers={"apigw-requestid": request_id},
    )


def _too_large(route: routes.Route, size: int, limit: int, *, event: bool = False) -> PayloadTooLarge:
    """413 with `details.size` and `details.limit` (docs/api.md), as the ingestion route's own
    limit answers; a document route also names the upload route to use instead."""
    from citegate.knowledge.ingest.service import UPLOAD_ROUTE

    what = (
        f"the request makes a {size}-byte Lambda event, over Lambda's"
        if event
        else (f"the request body is {size} bytes, over API Gateway's")
    )
    details: dict[str, Any] = {"size": size, "limit": limit}
    message = f"{what} {limit}"
    if route.path == "/v1/kb/{kb_id}/documents":
        details["upload_route"] = UPLOAD_ROUTE
        message += f"; upload large documents ({UPLOAD_ROUTE}, then ingest with s3_key)"
    return PayloadTooLarge(message, details=details)


def build_event(
    request: Request, body: bytes, route: routes.Route, path_params: dict[str, str], request_id: str
) -> dict[str, Any]:
    headers: dict[str, str] = {}
    for key, value in request.headers.items():
        key = key.lower()
        if key == "cookie":
            continue
        headers[key] = f"{headers[key]},{value}" if key in headers else value
    now = time.time()
    return payload_event(
        route_key=route.route_key,
        raw_path=request.url.path,
        raw_query=request.url.query,
        headers=headers,
        request_context={
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": request.url.hostname or "127.0.0.1",
            "domainPrefix": "local",
            "http": {
                "method": request.method,
                "path": request.url.path,
                "protocol": "HTTP/1.1",
                "sourceIp": request.client.host if request.client else "127.0.0.1",
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": request_id,
            "routeKey": route.route_key,
            "stage": "$default",
            "time": dt.datetime.fromtimestamp(now, dt.UTC).strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now * 1000),
        },
        body=body,
        cookies=[c.strip() for c in request.headers.get("cookie", "").split(";") if c.strip()],
        path_params=path_params,
    )


def authorize(event: dict[str, Any]) -> dict[str, Any]:
    """Run the authorizer function on the request, as API Gateway would, and return its context."""
    result = invoke(routes.AUTHORIZER_FUNCTION, authorizer_event(event, _ROUTE_ARN_PREFIX))
    if not result.get("isAuthorized"):
        raise PermissionError("the authorizer refused the request")
    return dict(result.get("context") or {})


def verify_iam(request: Request, body: bytes) -> dict[str, Any]:
    """What API Gateway IAM authorization puts in `requestContext.authorizer.iam` for a valid signature."""
    settings = get_settings()
    credentials = _local_iam_credentials(settings.local_iam_credentials)
    identity = verify_sigv4(
        method=request.method,
        path=request.scope.get("raw_path", b"").decode("latin-1") or request.url.path,
        query_string=request.scope.get("query_string", b"").decode("latin-1"),
        headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.scope["headers"]],
        body=body,
        credentials=credentials,
        region=settings.region,
    )
    return {
        "accessKey": identity.access_key_id,
        "accountId": identity.account_id,
        "userArn": identity.arn,
        "caller": identity.arn,
        "userId": identity.access_key_id,
        "principalOrgId": None,
    }


_iam_cache: dict[str, Any] = {}


def _local_iam_credentials(path: Path | None) -> dict[str, LocalIamIdentity]:
    if path is None:
        return {}
    key = str(path)
    if key not in _iam_cache:
        _iam_cache[key] = load_local_iam_credentials(path)
    credentials: dict[str, LocalIamIdentity] = _iam_cache[key]
    return credentials


class LambdaStreamResponse(Response):
    """A streamed Lambda response delivered frame by frame, as Lambda response streaming does.

    Frames are pulled in worker threads. The client going away is noticed (an ASGI
    `http.disconnect`) and ends the delivery; in every case the stream is closed on this
    request's own path, shielded from cancellation, so the route's cleanup and the call's audit
    record (citegate.api.streaming.EventStream) run here, once, and never in a finalizer."""

    def __init__(self, stream: Any, request_id: str, on_done: Callable[[], None] | None = None) -> None:
        # As StreamingResponse does: no body, so no Content-Length (the frames go out chunked).
        self.status_code = 200
        self.media_type = "text/event-stream"
        self.background = None
        self.init_headers({"apigw-requestid": request_id, "cache-control": "no-cache"})
        self.stream = stream
        self.on_done = on_done

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await deliver(self.stream, self.raw_headers, receive, send)
        finally:
            if self.on_done is not None:
                self.on_done()


def to_response(result: Any, request_id: str) -> Response:
    """A handler's non-streamed result as the HTTP response API Gateway would send."""
    if not isinstance(result, dict) or "statusCode" not in result:
        # A payload-2.0 integration may return a bare JSON value: API Gateway wraps it as 200.
        return Response(json.dumps(result), status_code=200, media_type="application/json")
    body = result.get("body") or ""
    content = base64.b64decode(body) if result.get("isBase64Encoded") else body.encode()
    headers = {k: str(v) for k, v in (result.get("headers") or {}).items()}
    headers["apigw-requestid"] = request_id
    response = Response(content, status_code=int(result["statusCode"]), headers=headers)
    for cookie in result.get("cookies") or []:
        response.headers.append("set-cookie", cookie)
    return response


async def dispatch(request: Request) -> Response:
    request_id = str(uuid.uuid4())
    try:
        return with_cors(request, await _dispatch(request, request_id))
    except Exception:  # never a bare 500 from the server, nor a reset connection
        logger.exception("the local gateway failed", extra={"request_id": request_id})
        failed = CitegateError("the gateway failed; the request id identifies it")
        return with_cors(request, _error(failed, routes.family_of_path(request.url.path), request_id))


def _cors_origin(request: Request) -> str | None:
    """The request's Origin when it is one of the page origins (CITEGATE_ALLOWED_ORIGINS), else None."""
    from citegate.governance.identity.authenticate import allowed_origins

    origin = request.headers.get("origin")
    if origin is None:
        return None
    allowed = allowed_origins(get_settings())
    return origin if origin.strip().rstrip("/").lower() in allowed else None


def is_preflight(request: Request) -> bool:
    """A CORS preflight as API Gateway recognises one: OPTIONS with Origin and
    Access-Control-Request-Method. Any other OPTIONS request is routed like any method."""
    headers = request.headers
    return request.method == "OPTIONS" and "origin" in headers and "access-control-request-method" in headers


def preflight(request: Request, request_id: str) -> Response:
    """What the deployed public API's CORS configuration answers (infra/constructs/api.py, from
    citegate.platform.resources.CORS): 204 on any path, with the allowed methods, headers and max age when
    the origin is a page origin, and no CORS headers otherwise (the browser then refuses)."""
    response = Response(status_code=204, headers={"apigw-requestid": request_id})
    origin = _cors_origin(request)
    if origin is not None:
        response.headers["access-control-allow-origin"] = origin
        response.headers["access-control-allow-methods"] = ",".join(resources.CORS.allow_methods)
        response.headers["access-control-allow-headers"] = ",".join(resources.CORS.allow_headers)
        response.headers["access-control-max-age"] = str(resources.CORS.max_age_seconds)
    return response


def with_cors(request: Request, response: Response) -> Response:
    """API Gateway adds the CORS headers to every response to an allowed origin (and ignores any the
    integration sets)."""
    if is_preflight(request):
        return response
    for name in [k for k in response.headers if k.lower().startswith("access-control-")]:
        del response.headers[name]
    origin = _cors_origin(request)
    if origin is not None:
        response.headers["access-control-allow-origin"] = origin
        response.headers["access-control-expose-headers"] = ",".join(resources.CORS.expose_headers)
    return response


async def _dispatch(request: Request, request_id: str) -> Response:
    if is_preflight(request):
        return preflight(request, request_id)
    matched = routes.match(request.method, request.url.path)
    if matched is None:
        family = routes.family_of_path(request.url.path)
        if routes.path_exists(request.url.path):
            refused = MethodNotAllowed(f"{request.method} is not allowed on {request.url.path}")
            return _error(refused, family, request_id)
        missing = RouteNotFound(f"no route for {request.method} {request.url.path}")
        return _error(missing, family, request_id)
    route, path_params = matched
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_PAYLOAD_BYTES:  # refused before it is read
        return _error(_too_large(route, int(declared), MAX_PAYLOAD_BYTES), route.family, request_id)
    body = await request.body()
    if len(body) > MAX_PAYLOAD_BYTES:
        return _error(_too_large(route, len(body), MAX_PAYLOAD_BYTES), route.family, request_id)
    event = build_event(request, body, route, path_params, request_id)
    event_size = len(json.dumps(event).encode())
    if event_size > MAX_EVENT_BYTES:  # as Lambda would: the document should have been uploaded
        return _error(_too_large(route, event_size, MAX_EVENT_BYTES, event=True), route.family, request_id)
    authorization = request.headers.get("authorization", "")
    try:
        if authorization.startswith("AWS4-HMAC-SHA256"):
            # The IAM front door: API Gateway verifies the signature; so does the local gateway.
            try:
                iam = await run_in_threadpool(verify_iam, request, body)
            except SigV4Error as error:
                reason = f"the request signature was refused: {error.reason}"
                return _error(Unauthorized(reason), route.family, request_id)
            event["requestContext"]["authorizer"] = {"iam": iam}
        elif route.auth != "none":
            event["requestContext"]["authorizer"] = {"lambda": await run_in_threadpool(authorize, event)}
    except PermissionError:
        return _error(Forbidden("Forbidden"), route.family, request_id)
    return await _integrate(route, event, request_id)


async def _integrate(route: routes.Route, event: dict[str, Any], request_id: str) -> Response:
    """Invoke the route's function. Waiting for one of its environments happens here, in the event
    loop, not in a worker thread: requests queued for a busy function must not hold the threads
    every other route (and /healthz) needs."""
    gate = _gate(route.function)
    acquired = False
    with anyio.move_on_after(ENVIRONMENT_WAIT_SECONDS):
        await gate.acquire()
        acquired = True
    if not acquired:
        return _busy(f"all environments of {route.function} stayed busy", route.family, request_id)
    release: Any = gate.release
    try:
        result = await run_in_threadpool(invoke, route.function, event)
        if is_stream(result):
            stream = result if hasattr(result, "close") else iter(result)
            response: Response = LambdaStreamResponse(stream, request_id, on_done=release)
            release = None  # the stream gives the environment back when it is closed
            return response
        return to_response(result, request_id)
    except TooManyRequestsException as busy:  # Lambda's throttle: every environment stayed busy
        return _busy(str(busy), route.family, request_id)
    except Exception as error:  # what API Gateway answers when an integration crashes
        logger.exception("an integration failed", extra={"function": route.function})
        failed = CitegateError(f"the integration failed: {type(error).__name__}")
        return _error(failed, route.family, request_id)
    finally:
        if release is not None:
            release()


def _busy(message: str, family: routes.Family, request_id: str) -> Response:
    response = _error(ServiceUnavailable(message), family, request_id)
    response.headers["retry-after"] = "1"
    return response


_gates: weakref.WeakKeyDictionary[Any, dict[str, anyio.Semaphore]] = weakref.WeakKeyDictionary()
_gates_lock = threading.Lock()


def _gate(function: str) -> anyio.Semaphore:
    """The function's environments as seen from this event loop (one per server; tests make more)."""
    loop = asyncio.get_running_loop()
    with _gates_lock:
        gates = _gates.setdefault(loop, {})
        if function not in gates:
            gates[function] = anyio.Semaphore(max_environments())
        return gates[function]


async def openapi_json(request: Request) -> Response:
    from citegate.api import openapi

    return Response(openapi.render(openapi.build_openapi()), media_type="application/json")


async def openapi_docs(request: Request) -> Response:
    from citegate.api import openapi

    return HTMLResponse(openapi.docs_html())


class _AnyPath(Convertor[str]):
    """Starlette's `path` convertor is `.*`, which stops at a newline: a path holding %0A missed
    the catch-all route and got Starlette's plain-text 404."""

    regex = "(?s:.*)"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("anypath", _AnyPath())


async def _refused_by_router(request: Request, error: Exception) -> Response:
    """What Starlette itself refuses (a method no route takes, say) in the decided JSON shape."""
    status = int(getattr(error, "status_code", 400))
    kinds = {404: RouteNotFound, 405: MethodNotAllowed}
    message = f"{request.method} is not served on {request.url.path}"
    refused = kinds[status](message) if status in kinds else InvalidRequest(message)
    response = _error(refused, routes.family_of_path(request.url.path), str(uuid.uuid4()))
    return with_cors(request, response)


def create_app() -> Starlette:
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]
    return Starlette(
        routes=[
            # The API's own description, served by the local gateway only (not one of ROUTES).
            StarletteRoute("/openapi.json", openapi_json, methods=["GET"]),
            StarletteRoute("/docs", openapi_docs, methods=["GET"]),
            # The widget, the console and the example site (ui/dist and samples/; local only).
            *static_routes(),
            StarletteRoute("/{path:anypath}", dispatch, methods=methods),  # must stay last
        ],
        exception_handlers={HTTPException: _refused_by_router},
    )
