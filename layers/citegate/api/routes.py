"""Every HTTP route and the function (folder under functions/) that serves it.

The local gateway dispatches by this table and the CDK app creates one API route and one Lambda
function per entry from it, so a route cannot exist in one place and not the other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from citegate.governance.policy.model import WriteAction

Auth = Literal["none", "principal"]
# The route's error family (citegate.platform.errors.Family): spec 004's /v1 codes, spec 000's Answer API
# codes, spec 001's upper-case codes, OpenAI's error objects on the OpenAI-compatible routes.
# Handlers take theirs from here (`family_of_function`).
Family = Literal["v1", "answer", "chat", "openai"]


@dataclass(frozen=True)
class Route:
    """A route and what the shared HTTP layer checks before its handler reads the body
    (citegate.api.admission): the caller, the policy, the tool, the knowledge base in the path
    and the write action. A `scoped` route's body may ask for a narrower scope; the handler passes
    it to `govern`, which checks it (and the write action after it, as spec 000 6.2 orders)."""

    method: str
    path: str  # API Gateway style: /v1/kb/{kb_id}
    function: str  # folder name under functions/
    tool: str | None = None  # the name policies grant (spec 004's tool names for /v1)
    auth: Auth = "principal"
    streaming: bool = False
    anonymous: bool = False  # public-read callers may call it (their policy still decides)
    write: WriteAction | None = None  # the write action the route performs
    scoped: bool = False  # the body carries a requested scope (spec 000 section 4)
    every_caller: bool = False  # no grant needed beyond a policy (who am I, what may I use)
    # Spec 002 carries the caller agent key in the body, where no authorizer sees it.
    body_credential: Literal["caller_agent_key"] | None = None
    # The codes its errors use, the gateway's own refusals (404, 405, 413, 503) included.
    family: Family = "v1"
    # In AWS, the streaming function whose function URLs also serve this route (its handler
    # declares it too), so one base URL serves a protocol's every route: an OpenAI client's
    # `base_url` lists models and streams completions on the same URL (infra/constructs/streaming.py).
    stream_twin: str | None = None

    @property
    def route_key(self) -> str:
        return f"{self.method} {self.path}"

    def pattern(self) -> re.Pattern[str]:
        regex = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", self.path)
        return re.compile(f"^{regex}$")


ROUTES: tuple[Route, ...] = (
    Route("GET", "/healthz", "healthz", auth="none"),
    # Knowledge bases (spec 004; shapes decided in PRODUCT.md).
    Route("POST", "/v1/kb", "kb_create", "rag_create_kb", write="kb_admin"),
    Route("GET", "/v1/kb", "kb_list", "rag_list_kb"),
    Route("GET", "/v1/kb/{kb_id}", "kb_get", "rag_list_kb"),
    Route("PATCH", "/v1/kb/{kb_id}", "kb_update", "rag_update_kb", write="kb_admin"),
    # Documents and ingestion.
    Route("POST", "/v1/kb/{kb_id}/uploads", "upload_create", "rag_ingest", write="ingest"),
    Route("POST", "/v1/kb/{kb_id}/documents", "document_ingest", "rag_ingest", write="ingest"),
    Route("GET", "/v1/kb/{kb_id}/documents", "document_list", "rag_list_documents"),
    Route("GET", "/v1/kb/{kb_id}/documents/{document_id}", "document_get", "rag_list_documents"),
    Route(
        "GET",
        "/v1/kb/{kb_id}/documents/{document_id}/chunks",
        "document_chunks",
        "rag_list_documents",
    ),
    Route(
        "DELETE",
        "/v1/kb/{kb_id}/documents/{document_id}",
        "document_delete",
        "rag_delete_document",
        write="ingest",
    ),
    Route("POST", "/v1/kb/{kb_id}/reindex", "kb_reindex", "rag_reindex", write="ingest"),
    Route("GET", "/v1/tasks/{task_id}", "task_get", "rag_task_status"),
    # Sources a knowledge base follows (docs/sources.md): managing them is the "sources" write
    # action, syncing one is "ingest" under its own tool, so the two are granted apart.
    Route("POST", "/v1/kb/{kb_id}/sources", "source_create", "rag_manage_sources", write="sources"),
    Route("GET", "/v1/kb/{kb_id}/sources", "source_list", "rag_list_sources"),
    Route("GET", "/v1/kb/{kb_id}/sources/{source_id}", "source_get", "rag_list_sources"),
    Route(
        "PATCH", "/v1/kb/{kb_id}/sources/{source_id}", "source_update", "rag_manage_sources", write="sources"
    ),
    Route(
        "DELETE", "/v1/kb/{kb_id}/sources/{source_id}", "source_delete", "rag_manage_sources", write="sources"
    ),
    Route(
        "POST", "/v1/kb/{kb_id}/sources/{source_id}/sync", "source_sync", "rag_sync_source", write="ingest"
    ),
    Route("GET", "/v1/kb/{kb_id}/sources/{source_id}/runs", "source_runs", "rag_list_sources"),
    Route("GET", "/v1/kb/{kb_id}/sources/{source_id}/runs/{run_id}", "source_run_get", "rag_list_sources"),
    # Who the caller is and what its policy grants (MCP lists only the tools a caller may use).
    Route("GET", "/v1/me", "me", "me", every_caller=True),
    # Retrieval and evidence-bound answers.
    Route("POST", "/v1/kb/{kb_id}/retrieve", "kb_retrieve", "rag_retrieve"),
    Route("POST", "/v1/kb/{kb_id}/ask", "kb_ask", "rag_ask"),
    Route("POST", "/v1/kb/{kb_id}/resolve_refs", "kb_resolve_refs", "rag_resolve_refs"),
    # OpenAI's Chat Completions protocol (citegate.api.openai_compat): the knowledge bases the `ask`
    # tool grants, as models, and cited answers to a conversation's last question.
    Route(
        "GET", "/v1/models", "openai_models", "ask", family="openai", stream_twin="openai_chat_completions"
    ),
    Route("POST", "/v1/chat/completions", "openai_chat_completions", "ask", streaming=True, family="openai"),
    # Spec 002's governed knowledge entry for business agents (caller agent key).
    Route(
        "POST",
        "/api/v1/knowledge/query",
        "knowledge_query",
        "ka_retrieve",
        body_credential="caller_agent_key",
    ),
    # Spec 000: the Answer API for people and Agent Access tools for agents.
    Route("POST", "/answer/ask", "answer_ask", "answer_ask", anonymous=True, scoped=True, family="answer"),
    Route(
        "POST",
        "/answer/sessions",
        "answer_session_create",
        "answer_sessions",
        anonymous=True,
        scoped=True,
        family="answer",
    ),
    Route(
        "POST",
        "/answer/sessions/{sessionId}/turns",
        "answer_session_turn",
        "answer_turns",
        anonymous=True,
        scoped=True,
        family="answer",
    ),
    Route("POST", "/agent/tools/search", "agent_search", "search", scoped=True, family="answer"),
    Route("POST", "/agent/tools/ask", "agent_ask", "ask", scoped=True, family="answer"),
    Route("POST", "/agent/tools/get_page", "agent_get_page", "get_page", scoped=True, family="answer"),
    Route(
        "POST", "/agent/tools/get_context", "agent_get_context", "get_context", scoped=True, family="answer"
    ),
    Route(
        "POST",
        "/agent/tools/create_feedback",
        "agent_create_feedback",
        "create_feedback",
        anonymous=True,
        write="feedback",
        scoped=True,
        family="answer",
    ),
    Route(
        "POST",
        "/agent/tools/create_improvement_task",
        "agent_create_improvement_task",
        "create_improvement_task",
        write="improvement_task",
        scoped=True,
        family="answer",
    ),
    # What the documentation is missing (citegate.insights): gap groups, the answer summary,
    # a group's "fixed" mark (re-asks its questions) and its improvement task (deduplicated).
    Route("GET", "/v1/insights/gaps", "insights_gaps", "insights"),
    Route("GET", "/v1/insights/summary", "insights_summary", "insights"),
    Route("POST", "/v1/insights/gaps/{group_id}/fix", "insights_gap_fix", "insights", write="insights"),
    Route(
        "POST",
        "/v1/insights/gaps/{group_id}/improvement_task",
        "insights_gap_task",
        "insights",
        write="improvement_task",
    ),
    Route("GET", "/admin/feedback", "admin_feedback_list", "admin"),
    Route("POST", "/admin/feedback/{record_id}/close", "admin_feedback_close", "admin", write="admin"),
    # Spec 003: the dual-agent query, streamed as server-sent events.
    Route(
        "POST",
        "/api/v2/query",
        "query_v2",
        "query_v2",
        streaming=True,
        anonymous=True,
        scoped=True,
        family="chat",
    ),
    # Spec 001: agent chats with model switching (owner-only), and the models a caller may pick.
    Route("POST", "/api/v1/agent/chats", "agent_chat_create", "chat", family="chat"),
    Route("GET", "/api/v1/agent/chats", "agent_chat_list", "chat", family="chat"),
    Route("GET", "/api/v1/agent/chats/{chat_id}", "agent_chat_get", "chat", family="chat"),
    Route("PATCH", "/api/v1/agent/chats/{chat_id}", "agent_chat_update", "chat", family="chat"),
    Route("DELETE", "/api/v1/agent/chats/{chat_id}", "agent_chat_delete", "chat", family="chat"),
    Route(
        "POST",
        "/api/v1/agent/chats/{chat_id}/messages",
        "agent_chat_message",
        "chat",
        streaming=True,
        family="chat",
    ),
    Route("GET", "/api/v1/agent/models", "agent_models_list", "chat", family="chat"),
    # MCP over streamable HTTP (stateless, JSON responses); each tool call is authorized and
    # audited by the route behind the tool, under the caller's own policy.
    Route("POST", "/mcp", "mcp"),
    # Spec 001: web search and reading (JINA-compatible shapes, section 3.2).
    Route("POST", "/api/v1/web/search", "web_search", "web_search", family="chat"),
    Route("POST", "/api/v1/web/read", "web_read", "web_read", family="chat"),
    # Administration: policies, agent credentials, the audit log.
    Route("GET", "/admin/policies", "admin_policies_list", "admin"),
    Route("GET", "/admin/policies/{principal_key}", "admin_policy_get", "admin"),
    Route("PUT", "/admin/policies/{principal_key}", "admin_policy_put", "admin", write="admin"),
    Route("POST", "/admin/agents/{agent_id}/credentials", "admin_credential_create", "admin", write="admin"),
    Route("GET", "/admin/agents/{agent_id}/credentials", "admin_credential_list", "admin"),
    Route(
        "DELETE",
        "/admin/agents/{agent_id}/credentials/{credential_id}",
        "admin_credential_revoke",
        "admin",
        write="admin",
    ),
    Route("GET", "/admin/audit", "admin_audit_list", "admin"),
)

# Functions that are not behind a route: the authorizer, the queue consumer, the ingestion steps.
AUTHORIZER_FUNCTION = "authorizer"
INGEST_CONSUMER_FUNCTION = "ingest_consumer"


_BY_KEY = {route.route_key: route for route in ROUTES}


def by_key(route_key: str) -> Route | None:
    """The route of an API Gateway event's `routeKey` ("POST /v1/kb")."""
    return _BY_KEY.get(route_key)


def match(method: str, path: str) -> tuple[Route, dict[str, str]] | None:
    for route in ROUTES:
        if route.method == method:
            found = route.pattern().match(path)
            if found:
                return route, found.groupdict()
    return None


def path_exists(path: str) -> bool:
    return any(route.pattern().match(path) for route in ROUTES)


def stream_routes(function: str) -> list[Route]:
    """The routes a streaming function's twin serves on its function URLs: its own, and those
    that name it as their `stream_twin`."""
    return [route for route in ROUTES if function in (route.function, route.stream_twin)]


def family_of_function(function: str) -> Family:
    """The error family of a function's routes (a handler's `make_resolver`/`http_handler` family)."""
    families = {route.family for route in ROUTES if route.function == function}
    if len(families) != 1:
        raise ValueError(f"{function!r} has no route, or routes of different families: {families}")
    return families.pop()


def _segments(path: str) -> list[str]:
    return [part for part in path.split("/") if part]


def family_of_path(path: str) -> Family:
    """The family of the routes a path belongs to, matched or not: the family shared by the routes
    whose paths agree longest with it, segment by segment ({param} matches any segment). So the
    gateway answers /api/v1/agent/nothing (404) or a PUT to /api/v1/web/read (405) in spec 001's
    codes; a path that shares no prefix with any route, or whose closest routes disagree, is "v1"."""
    parts = _segments(path)
    best, families = 0, set()
    for route in ROUTES:
        shared = 0
        for mine, theirs in zip(parts, _segments(route.path), strict=False):
            if mine != theirs and not theirs.startswith("{"):
                break
            shared += 1
        if shared > best:
            best, families = shared, {route.family}
        elif shared == best and shared:
            families.add(route.family)
    return families.pop() if best and len(families) == 1 else "v1"
