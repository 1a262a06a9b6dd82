"""citegate as an MCP server: a thin adapter over the HTTP API, on the official MCP Python SDK.

Every tool call becomes the matching HTTP request (routes.py names the route and its policy tool)
to a configured base URL with the caller's credentials, so principals, policy and audit are exactly
the HTTP ones; nothing is decided here that the server would not decide the same way. Tool input
schemas are the route's own pydantic request models (plus path parameters), so MCP and HTTP accept
the same arguments. Results carry the HTTP JSON as structured content and a short text rendering
with numbered citations; an HTTP error becomes a tool error carrying the HTTP error body.

Transports: stdio (`citegate mcp --stdio`, identity from configuration) and stateless streamable
HTTP (`create_streamable_http_app()`, identity from each request's own Authorization header).
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from starlette.applications import Starlette

from citegate import routes
from citegate.client import DEFAULT_URL, Credentials, describe_error, encode, parse_body
from citegate.models.answer import AskBody, GetContextBody, GetPageBody, SearchBody
from citegate.models.documents import DocumentMetadata, IngestRequest
from citegate.models.feedback import FeedbackBody, ImprovementTaskBody
from citegate.models.kb import KB_ID_PATTERN, CreateKbRequest
from citegate.models.retrieval import AskRequest, ResolveRefsRequest, RetrieveRequest

SERVER_NAME = "citegate"
# The route that tells a caller which tools its policy grants; listing falls back to every tool
# while the server does not have it (404).
ME_PATH = "/v1/me"
ME_CACHE_SECONDS = 60.0


class _NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _LocalFileArgs(BaseModel):
    """Ingest a file from the machine the MCP server runs on."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    kb_id: str = Field(pattern=KB_ID_PATTERN, description="The knowledge base to ingest into.")
    path: str = Field(
        min_length=1, max_length=4096, description="Path of a Markdown, text, HTML or PDF file."
    )
    source_name: str | None = Field(None, min_length=1, max_length=512, description="Default: the file name.")
    title: str | None = Field(None, max_length=500)
    mime_type: str | None = Field(None, max_length=200)
    metadata: DocumentMetadata = Field(default_factory=DocumentMetadata)


_PATH_FIELDS: dict[str, tuple[Any, Any]] = {
    "kb_id": (str, Field(pattern=KB_ID_PATTERN, description="The knowledge base id.")),
    "task_id": (str, Field(min_length=1, max_length=200, description="A task id from an ingest or reindex.")),
    "document_id": (
        str,
        Field(min_length=1, max_length=300, description="A document id (rag_list_documents)."),
    ),
}


def _with_path(base: type[BaseModel], name: str, params: tuple[str, ...], doc: str) -> type[BaseModel]:
    """The route's request model plus its path parameters: validators and extra=forbid are kept."""
    if not params and base is not _NoArgs:
        return base
    fields: dict[str, Any] = {p: _PATH_FIELDS[p] for p in params}
    model: type[BaseModel] = create_model(name, __base__=base, __doc__=doc, **fields)
    return model


@dataclass(frozen=True)
class ToolSpec:
    name: str
    method: str
    path: str  # routes.py template, e.g. /v1/kb/{kb_id}/ask
    model: type[BaseModel]
    description: str
    path_params: tuple[str, ...] = ()
    has_body: bool = True

    def input_schema(self) -> dict[str, Any]:
        schema = self.model.model_json_schema()
        schema.pop("title", None)
        return schema


def _spec(
    name: str, method: str, path: str, base: type[BaseModel], description: str, *, body: bool = True
) -> ToolSpec:
    route = next((r for r in routes.ROUTES if r.method == method and r.path == path), None)
    # The policy tool is the route's: a drift between the two would grant one and check another.
    if route is None or route.tool != name:
        raise RuntimeError(f"MCP tool {name} does not match a route {method} {path} in routes.py")
    params = tuple(p for p in ("kb_id", "task_id", "document_id") if "{" + p + "}" in path)
    model = _with_path(base, f"{name}_arguments", params, description)
    return ToolSpec(name, method, path, model, description, params, body)


TOOLS: tuple[ToolSpec, ...] = (
    # Spec 000: governed tools over everything the caller may read (AnswerResult citations).
    _spec(
        "search",
        "POST",
        "/agent/tools/search",
        SearchBody,
        "Search the knowledge the caller may read; passages with citations (path, title, url, anchor).",
    ),
    _spec(
        "ask",
        "POST",
        "/agent/tools/ask",
        AskBody,
        "Ask a question; an answer grounded in cited passages, or noAnswerReason when there is none.",
    ),
    _spec(
        "get_page",
        "POST",
        "/agent/tools/get_page",
        GetPageBody,
        "Read a whole page by its path (and version), as sections with headings and anchors.",
    ),
    _spec(
        "get_context",
        "POST",
        "/agent/tools/get_context",
        GetContextBody,
        "A context pack for a task: the most relevant cited passages that fit a token budget.",
    ),
    _spec(
        "create_feedback",
        "POST",
        "/agent/tools/create_feedback",
        FeedbackBody,
        "Report a problem with an answer (e.g. no answer found) for maintainers; deduplicated.",
    ),
    _spec(
        "create_improvement_task",
        "POST",
        "/agent/tools/create_improvement_task",
        ImprovementTaskBody,
        "Ask maintainers to fill a knowledge gap; deduplicated by content.",
    ),
    # Spec 004: knowledge-base operations.
    _spec(
        "rag_list_kb",
        "GET",
        "/v1/kb",
        _NoArgs,
        "List the knowledge bases of the caller's tenant.",
        body=False,
    ),
    _spec(
        "rag_create_kb",
        "POST",
        "/v1/kb",
        CreateKbRequest,
        "Create a knowledge base (kb_id optional: derived from the name).",
    ),
    _spec(
        "rag_list_documents",
        "GET",
        "/v1/kb/{kb_id}/documents",
        _NoArgs,
        "List a knowledge base's documents with their status and chunk counts.",
        body=False,
    ),
    _spec(
        "rag_ingest",
        "POST",
        "/v1/kb/{kb_id}/documents",
        IngestRequest,
        "Ingest one document (text, base64_file, s3_key or file_path); returns a task_id to poll "
        "with rag_task_status. The same source_name replaces the earlier document.",
    ),
    _spec(
        "rag_reindex",
        "POST",
        "/v1/kb/{kb_id}/reindex",
        _NoArgs,
        "Rebuild a knowledge base's index from its stored documents; returns a task_id.",
    ),
    _spec(
        "rag_delete_document",
        "DELETE",
        "/v1/kb/{kb_id}/documents/{document_id}",
        _NoArgs,
        "Delete a document and every chunk, parent and file of it.",
        body=False,
    ),
    _spec(
        "rag_retrieve",
        "POST",
        "/v1/kb/{kb_id}/retrieve",
        RetrieveRequest,
        "Hybrid (BM25 + dense) retrieval: ranked chunks with ref_ids (resolve with rag_resolve_refs).",
    ),
    _spec(
        "rag_ask",
        "POST",
        "/v1/kb/{kb_id}/ask",
        AskRequest,
        "Ask one knowledge base; an answer whose [n] markers match the returned citations, or "
        "no_answer with a reason.",
    ),
    _spec(
        "rag_task_status",
        "GET",
        "/v1/tasks/{task_id}",
        _NoArgs,
        "An ingestion or reindex task: queued, running, succeeded or failed, with counts.",
        body=False,
    ),
    _spec(
        "rag_resolve_refs",
        "POST",
        "/v1/kb/{kb_id}/resolve_refs",
        ResolveRefsRequest,
        "Resolve ref_ids to citations (source, heading, page, snippet, url).",
    ),
)
LOCAL_FILE_TOOL = ToolSpec(
    "rag_ingest_local_file",
    "POST",
    "/v1/kb/{kb_id}/documents",
    _LocalFileArgs,
    "Ingest a local file (Markdown, text, HTML, PDF). Over stdio the file is read where the MCP server "
    "runs and uploaded; over HTTP the path is passed to the server as file_path (local runtime only, "
    "confined to its ingest folder). Returns a task_id.",
    ("kb_id",),
)
ALL_TOOLS: dict[str, ToolSpec] = {t.name: t for t in (*TOOLS, LOCAL_FILE_TOOL)}
# The local-file tool is granted by the same policy tool as rag_ingest (same route).
POLICY_TOOL = {**{t.name: t.name for t in TOOLS}, LOCAL_FILE_TOOL.name: "rag_ingest"}


@dataclass
class AdapterConfig:
    url: str = DEFAULT_URL
    credentials: Credentials | None = None  # None: take the caller's Authorization header (HTTP)
    read_local_files: bool = True  # stdio: read files here; HTTP: pass file_path to the server
    timeout: float = 120.0
    _me_cache: dict[str, tuple[float, frozenset[str] | None]] = field(default_factory=dict)

    @classmethod
    def from_env(
        cls, *, sigv4: bool = False, url: str | None = None, token: str | None = None
    ) -> AdapterConfig:
        token = token or os.environ.get("CITEGATE_TOKEN") or os.environ.get("RAG_API_TOKEN")
        return cls(
            url=(url or os.environ.get("CITEGATE_URL") or DEFAULT_URL).rstrip("/"),
            credentials=Credentials(token=None if sigv4 else token, sigv4=sigv4),
        )


def _caller_headers(
    config: AdapterConfig, ctx: ServerRequestContext[Any, Any] | None
) -> Callable[[str, str, bytes], dict[str, str]]:
    """How to authenticate the backend request: configured credentials, or the MCP caller's own."""
    if config.credentials is not None:
        return config.credentials.headers
    authorization = None
    request = getattr(ctx, "request", None) if ctx is not None else None
    if request is not None and hasattr(request, "headers"):
        authorization = request.headers.get("authorization")

    def forward(_method: str, _url: str, _body: bytes) -> dict[str, str]:
        # Forwarded untouched: no header means the anonymous principal, exactly as over HTTP.
        return {"Authorization": authorization} if authorization else {}

    return forward


async def _http(
    config: AdapterConfig,
    sign: Callable[[str, str, bytes], dict[str, str]],
    method: str,
    path: str,
    body: dict[str, Any] | None,
) -> tuple[int, dict[str, Any]]:
    url = f"{config.url}{path}"
    content = encode(body)
    headers = {"Content-Type": "application/json", **sign(method, url, content)}
    async with httpx.AsyncClient(timeout=config.timeout) as http:
        response = await http.request(method, url, content=content, headers=headers)
    return response.status_code, parse_body(response)


async def allowed_tools(
    config: AdapterConfig, ctx: ServerRequestContext[Any, Any] | None
) -> frozenset[str] | None:
    """The tools the caller's policy grants, from GET /v1/me; None when unknown (list everything)."""
    sign = _caller_headers(config, ctx)
    cache_key = json.dumps(sign("GET", f"{config.url}{ME_PATH}", b"").get("Authorization", "")[:200])
    if config.credentials is not None and config.credentials.sigv4:
        cache_key = "sigv4"  # a signature changes per request; the identity does not
    cached = config._me_cache.get(cache_key)
    if cached and time.monotonic() - cached[0] < ME_CACHE_SECONDS:
        return cached[1]
    try:
        status, body = await _http(config, sign, "GET", ME_PATH, None)
    except (httpx.HTTPError, Exception):  # listing must not fail because a probe did
        return None
    granted: frozenset[str] | None = None
    if status == 200 and isinstance(body.get("tools"), list):
        granted = frozenset(str(t) for t in body["tools"])
    config._me_cache[cache_key] = (time.monotonic(), granted)
    return granted


def visible(spec: ToolSpec, granted: frozenset[str] | None) -> bool:
    return granted is None or "*" in granted or POLICY_TOOL[spec.name] in granted


def mcp_tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(name=spec.name, description=spec.description, input_schema=spec.input_schema())


# --- rendering -------------------------------------------------------------------------------------


def _where(citation: dict[str, Any]) -> str:
    where = str(citation.get("source_name") or citation.get("title") or citation.get("path") or "?")
    if citation.get("path") and citation.get("path") != where:
        where += f" ({citation['path']})"
    if citation.get("heading"):
        where += f" › {citation['heading']}"
    page = citation.get("page_hint") or citation.get("page")
    if page:
        where += f", page {page}"
    if citation.get("url"):
        where += f" <{citation['url']}>"
    return where


def render_citations(citations: list[dict[str, Any]]) -> list[str]:
    lines = []
    for number, citation in enumerate(citations, start=1):
        snippet = " ".join(str(citation.get("snippet") or "").split())[:200]
        lines.append(f"[{number}] {_where(citation)}" + (f": “{snippet}”" if snippet else ""))
    return lines


def render_text(tool: str, body: dict[str, Any]) -> str:
    """A short human/LLM-readable rendering; the full JSON is in structuredContent."""
    if "answer" in body and isinstance(body.get("citations"), list):
        no_answer = body.get("no_answer") or body.get("noAnswerReason")
        head = str(body["answer"])
        if no_answer:
            reason = body.get("no_answer_reason") or (body.get("noAnswerReason") or {}).get("message", "")
            head = f"(no answer) {head}" + (f"\nreason: {reason}" if reason else "")
        return "\n".join([head, *render_citations(body["citations"])])
    results = body.get("results")
    if isinstance(results, list):
        lines = [f"{len(results)} result(s)"]
        for rank, hit in enumerate(results, start=1):
            text = " ".join(str(hit.get("chunk_text") or hit.get("text") or "").split())[:200]
            ref = hit.get("ref_id") or hit.get("chunkId") or ""
            where = f" {_where(hit['citation'])}" if isinstance(hit.get("citation"), dict) else ""
            lines.append(f"[{rank}] {ref} score={hit.get('score')}{where}: {text}")
        return "\n".join(lines)
    if isinstance(body.get("citations"), list):
        return "\n".join(render_citations(body["citations"]) or ["no citations"])
    if tool == "rag_task_status" or "task_id" in body:
        counts = body.get("counts") or {}
        extra = f" parents={counts.get('parents')} children={counts.get('children')}" if counts else ""
        error = f" error={body['error']}" if body.get("error") else ""
        return f"task {body.get('task_id')}: {body.get('status')}{extra}{error}"
    text = json.dumps(body, ensure_ascii=False)
    return text if len(text) <= 2000 else text[:2000] + "…"


def tool_error(body: dict[str, Any], text: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=body, is_error=True
    )


# --- calling ---------------------------------------------------------------------------------------


def _request_for(
    spec: ToolSpec, arguments: dict[str, Any], config: AdapterConfig
) -> tuple[str, dict[str, Any] | None]:
    """The HTTP path and JSON body of a validated call. The body is the caller's own arguments (minus
    path parameters), so the server applies its defaults and validation exactly as over HTTP."""
    path = spec.path
    for param in spec.path_params:
        path = path.replace("{" + param + "}", str(arguments[param]))
    if spec is LOCAL_FILE_TOOL:
        body: dict[str, Any] = {k: v for k, v in arguments.items() if k not in ("kb_id", "path")}
        if config.read_local_files:
            file = Path(arguments["path"]).expanduser()
            body["base64_file"] = base64.b64encode(file.read_bytes()).decode()
            body.setdefault("source_name", file.name)
        else:
            body["file_path"] = arguments["path"]
        return path, body
    if not spec.has_body:
        return path, None
    return path, {k: v for k, v in arguments.items() if k not in spec.path_params}


async def call_tool(
    config: AdapterConfig, ctx: ServerRequestContext[Any, Any] | None, name: str, arguments: dict[str, Any]
) -> types.CallToolResult:
    spec = ALL_TOOLS.get(name)
    if spec is None:
        return tool_error({"error": "unknown_tool", "message": f"no tool {name!r}"}, f"unknown tool {name!r}")
    try:
        spec.model.model_validate(arguments)
    except ValidationError as error:
        fields = [
            {"field": ".".join(str(p) for p in e["loc"]) or "(arguments)", "message": e["msg"]}
            for e in error.errors(include_url=False)
        ]
        body = {
            "error": "invalid_request",
            "message": "the arguments do not match the tool's schema",
            "details": {"fields": fields},
        }
        summary = "; ".join(f"{f['field']}: {f['message']}" for f in fields)
        return tool_error(body, f"invalid arguments for {name}: {summary}")
    try:
        path, payload = _request_for(spec, arguments, config)
    except OSError as error:
        return tool_error(
            {"error": "local_file_unreadable", "message": str(error)}, f"cannot read file: {error}"
        )
    try:
        status, body = await _http(config, _caller_headers(config, ctx), spec.method, path, payload)
    except httpx.HTTPError as error:
        message = f"{config.url} is unreachable: {error}"
        return tool_error(
            {"error": "server_unavailable", "message": message}, f"citegate is unavailable: {message}"
        )
    except Exception as error:  # e.g. no AWS credentials for SigV4: a tool error, never a crash
        message = f"{type(error).__name__}: {error}"
        return tool_error({"error": "client_error", "message": message}, message)
    if status >= 400:
        return tool_error({**body, "http_status": status}, describe_error(status, body))
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=render_text(name, body))], structured_content=body
    )


def build_server(config: AdapterConfig) -> Server[Any]:
    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        granted = await allowed_tools(config, ctx)
        return types.ListToolsResult(tools=[mcp_tool(t) for t in ALL_TOOLS.values() if visible(t, granted)])

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await call_tool(config, ctx, params.name, dict(params.arguments or {}))

    return Server(
        SERVER_NAME,
        version="1",
        instructions="Cited answers from citegate knowledge bases. Cite with the numbered citations.",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


async def run_stdio(config: AdapterConfig) -> None:
    from mcp.server.stdio import stdio_server

    server = build_server(config)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_stdio(config: AdapterConfig) -> int:
    anyio.run(run_stdio, config)
    return 0


def create_streamable_http_app(
    config: AdapterConfig | None = None, *, path: str = "/mcp", allowed_hosts: list[str] | None = None
) -> Starlette:
    """Stateless streamable HTTP with JSON responses (one request, one answer: fits Lambda and the
    local gateway). Each request authenticates with its own Authorization header, never a shared one."""
    from mcp.server.transport_security import TransportSecuritySettings

    if config is None:
        config = AdapterConfig(url=(os.environ.get("CITEGATE_URL") or DEFAULT_URL).rstrip("/"))
        config.read_local_files = False
    if allowed_hosts is None and os.environ.get("CITEGATE_MCP_ALLOWED_HOSTS"):
        allowed_hosts = [h.strip() for h in os.environ["CITEGATE_MCP_ALLOWED_HOSTS"].split(",") if h.strip()]
    security = None  # the SDK's default: DNS-rebinding protection admitting localhost only
    if allowed_hosts == ["*"]:
        # Behind API Gateway the Host is the API's domain; the bearer token is the protection there.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    elif allowed_hosts is not None:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=allowed_hosts
        )
    server = build_server(config)
    return server.streamable_http_app(
        streamable_http_path=path,
        stateless_http=True,
        json_response=True,
        transport_security=security,
    )


def lambda_handler(event: dict[str, Any], _context: Any = None) -> dict[str, Any]:
    """API Gateway (HTTP API, payload 2.0) -> the stateless streamable HTTP app, one request per call.

    A fresh app per invocation: the SDK's session manager runs once per instance, and stateless JSON
    responses keep nothing between requests anyway. No mangum dependency needed for this one route."""
    return anyio.run(_lambda_call, event)


async def _lambda_call(event: dict[str, Any]) -> dict[str, Any]:
    context = event.get("requestContext") or {}
    http = context.get("http") or {}
    body = event.get("body") or ""
    raw = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode()
    headers = [(k.lower().encode(), str(v).encode()) for k, v in (event.get("headers") or {}).items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": http.get("method", "POST"),
        "scheme": "https",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": (event.get("rawQueryString") or "").encode(),
        "headers": headers,
        "server": ("lambda", 443),
        "client": (http.get("sourceIp") or "0.0.0.0", 0),
        "root_path": "",
    }
    status, out_headers, chunks = 500, [], []
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await anyio.sleep_forever()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status, out_headers
        if message["type"] == "http.response.start":
            status, out_headers = message["status"], message.get("headers", [])
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    app = create_streamable_http_app(allowed_hosts=["*"])
    async with app.router.lifespan_context(app):
        await app(scope, receive, send)
    return {
        "statusCode": status,
        "headers": {k.decode(): v.decode() for k, v in out_headers},
        "body": b"".join(chunks).decode(),
    }
