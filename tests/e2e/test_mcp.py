"""The MCP server driven by the official SDK's own client: over stdio, over the standalone streamable
HTTP app, and over the `POST /mcp` route of the local gateway (token and SigV4), where listing follows
the caller's policy (GET /v1/me) and every tool call is the route's own, audited call."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
import uvicorn
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from citegate.clients.mcp_server import ALL_TOOLS, AdapterConfig, create_streamable_http_app
from tests.e2e.conftest import ROOT, TOKEN
from tests.unit.web.pages import serve as serve_pages

SPEC_000 = {"search", "ask", "get_page", "get_context", "create_feedback", "create_improvement_task"}
SPEC_004 = {
    "rag_list_kb",
    "rag_create_kb",
    "rag_list_documents",
    "rag_ingest",
    "rag_ingest_local_file",
    "rag_reindex",
    "rag_delete_document",
    "rag_retrieve",
    "rag_ask",
    "rag_task_status",
    "rag_resolve_refs",
}
SPEC_001 = {"web_search", "web_read"}
READER_TOOLS = {"search", "rag_retrieve", "rag_list_kb"}
ACCESS_KEY, SECRET = "AKIACITEGATEMCP00001", "local-secret-for-the-mcp-test"
AGENT_ARN = "arn:aws:iam::123456789012:role/mcp-bot"
MARS = "# Mars\n\nOlympus Mons on Mars is about 22 km high, the tallest volcano in the Solar System."


@pytest.fixture
def site() -> Iterator[str]:
    """Loopback pages and a SearXNG-compatible search endpoint for the web tools."""
    with serve_pages() as (url, _state):
        yield url


@pytest.fixture
def server(server_factory: Any, site: str, tmp_path: Path) -> Any:
    iam = tmp_path / "iam.json"
    iam.write_text(
        json.dumps(
            {"credentials": [{"access_key_id": ACCESS_KEY, "secret_access_key": SECRET, "arn": AGENT_ARN}]}
        )
    )
    running = server_factory(
        {
            "CITEGATE_EMBEDDER": "hashing",
            "CITEGATE_WEB_SEARCH_PROVIDER": "searxng",
            "CITEGATE_WEB_SEARCH_URL": f"{site}/searxng",
            "CITEGATE_WEB_ALLOW_LOOPBACK": "true",
            "CITEGATE_LOCAL_IAM_CREDENTIALS": str(iam),
        }
    ).start()
    with running.client() as admin:
        admin.post("/v1/kb", json={"kb_id": "mcp", "name": "MCP", "status": "approved"}).raise_for_status()
        policies = {
            "reader": {"tools": sorted(READER_TOOLS), "knowledge_bases": ["*"]},
            "surfer": {
                "tools": sorted(SPEC_001),
                "knowledge_bases": [],
                "web": {"enabled": True, "domains": []},
            },
            "mcp-bot": {
                "tools": ["rag_list_kb", "search"],
                "knowledge_bases": ["*"],
                "iam_arns": [AGENT_ARN],
            },
        }
        for agent, policy in policies.items():
            admin.put(f"/admin/policies/agent:{agent}", json=policy).raise_for_status()
        running.tokens = {
            agent: admin.post(f"/admin/agents/{agent}/credentials", json={"kind": "token"}).json()["secret"]
            for agent in ("reader", "surfer")
        }
    running.agent_token = running.tokens["reader"]
    running.site = site
    return running


@asynccontextmanager
async def stdio_session(
    url: str, token: str | None, environment: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """`citegate mcp --stdio` as an MCP client starts it: the token in $CITEGATE_TOKEN (the
    Makefile's $RAG_API_TOKEN, which would win by docs/cli.md's table, is not passed on), or
    the credential variables `environment` sets."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAG_API_TOKEN", "CITEGATE_TOKEN")}
    env.update(environment if environment is not None else {"CITEGATE_TOKEN": token or ""})
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "citegate.clients.cli", "mcp", "--stdio"],
        env={**env, "CITEGATE_URL": url},
        cwd=str(ROOT),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@pytest.fixture
def mcp_http(server: Any) -> Iterator[str]:
    """The streamable HTTP app under uvicorn in a thread, on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_streamable_http_app(AdapterConfig(url=server.url, read_local_files=False))
    web = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=web.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not web.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    web.should_exit = True
    thread.join(timeout=10)


class SigV4(httpx2.Auth):
    """Signs every MCP request as an AWS SDK would for API Gateway IAM authorization."""

    requires_request_body = True

    def auth_flow(self, request: httpx2.Request) -> Iterator[httpx2.Request]:
        signed = AWSRequest(method=request.method, url=str(request.url), data=request.content, headers={})
        for name in ("content-type", "accept", "mcp-protocol-version"):
            if name in request.headers:
                signed.headers[name] = request.headers[name]
        SigV4Auth(Credentials(ACCESS_KEY, SECRET), "execute-api", "us-east-1").add_auth(signed)
        for name, value in signed.headers.items():
            request.headers[name] = value
        yield request


@asynccontextmanager
async def http_session(url: str, token: str | None, *, sigv4: bool = False) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60, auth=SigV4() if sigv4 else None) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def listed(session: ClientSession) -> set[str]:
    return {tool.name for tool in (await session.list_tools()).tools}


async def call(session: ClientSession, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    result = await session.call_tool(name, arguments)
    assert isinstance(result, types.CallToolResult)
    return result


def text(result: types.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    return first.text


async def exercise(session: ClientSession) -> None:
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == SPEC_000 | SPEC_004 | SPEC_001  # the service policy grants "*"
    assert tools["rag_ask"].input_schema["required"] == ["question", "kb_id"]
    assert tools["web_read"].input_schema["required"] == ["urls"]

    kbs = await call(session, "rag_list_kb", {})
    assert not kbs.is_error and kbs.structured_content is not None
    assert [kb["kb_id"] for kb in kbs.structured_content["knowledge_bases"]] == ["mcp"]

    ingested = await call(
        session,
        "rag_ingest",
        {"kb_id": "mcp", "text": MARS, "source_name": "mars.md", "metadata": {"path": "planets/mars.md"}},
    )
    assert not ingested.is_error, ingested.content
    task_id = ingested.structured_content["task_id"]
    for _ in range(300):
        status = await call(session, "rag_task_status", {"task_id": task_id})
        if status.structured_content["status"] in ("succeeded", "failed"):
            break
        await anyio.sleep(0.1)
    assert status.structured_content["status"] == "succeeded"
    assert f"task {task_id}: succeeded" in text(status)

    answer = await call(session, "rag_ask", {"kb_id": "mcp", "question": "How high is Olympus Mons?"})
    body = answer.structured_content
    assert not answer.is_error and body is not None and body["no_answer"] is False
    assert body["citations"][0]["source_name"] == "mars.md"  # the HTTP citation shape, unchanged
    assert "[1] mars.md" in text(answer)

    found = await call(session, "search", {"query": "Olympus Mons volcano"})
    assert (
        not found.is_error and found.structured_content["results"][0]["citation"]["path"] == "planets/mars.md"
    )

    asked = await call(session, "ask", {"question": "How high is Olympus Mons?"})
    assert not asked.is_error and asked.structured_content["citations"], asked.content
    assert "\n[1] " in text(asked)

    bad = await call(session, "rag_ask", {"kb_id": "mcp", "question": "", "top_k": 500, "surprise": 1})
    assert bad.is_error and bad.structured_content["error"] == "invalid_request"
    fields = {f["field"] for f in bad.structured_content["details"]["fields"]}
    assert {"question", "top_k", "surprise"} <= fields

    missing = await call(session, "rag_ask", {"kb_id": "nope", "question": "anything?"})
    assert missing.is_error and missing.structured_content["error"] == "kb_not_found"
    assert missing.structured_content["http_status"] == 404


async def refused(session: ClientSession) -> None:
    """A policy without a tool: the tool is not listed, and calling it anyway is refused by its route."""
    assert await listed(session) == READER_TOOLS
    allowed = await call(session, "rag_retrieve", {"kb_id": "mcp", "query": "Olympus"})
    assert not allowed.is_error, allowed.content
    result = await call(session, "rag_ask", {"kb_id": "mcp", "question": "How high is Olympus Mons?"})
    assert result.is_error
    assert result.structured_content["error"] == "forbidden"
    assert result.structured_content["details"]["reason"] == "forbidden_tool"
    assert "forbidden_tool" in text(result)
    web = await call(session, "web_search", {"query": "anything"})  # spec 001's error family
    assert web.is_error and web.structured_content["error"] == "FORBIDDEN"
    assert web.structured_content["details"]["reason"] == "forbidden_tool"


async def surfing(session: ClientSession, site: str) -> None:
    """Spec 001's web tools, through the same routes as HTTP (loopback pages only)."""
    assert await listed(session) == SPEC_001
    found = await call(session, "web_search", {"query": "olympus mons", "max_results": 3})
    assert not found.is_error, found.content
    assert [r["title"] for r in found.structured_content["results"]] == [
        f"olympus mons result {i}" for i in (1, 2, 3)
    ]
    assert "[1] olympus mons result 1 <https://docs.example.com/1>" in text(found)
    page = await call(session, "web_read", {"urls": f"{site}/article"})
    assert not page.is_error, page.content
    (result,) = page.structured_content["results"]
    assert result["status"] == "success" and "Every address is checked" in result["content"]
    assert "BUY CHEAP WIDGETS" not in result["content"]
    assert text(page).startswith("# ")
    bad = await call(session, "web_read", {"urls": [], "surprise": 1})
    assert bad.is_error and bad.structured_content["error"] == "invalid_request"
    blocked = await call(session, "web_read", {"urls": "http://169.254.169.254/latest/meta-data/"})
    assert blocked.is_error or blocked.structured_content["results"][0]["status"] == "error"
    not_granted = await call(session, "search", {"query": "Olympus"})  # spec 000's codes (section 9)
    assert not_granted.is_error and not_granted.structured_content["error"] == "forbidden_tool"


def test_stdio(server: Any) -> None:
    async def main() -> None:
        async with stdio_session(server.url, TOKEN) as session:
            await exercise(session)
        async with stdio_session(server.url, server.agent_token) as session:
            await refused(session)
        async with stdio_session(server.url, server.tokens["surfer"]) as session:
            await surfing(session, server.site)

    anyio.run(main)


def test_stdio_picks_the_credential_every_other_command_picks(server: Any) -> None:
    """docs/cli.md's table: `--token`, else $RAG_API_TOKEN, then $CITEGATE_TOKEN, for `mcp --stdio`
    as for `kb list`. With both set to different agents, both commands act as the same one."""
    both = {"RAG_API_TOKEN": server.tokens["reader"], "CITEGATE_TOKEN": server.tokens["surfer"]}
    env = {k: v for k, v in os.environ.items() if k not in both}
    listed = subprocess.run(
        [sys.executable, "-m", "citegate.clients.cli", "kb", "list", "--json"],
        cwd=ROOT,
        env={**env, **both, "CITEGATE_URL": server.url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    # The reader may list knowledge bases, the surfer may not: the list came as the reader.
    assert listed.returncode == 0, listed.stderr
    assert "mcp" in {kb["kb_id"] for kb in json.loads(listed.stdout)["knowledge_bases"]}

    async def main() -> None:
        async with stdio_session(server.url, None, both) as session:
            tools = {t.name for t in (await session.list_tools()).tools}
            assert tools == READER_TOOLS, tools  # the reader's policy, not the surfer's
            kbs = await call(session, "rag_list_kb", {})
            assert not kbs.is_error and "mcp" in {
                kb["kb_id"] for kb in kbs.structured_content["knowledge_bases"]
            }

    anyio.run(main)


def test_streamable_http(server: Any, mcp_http: str) -> None:
    async def main() -> None:
        async with http_session(mcp_http, TOKEN) as session:
            await exercise(session)
        async with http_session(mcp_http, server.agent_token) as session:
            await refused(session)
        async with http_session(mcp_http, None) as session:  # anonymous: the HTTP API's 401/403
            anonymous = await call(session, "rag_list_kb", {})
            assert anonymous.is_error and anonymous.structured_content["http_status"] in (401, 403)

    anyio.run(main)


def test_backend_down_is_a_tool_error(server: Any) -> None:
    url = server.url
    server.stop()

    async def main() -> None:
        async with stdio_session(url, TOKEN) as session:
            assert {t.name for t in (await session.list_tools()).tools} == set(ALL_TOOLS)
            down = await call(session, "rag_list_kb", {})
            assert down.is_error and down.structured_content["error"] == "server_unavailable"
            again = await call(session, "search", {"query": "still alive?"})  # the server did not crash
            assert again.is_error

    anyio.run(main)


def test_listing_follows_the_granted_tools_when_the_server_says_them() -> None:
    from citegate.clients.mcp_server import visible

    granted = frozenset({"search", "rag_ingest"})
    shown = {name for name, spec in ALL_TOOLS.items() if visible(spec, granted)}
    assert shown == {"search", "rag_ingest", "rag_ingest_local_file"}  # same route, same grant
    assert {name for name, spec in ALL_TOOLS.items() if visible(spec, frozenset({"*"}))} == set(ALL_TOOLS)


def test_the_mcp_route_of_the_gateway(server: Any) -> None:
    """POST /mcp behind the local gateway, as behind API Gateway: the authorizer's verdict on the
    caller reaches each tool's own function, which applies the policy and writes the audit record."""
    url = f"{server.url}/mcp"

    async def main() -> None:
        async with http_session(url, TOKEN) as session:
            await exercise(session)
        async with http_session(url, server.agent_token) as session:
            await refused(session)
        async with http_session(url, server.tokens["surfer"]) as session:
            await surfing(session, server.site)
        async with http_session(url, None) as session:  # anonymous: nothing listed, calls refused
            assert await listed(session) == set()
            anonymous = await call(session, "rag_list_kb", {})
            assert anonymous.is_error and anonymous.structured_content["http_status"] in (401, 403)

    anyio.run(main)
    with server.client() as admin:
        records = admin.get("/admin/audit", params={"caller": "agent:reader"}).json()["records"]
    by_route = {(r["route"], r["decision"], r["reason"]) for r in records}
    assert ("POST /v1/kb/{kb_id}/retrieve", "allow", None) in by_route
    assert ("POST /v1/kb/{kb_id}/ask", "deny", "forbidden") in by_route
    assert ("GET /v1/me", "allow", None) in by_route


def test_the_mcp_route_refuses_bad_credentials_before_any_tool(server: Any) -> None:
    # The refusal is what is checked, not its speed: httpx's 5 s default read timeout tripped in CI
    # at load 9-11, on the first credential lookup against the embedded endpoint.
    with httpx.Client(base_url=server.url, timeout=60) as http:
        answer = http.post(
            "/mcp",
            headers={
                "Authorization": "Bearer cgat_not-a-token",
                "Accept": "application/json, text/event-stream",
            },
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        )
    assert answer.status_code == 401 and answer.json()["error"] == "unauthorized"
    assert answer.headers["www-authenticate"].startswith("Bearer")


def test_the_mcp_route_with_sigv4(server: Any) -> None:
    """An agent signing with SigV4 (the IAM front door): its policy is the one that names its ARN."""

    async def main() -> None:
        async with http_session(f"{server.url}/mcp", None, sigv4=True) as session:
            assert await listed(session) == {"rag_list_kb", "search"}
            kbs = await call(session, "rag_list_kb", {})
            assert not kbs.is_error and [kb["kb_id"] for kb in kbs.structured_content["knowledge_bases"]] == [
                "mcp"
            ]
            refused = await call(session, "rag_ask", {"kb_id": "mcp", "question": "anything?"})
            assert refused.structured_content["details"]["reason"] == "forbidden_tool"

    anyio.run(main)
    with server.client() as admin:
        records = admin.get("/admin/audit", params={"caller": "agent:mcp-bot"}).json()["records"]
    assert {r["route"] for r in records} >= {"GET /v1/kb", "POST /v1/kb/{kb_id}/ask"}
