"""citegate as an MCP server: a thin adapter over the HTTP routes, on the official MCP Python SDK.

Every tool is one route of routes.py (its policy tool is the route's), and a tool call is that
route's request made with the caller's own identity, so principals, policy and audit are exactly
the HTTP ones: nothing is decided here that the route would not decide the same way. Tool input
schemas are the route's own pydantic request models (plus path parameters), so MCP and HTTP accept
the same arguments. Results carry the route's JSON as structured content and a short text rendering
with numbered citations; an error answer becomes a tool error carrying the route's error body.

How a call reaches its route (a `Backend`):
- `HttpBackend`: an HTTP request to a citegate URL with configured credentials (stdio: token or
  SigV4) or the MCP caller's own Authorization header (`create_streamable_http_app`).
- `InvokeBackend`: inside the `POST /mcp` route (functions/mcp), the route's function is invoked
  with a payload-2.0 event that carries the front door's verdict on this caller
  (`requestContext.authorizer`: the Lambda authorizer's context or the verified SigV4 identity)
  unchanged, as API Gateway would hand it over. That works for SigV4 callers too, whose signature
  covers `/mcp` and could not be forwarded to another path.

Listing: `GET /v1/me` (through the same backend) says what the caller's policy grants (tools, write
actions, the web); only the tools the caller can actually call are listed (the tool granted, the
route's write action granted, the web allowed for the web tools), and a call to another one is
refused by its route (forbidden_tool, forbidden).
"""

from __future__ import annotations

import base64
import json
import os
import time
import uuid
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio
import httpx
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from starlette.applications import Starlette

from citegate.answers.schemas.answer import AskBody, GetContextBody, GetPageBody, SearchBody
from citegate.answers.schemas.feedback import FeedbackBody, ImprovementTaskBody
from citegate.api import routes
from citegate.clients.http_client import (
    DEFAULT_URL,
    Credentials,
    base_url,
    credentials_for,
    describe_error,
    encode,
    parse_body,
)
from citegate.knowledge.schemas.documents import DocumentMetadata, IngestRequest
from citegate.knowledge.schemas.kb import KB_ID_PATTERN, CreateKbRequest
from citegate.knowledge.schemas.retrieval import AskRequest, ResolveRefsRequest, RetrieveRequest
from citegate.web.schemas import WebReadRequest, WebSearchRequest

SERVER_NAME = "citegate"
# The route that tells a caller which tools its policy grants.
ME_PATH = "/v1/me"
ME_CACHE_SECONDS = 60.0
ME_CACHE_ENTRIES = 1024  # callers whose grants are remembered
MCP_PATH = "/mcp"


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
# Spec 001's web tools (their routes answer in the spec's "chat" error family).
WEB_TOOLS: tuple[ToolSpec, ...] = (
    _spec(
        "web_search",
        "POST",
        "/api/v1/web/search",
        WebSearchRequest,
        "Search the web through the configured provider: ranked results with title, url and snippet. "
        "Counted against the caller's web quota; the policy's web grant applies.",
    ),
    _spec(
        "web_read",
        "POST",
        "/api/v1/web/read",
        WebReadRequest,
        "Read one web page or a list of them as Markdown (address-checked, size-capped, cached), with "
        "optional css_selector / exclude_selector.",
    ),
)
ALL_TOOLS: dict[str, ToolSpec] = {t.name: t for t in (*TOOLS, *WEB_TOOLS, LOCAL_FILE_TOOL)}
# The local-file tool is granted by the same policy tool as rag_ingest (same route).
POLICY_TOOL = {**{t.name: t.name for t in (*TOOLS, *WEB_TOOLS)}, LOCAL_FILE_TOOL.name: "rag_ingest"}
# The functions behind the tools (and /v1/me): what the /mcp function may invoke
# (infra's FUNCTION_SPECS["mcp"].invokes must list exactly these; a test checks it).
TOOL_FUNCTIONS: frozenset[str] = frozenset(
    route.function
    for route in routes.ROUTES
    for spec in (*ALL_TOOLS.values(), ToolSpec("me", "GET", ME_PATH, _NoArgs, "", has_body=False))
    if route.method == spec.method and route.path == spec.path
)


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
        """The CLI's connection (citegate.clients.http_client: docs/cli.md's table of credentials)."""
        return cls(url=base_url(url), credentials=credentials_for(token, sigv4=sigv4))


# --- backends: how a tool call reaches its route ----------------------------------------------------


class BackendUnavailable(Exception):
    """The route could not be reached or its function failed without answering."""


class Backend(Protocol):
    @property
    def read_local_files(self) -> bool:
        """Whether rag_ingest_local_file reads the file here (stdio) or passes its path on."""
        ...

    async def request(
        self, method: str, path: str, body: dict[str, Any] | None
    ) -> tuple[int, dict[str, Any]]:
        """The route's status and JSON body; raises BackendUnavailable when there is no answer."""
        ...

    def listing_cache(self) -> tuple[dict[str, tuple[float, frozenset[str] | None]], str] | None:
        """Where to cache this caller's granted tools, and under which key (None: do not cache)."""
        ...


Signer = Callable[[str, str, bytes], dict[str, str]]


@dataclass
class HttpBackend:
    config: AdapterConfig
    sign: Signer

    @property
    def read_local_files(self) -> bool:
        return self.config.read_local_files

    async def request(
        self, method: str, path: str, body: dict[str, Any] | None
    ) -> tuple[int, dict[str, Any]]:
        url = f"{self.config.url}{path}"
        content = encode(body)
        try:
            headers = {"Content-Type": "application/json", **self.sign(method, url, content)}
            async with httpx.AsyncClient(timeout=self.config.timeout) as http:
                response = await http.request(method, url, content=content, headers=headers)
        except httpx.HTTPError as error:
            raise BackendUnavailable(f"{self.config.url} is unreachable: {error}") from error
        return response.status_code, parse_body(response)

    def listing_cache(self) -> tuple[dict[str, tuple[float, frozenset[str] | None]], str] | None:
        if self.config.credentials is not None and self.config.credentials.sigv4:
            key = "sigv4"  # a signature changes per request; the identity does not
        else:
            key = json.dumps(
                self.sign("GET", f"{self.config.url}{ME_PATH}", b"").get("Authorization", "")[:200]
            )
        return self.config._me_cache, key


def _caller_headers(config: AdapterConfig, ctx: ServerRequestContext[Any, Any] | None) -> Signer:
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


# (function folder, payload-2.0 event) -> what the function returned (a payload-2.0 response).
Invoker = Callable[[str, dict[str, Any]], Any]
# Headers a tool's function may read about the request (never the credentials: the front door's
# verdict travels in requestContext.authorizer).
FORWARDED_HEADERS = frozenset(
    {
        "user-agent",
        "x-forwarded-for",
        "x-forwarded-proto",
        "x-forwarded-port",
        "x-request-id",
        "accept-language",
    }
)


def route_event(
    source: Mapping[str, Any], route: routes.Route, path: str, params: Mapping[str, str], body: bytes
) -> dict[str, Any]:
    """The payload-2.0 event API Gateway would send `route`'s function for this call, made from the
    /mcp request's own event: same caller (authorizer), source IP, stage and API."""
    context = dict(source.get("requestContext") or {})
    http = dict(context.get("http") or {})
    headers = {
        k.lower(): str(v) for k, v in (source.get("headers") or {}).items() if k.lower() in FORWARDED_HEADERS
    }
    headers["content-type"] = "application/json"
    request_id = f"{context.get('requestId') or 'mcp'}-{uuid.uuid4().hex[:12]}"
    http.update(method=route.method, path=path)
    context.update(http=http, requestId=request_id, routeKey=route.route_key)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route.route_key,
        "rawPath": path,
        "rawQueryString": "",
        "headers": headers,
        "requestContext": context,
        "isBase64Encoded": False,
    }
    if params:
        event["pathParameters"] = dict(params)
    if body:
        event["body"] = body.decode()
    return event


def response_of(result: Any) -> tuple[int, dict[str, Any]]:
    """A function's payload-2.0 answer as (status, JSON body)."""
    if not isinstance(result, dict) or "statusCode" not in result:
        # A payload-2.0 integration may return a bare JSON value: API Gateway answers it as 200.
        return 200, result if isinstance(result, dict) else {"value": result}
    raw = result.get("body") or ""
    text = base64.b64decode(raw).decode() if result.get("isBase64Encoded") else str(raw)
    try:
        body = json.loads(text) if text else {}
    except ValueError:
        body = {"error": "http_error", "message": text[:500]}
    return int(result["statusCode"]), body if isinstance(body, dict) else {"value": body}


@dataclass
class InvokeBackend:
    """Inside the /mcp function: each call invokes the route's own function (see the module doc)."""

    event: Mapping[str, Any]
    invoke: Invoker
    read_local_files: bool = False  # the caller's files are not on this machine

    async def request(
        self, method: str, path: str, body: dict[str, Any] | None
    ) -> tuple[int, dict[str, Any]]:
        matched = routes.match(method, path)
        if matched is None:
            return 404, {"error": "not_found", "message": f"no route for {method} {path}"}
        route, params = matched
        event = route_event(self.event, route, path, params, encode(body))
        try:
            result = await anyio.to_thread.run_sync(self.invoke, route.function, event)
        except Exception as error:  # an unhandled error or timeout of the function: no answer
            raise BackendUnavailable(f"{route.route_key} failed: {type(error).__name__}: {error}") from error
        return response_of(result)

    def listing_cache(self) -> None:
        return None  # one /mcp request, one listing


class FunctionError(Exception):
    """A Lambda invocation that ended in an unhandled error."""


def lambda_invoker(stage: str, region: str | None = None) -> Invoker:
    """Invoke the stage's functions by name (citegate-<stage>-<function>) with boto3, built on first use."""
    from citegate.platform import resources

    client: Any = None

    def invoke(function: str, event: dict[str, Any]) -> Any:
        nonlocal client
        if client is None:
            import boto3
            from botocore.config import Config

            # Under the tools' own 29 s API timeout; no retries: a tool call is not idempotent.
            config = Config(
                read_timeout=30, connect_timeout=5, retries={"max_attempts": 1, "mode": "standard"}
            )
            client = boto3.client("lambda", region_name=region, config=config)
        answer = client.invoke(
            FunctionName=resources.invoke_target(stage, function), Payload=json.dumps(event)
        )
        payload = json.loads(answer["Payload"].read() or b"null")
        if answer.get("FunctionError"):
            message = payload.get("errorMessage") if isinstance(payload, dict) else payload
            raise FunctionError(f"{function}: {message}")
        return payload

    return invoke


def default_invoker() -> Invoker:
    """AWS: Lambda Invoke. The local runtime: the same in-process call its gateway makes."""
    from citegate.platform.settings import get_settings

    settings = get_settings()
    if settings.runtime == "aws":
        return lambda_invoker(settings.stage, settings.region)
    from citegate.runtime.functions import invoke

    return invoke


# --- listing ----------------------------------------------------------------------------------------


async def allowed_tools(backend: Backend) -> frozenset[str] | None:
    """The policy tools the caller is granted, from GET /v1/me. None when the server cannot say (no
    such route, or unreachable): every tool is listed and each call is still decided by its route.
    A caller /v1/me does not accept (no or bad credentials) is granted nothing."""
    cache = backend.listing_cache()
    if cache is not None:
        store, key = cache
        hit = store.get(key)
        if hit and time.monotonic() - hit[0] < ME_CACHE_SECONDS:
            return hit[1]
    try:
        status, body = await backend.request("GET", ME_PATH, None)
    except Exception:  # listing must not fail because the probe did
        return None
    granted: frozenset[str] | None = None
    if status == 200 and isinstance(body.get("tools"), list):
        granted = callable_tools(body)
    elif status in (401, 403):
        granted = frozenset()
    if cache is not None and (status == 200 or status in (401, 403)):
        store, key = cache
        now = time.monotonic()
        if len(store) >= ME_CACHE_ENTRIES:  # callers' credentials change (JWTs refresh): bounded
            for stale in [k for k, (at, _) in store.items() if now - at >= ME_CACHE_SECONDS]:
                del store[stale]
            while len(store) >= ME_CACHE_ENTRIES:
                del store[next(iter(store))]  # the oldest entry first (dicts keep insertion order)
        store.pop(key, None)
        store[key] = (now, granted)
    return granted


def _write_of(spec: ToolSpec) -> str | None:
    route = next(r for r in routes.ROUTES if r.method == spec.method and r.path == spec.path)
    return route.write


# The write action each tool's route performs (granted by a policy's write_actions, or "admin").
TOOL_WRITES: dict[str, str | None] = {name: _write_of(spec) for name, spec in ALL_TOOLS.items()}


def callable_tools(me: Mapping[str, Any]) -> frozenset[str]:
    """The policy tools a caller can actually call, from its `GET /v1/me`: granted (by name or "*"),
    with the route's write action granted, and for the web tools the web allowed. A grant the
    answer does not state (an older server) is not used to hide anything."""
    tools = {str(t) for t in me.get("tools") or []}
    writes = me.get("write_actions")
    web = me.get("web")
    names: set[str] = set()
    for spec in ALL_TOOLS.values():
        tool = POLICY_TOOL[spec.name]
        if "*" not in tools and tool not in tools:
            continue
        write = TOOL_WRITES[spec.name]
        if write is not None and isinstance(writes, list) and not {"admin", write} & set(writes):
            continue
        if spec in WEB_TOOLS and isinstance(web, Mapping) and not web.get("enabled"):
            continue
        names.add(tool)
    return frozenset(names)


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
    from citegate.knowledge.citations import excerpt

    lines = []
    for number, citation in enumerate(citations, start=1):
        # Whole sentences, from those the answer rests on (`answer_sentences`, on ask's citations).
        snippet = excerpt(str(citation.get("snippet") or ""), 300, citation.get("answer_sentences") or ())
        lines.append(f"[{number}] {_where(citation)}" + (f": “{snippet}”" if snippet else ""))
    return lines


def _render_web(tool: str, results: list[dict[str, Any]]) -> str:
    if tool == "web_search":
        lines = [f"{len(results)} web result(s)"]
        for hit in results:
            snippet = " ".join(str(hit.get("snippet") or "").split())[:300]
            lines.append(
                f"[{hit.get('rank')}] {hit.get('title') or hit.get('url')} <{hit.get('url')}>: {snippet}"
            )
        return "\n".join(lines)
    parts = []
    for page in results:
        if page.get("status") != "success":
            parts.append(f"<{page.get('url')}> failed: {page.get('error_code')}: {page.get('error')}")
            continue
        content = str(page.get("content") or "")
        if len(content) > 4000:
            content = content[:4000] + "… (the full page is in the structured content)"
        parts.append(f"# {page.get('title') or page.get('url')}\n<{page.get('url')}>\n\n{content}")
    return "\n\n".join(parts) or "no pages"


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
        if tool in ("web_search", "web_read"):
            return _render_web(tool, results)
        lines = [f"{len(results)} result(s)"]
        for rank, hit in enumerate(results, start=1):
            text = " ".join(str(hit.get("chunk_text") or hit.get("text") or "").split())[:200]
            ref = hit.get("ref_id") or hit.get("chunkId") or ""
            where = f" {_where(hit['citation'])}" if isinstance(hit.get("citation"), dict) else ""
            rank_score = hit.get("rank_score", hit.get("rankScore"))
            ranked = f" rank_score={rank_score}" if rank_score is not None else ""
            lines.append(f"[{rank}] {ref}{ranked} score={hit.get('score')}{where}: {text}")
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
    spec: ToolSpec, arguments: dict[str, Any], read_local_files: bool
) -> tuple[str, dict[str, Any] | None]:
    """The HTTP path and JSON body of a validated call. The body is the caller's own arguments (minus
    path parameters), so the server applies its defaults and validation exactly as over HTTP."""
    path = spec.path
    for param in spec.path_params:
        path = path.replace("{" + param + "}", str(arguments[param]))
    if spec is LOCAL_FILE_TOOL:
        body: dict[str, Any] = {k: v for k, v in arguments.items() if k not in ("kb_id", "path")}
        if read_local_files:
            file = Path(arguments["path"]).expanduser()
            body["base64_file"] = base64.b64encode(file.read_bytes()).decode()
            body.setdefault("source_name", file.name)
        else:
            body["file_path"] = arguments["path"]
        return path, body
    if not spec.has_body:
        return path, None
    return path, {k: v for k, v in arguments.items() if k not in spec.path_params}


async def call_tool(backend: Backend, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
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
        path, payload = _request_for(spec, arguments, backend.read_local_files)
    except OSError as error:
        return tool_error(
            {"error": "local_file_unreadable", "message": str(error)}, f"cannot read file: {error}"
        )
    try:
        status, body = await backend.request(spec.method, path, payload)
    except BackendUnavailable as error:
        return tool_error(
            {"error": "server_unavailable", "message": str(error)}, f"citegate is unavailable: {error}"
        )
    except Exception as error:  # e.g. no AWS credentials for SigV4: a tool error, never a crash
        message = f"{type(error).__name__}: {error}"
        return tool_error({"error": "client_error", "message": message}, message)
    if status >= 400:
        return tool_error({**body, "http_status": status}, describe_error(status, body))
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=render_text(name, body))], structured_content=body
    )


BackendFor = Callable[[ServerRequestContext[Any, Any] | None], Backend]


def build_server(config: AdapterConfig, backend_for: BackendFor | None = None) -> Server[Any]:
    """The MCP server; each request reaches the routes through `backend_for(ctx)` (default: HTTP to
    config.url with the configured or the caller's credentials)."""

    def http_backend(ctx: ServerRequestContext[Any, Any] | None) -> Backend:
        return HttpBackend(config, _caller_headers(config, ctx))

    backend_of = backend_for or http_backend

    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        granted = await allowed_tools(backend_of(ctx))
        return types.ListToolsResult(tools=[mcp_tool(t) for t in ALL_TOOLS.values() if visible(t, granted)])

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await call_tool(backend_of(ctx), params.name, dict(params.arguments or {}))

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


def _stateless_app(server: Server[Any], path: str, allowed_hosts: list[str] | None) -> Starlette:
    """Stateless streamable HTTP with JSON responses: one request, one answer (fits Lambda)."""
    from mcp.server.transport_security import TransportSecuritySettings

    security = None  # the SDK's default: DNS-rebinding protection admitting localhost only
    if allowed_hosts == ["*"]:
        # Behind a front door that authenticates every request (API Gateway, the local gateway).
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    elif allowed_hosts is not None:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=allowed_hosts
        )
    return server.streamable_http_app(
        streamable_http_path=path, stateless_http=True, json_response=True, transport_security=security
    )


def create_streamable_http_app(
    config: AdapterConfig | None = None, *, path: str = MCP_PATH, allowed_hosts: list[str] | None = None
) -> Starlette:
    """A standalone MCP endpoint in front of a citegate URL (`citegate mcp --http`). Each request
    authenticates with its own Authorization header, never a shared one."""
    if config is None:
        config = AdapterConfig(url=base_url())
        config.read_local_files = False
    if allowed_hosts is None and os.environ.get("CITEGATE_MCP_ALLOWED_HOSTS"):
        allowed_hosts = [h.strip() for h in os.environ["CITEGATE_MCP_ALLOWED_HOSTS"].split(",") if h.strip()]
    return _stateless_app(build_server(config), path, allowed_hosts)


# --- the POST /mcp route ------------------------------------------------------------------------------


def _refusal(status: int, code: str, message: str, request_id: str) -> dict[str, Any]:
    from citegate.platform.errors import error_body

    headers = {"Content-Type": "application/json"}
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="citegate"'
    return {
        "statusCode": status,
        "headers": headers,
        "body": json.dumps(error_body(code, message, request_id)),
    }


def handle_mcp_event(event: dict[str, Any], invoke: Invoker) -> dict[str, Any]:
    """API Gateway (HTTP API, payload 2.0) -> the SDK's stateless streamable HTTP app -> one answer.

    The front door has already decided who the caller is. Credentials it refused are refused here
    (401, as every route answers them); otherwise each tool call invokes its route's function with
    this event's authorizer context (InvokeBackend). A fresh app per event: the SDK's session
    manager runs once per instance, and stateless JSON responses keep nothing between requests."""
    context = event.get("requestContext") or {}
    request_id = str(context.get("requestId") or "")
    refused = ((context.get("authorizer") or {}).get("lambda") or {}).get("auth_error")
    if refused:
        return _refusal(401, "unauthorized", str(refused), request_id)
    return anyio.run(_serve_event, event, invoke)


async def _serve_event(event: dict[str, Any], invoke: Invoker) -> dict[str, Any]:
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
        "path": MCP_PATH,
        "raw_path": MCP_PATH.encode(),
        "query_string": (event.get("rawQueryString") or "").encode(),
        "headers": headers,
        "server": (context.get("domainName") or "lambda", 443),
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

    backend = InvokeBackend(event, invoke)
    server = build_server(AdapterConfig(read_local_files=False), lambda _ctx: backend)
    app = _stateless_app(server, MCP_PATH, allowed_hosts=["*"])
    async with app.router.lifespan_context(app):
        await app(scope, receive, send)
    body = b"".join(chunks).decode(errors="replace")
    response_headers = {k.decode(): v.decode() for k, v in out_headers}
    if status >= 400 and not _json_object(body):
        # The SDK refuses some requests in plain text (a wrong Content-Type or Accept header):
        # every error leaves in JSON, in the error shape of the other routes.
        code = _SDK_REFUSALS.get(status, "invalid_request" if status < 500 else "internal_error")
        return _refusal(status, code, body.strip() or f"HTTP {status}", str(context.get("requestId") or ""))
    return {"statusCode": status, "headers": response_headers, "body": body, "isBase64Encoded": False}


_SDK_REFUSALS = {
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def _json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False
