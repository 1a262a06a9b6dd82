"""The HTTP side of citegate.insights: query parameters and the export's content types."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from citegate.api.http import HasEvent, json_response, query_param
from citegate.insights.export import CONTENT_TYPES, Format, negotiate
from citegate.insights.schemas import FixBody, TaskBody
from citegate.insights.service import Filters, Window
from citegate.platform.errors import InvalidRequest

__all__ = ["FixBody", "TaskBody", "filters_of", "limit_of", "respond", "window_of"]

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import Response

    from citegate.governance.calls import Authorized


def window_of(app: HasEvent, s: Any) -> Window:
    return Window.parse(
        query_param(app, "since") or None, query_param(app, "until") or None, s.settings.insights_window_days
    )


def filters_of(app: HasEvent, call: Authorized, *, kinds: bool = True) -> Filters:
    kind = query_param(app, "kind") or None
    if kind is not None and not kinds:
        raise InvalidRequest(
            "kind filters gap groups only (GET /v1/insights/gaps)", details={"field": "kind"}
        )
    return Filters(
        kb=query_param(app, "kb") or None, kind=kind, caller=query_param(app, "caller") or None
    ).validate(call.policy)


def limit_of(app: HasEvent, name: str = "limit", default: int = 100) -> int:
    try:
        limit = int(query_param(app, name) or default)
    except ValueError as error:
        raise InvalidRequest(f"{name} must be an integer", details={"field": name}) from error
    if not 1 <= limit <= 1000:
        raise InvalidRequest(f"{name} must be between 1 and 1000", details={"field": name})
    return limit


def respond(
    app: HasEvent, view: dict[str, Any], render: Callable[[dict[str, Any], Format], str], name: str
) -> Response[str]:
    """JSON, or the export the `format` parameter (else the Accept header) asks for."""
    from aws_lambda_powertools.event_handler import Response

    headers = app.current_event.headers or {}
    accept = next((v for k, v in headers.items() if k.lower() == "accept"), None)
    fmt = negotiate(query_param(app, "format"), accept)
    if fmt == "json":
        return json_response(200, view)
    extension = "csv" if fmt == "csv" else "md"
    return Response(
        status_code=200,
        content_type=CONTENT_TYPES[fmt],
        body=render(view, fmt),
        headers={"Content-Disposition": f'attachment; filename="citegate-insights-{name}.{extension}"'},
    )
