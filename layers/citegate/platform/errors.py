"""Domain errors and the one place that maps them to HTTP statuses and code families.

The layer raises `CitegateError` subclasses with a product-neutral `kind`; each route family
(spec 004's `/v1`, spec 000's Answer API, spec 001's chats) names that kind with its own code.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

Family = Literal["v1", "answer", "chat", "openai"]


class CitegateError(Exception):
    kind: ClassVar[str] = "internal"
    status: ClassVar[int] = 500

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class InvalidRequest(CitegateError):
    kind, status = "invalid_request", 400


class Unauthorized(CitegateError):
    kind, status = "unauthorized", 401


class Forbidden(CitegateError):
    kind, status = "forbidden", 403


class ForbiddenTool(Forbidden):
    kind = "forbidden_tool"


class ForbiddenScope(Forbidden):
    kind = "forbidden_scope"


class DatasetNotAllowed(Forbidden):
    kind = "dataset_not_allowed"


class ForbiddenAction(Forbidden):
    """The tool is granted but the write action it performs is not (spec 000 6.2 step 7)."""

    kind = "forbidden_action"


class AuditUnavailable(CitegateError):
    kind, status = "audit_unavailable", 503


class SessionForbidden(Forbidden):
    kind = "session_forbidden"


class SessionExpired(CitegateError):
    kind, status = "session_expired", 410


class NotFound(CitegateError):
    kind, status = "not_found", 404


class KbNotFound(NotFound):
    kind = "kb_not_found"


class DocumentNotFound(NotFound):
    kind = "document_not_found"


class TaskNotFound(NotFound):
    kind = "task_not_found"


class RouteNotFound(NotFound):
    kind = "route_not_found"


class ModelNotFound(NotFound):
    """An OpenAI-compatible `model` that names no knowledge base the caller may ask."""

    kind = "model_not_found"


class Conflict(CitegateError):
    kind, status = "conflict", 409


class KbExists(Conflict):
    kind = "kb_exists"


class PayloadTooLarge(CitegateError):
    kind, status = "payload_too_large", 413


class UnsupportedMediaType(CitegateError):
    kind, status = "unsupported_media_type", 415


class RateLimited(CitegateError):
    kind, status = "rate_limited", 429


class SearchUnavailableError(CitegateError):
    kind, status = "search_unavailable", 503


class ModelUnavailable(CitegateError):
    kind, status = "model_unavailable", 503


class StorageUnavailable(CitegateError):
    kind, status = "storage_unavailable", 503


# The /v1 routes (spec 004) use lower-case codes, one per kind, as PRODUCT.md decides.
# Spec 000's finer refusals keep their name in `details.reason`.
_V1_CODES: dict[str, str] = {
    "route_not_found": "not_found",
    "internal": "internal_error",
    "forbidden_tool": "forbidden",
    "forbidden_scope": "forbidden",
    "dataset_not_allowed": "forbidden",
    "forbidden_action": "forbidden",
}


# Spec 000's routes (Answer API, Agent Access) use its section 9 codes. `ragflow_unavailable` keeps
# its name and means "the answering engine (the model) is unreachable".
_ANSWER_CODES: dict[str, str] = {
    "route_not_found": "not_found",
    "internal": "internal_error",
    "model_unavailable": "ragflow_unavailable",
    "forbidden": "forbidden_tool",
    "kb_not_found": "dataset_not_allowed",
}


# Spec 001's routes (agent chats, web search/read) use its section 7.2 codes; other kinds are
# upper-cased (FORBIDDEN, UNAUTHORIZED, INVALID_REQUEST, ...), finer kinds keep details.reason.
_CHAT_CODES: dict[str, str] = {
    "rate_limited": "QUOTA_EXCEEDED",
    "invalid_url_format": "INVALID_URL_FORMAT",
    "url_not_accessible": "URL_NOT_ACCESSIBLE",
    "timeout_error": "TIMEOUT_ERROR",
    "web_read_failed": "WEB_READ_FAILED",
    "content_too_large": "WEB_READ_FAILED",
    "unsupported_content": "WEB_READ_FAILED",
    "web_search_failed": "WEB_SEARCH_FAILED",
    "model_unavailable": "MODEL_NOT_AVAILABLE",
    "invalid_selector": "INVALID_REQUEST",
    "forbidden_tool": "FORBIDDEN",
    "forbidden_scope": "FORBIDDEN",
    "dataset_not_allowed": "FORBIDDEN",
    "forbidden_action": "FORBIDDEN",
    "route_not_found": "NOT_FOUND",
    "internal": "INTERNAL_ERROR",
}


# Spec 001 section 7.2 gives each of its codes one HTTP status; its routes answer with that status,
# whatever the kind behind the code. MODEL_NOT_AVAILABLE is 400 there, so a model that fails is 400
# too (details.reason says which: an unknown model_id, or the model failed), where the other
# families answer 503 for it.
_CHAT_STATUSES: dict[str, int] = {
    "CHAT_NOT_FOUND": 404,
    "MODEL_NOT_AVAILABLE": 400,
    "WEB_SEARCH_FAILED": 500,
    "WEB_READ_FAILED": 500,
    "URL_NOT_ACCESSIBLE": 400,
    "QUOTA_EXCEEDED": 429,
    "INVALID_URL_FORMAT": 400,
    "TIMEOUT_ERROR": 408,
}


# The OpenAI-compatible routes (/v1/models, /v1/chat/completions) answer in OpenAI's error shape,
# whose clients read `error.type` (and the status) more than `error.code`.
_OPENAI_CODES: dict[str, str] = {
    "unauthorized": "invalid_api_key",
    "kb_not_found": "model_not_found",
    "route_not_found": "not_found",
    "rate_limited": "rate_limit_exceeded",
    "internal": "internal_error",
}
_OPENAI_TYPES: dict[str, str] = {
    "invalid_api_key": "authentication_error",
    "rate_limit_exceeded": "rate_limit_error",
    "forbidden": "permission_error",
    "forbidden_tool": "permission_error",
    "forbidden_scope": "permission_error",
    "forbidden_action": "permission_error",
    "dataset_not_allowed": "permission_error",
}
_OPENAI_CLIENT_CODES = frozenset(
    {
        "invalid_request",
        "model_not_found",
        "not_found",
        "method_not_allowed",
        "payload_too_large",
        "unsupported_media_type",
        "conflict",
    }
)


def openai_error(code: str, message: str) -> dict[str, Any]:
    """OpenAI's error object: `{"message", "type", "param", "code"}`."""
    kind = _OPENAI_TYPES.get(code) or (
        "invalid_request_error" if code in _OPENAI_CLIENT_CODES else "server_error"
    )
    return {"message": message, "type": kind, "param": None, "code": code}


def error_status(error: CitegateError, family: Family = "v1") -> int:
    """The HTTP status of `error` on the family's routes: spec 001's table for its codes, else the
    kind's own status."""
    if family == "chat":
        return _CHAT_STATUSES.get(error_code(error, family), error.status)
    return error.status


def error_code(error: CitegateError, family: Family = "v1") -> str:
    if family == "v1":
        return _V1_CODES.get(error.kind, error.kind)
    if family == "answer":
        return _ANSWER_CODES.get(error.kind, error.kind)
    if family == "chat":
        return _CHAT_CODES.get(error.kind, error.kind.upper())
    if family == "openai":
        return _OPENAI_CODES.get(error.kind, error.kind)
    raise ValueError(f"no code table for family {family!r} yet")


def error_details(error: CitegateError, family: Family = "v1") -> dict[str, Any]:
    if family == "chat":
        chat_code = error_code(error, family)
        if chat_code in ("FORBIDDEN", "WEB_READ_FAILED") and chat_code.lower() != error.kind:
            return {"reason": error.kind, **error.details}
        if chat_code == "MODEL_NOT_AVAILABLE":  # one code and status, two causes: which one
            return {"reason": error.kind, **error.details}
        return error.details
    code = error_code(error, family)
    if code != error.kind and isinstance(error, Forbidden):
        return {"reason": error.kind, **error.details}
    return error.details


def error_body(
    code: str,
    message: str,
    request_id: str,
    details: dict[str, Any] | None = None,
    *,
    family: Family = "v1",
) -> dict[str, Any]:
    """The decided error shape, used by every route and by the gateway itself; OpenAI's on the
    OpenAI-compatible routes (their clients parse nothing else; the request id is in the headers)."""
    if family == "openai":
        return {"error": openai_error(code, message)}
    return {"error": code, "message": message, "requestId": request_id, "details": details or {}}
