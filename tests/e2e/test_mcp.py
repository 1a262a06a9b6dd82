"""The MCP server driven by the official SDK's own client, over stdio and streamable HTTP."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
import uvicorn
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from citegate.mcp_server import ALL_TOOLS, AdapterConfig, create_streamable_http_app
from tests.e2e.conftest import ROOT, TOKEN

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
MARS = "# Mars\n\nOlympus Mons on Mars is about 22 km high, the tallest volcano in the Solar System."


@pytest.fixture
def server(server_factory: Any) -> Any:
    running = server_factory({"CITEGATE_EMBEDDER": "hashing"}).start()
    with running.client() as admin:
        admin.post("/v1/kb", json={"kb_id": "mcp", "name": "MCP", "status": "approved"}).raise_for_status()
        admin.put(
            "/admin/policies/agent:reader",
            json={"tools": ["search", "rag_retrieve", "rag_list_kb"], "knowledge_bases": ["*"]},
        ).raise_for_status()
        running.agent_token = admin.post("/admin/agents/reader/credentials", json={"kind": "token"}).json()[
            "secret"
        ]
    return running


@asynccontextmanager
async def stdio_session(url: str, token: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "citegate.cli", "mcp", "--stdio"],
        env={**os.environ, "CITEGATE_URL": url, "CITEGATE_TOKEN": token},
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


@asynccontextmanager
async def http_session(url: str, token: str | None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    result = await session.call_tool(name, arguments)
    assert isinstance(result, types.CallToolResult)
    return result


def text(result: types.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    return first.text


async def exercise(session: ClientSession) -> None:
    listed = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(listed) == SPEC_000 | SPEC_004  # the server has no /v1/me yet: every tool is listed
    assert listed["rag_ask"].input_schema["required"] == ["question", "kb_id"]

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
    allowed = await call(session, "rag_retrieve", {"kb_id": "mcp", "query": "Olympus"})
    assert not allowed.is_error, allowed.content
    result = await call(session, "rag_ask", {"kb_id": "mcp", "question": "How high is Olympus Mons?"})
    assert result.is_error
    assert result.structured_content["error"] == "forbidden"
    assert result.structured_content["details"]["reason"] == "forbidden_tool"
    assert "forbidden_tool" in text(result)


def test_stdio(server: Any) -> None:
    async def main() -> None:
        async with stdio_session(server.url, TOKEN) as session:
            await exercise(session)
        async with stdio_session(server.url, server.agent_token) as session:
            await refused(session)

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
    from citegate.mcp_server import visible

    granted = frozenset({"search", "rag_ingest"})
    shown = {name for name, spec in ALL_TOOLS.items() if visible(spec, granted)}
    assert shown == {"search", "rag_ingest", "rag_ingest_local_file"}  # same route, same grant
    assert {name for name, spec in ALL_TOOLS.items() if visible(spec, frozenset({"*"}))} == set(ALL_TOOLS)


def test_lambda_handler_serves_one_json_rpc_request_per_event(server: Any, monkeypatch: Any) -> None:
    import json

    from citegate.mcp_server import lambda_handler

    monkeypatch.setenv("CITEGATE_URL", server.url)

    def event(message: dict[str, Any]) -> dict[str, Any]:
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "host": "abc.execute-api.us-east-1.amazonaws.com",
            "mcp-protocol-version": "2025-06-18",
            "authorization": f"Bearer {TOKEN}",
        }
        return {
            "requestContext": {"http": {"method": "POST"}},
            "headers": headers,
            "body": json.dumps(message),
        }

    called = lambda_handler(
        event(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "rag_list_kb", "arguments": {}},
            }
        )
    )
    assert called["statusCode"] == 200, called
    result = json.loads(called["body"])["result"]
    assert not result.get("isError") and result["structuredContent"]["knowledge_bases"][0]["kb_id"] == "mcp"
