"""MCP lists only the tools a caller can actually call: the tool granted, its route's write action
granted, and the web allowed for the web tools, as `GET /v1/me` states them (issue 19)."""

from __future__ import annotations

from typing import Any

import pytest

from citegate.clients.mcp_server import ALL_TOOLS, callable_tools, visible


def listed(me: dict[str, object]) -> set[str]:
    granted = callable_tools(me)
    return {name for name, spec in ALL_TOOLS.items() if visible(spec, granted)}


def test_every_tool_with_every_write_and_the_web_lists_everything() -> None:
    me = {"tools": ["*"], "write_actions": ["admin"], "web": {"enabled": True, "domains": []}}
    assert listed(me) == set(ALL_TOOLS)


def test_web_tools_need_the_web() -> None:
    me = {"tools": ["*"], "write_actions": ["admin"], "web": {"enabled": False, "domains": []}}
    assert listed(me) == set(ALL_TOOLS) - {"web_search", "web_read"}


def test_write_tools_need_their_write_action() -> None:
    me = {"tools": ["*"], "write_actions": ["feedback"], "web": {"enabled": False}}
    shown = listed(me)
    assert "create_feedback" in shown and "search" in shown and "rag_retrieve" in shown
    assert not shown & {"rag_ingest", "rag_ingest_local_file", "rag_create_kb", "create_improvement_task"}
    assert listed({"tools": ["rag_ingest"], "write_actions": ["ingest"]}) == {
        "rag_ingest",
        "rag_ingest_local_file",
    }


def test_what_an_older_server_does_not_say_hides_nothing() -> None:
    assert listed({"tools": ["search", "rag_ingest", "web_read"]}) == {
        "search",
        "rag_ingest",
        "rag_ingest_local_file",
        "web_read",
    }


def test_the_listing_cache_of_callers_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from citegate.clients import mcp_server

    monkeypatch.setattr(mcp_server, "ME_CACHE_ENTRIES", 8)
    store: dict[str, Any] = {}

    class Backend:
        key = ""

        def listing_cache(self) -> Any:
            return store, self.key

        async def request(self, method: str, path: str, body: Any) -> Any:
            return 200, {"tools": ["search"]}

    backend = Backend()
    for i in range(50):
        backend.key = f"caller-{i}"
        asyncio.run(mcp_server.allowed_tools(backend))  # type: ignore[arg-type]
    assert len(store) == 8 and "caller-49" in store and "caller-0" not in store
