"""What every HTTP handler shares: the resolver with error mapping, body parsing, the principal.

Handlers stay thin: they declare their route, parse the body into a pydantic model, call one
function of the layer and shape the response. Every error leaves here in the decided JSON shape.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any, TypeVar

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.logging import correlation_paths
from pydantic import BaseModel, ValidationError

from citegate.errors import (
    AuditUnavailable,
    CitegateError,
    Family,
    InvalidRequest,
    RouteNotFound,
    error_body,
    error_code,
    error_details,
)
from citegate.governance import Authorized, authorize, begin_call, current_call, end_call
from citegate.identity.principal import Principal
from citegate.observability import logger, metrics, traced
from citegate.policy.model import RequestedScope, WriteAction

ModelT = TypeVar("ModelT", bound=BaseModel)
JSON = "application/json"


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response[str]:
    return Response(
        status_code=status,
        content_type=JSON,
        body=json.dumps(body, ensure_ascii=False, default=str),
        headers=headers or {},
    )


def request_id(app: APIGatewayHttpResolver) -> str:
    return str(app.current_event.request_context.request_id or "")


def _error_response(app: APIGatewayHttpResolver, family: Family, error: CitegateError) -> Response[str]:
    code = error_code(error, family)
    headers = {}
    if "retry_after" in error.details:
        headers["Retry-After"] = str(error.details["retry_after"])
    body = error_body(code, error.message, request_id(app), error_details(error, family))
    return json_response(error.status, body, headers=headers)


def make_resolver(family: Family = "v1") -> APIGatewayHttpResolver:
    app = APIGatewayHttpResolver()

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

    return app


def invalid_request_from(error: ValidationError) -> InvalidRequest:
    problems = []
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"]) or "body"
        problems.append({"field": field, "problem": item["msg"]})
    summary = "; ".join(f"{p['field']}: {p['problem']}" for p in problems)
    return InvalidRequest(f"invalid request: {summary}", details={"fields": problems})


def raw_body(app: APIGatewayHttpResolver) -> bytes:
    event = app.current_event
    body = event.body or ""
    if event.is_base64_encoded:
        return base64.b64decode(body)
    return body.encode()


def parse_body(app: APIGatewayHttpResolver, model: type[ModelT], *, allow_empty: bool = False) -> ModelT:
    raw = raw_body(app)
    if not raw.strip():
        if allow_empty:
            return model.model_validate({})
        raise InvalidRequest("the request body is empty; a JSON object is required")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InvalidRequest(f"the request body is not valid JSON: {error}") from error
    if not isinstance(data, dict):
        raise InvalidRequest("the request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise invalid_request_from(error) from error


def query_param(app: APIGatewayHttpResolver, name: str) -> str | None:
    params = app.current_event.query_string_parameters or {}
    return params.get(name)


def principal(app: APIGatewayHttpResolver) -> Principal:
    """The caller as the front door identified it (anonymous when no credentials were sent)."""
    from citegate.container import services
    from citegate.identity.resolve import resolve_principal

    record = current_call()
    found = resolve_principal(app.current_event.raw_event, services())
    record.principal = found
    return found


def govern(
    app: APIGatewayHttpResolver,
    tool: str,
    *,
    kb_id: str | None = None,
    write: WriteAction | None = None,
    requested: RequestedScope | None = None,
    allow_anonymous: bool = False,
) -> Authorized:
    """Identify the caller and run every policy check for this route (see citegate.governance)."""
    from citegate.container import services

    return authorize(
        services(),
        principal(app),
        tool,
        kb_id=kb_id,
        write=write,
        requested=requested,
        allow_anonymous=allow_anonymous,
    )


def http_handler(
    app: APIGatewayHttpResolver, *, audited: bool = True, family: Family = "v1"
) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The Lambda entry point for a resolver: request-id logging, tracing, metrics, and the audit
    record of the call (a call that cannot be audited answers 503 audit_unavailable)."""

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
    @traced
    @metrics.log_metrics
    def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        if not audited:
            return app.resolve(event, context)
        from citegate.container import services

        record = begin_call(event)
        response = app.resolve(event, context)
        status = int(response.get("statusCode", 500))
        error = None
        if status >= 400:
            try:
                error = json.loads(response.get("body") or "{}").get("error")
            except (ValueError, AttributeError):
                error = None
        try:
            end_call(services(), record, status, error)
        except AuditUnavailable as failure:
            body = error_body(error_code(failure, family), failure.message, record.request_id)
            return {"statusCode": 503, "headers": {"Content-Type": JSON}, "body": json.dumps(body)}
        return response

    return lambda_handler
