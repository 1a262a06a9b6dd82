"""The AWS entry of the streaming routes: an ASGI app the Lambda Web Adapter (LWA) serves.

`/api/v2/query`, `/api/v1/agent/chats/{chat_id}/messages` and `/v1/chat/completions` each have a
second Lambda function (infra/constructs/streaming.py) whose function URLs use
`InvokeMode: RESPONSE_STREAM`. Python has
no native response streaming in Lambda, so the function runs LWA as its exec wrapper: LWA starts
`run.sh` in the function's folder (`python3 -m citegate.api.stream_app`: this app under uvicorn on
127.0.0.1:$AWS_LWA_PORT), turns each invocation into an HTTP request to it, and streams the body
back as the app writes it (`AWS_LWA_INVOKE_MODE=response_stream`). docs/architecture.md
("Streaming in AWS") says why this entry and not a REST API.

Per request, the app does what API Gateway and the local gateway do before a handler runs, then
calls the function's own `handler.lambda_handler` (the same `sse_handler` entry, so the same
admission, policy, audit and error codes):
- the route is matched in citegate.api.routes (only this function's routes); the event is the HTTP
  API's payload 2.0, with LWA's request context (`x-amzn-request-context`: request id, source IP);
- the caller: on the agents' URL (auth type AWS_IAM) Lambda has verified the SigV4 signature and
  the request context carries `authorizer.iam`, as the HTTP API's IAM authorizer does; on the
  public URL (auth type NONE) nothing stands in front, so the app invokes the authorizer function
  itself, with the REQUEST event the HTTP API sends it, and hands the handler its context as
  `authorizer.lambda` (one implementation of authentication, its secret and OIDC settings in one
  function). LWA sets `x-amzn-request-context` itself (it replaces a header of that name sent by
  the client), so a caller cannot claim an IAM identity on the public URL;
- the handler's `EventStream` is delivered frame by frame; a client that goes away (an ASGI
  `http.disconnect`) ends the delivery, and the stream is closed on this request's own path, so
  the route's `on_disconnect` runs and the call is audited once as closed by the client (499).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import importlib.util
import json
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from citegate.api import events, routes
from citegate.api.events import payload_event
from citegate.platform.errors import (
    CitegateError,
    Forbidden,
    RouteNotFound,
    error_body,
    error_code,
    error_details,
    error_status,
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# LWA's readiness check (AWS_LWA_READINESS_CHECK_PATH) and the headers it adds to every request.
READY_PATH = "/_citegate/ready"
REQUEST_CONTEXT_HEADER = "x-amzn-request-context"
LAMBDA_CONTEXT_HEADER = "x-amzn-lambda-context"
REQUEST_ID_HEADER = "x-request-id"
DEFAULT_PORT = 8080  # LWA's default AWS_LWA_PORT


class MethodNotAllowed(CitegateError):
    kind, status = "method_not_allowed", 405


@dataclass
class InvocationContext:
    """The Lambda context fields Powertools and the handlers read, from LWA's
    `x-amzn-lambda-context` (the invocation's own context; this process is not the runtime's)."""

    function_name: str
    aws_request_id: str
    invoked_function_arn: str = ""
    memory_limit_in_mb: int = 0
    function_version: str = "$LATEST"
    log_group_name: str = ""
    log_stream_name: str = ""
    deadline_ms: int = 0
    xray_trace_id: str = ""

    def get_remaining_time_in_millis(self) -> int:
        if not self.deadline_ms:
            return 900_000
        return max(0, self.deadline_ms - int(time.time() * 1000))

    @classmethod
    def from_header(cls, raw: str | None, function: str) -> InvocationContext:
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            data = {}
        config = data.get("env_config") or {}
        return cls(
            function_name=str(
                config.get("function_name") or os.environ.get("AWS_LAMBDA_FUNCTION_NAME") or function
            ),
            aws_request_id=str(data.get("request_id") or uuid.uuid4()),
            invoked_function_arn=str(data.get("invoked_function_arn") or ""),
            memory_limit_in_mb=int(
                config.get("memory") or os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE") or 0
            ),
            function_version=str(config.get("version") or "$LATEST"),
            log_group_name=str(config.get("log_group") or ""),
            log_stream_name=str(config.get("log_stream") or ""),
            deadline_ms=int(data.get("deadline") or 0),
            xray_trace_id=str(data.get("xray_trace_id") or ""),
        )


def load_handler(handler_file: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("handler", handler_file)
    if spec is None or spec.loader is None:
        raise LookupError(f"no handler module at {handler_file}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_event(
    scope: Scope,
    headers: dict[str, str],
    cookies: list[str],
    body: bytes,
    route: routes.Route,
    path_params: dict[str, str],
    request_context: dict[str, Any],
) -> dict[str, Any]:
    """The HTTP API's payload-2.0 event for this request (what the route's handler reads)."""
    now = time.time()
    http = dict(request_context.get("http") or {})
    client = scope.get("client") or ("127.0.0.1", 0)
    http.setdefault("method", scope["method"])
    http.setdefault("path", scope["path"])
    http.setdefault("protocol", "HTTP/1.1")
    http.setdefault("sourceIp", client[0])
    http.setdefault("userAgent", headers.get("user-agent", ""))
    context = {
        **{k: v for k, v in request_context.items() if k != "authorizer"},
        "http": http,
        "routeKey": route.route_key,
        "stage": request_context.get("stage") or "$default",
        "requestId": str(request_context.get("requestId") or uuid.uuid4()),
    }
    context.setdefault("time", dt.datetime.fromtimestamp(now, dt.UTC).strftime("%d/%b/%Y:%H:%M:%S +0000"))
    context.setdefault("timeEpoch", int(now * 1000))
    return payload_event(
        route_key=route.route_key,
        raw_path=scope["path"],
        raw_query=scope.get("query_string", b"").decode("latin-1"),
        headers=headers,
        request_context=context,
        body=body,
        cookies=cookies,
        path_params=path_params,
    )


def authorizer_event(event: dict[str, Any]) -> dict[str, Any]:
    """The HTTP API's Lambda authorizer event (payload 2.0, REQUEST) for this request."""
    domain = event["requestContext"].get("domainName", "")
    return events.authorizer_event(event, f"lambda-url:{domain}/")


class AuthorizerFailed(Exception):
    """The authorizer function failed or answered something that is not a verdict."""


def invoke_authorizer(event: dict[str, Any]) -> dict[str, Any]:
    """Run the authorizer function on the request, as the HTTP API does, and return its verdict:
    in AWS by Lambda Invoke (citegate-<stage>-authorizer), locally in process."""
    from citegate.platform.settings import get_settings

    settings = get_settings()
    if settings.local_runtime:
        from citegate.runtime.functions import invoke  # not in the Lambda layer; never reached there

        verdict = invoke(routes.AUTHORIZER_FUNCTION, event)
    else:
        verdict = _lambda_invoke(settings.stage, settings.region, event)
    if not isinstance(verdict, dict) or "isAuthorized" not in verdict:
        raise AuthorizerFailed(f"the authorizer answered {type(verdict).__name__}, not a verdict")
    return verdict


_lambda_client: Any = None


def _lambda_invoke(stage: str, region: str | None, event: dict[str, Any]) -> Any:
    global _lambda_client
    from citegate.platform import resources

    if _lambda_client is None:
        import boto3
        from botocore.config import Config

        # The authorizer answers in milliseconds (10 s timeout); it reads only, so a retry is safe.
        config = Config(read_timeout=12, connect_timeout=3, retries={"max_attempts": 2, "mode": "standard"})
        _lambda_client = boto3.client("lambda", region_name=region, config=config)
    answer = _lambda_client.invoke(
        FunctionName=resources.invoke_target(stage, routes.AUTHORIZER_FUNCTION), Payload=json.dumps(event)
    )
    payload = json.loads(answer["Payload"].read() or b"null")
    if answer.get("FunctionError"):
        raise AuthorizerFailed(str(payload.get("errorMessage") if isinstance(payload, dict) else payload))
    return payload


def _json_response(status: int, body: Any, request_id: str) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json", REQUEST_ID_HEADER: request_id},
        "body": json.dumps(body, ensure_ascii=False),
    }


def _refusal(error: CitegateError, family: routes.Family, request_id: str) -> dict[str, Any]:
    body = error_body(
        error_code(error, family), error.message, request_id, error_details(error, family), family=family
    )
    return _json_response(error_status(error, family), body, request_id)


class StreamApp:
    """The ASGI app of one streaming function (its folder's `handler.py`, loaded at start-up: the
    init phase, like the runtime's own import of a handler)."""

    def __init__(self, function: str, handler_file: Path) -> None:
        self.function = function
        # Its own routes and those it also serves in AWS (routes.Route.stream_twin): its handler
        # declares them all, so one base URL serves both (GET /v1/models beside chat completions).
        self.routes = routes.stream_routes(function)
        if not self.routes:
            raise LookupError(f"{function!r} serves no route in citegate.api.routes")
        self.family = routes.family_of_function(function)
        self.handler: Callable[[dict[str, Any], Any], Any] = load_handler(handler_file).lambda_handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                pass
            return
        if scope["type"] != "http":
            return
        if scope["path"] == READY_PATH:
            await _send_response(
                send, {"statusCode": 200, "headers": {"Content-Type": "text/plain"}, "body": "ok"}
            )
            return
        await self._serve(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        import anyio.to_thread

        headers: dict[str, str] = {}
        cookies: list[str] = []
        for raw_key, raw_value in scope.get("headers", []):
            key, value = raw_key.decode("latin-1").lower(), raw_value.decode("latin-1")
            if key == "cookie":
                cookies += [c.strip() for c in value.split(";") if c.strip()]
                continue
            headers[key] = f"{headers[key]},{value}" if key in headers else value
        request_context = _json_header(headers.pop(REQUEST_CONTEXT_HEADER, None))
        lambda_header = headers.pop(LAMBDA_CONTEXT_HEADER, None)
        request_id = str(request_context.get("requestId") or uuid.uuid4())
        request_context["requestId"] = request_id

        matched = routes.match(scope["method"], scope["path"])
        if matched is None or matched[0] not in self.routes:
            if any(route.pattern().match(scope["path"]) for route in self.routes):
                refused: CitegateError = MethodNotAllowed(
                    f"{scope['method']} is not allowed on {scope['path']}"
                )
            else:
                refused = RouteNotFound(f"no route for {scope['method']} {scope['path']} on this URL")
            await _send_response(send, _refusal(refused, self.family, request_id))
            return
        route, path_params = matched
        body = await _read_body(receive)
        event = build_event(scope, headers, cookies, body, route, path_params, request_context)
        iam = (request_context.get("authorizer") or {}).get("iam")
        context = InvocationContext.from_header(lambda_header, self.function)
        if context.xray_trace_id:  # what the runtime sets for X-Ray per invocation
            os.environ["_X_AMZN_TRACE_ID"] = context.xray_trace_id
        try:
            if iam:  # the agents' URL: Lambda verified the SigV4 signature (auth type AWS_IAM)
                event["requestContext"]["authorizer"] = {"iam": iam}
            elif route.auth != "none":
                verdict = await anyio.to_thread.run_sync(invoke_authorizer, authorizer_event(event))
                if not verdict["isAuthorized"]:  # what the HTTP API answers for a denial
                    await _send_response(send, _refusal(Forbidden("Forbidden"), self.family, request_id))
                    return
                event["requestContext"]["authorizer"] = {"lambda": dict(verdict.get("context") or {})}
            result = await anyio.to_thread.run_sync(self._invoke, event, context)
        except Exception as error:  # what API Gateway answers when an integration crashes
            from citegate.platform.observability import logger

            logger.exception("the streaming entry failed", extra={"function": self.function})
            failed = CitegateError(f"the integration failed: {type(error).__name__}")
            await _send_response(send, _refusal(failed, self.family, request_id))
            return
        if isinstance(result, dict):
            result.setdefault("headers", {})[REQUEST_ID_HEADER] = request_id
            await _send_response(send, result)
            return
        await _send_stream(result, request_id, receive, send)

    def _invoke(self, event: dict[str, Any], context: InvocationContext) -> Any:
        from citegate.api.streaming import delivering_frames

        with delivering_frames():
            return self.handler(event, context)


def _json_header(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        found = json.loads(raw)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


async def _send_response(send: Send, result: dict[str, Any]) -> None:
    body = result.get("body") or ""
    content = base64.b64decode(body) if result.get("isBase64Encoded") else str(body).encode()
    headers = [(str(k).lower().encode(), str(v).encode()) for k, v in (result.get("headers") or {}).items()]
    headers += [(b"set-cookie", str(c).encode()) for c in result.get("cookies") or []]
    headers.append((b"content-length", str(len(content)).encode()))
    await send(
        {"type": "http.response.start", "status": int(result.get("statusCode", 200)), "headers": headers}
    )
    await send({"type": "http.response.body", "body": content, "more_body": False})


async def _send_stream(stream: Any, request_id: str, receive: Receive, send: Send) -> None:
    """Each frame as it is produced (chunked, which LWA streams on), the stream closed on this path
    whatever happens: the same delivery as the local gateway's (citegate.api.streaming.deliver)."""
    from citegate.api.streaming import SSE, SSE_HEADERS, deliver

    headers = [(b"content-type", SSE.encode()), (REQUEST_ID_HEADER.encode(), request_id.encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in SSE_HEADERS.items()]
    await deliver(stream, headers, receive, send)


def create_app(function: str | None = None, handler_file: Path | None = None) -> StreamApp:
    """The app of the function this process serves: `CITEGATE_STREAM_FUNCTION` names it (the
    construct sets it), and its handler is `$LAMBDA_TASK_ROOT/handler.py`."""
    name = function or os.environ.get("CITEGATE_STREAM_FUNCTION", "")
    if not name:
        raise LookupError("CITEGATE_STREAM_FUNCTION names the streaming function this process serves")
    root = Path(os.environ.get("LAMBDA_TASK_ROOT") or Path.cwd())
    return StreamApp(name, handler_file or root / "handler.py")


def server(app: Any, port: int, host: str = "127.0.0.1") -> Any:
    """uvicorn as run.sh starts it: one process, h11 and asyncio (no optional C extensions in the
    layers), no access log. Keep-alive outlives a frozen execution environment: LWA reuses its
    connection to the app, and a keep-alive timer that fired while frozen would close it under the
    next invocation."""
    import uvicorn

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http="h11",
        loop="asyncio",
        lifespan="off",
        log_level=os.environ.get("CITEGATE_STREAM_LOG_LEVEL", "warning"),
        access_log=False,
        timeout_keep_alive=3600,
    )
    return uvicorn.Server(config)


def main() -> int:
    port = int(os.environ.get("AWS_LWA_PORT") or os.environ.get("PORT") or DEFAULT_PORT)
    with contextlib.suppress(KeyboardInterrupt):
        server(create_app(), port).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
