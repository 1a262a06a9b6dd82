"""The OpenAPI 3.1 document of the HTTP API, generated from `routes.ROUTES` and the handlers' models.

`OPERATIONS` is the one table that says, for each route's function, which model its handler parses
(`parse_body(app, Model)`) and which it returns. Handlers that answer a plain dict are described by a
small inline object schema (`x-plain-dict: true`), built from the keys the handler writes.

`python -m citegate.api.openapi` rewrites docs/openapi.json; tests/unit/test_openapi.py fails when that
file differs from `build_openapi()` or when a route has no entry here (or an entry has no route).
"""

from __future__ import annotations

import html
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from citegate import __version__
from citegate.agents.schemas.agents import QueryV2Body, QueryV2Event
from citegate.agents.schemas.chats import (
    Chat,
    ChatCreateBody,
    ChatDetail,
    ChatEvent,
    ChatList,
    ChatModelList,
    ChatRenameBody,
    MessageBody,
    MessageReply,
)
from citegate.agents.schemas.knowledge import KnowledgeQuery, KnowledgeResult
from citegate.answers.schemas.answer import (
    AnswerResult,
    AnswerSession,
    AskBody,
    GetContextBody,
    GetPageBody,
    SearchBody,
    SessionCreateBody,
    TurnBody,
)
from citegate.answers.schemas.feedback import (
    CloseBody,
    FeedbackBody,
    FeedbackRecordAdmin,
    ImprovementTaskBody,
    ReportResult,
)
from citegate.api import routes
from citegate.api.openai_compat import ChatCompletionChunk, ChatCompletionRequest
from citegate.governance.policy.model import Policy, PolicyUpdate
from citegate.governance.schemas import CredentialRequest
from citegate.insights.schemas import FixBody, TaskBody
from citegate.knowledge.schemas.documents import DocumentRecord, IngestRequest, Task, UploadRequest
from citegate.knowledge.schemas.kb import CreateKbRequest, KnowledgeBase, UpdateKbRequest
from citegate.knowledge.schemas.retrieval import (
    AskRequest,
    AskResponse,
    ResolveRefsRequest,
    ResolveRefsResponse,
    RetrieveRequest,
    RetrieveResponse,
)
from citegate.knowledge.sources.model import CreateSourceRequest, Source, SyncRun, UpdateSourceRequest
from citegate.platform import errors
from citegate.web.schemas import WebReadRequest, WebReadResponse, WebSearchRequest, WebSearchResponse

OPENAPI_VERSION = "3.1.0"
REF = "#/components/schemas/{model}"
DOCUMENT_PATH = Path(__file__).resolve().parents[3] / "docs" / "openapi.json"

# A response is a model, or a plain-dict description: {"properties": {...}} (+ "allOf" a model).
Body = type[BaseModel] | dict[str, Any] | None


@dataclass(frozen=True)
class Op:
    request: type[BaseModel] | None
    response: Body
    summary: str
    status: int = 200
    query: tuple[tuple[str, dict[str, Any], str], ...] = ()  # (name, schema, description)
    anonymous: bool = False  # the handler also serves callers without credentials
    errors: tuple[int, ...] = field(default=())  # statuses beyond the common ones
    # Server-sent events: each `data:` line is one of these (the JSON `response` is then the reply
    # without streaming, if the route has one).
    stream: type[BaseModel] | None = None
    # The answer may also be an export: text/csv or text/markdown (`format` or Accept).
    exports: bool = False


def ref(model: type[BaseModel]) -> dict[str, Any]:
    return {"$ref": REF.format(model=model.__name__)}


def obj(required: bool = True, **properties: Any) -> dict[str, Any]:
    """A plain-dict response: an object with these properties (all present unless required=False)."""
    schema: dict[str, Any] = {"type": "object", "properties": properties, "x-plain-dict": True}
    if required:
        schema["required"] = sorted(properties)
    return schema


def array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


STR: dict[str, Any] = {"type": "string"}
INT: dict[str, Any] = {"type": "integer"}
BOOL: dict[str, Any] = {"type": "boolean"}
ANY_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}
LIMIT = ("limit", {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}, "At most this many.")

CREDENTIAL = obj(
    False,
    credential_id=STR,
    agent_id=STR,
    tenant_id=STR,
    kind={"type": "string", "enum": ["token", "caller_key"]},
    status={"type": "string", "enum": ["active", "revoked"]},
    description=STR,
    created_at=STR,
    revoked_at=STR,
)
GAP_KIND: dict[str, Any] = {"type": "string", "enum": ["declined", "low_confidence", "not_helpful"]}
INSIGHTS_QUERY: tuple[tuple[str, Any, str], ...] = (
    ("kb", STR, "Only questions asked of this knowledge base (granted to the caller)."),
    ("since", STR, "A date (YYYY-MM-DD) or an ISO 8601 time; default: the last 30 days."),
    ("until", STR, "A date (the whole day) or an ISO 8601 time; default: now."),
    ("caller", {"type": "string", "enum": ["human", "agent"]}, "Only this caller kind."),
    ("format", {"type": "string", "enum": ["json", "csv", "md"]}, "json (default), csv or md."),
)
TURN_RESULT = {"allOf": [ref(AnswerResult), obj(sessionId=STR, turn=INT, earlierCitations=array(ANY_OBJECT))]}

OPERATIONS: dict[str, Op] = {
    "healthz": Op(
        None,
        obj(
            status={"type": "string", "enum": ["ok", "degraded"]},
            version=STR,
            runtime=STR,
            embedder=STR,
            checks={"type": "object", "additionalProperties": ANY_OBJECT},
        ),
        "Liveness and dependency checks (503 when degraded).",
        errors=(503,),
    ),
    "kb_create": Op(CreateKbRequest, KnowledgeBase, "Create a knowledge base.", 201, errors=(409,)),
    "kb_list": Op(
        None, obj(knowledge_bases=array(ref(KnowledgeBase))), "List the knowledge bases the caller may use."
    ),
    "kb_get": Op(None, KnowledgeBase, "Get a knowledge base."),
    "kb_update": Op(UpdateKbRequest, KnowledgeBase, "Update a knowledge base."),
    "upload_create": Op(
        UploadRequest,
        obj(
            False,
            upload_id=STR,
            s3_key=STR,
            url=STR,
            method={"type": "string", "const": "PUT"},
            headers=ANY_OBJECT,
            expires_in=INT,
        ),
        "Get a presigned URL to upload a large file, then ingest it by s3_key.",
        201,
        errors=(413,),
    ),
    "document_ingest": Op(
        IngestRequest,
        obj(task_id=STR, document_id=STR, status=STR),
        "Ingest a document; poll the task (Location header).",
        202,
        errors=(413, 415),
    ),
    "document_list": Op(
        None, obj(kb_id=STR, documents=array(ref(DocumentRecord))), "List a knowledge base's documents."
    ),
    "document_get": Op(None, DocumentRecord, "Get a document."),
    "document_chunks": Op(
        None,
        obj(
            kb_id=STR,
            document_id=STR,
            source_name=STR,
            status=STR,
            parents=array(
                obj(
                    parent_id=STR,
                    index=INT,
                    heading=STR,
                    heading_path=array(STR),
                    anchor=STR,
                    page={"type": ["integer", "null"]},
                    text=STR,
                )
            ),
            children=array(
                obj(
                    ref_id=STR,
                    parent_id=STR,
                    position=INT,
                    page={"type": ["integer", "null"]},
                    heading=STR,
                    anchor=STR,
                    text=STR,
                )
            ),
            truncated=BOOL,
        ),
        "A document's parents and children (with their ref ids), in reading order.",
    ),
    "document_delete": Op(
        None,
        obj(kb_id=STR, document_id=STR, source_name=STR, deleted=obj(chunks=INT, parents=INT, files=INT)),
        "Delete a document with its chunks, parents and files.",
    ),
    "kb_reindex": Op(
        None,
        obj(task_id=STR, kb_id=STR, documents=INT, status=STR),
        "Re-index every document of a knowledge base.",
        202,
    ),
    "task_get": Op(None, Task, "Get an ingestion or reindex task."),
    "source_create": Op(CreateSourceRequest, Source, "Add a source the knowledge base follows.", 201),
    "source_list": Op(None, obj(kb_id=STR, sources=array(ref(Source))), "List a knowledge base's sources."),
    "source_get": Op(None, Source, "Get a source."),
    "source_update": Op(UpdateSourceRequest, Source, "Change a source (its kind stays)."),
    "source_delete": Op(
        None,
        obj(kb_id=STR, source_id=STR, deleted=obj(documents=INT), kept=INT),
        "Delete a source and the documents it brought (unless keep_documents).",
        query=(("keep_documents", BOOL, "Keep its documents (they stay, no longer synced)."),),
        errors=(409,),
    ),
    "source_sync": Op(
        None,
        SyncRun,
        "Sync a source: the run, queued (its link in Location and links.self); the sync function "
        "queues new and changed documents and deletes gone ones.",
        202,
        errors=(409,),
    ),
    "source_run_get": Op(
        None,
        SyncRun,
        "One sync run: queued, running, then succeeded or failed with its counts.",
    ),
    "source_runs": Op(
        None,
        obj(kb_id=STR, source_id=STR, runs=array(ref(SyncRun))),
        "A source's latest sync runs, newest first.",
        query=(
            ("limit", {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}, "At most this many."),
        ),
    ),
    "me": Op(
        None,
        obj(
            principal=obj(type=STR, id=STR, tenant_id=STR),
            tools=array(STR),
            knowledge_bases=array(STR),
            write_actions=array(STR),
            web=obj(enabled=BOOL, domains=array(STR)),
        ),
        "Who the caller is and what its policy grants.",
    ),
    "kb_retrieve": Op(RetrieveRequest, RetrieveResponse, "Retrieve ranked chunks."),
    "kb_ask": Op(AskRequest, AskResponse, "Answer a question from cited evidence."),
    "kb_resolve_refs": Op(ResolveRefsRequest, ResolveRefsResponse, "Resolve ref ids to citations."),
    "knowledge_query": Op(
        KnowledgeQuery,
        obj(
            False,
            success=BOOL,
            type={"type": "string", "enum": ["retrieval", "stats", "empty"]},
            answer=STR,
            guidance=STR,
            knowledge_bases=array(ANY_OBJECT),
            results=array(ref(KnowledgeResult)),
            total=INT,
            query_time_ms=INT,
        ),
        "Spec 002's governed knowledge query for business agents.",
    ),
    "answer_ask": Op(AskBody, AnswerResult, "Ask the Answer API a question.", anonymous=True),
    "answer_session_create": Op(
        SessionCreateBody,
        AnswerSession,
        "Open an answer session (optionally with a first question, answered as its first turn).",
        201,
        anonymous=True,
    ),
    "answer_session_turn": Op(
        TurnBody,
        TURN_RESULT,
        "Ask a follow-up in a session: its scope, or a narrower one sent in `scope`.",
        anonymous=True,
        errors=(409, 410),
    ),
    "agent_search": Op(
        SearchBody,
        obj(
            results=array(
                obj(
                    False,
                    rank=INT,
                    chunkId=STR,
                    text=STR,
                    score={"type": "number", "description": "absolute relevance estimate in [0, 1]"},
                    rankScore={
                        "type": ["number", "null"],
                        "description": "what the rank follows: the fused score, relative to this query",
                    },
                    citation=ANY_OBJECT,
                )
            ),
            total=INT,
            stats=ANY_OBJECT,
        ),
        "Agent tool: search.",
    ),
    "agent_ask": Op(AskBody, AnswerResult, "Agent tool: ask (citations required)."),
    "agent_get_page": Op(
        GetPageBody,
        obj(
            False,
            path=STR,
            version=STR,
            title=STR,
            url=STR,
            sourceProject=STR,
            kbId=STR,
            documentId=STR,
            headings=array(ANY_OBJECT),
            sections=array(ANY_OBJECT),
        ),
        "Agent tool: a page by path, as sections with headings and anchors.",
        errors=(404,),
    ),
    "agent_get_context": Op(
        GetContextBody,
        obj(
            task=STR,
            tokenBudget=INT,
            tokensUsed=INT,
            passages=array(ANY_OBJECT),
            relatedPages=array(ANY_OBJECT),
            omitted=array(
                obj(
                    rank=INT,
                    chunkId=STR,
                    score={"type": "number"},
                    tokens=INT,
                    reason={"type": "string", "enum": ["token_budget"]},
                )
            ),
        ),
        "Agent tool: context passages for a task within a token budget.",
    ),
    "agent_create_feedback": Op(
        FeedbackBody, ReportResult, "Agent tool: report feedback.", anonymous=True, errors=(409,)
    ),
    "agent_create_improvement_task": Op(
        ImprovementTaskBody, ReportResult, "Agent tool: open an improvement task.", errors=(409,)
    ),
    "admin_feedback_list": Op(
        None,
        obj(records=array(ref(FeedbackRecordAdmin))),
        "List feedback records and improvement tasks.",
        query=(
            ("kind", {"type": "string", "enum": ["feedback", "improvement_task"]}, "Only this kind."),
            ("status", {"type": "string", "enum": ["open", "closed"]}, "Only this status."),
            LIMIT,
        ),
    ),
    "admin_feedback_close": Op(CloseBody, FeedbackRecordAdmin, "Close a feedback record.", errors=(409,)),
    "query_v2": Op(
        QueryV2Body,
        None,
        "Spec 003's dual agent: retrieval rounds, then a cited summary, as server-sent events.",
        anonymous=True,
        stream=QueryV2Event,
    ),
    "agent_chat_create": Op(ChatCreateBody, Chat, "Create an agent chat.", 201),
    "agent_chat_list": Op(None, ChatList, "The caller's chats, newest first.", query=(LIMIT,)),
    "agent_chat_get": Op(None, ChatDetail, "A chat with its messages and sources."),
    "agent_chat_update": Op(ChatRenameBody, Chat, "Rename a chat."),
    "agent_chat_delete": Op(None, obj(id=STR, deleted=BOOL), "Delete a chat and its messages."),
    "agent_chat_message": Op(
        MessageBody, MessageReply, "Send a message: JSON, or SSE with stream=true.", stream=ChatEvent
    ),
    "agent_models_list": Op(None, ChatModelList, "The chat models the caller may pick."),
    "openai_models": Op(
        None,
        obj(object={"type": "string", "const": "list"}, data=array(ANY_OBJECT)),
        "OpenAI-compatible: the knowledge bases and answer scopes the caller may ask, as models "
        "('citegate', 'citegate/<kb_id>', each optionally '@project=<p>', '@path=<prefix>' or "
        "'@version=<v>').",
    ),
    "openai_chat_completions": Op(
        ChatCompletionRequest,
        obj(
            id=STR,
            object={"type": "string", "const": "chat.completion"},
            created=INT,
            model=STR,
            system_fingerprint={"type": ["string", "null"]},
            choices=array(ANY_OBJECT),
            usage=ANY_OBJECT,
            citations=array(ANY_OBJECT),
            citegate=ANY_OBJECT,
        ),
        "OpenAI-compatible chat completion: the last user message answered with [n] markers, "
        "url_citation annotations and resolve_refs's citations; `stream: true` streams chunks.",
        errors=(404,),
        stream=ChatCompletionChunk,
    ),
    "mcp": Op(
        None,
        obj(False, jsonrpc={"type": "string", "const": "2.0"}, id={}, result=ANY_OBJECT, error=ANY_OBJECT),
        "MCP over streamable HTTP (stateless, JSON responses): one JSON-RPC 2.0 message per POST "
        "(initialize, tools/list, tools/call); tools are listed and called under the caller's own policy.",
        anonymous=True,
    ),
    "web_search": Op(WebSearchRequest, WebSearchResponse, "Search the web.", errors=(408,)),
    "web_read": Op(WebReadRequest, WebReadResponse, "Read web pages.", errors=(408,)),
    "admin_policies_list": Op(None, obj(policies=array(ref(Policy))), "List the tenant's policies."),
    "admin_policy_get": Op(None, Policy, "Get a principal's policy."),
    "admin_policy_put": Op(
        PolicyUpdate,
        Policy,
        "Write a principal's policy (replaced whole). 409 `conflict` with `details.reason` "
        "`bootstrap_admin_required` when it would take `admin` from the service principal; "
        "nothing is written.",
        errors=(409,),
    ),
    "admin_credential_create": Op(
        CredentialRequest,
        {"allOf": [CREDENTIAL, obj(secret={"type": "string", "description": "Shown once."})]},
        "Issue an agent credential (bearer token or caller agent key).",
        201,
    ),
    "admin_credential_list": Op(
        None, obj(agent_id=STR, credentials=array(CREDENTIAL)), "List an agent's credentials."
    ),
    "admin_credential_revoke": Op(None, CREDENTIAL, "Revoke an agent credential."),
    "insights_gaps": Op(
        None,
        obj(
            window=ANY_OBJECT,
            filters=ANY_OBJECT,
            groups=array(ANY_OBJECT),
            totalGroups=INT,
            gapQuestions=INT,
            ungrouped=INT,
            refresh=ANY_OBJECT,
        ),
        "Questions the documents do not answer, grouped by meaning and ranked by count "
        "(format=csv|md, or Accept: text/csv|text/markdown, exports them).",
        query=(
            *INSIGHTS_QUERY,
            ("kind", GAP_KIND, "Only this gap kind."),
            LIMIT,
            (
                "questions",
                {"type": "integer", "minimum": 1, "maximum": 1000, "default": 10},
                "Questions per group.",
            ),
        ),
        exports=True,
    ),
    "insights_summary": Op(
        None,
        ANY_OBJECT,
        "Questions, answer and decline rates, confidence mix, top cited pages, per day (format=csv|md).",
        query=INSIGHTS_QUERY,
        exports=True,
    ),
    "insights_gap_fix": Op(
        FixBody, ANY_OBJECT, "Mark a gap group fixed; its questions are asked again.", errors=(404,)
    ),
    "insights_gap_task": Op(
        TaskBody,
        ReportResult,
        "Open (or count on) the improvement task of a gap group (deduplicated).",
        errors=(404, 409),
    ),
    "admin_audit_list": Op(
        None,
        obj(records=array(ANY_OBJECT)),
        "Read the audit log.",
        query=(
            ("caller", STR, "Only this caller (principal key)."),
            ("since", STR, "ISO 8601 lower bound."),
            ("until", STR, "ISO 8601 upper bound."),
            LIMIT,
        ),
    ),
}

SECURITY_SCHEMES: dict[str, Any] = {
    "bearerAuth": {
        "type": "http",
        "scheme": "bearer",
        "description": "Authorization: Bearer <token> (RAG_API_TOKEN, or an agent token cgat_...).",
    },
    "sigv4": {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "AWS Signature Version 4 (AWS4-HMAC-SHA256): the IAM front door.",
        "x-amazon-apigateway-authtype": "awsSigv4",
    },
    "callerAgentKey": {
        "type": "apiKey",
        "in": "header",
        "name": "X-Caller-Agent-Key",
        "description": "Spec 002's caller agent key (cgak_...).",
    },
    "sessionToken": {
        "type": "apiKey",
        "in": "header",
        "name": "X-Session-Token",
        "description": "The token returned when the answer session was created.",
    },
}
CREDENTIAL_SCHEMES = ("bearerAuth", "sigv4", "callerAgentKey")

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "Error",
    "description": "Every 4xx/5xx body. `error` is the code of the route's family (x-error-family).",
    "properties": {
        "error": {"type": "string", "description": "The error code."},
        "message": {"type": "string"},
        "requestId": {"type": "string"},
        "details": {"type": "object", "additionalProperties": True},
    },
    "required": ["details", "error", "message", "requestId"],
}

# The OpenAI-compatible routes' errors (x-error-family "openai"): OpenAI's error object.
OPENAI_ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "OpenAIError",
    "description": "Every 4xx/5xx body of the OpenAI-compatible routes, in OpenAI's shape.",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": "string"},
            },
            "required": ["code", "message", "param", "type"],
        }
    },
    "required": ["error"],
}

ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "The request is invalid.",
    401: "No valid credentials.",
    403: "The caller's policy does not allow this.",
    404: "Not found.",
    408: "A request to the web timed out.",
    409: "Conflict.",
    410: "The session has expired.",
    413: (
        "The payload is too large: `details.size` and `details.limit` in bytes (in AWS, a body API "
        "Gateway or Lambda refuses before any function runs gets API Gateway's own answer instead)."
    ),
    415: "Unsupported media type.",
    429: "Rate limited (see Retry-After).",
    500: "Internal error.",
    503: "A dependency is unavailable.",
}


def tag_of(path: str) -> str:
    for prefix, tag in (
        ("/v1/insights/", "insights"),
        ("/v1/", "v1"),
        ("/api/v1/knowledge/", "knowledge"),
        ("/api/v1/web/", "web"),
        ("/api/v1/agent/", "chats"),
        ("/api/v2/", "agents"),
        ("/mcp", "mcp"),
        ("/answer/", "answer"),
        ("/agent/", "agent-tools"),
        ("/admin/", "admin"),
    ):
        if path.startswith(prefix):
            return tag
    return "health"


def error_codes() -> dict[str, list[str]]:
    """Each family's codes for the error kinds defined in citegate.platform.errors (nowhere else, so the
    document does not depend on which modules happen to be imported)."""
    kinds: list[type[errors.CitegateError]] = [errors.CitegateError]
    pending = [errors.CitegateError]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub.__module__ == errors.__name__ and sub not in kinds:
                kinds.append(sub)
                pending.append(sub)
    families: tuple[errors.Family, ...] = ("v1", "answer", "chat", "openai")
    return {f: sorted({errors.error_code(k("x"), f) for k in kinds}) for f in families}


def path_params(path: str) -> list[str]:
    return re.findall(r"\{(\w+)\}", path)


def _schemas(models: set[tuple[type[BaseModel], str]]) -> tuple[dict[Any, Any], dict[str, Any]]:
    ordered = sorted(models, key=lambda m: (m[0].__module__, m[0].__name__, m[1]))
    keys, top = models_json_schema(ordered, ref_template=REF)  # type: ignore[arg-type]
    return keys, top.get("$defs", {})


def _rewrite(schema: Any, names: dict[str, str]) -> Any:
    """Point the hand-written refs (#/components/schemas/<ClassName>) at the generated names."""
    if isinstance(schema, dict):
        return {
            k: (
                REF.format(model=names.get(v.rsplit("/", 1)[-1], v.rsplit("/", 1)[-1]))
                if k == "$ref"
                else _rewrite(v, names)
            )
            for k, v in schema.items()
        }
    if isinstance(schema, list):
        return [_rewrite(v, names) for v in schema]
    return schema


def _hand_refs(schema: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(schema, dict):
        for k, v in schema.items():
            found |= {v.rsplit("/", 1)[-1]} if k == "$ref" else _hand_refs(v)
    elif isinstance(schema, list):
        for v in schema:
            found |= _hand_refs(v)
    return found


def build_openapi() -> dict[str, Any]:
    by_function = {r.function: r for r in routes.ROUTES}
    missing = sorted(set(by_function) - set(OPERATIONS))
    extra = sorted(set(OPERATIONS) - set(by_function))
    if missing or extra:
        raise ValueError(f"OPERATIONS is out of step with ROUTES: missing {missing}, extra {extra}")

    # Every model any operation names, in the mode it is used (requests validate, responses serialise).
    by_name: dict[str, type[BaseModel]] = {}
    wanted: set[tuple[type[BaseModel], str]] = set()
    for op in OPERATIONS.values():
        if op.request is not None:
            wanted.add((op.request, "validation"))
        if isinstance(op.response, type):
            wanted.add((op.response, "serialization"))
        if op.stream is not None:
            wanted.add((op.stream, "serialization"))
        elif op.response is not None:
            for name in _hand_refs(op.response):
                by_name.setdefault(name, _model_named(name))
                wanted.add((by_name[name], "serialization"))
    keys, components = _schemas(wanted)

    def ref_of(model: type[BaseModel], mode: str) -> dict[str, Any]:
        return dict(keys[(model, mode)])

    hand_names = {
        name: ref_of(model, "serialization")["$ref"].rsplit("/", 1)[-1] for name, model in by_name.items()
    }

    paths: dict[str, dict[str, Any]] = {}
    for route in routes.ROUTES:
        op = OPERATIONS[route.function]
        family = route.family  # the handler's, and the gateway's for its own refusals
        operation: dict[str, Any] = {
            "operationId": route.function,
            "summary": op.summary,
            "tags": [tag_of(route.path)],
            "x-error-family": family,
        }
        if route.tool:
            operation["x-citegate-tool"] = route.tool
        parameters = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in path_params(route.path)
        ]
        parameters += [
            {"name": name, "in": "query", "required": False, "schema": schema, "description": text}
            for name, schema, text in op.query
        ]
        if parameters:
            operation["parameters"] = parameters

        if route.auth == "none":
            operation["security"] = []
        else:
            extra_scheme: dict[str, list[str]] = (
                {"sessionToken": []} if route.function == "answer_session_turn" else {}
            )
            security: list[dict[str, list[str]]] = [{s: [], **extra_scheme} for s in CREDENTIAL_SCHEMES]
            if op.anonymous:
                security.append(dict(extra_scheme))  # {} when there is no session token: optional auth
            operation["security"] = security

        if op.request is not None:
            operation["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": ref_of(op.request, "validation")}},
            }
        success: dict[str, Any] = {"description": op.summary}
        if op.response is not None:
            schema = (
                ref_of(op.response, "serialization")
                if isinstance(op.response, type)
                else _rewrite(op.response, hand_names)
            )
            success["content"] = {"application/json": {"schema": schema}}
        if op.exports:
            for media in ("text/csv", "text/markdown"):
                success.setdefault("content", {})[media] = {"schema": {"type": "string"}}
        if op.stream is not None:
            # Before OpenAPI 3.2 (`itemSchema`), a stream's `schema` describes one event: its
            # `data` is the event's JSON (contentSchema), as schemathesis checks it.
            event = ref_of(op.stream, "serialization")
            success.setdefault("content", {})["text/event-stream"] = {
                "schema": {
                    "type": "object",
                    "description": "One server-sent event: `data: <event JSON>`.",
                    "properties": {
                        "data": {
                            "type": "string",
                            "contentMediaType": "application/json",
                            "contentSchema": event,
                        },
                        "event": STR,
                        "id": STR,
                        "retry": INT,
                    },
                    "required": ["data"],
                },
                "x-event-schema": event,
            }
        if op.status == 202:
            success["headers"] = {
                "Location": {"schema": {"type": "string"}, "description": "The task's (or sync run's) URL."}
            }
        responses: dict[str, Any] = {str(op.status): success}

        statuses = {400, 429, 500, 503, *op.errors}
        if op.request is not None:
            statuses.add(413)  # the gateway's payload limit (API Gateway's 10 MB)
        if route.auth != "none":
            statuses |= {401, 403}
        if path_params(route.path):
            statuses.add(404)
        if route.auth == "none" and route.function == "healthz":
            statuses = {503}
        prefix = "OpenAIError" if family == "openai" else "Error"
        for status in sorted(statuses):
            responses[str(status)] = {"$ref": f"#/components/responses/{prefix}{status}"}
        operation["responses"] = responses
        paths.setdefault(route.path, {})[route.method.lower()] = operation

    used_errors = sorted(
        {
            (str(response["$ref"]).rsplit("/", 1)[-1].rstrip("0123456789"), int(code))
            for item in paths.values()
            for op_ in item.values()
            for code, response in op_["responses"].items()
            if code[0] in "45"
        }
    )
    error_schema = {**ERROR_SCHEMA, "x-codes": error_codes()}
    return {
        "openapi": OPENAPI_VERSION,
        "jsonSchemaDialect": "https://spec.openapis.org/oas/3.1/dialect/base",
        "info": {
            "title": "citegate API",
            "version": __version__,
            "description": (
                "Governed, cited knowledge answering for people and AI agents. Generated from "
                "citegate.api.routes and the domains' schemas "
                "by `python -m citegate.api.openapi`; do not edit."
            ),
        },
        "servers": [{"url": "/"}],
        "tags": [{"name": t} for t in sorted({tag_of(r.path) for r in routes.ROUTES})],
        "paths": paths,
        "components": {
            "schemas": {**components, "Error": error_schema, "OpenAIError": OPENAI_ERROR_SCHEMA},
            "responses": {
                f"{name}{status}": {
                    "description": ERROR_DESCRIPTIONS[status],
                    "content": {"application/json": {"schema": {"$ref": REF.format(model=name)}}},
                }
                for name, status in used_errors
            },
            "securitySchemes": SECURITY_SCHEMES,
        },
    }


def _model_named(name: str) -> type[BaseModel]:
    found = globals().get(name)
    if not (isinstance(found, type) and issubclass(found, BaseModel)):
        raise ValueError(f"no model {name!r} imported in citegate.api.openapi")
    return found


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def docs_html(document: dict[str, Any] | None = None) -> str:
    """A self-contained page (no scripts, no CDN) listing every route with its schemas."""
    doc = document or build_openapi()
    esc = html.escape

    def pre(value: Any) -> str:
        text = esc(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False))
        # Link each $ref to its schema below.
        return re.sub(
            r"&quot;#/components/(schemas|responses)/([\w.\-]+)&quot;",
            lambda m: (
                f'&quot;<a href="#{m.group(1)}-{m.group(2)}">#/components/{m.group(1)}/{m.group(2)}</a>&quot;'
            ),
            text,
        )

    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(doc['info']['title'])} {esc(doc['info']['version'])}</title>",
        "<style>body{font-family:system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem}"
        "pre{background:#f5f5f5;padding:.75rem;overflow:auto;font-size:.85rem}"
        "code.m{font-weight:bold;margin-right:.5rem}section{border-top:1px solid #ddd;padding:.5rem 0}"
        "td,th{text-align:left;padding:.1rem .6rem}</style></head><body>",
        f"<h1>{esc(doc['info']['title'])} <small>{esc(doc['info']['version'])}</small></h1>",
        f'<p>{esc(doc["info"].get("description", ""))} <a href="/openapi.json">openapi.json</a></p>',
        "<h2>Routes</h2><table><tr><th>Method</th><th>Path</th><th>Summary</th></tr>",
    ]
    operations = [
        (path, method, op)
        for path, item in sorted(doc["paths"].items())
        for method, op in sorted(item.items())
    ]
    for path, method, op in operations:
        parts.append(
            f'<tr><td><code>{esc(method.upper())}</code></td><td><a href="#op-{esc(op["operationId"])}">'
            f"{esc(path)}</a></td><td>{esc(op.get('summary', ''))}</td></tr>"
        )
    parts.append("</table>")
    for path, method, op in operations:
        parts.append(f'<section id="op-{esc(op["operationId"])}">')
        parts.append(f'<h3><code class="m">{esc(method.upper())}</code>{esc(path)}</h3>')
        parts.append(f"<p>{esc(op.get('summary', ''))} <small>({esc(op['operationId'])})</small></p>")
        security = op.get("security", [])
        names = [" + ".join(req) or "anonymous" for req in security] or ["none"]
        parts.append(f"<p>Auth: {esc(', '.join(names))}</p>")
        if op.get("parameters"):
            parts.append("<h4>Parameters</h4>" + f"<pre>{pre(op['parameters'])}</pre>")
        if "requestBody" in op:
            parts.append("<h4>Request body</h4>" + f"<pre>{pre(op['requestBody']['content'])}</pre>")
        parts.append("<h4>Responses</h4>" + f"<pre>{pre(op['responses'])}</pre>")
        parts.append("</section>")
    parts.append("<h2>Schemas</h2>")
    for kind in ("schemas", "responses", "securitySchemes"):
        for name, schema in sorted(doc["components"].get(kind, {}).items()):
            parts.append(
                f'<section id="{esc(kind)}-{esc(name)}"><h3>{esc(name)}</h3>'
                f"<pre>{pre(schema)}</pre></section>"
            )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Write the OpenAPI 3.1 document of citegate's routes.")
    parser.add_argument(
        "target", nargs="?", type=Path, default=DOCUMENT_PATH, help="default: docs/openapi.json"
    )
    target = parser.parse_args(sys.argv[1:] if argv is None else argv).target
    target.write_text(render(build_openapi()), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
