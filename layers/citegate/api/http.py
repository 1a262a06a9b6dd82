"""What every HTTP handler shares: the resolver with error mapping, body parsing, the principal.

Handlers stay thin: they declare their route, parse the body into a pydantic model, call one
function of the layer and shape the response. Every error leaves here in the decided JSON shape.

Cold start (issue 10: a handler imports in at most 300 ms). Importing a handler imports this
module, citegate.platform.errors and Powertools' Logger and Metrics, nothing more (the handler
itself imports the composition root, citegate.container, and hands its `services` to the entry point):
- `make_resolver` returns a `LazyResolver`: it records the routes declared at import and builds the
  Powertools resolver on the first event (`aws_lambda_powertools.event_handler` imports every
  resolver Powertools has, about as long as all the rest of a handler's imports);
- pydantic, governance and the domain modules are imported by the functions that use them, and
  handlers import what a route needs inside the route, so no handler loads another route's code.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from citegate.platform.errors import (
    AuditUnavailable,
    CitegateError,
    Family,
    InvalidRequest,
    RouteNotFound,
    error_body,
    error_code,
    error_details,
    error_status,
)
from citegate.platform.observability import logged, logger, metrics, traced

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
    from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from pydantic import BaseModel, ValidationError

    from citegate.governance.calls import Authorized, CallRecord
    from citegate.governance.policy.model import RequestedScope
    from citegate.governance.ports import Governing
    from citegate.platform.principal import Principal

ModelT = TypeVar("ModelT", bound="BaseModel")
RouteT = TypeVar("RouteT", bound=Callable[..., Any])
JSON = "application/json"
# The composition root's `services` (citegate.container), as a handler hands it to its entry point:
# what the governed call reads, built once per process.
ServicesFactory = Callable[[], "Governing"]


class HasEvent(Protocol):
    """A resolver in a request: the Powertools one, or a `LazyResolver`."""

    @property
    def current_event(self) -> APIGatewayProxyEventV2: ...


_event: ContextVar[Any] = ContextVar("citegate_resolver_event", default=None)
_lambda_context: ContextVar[Any] = ContextVar("citegate_resolver_lambda_context", default=None)
_route_context: ContextVar[dict[str, Any] | None] = ContextVar("citegate_resolver_context", default=None)
_resolver_class: type[APIGatewayHttpResolver] | None = None


def request_local_resolver_class() -> type[APIGatewayHttpResolver]:
    """`APIGatewayHttpResolver` with its request state kept per request.

    Powertools keeps the current event and Lambda context on its `BaseRouter` class, shared by
    every resolver of the process: two events resolved at once on two threads (two local execution
    environments of one process) would each read the other's event, body and request id. Here
    they live in context variables, so each thread, and each request's copied context, sees its
    own; the route context (`self.context`) too. In Lambda, one event per process, it changes
    nothing. tests/concurrency pins it."""
    global _resolver_class
    if _resolver_class is None:
        from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

        class RequestLocalResolver(APIGatewayHttpResolver):
            def resolve(self, event: Any, context: Any) -> dict[str, Any]:
                tokens = (_event.set(None), _lambda_context.set(context), _route_context.set({}))
                try:
                    return super().resolve(event, context)
                finally:
                    _route_context.reset(tokens[2])
                    _lambda_context.reset(tokens[1])
                    _event.reset(tokens[0])

            def _to_proxy_event(self, event: dict[str, Any]) -> Any:
                # Called by resolve() where Powertools assigns the class-wide current event.
                proxy = super()._to_proxy_event(event)
                _event.set(proxy)
                return proxy

            @property
            def current_event(self) -> Any:
                return _event.get()

            @current_event.setter
            def current_event(self, value: Any) -> None:
                _event.set(value)

            @property
            def lambda_context(self) -> Any:
                return _lambda_context.get()

            @lambda_context.setter
            def lambda_context(self, value: Any) -> None:
                _lambda_context.set(value)

            @property
            def context(self) -> dict[str, Any]:
                found = _route_context.get()
                if found is None:
                    found = {}
                    _route_context.set(found)
                return found

            @context.setter
            def context(self, value: dict[str, Any]) -> None:
                _route_context.set(value)

        _resolver_class = RequestLocalResolver
    return _resolver_class


class LazyResolver:
    """An `APIGatewayHttpResolver` built on first use (see the module's docstring).

    Routes and exception handlers declared before then are registered on it in declaration order,
    after the ones `configure` registers; later declarations go straight to it."""

    def __init__(self, configure: Callable[[APIGatewayHttpResolver], None] | None = None) -> None:
        self._configure = configure
        self._declared: list[tuple[str, tuple[Any, ...], dict[str, Any], Callable[..., Any]]] = []
        self._built: APIGatewayHttpResolver | None = None
        self._lock = threading.Lock()

    @property
    def resolver(self) -> APIGatewayHttpResolver:
        built = self._built
        if built is None:
            with self._lock:
                if self._built is None:
                    app = request_local_resolver_class()()
                    if self._configure is not None:
                        self._configure(app)
                    for method, args, options, func in self._declared:
                        getattr(app, method)(*args, **options)(func)
                    self._declared.clear()
                    self._built = app
                built = self._built
        return built

    def _declare(self, method: str, *args: Any, **options: Any) -> Callable[[RouteT], RouteT]:
        def register(func: RouteT) -> RouteT:
            with self._lock:
                if self._built is None:
                    self._declared.append((method, args, options, func))
                    return func
            getattr(self._built, method)(*args, **options)(func)
            return func

        return register

    def get(self, rule: str, **options: Any) -> Callable[[RouteT], RouteT]:
        return self._declare("get", rule, **options)

    def post(self, rule: str, **options: Any) -> Callable[[RouteT], RouteT]:
        return self._declare("post", rule, **options)

    def put(self, rule: str, **options: Any) -> Callable[[RouteT], RouteT]:
        return self._declare("put", rule, **options)

    def patch(self, rule: str, **options: Any) -> Callable[[RouteT], RouteT]:
        return self._declare("patch", rule, **options)

    def delete(self, rule: str, **options: Any) -> Callable[[RouteT], RouteT]:
        return self._declare("delete", rule, **options)

    def route(self, rule: str, method: str | list[str], **options: Any) -> Callable[[RouteT], RouteT]:
        return self._declare("route", rule, method, **options)

    def exception_handler(
        self, exc_class: type[Exception] | list[type[Exception]]
    ) -> Callable[[RouteT], RouteT]:
        return self._declare("exception_handler", exc_class)

    def resolve(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        return self.resolver.resolve(event, context)

    @property
    def current_event(self) -> APIGatewayProxyEventV2:
        return self.resolver.current_event

    @property
    def lambda_context(self) -> LambdaContext:
        return self.resolver.lambda_context


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response[str]:
    from aws_lambda_powertools.event_handler import Response

    return Response(
        status_code=status,
        content_type=JSON,
        body=json.dumps(body, ensure_ascii=False, default=str),
        headers=headers or {},
    )


def request_id(app: HasEvent) -> str:
    return str(app.current_event.request_context.request_id or "")


def _error_response(app: HasEvent, family: Family, error: CitegateError) -> Response[str]:
    code = error_code(error, family)
    headers = {}
    if "retry_after" in error.details:
        headers["Retry-After"] = str(error.details["retry_after"])
    body = error_body(code, error.message, request_id(app), error_details(error, family), family=family)
    return json_response(error_status(error, family), body, headers=headers)


def make_resolver(family: Family = "v1") -> LazyResolver:
    """A route family's resolver: every error leaves it in the family's JSON shape and codes."""
    return LazyResolver(lambda app: _map_errors(app, family))


def _map_errors(app: APIGatewayHttpResolver, family: Family) -> None:
    from pydantic import ValidationError

    @app.exception_handler(CitegateError)  # type: ignore[untyped-decorator]
    def _domain_error(error: CitegateError) -> Response[str]:
        if error.status >= 500:
            logger.warning("request failed", extra={"code": error.kind, "reason": error.message})
        return _error_response(app, family, error)

    @app.exception_handler(ValidationError)  # type: ignore[untyped-decorator]
    def _validation_error(error: ValidationError) -> Response[str]:
        return _error_response(app, family, invalid_request_from(error))

    @app.not_found
    def _not_found(_: Exception) -> Response[str]:
        path = app.current_event.path
        return _error_response(
            app, family, RouteNotFound(f"no route for {app.current_event.http_method} {path}")
        )

    @app.exception_handler(Exception)  # type: ignore[untyped-decorator]
    def _unexpected(error: Exception) -> Response[str]:
        logger.exception("unhandled error")
        internal = CitegateError("internal error; the request id identifies it in the logs")
        return _error_response(app, family, internal)


def invalid_request_from(error: ValidationError) -> InvalidRequest:
    problems = []
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"]) or "body"
        problems.append({"field": field, "problem": item["msg"]})
    summary = "; ".join(f"{p['field']}: {p['problem']}" for p in problems)
    return InvalidRequest(f"invalid request: {summary}", details={"fields": problems})


def raw_body(app: HasEvent) -> bytes:
    event = app.current_event
    body = event.body or ""
    if event.is_base64_encoded:
        return base64.b64decode(body)
    return body.encode()


def parse_body(app: HasEvent, model: type[ModelT], *, allow_empty: bool = False) -> ModelT:
    from pydantic import ValidationError

    raw = raw_body(app)
    if not raw.strip():
        if allow_empty:
            return model.model_validate({})
        raise InvalidRequest("the request body is empty; a JSON object is required")
    try:
        data = json.loads(raw)
    except UnicodeDecodeError as error:
        reason = f"the request body is not valid UTF-8 ({error.reason} at byte {error.start})"
        raise InvalidRequest(reason) from error
    except json.JSONDecodeError as error:
        raise InvalidRequest(f"the request body is not valid JSON: {error}") from error
    except RecursionError as error:
        raise InvalidRequest("the request body is nested too deeply") from error
    if not isinstance(data, dict):
        raise InvalidRequest("the request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise invalid_request_from(error) from error
    except RecursionError as error:
        raise InvalidRequest("the request body is nested too deeply") from error


def query_param(app: HasEvent, name: str) -> str | None:
    params = app.current_event.query_string_parameters or {}
    return params.get(name)


def principal(app: HasEvent) -> Principal:
    """The admitted caller (anonymous when no credentials were sent)."""
    from citegate.api.admission import current

    return current().call.principal


def authorized(app: HasEvent) -> Authorized:
    """The call as the route table's declaration admitted it (citegate.api.admission): caller,
    policy, tool, the knowledge base in the path and the write action are already checked."""
    from citegate.api.admission import admitted

    return admitted()


def govern(app: HasEvent, *, requested: RequestedScope | None = None) -> Authorized:
    """A scoped route's last checks, with the scope its body asks for: scope subset, then the
    route's write action (spec 000 6.2's steps 5 and 7; the earlier ones ran at admission), on the
    services the call was admitted with."""
    from citegate.api.admission import current, govern_scope

    return govern_scope(current().services, requested)


def http_handler(
    app: LazyResolver, services: ServicesFactory, *, audited: bool = True, family: Family = "v1"
) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The Lambda entry point for a resolver: request-id logging, tracing, metrics, admission
    (who may call the route, before its body is read) and the audit record of the call (a call
    that cannot be audited answers 503 audit_unavailable). `services` is the composition root's
    (citegate.container.services), called once per request."""

    @logged
    @traced
    @metrics.log_metrics
    def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        if not audited:
            return app.resolve(event, context)
        s = services()
        record, refused = admit_event(s, event, family)
        if refused is not None:
            return finish_call(s, record, refused, family)
        return finish_call(s, record, checked(app.resolve(event, context), event, family), family)

    return lambda_handler


def admit_event(s: Any, event: dict[str, Any], family: Family) -> tuple[CallRecord, dict[str, Any] | None]:
    """Open the call's record and admit the event to its route; the refusal, if any."""
    from citegate.api.admission import admit
    from citegate.governance.calls import begin_call

    record = begin_call(event)
    return record, admit(s, event, family)


def checked(response: dict[str, Any], event: dict[str, Any], family: Family) -> dict[str, Any]:
    """Fail closed if a scoped route answered without checking the scope its body asked for."""
    from citegate.api.admission import refusal, unfinished

    if unfinished(response):
        logger.error("a scoped route answered without govern()", extra={"route": event.get("routeKey")})
        return refusal(
            event, family, CitegateError("internal error; the request id identifies it in the logs")
        )
    return response


def finish_call(s: Any, record: CallRecord, response: dict[str, Any], family: Family) -> dict[str, Any]:
    """Write the call's audit record; a call that cannot be audited answers 503 instead."""
    from citegate.governance.calls import end_call

    status = int(response.get("statusCode", 500))
    error = None
    if status >= 400:
        try:
            error = json.loads(response.get("body") or "{}").get("error")
        except (ValueError, AttributeError):
            error = None
        if isinstance(error, dict):  # OpenAI's error object (the OpenAI-compatible routes)
            error = error.get("code")
    try:
        end_call(s, record, status, error)
    except AuditUnavailable as failure:
        body = error_body(error_code(failure, family), failure.message, record.request_id, family=family)
        return {"statusCode": 503, "headers": {"Content-Type": JSON}, "body": json.dumps(body)}
    return response
