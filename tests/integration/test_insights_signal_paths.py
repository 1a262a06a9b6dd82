"""Every route that answers a question leaves exactly one insights signal (through
citegate.governance.calls.note_answered, the one place they report an outcome): the Answer API, the
agent tool, /v1/kb/{kb}/ask, sessions and their turns, OpenAI-compatible chat completions (JSON and
streamed), spec 003's /api/v2/query, an agent chat's turn, and MCP's ask tools (the tool route's
own call; the /mcp call itself is no question's outcome). A retried chat turn replays its reply
and adds none."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.integration.conftest import ingest

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
FACT = "The Vorlan gate opens at dawn and closes at the ninth bell, the harbour rules say."


@pytest.fixture(scope="module")
def kb_id(client: TestClient) -> str:
    kb = "kb-sig-" + uuid.uuid4().hex[:8]
    made = client.post("/v1/kb", json={"kb_id": kb, "name": kb, "status": "approved"})
    assert made.status_code == 201, made.text
    ingest(client, kb, text=f"# Harbour\n\n{FACT}", source_name="harbour.md")
    return kb


def _signals(stack: Any, question: str) -> list[dict[str, Any]]:
    store, tenant = stack.services.insights, stack.settings.default_tenant
    return [s for s in store.signals(tenant, "0000", "9999") if s["question"] == question]


def _mcp(client: TestClient, tool: str, arguments: dict[str, Any]) -> None:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    reply = client.post("/mcp", json=message, headers=MCP_HEADERS)
    assert reply.status_code == 200, reply.text
    assert not reply.json()["result"].get("isError"), reply.text


def _chat_turn(client: TestClient, question: str, **options: Any) -> None:
    chat = client.post("/api/v1/agent/chats", json={}).json()["id"]
    url = f"/api/v1/agent/chats/{chat}/messages"
    key = {"Idempotency-Key": uuid.uuid4().hex}
    reply = client.post(url, json={"content": question, **options}, headers=key)
    assert reply.status_code == 200, reply.text
    retried = client.post(url, json={"content": question, **options}, headers=key)  # replayed, not asked
    assert retried.status_code == 200, retried.text


def _session_turn(client: TestClient, question: str) -> Any:
    session = client.post("/answer/sessions", json={}).json()
    return client.post(
        f"/answer/sessions/{session['sessionId']}/turns",
        json={"question": question},
        headers={"X-Session-Token": session["sessionToken"]},
    )


PATHS: dict[str, Callable[[TestClient, str, str], Any]] = {
    "answer_ask": lambda c, kb, q: c.post("/answer/ask", json={"question": q}),
    "agent_ask": lambda c, kb, q: c.post("/agent/tools/ask", json={"question": q}),
    "kb_ask": lambda c, kb, q: c.post(f"/v1/kb/{kb}/ask", json={"question": q}),
    "session": lambda c, kb, q: c.post("/answer/sessions", json={"question": q}),
    "session_turn": lambda c, kb, q: _session_turn(c, q),
    "chat_completions": lambda c, kb, q: c.post(
        "/v1/chat/completions", json={"model": f"citegate/{kb}", "messages": [{"role": "user", "content": q}]}
    ),
    "chat_completions_stream": lambda c, kb, q: c.post(
        "/v1/chat/completions",
        json={"model": "citegate", "stream": True, "messages": [{"role": "user", "content": q}]},
    ),
    "query_v2": lambda c, kb, q: c.post("/api/v2/query", json={"query": q}),
    "agent_chat": lambda c, kb, q: _chat_turn(c, q),
    "agent_chat_stream": lambda c, kb, q: _chat_turn(c, q, stream=True),
    "mcp_ask": lambda c, kb, q: _mcp(c, "ask", {"question": q}),
    "mcp_rag_ask": lambda c, kb, q: _mcp(c, "rag_ask", {"kb_id": kb, "question": q}),
}


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("answerable", [True, False], ids=["answered", "declined"])
def test_each_answering_route_leaves_one_signal(
    path: str, answerable: bool, client: TestClient, stack: Any, kb_id: str
) -> None:
    tag = uuid.uuid4().hex[:6]
    question = (
        f"When does the Vorlan gate close ({tag})?"
        if answerable
        else f"Who painted the Quessel lighthouse {tag}?"
    )
    reply = PATHS[path](client, kb_id, question)
    if reply is not None:
        assert reply.status_code in (200, 201), reply.text
    found = _signals(stack, question)
    assert len(found) == 1, (path, found)
    signal = found[0]
    assert signal["outcome"] in ("answered", "declined") and signal["caller_kind"] == "agent"
    assert kb_id in signal["kbs"]
    if not answerable:
        assert signal["outcome"] == "declined" and signal["gap"] == "declined", signal
