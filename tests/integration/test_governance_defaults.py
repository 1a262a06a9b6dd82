"""Issue 19's governance defaults, tried as a new user and a public site would: anonymous readers are
limited per client address under a site-wide ceiling; the bootstrap service principal never loses
admin through the API, and a policy table can be restored by hand; working knowledge bases answer
on every entry for a caller whose policy grants working docs (approved ones only for anonymous
readers); a policy granting every tool grants the web, and MCP lists only what a caller can call.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from citegate.governance.ratelimit import Counters
from citegate.runtime.gateway import create_app
from tests.integration.conftest import TOKEN, ingest

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
TELQUARN = "Mount Telquarn on the moon Isvel rises about 47 kilometres above the Isvel plains. " * 3
QUESTION = "How high is Mount Telquarn on Isvel?"


def _agent(client: TestClient, policy: dict[str, Any]) -> TestClient:
    agent_id = "agent-" + uuid.uuid4().hex[:8]
    assert client.put(f"/admin/policies/agent:{agent_id}", json=policy).status_code == 200
    issued = client.post(f"/admin/agents/{agent_id}/credentials", json={"kind": "token"})
    assert issued.status_code == 201, issued.text
    return TestClient(create_app(), headers={"Authorization": f"Bearer {issued.json()['secret']}"})


def _from(client: TestClient, address: str, token: str | None = None) -> TestClient:
    """A client of the same gateway whose calls come from `address` (the socket's, as sourceIp)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return TestClient(client.app, client=(address, 40000), headers=headers)


# -- rate limits ------------------------------------------------------------------------------------


@pytest.fixture
def fresh_counters(stack: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Rate limits counted in a table of their own (and with no lease left from earlier tests), so
    the site-wide anonymous count starts at zero; the limits are the test's settings."""
    table_name = f"citegate-test-counters-{uuid.uuid4().hex[:8]}"
    table = stack.services.counters._table
    client = table.meta.client
    client.create_table(
        TableName=table_name,
        KeySchema=[{"AttributeName": "counter_key", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "counter_key", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    import boto3

    fresh = boto3.resource("dynamodb", region_name=stack.settings.region).Table(table_name)
    monkeypatch.setitem(stack.services.__dict__, "counters", Counters(fresh))
    # Far from the end of a one-minute window, so that every call of the test counts in one window.
    if time.time() % 60 > 50:
        time.sleep(61 - time.time() % 60)
    yield
    client.delete_table(TableName=table_name)


def _ask_anonymously(caller: TestClient) -> int:
    # Admission counts the call before the body is read: a junk body costs nothing else (400).
    return caller.post("/answer/ask", json={}).status_code


def test_anonymous_readers_are_limited_per_client_address(
    client: TestClient, stack: Any, fresh_counters: None
) -> None:
    # The default settings: 30 a minute per address, 1200 for the whole site.
    limit = getattr(stack.services.settings, "anonymous_ip_rate_limit_per_minute", 30)
    first, second = _from(client, "198.51.100.7"), _from(client, "198.51.100.8")
    assert [_ask_anonymously(first) for _ in range(limit + 1)] == [400] * limit + [429]
    # Another reader of the same public site is not refused because the first one was.
    assert [_ask_anonymously(second) for _ in range(3)] == [400, 400, 400]
    refused = first.post("/answer/ask", json={})
    assert refused.status_code == 429 and refused.json()["error"] == "rate_limited"
    assert refused.json()["details"]["limit"] == limit and int(refused.headers["Retry-After"]) >= 1


def test_anonymous_readers_share_a_site_wide_ceiling(
    client: TestClient, stack: Any, fresh_counters: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stack.services.settings, "anonymous_ip_rate_limit_per_minute", 100, raising=False)
    monkeypatch.setattr(stack.services.settings, "anonymous_rate_limit_per_minute", 5, raising=False)
    readers = [_from(client, f"203.0.113.{n}") for n in range(1, 4)]
    statuses = [_ask_anonymously(reader) for reader in readers for _ in range(2)]
    assert statuses == [400] * 5 + [429]
    assert _ask_anonymously(_from(client, "203.0.113.99")) == 429
    # Signed-in callers are not anonymous readers: the ceiling is not theirs.
    assert _from(client, "203.0.113.99", TOKEN).get("/v1/kb").status_code == 200


# -- policy administration ----------------------------------------------------------------------------


def test_the_bootstrap_service_principal_never_loses_admin(client: TestClient) -> None:
    key = "service:rag-service"
    before = client.get(f"/admin/policies/{key}").json()
    for body in ({"tools": ["e"]}, {"tools": ["*"], "write_actions": []}, {"tools": ["search"]}):
        refused = client.put(f"/admin/policies/{key}", json=body)
        assert refused.status_code == 409, refused.text
        error = refused.json()
        assert error["error"] == "conflict" and error["details"]["reason"] == "bootstrap_admin_required"
        assert "bootstrap service principal" in error["message"]
    # Nothing was written: the token still administers, with the policy it had.
    assert client.get(f"/admin/policies/{key}").json() == before
    assert client.get("/admin/policies").status_code == 200
    # It may still be changed in any way that keeps admin.
    kept = client.put(f"/admin/policies/{key}", json={**before, "rate_limit_per_minute": 5000})
    assert kept.status_code == 200 and kept.json()["rate_limit_per_minute"] == 5000
    assert client.put(f"/admin/policies/{key}", json=before).status_code == 200
    # Other principals' policies may lose admin (the bootstrap principal can restore them).
    other = "agent:admin-" + uuid.uuid4().hex[:6]
    assert client.put(
        f"/admin/policies/{other}", json={"tools": ["admin"], "write_actions": ["admin"]}
    ).is_success
    assert client.put(f"/admin/policies/{other}", json={"tools": ["e"]}).status_code == 200


def test_a_policy_can_be_restored_from_the_seed_file_by_hand(client: TestClient, stack: Any) -> None:
    from citegate.governance.policy.store import SEED_FILE, seed_policies
    from citegate.platform.errors import NotFound

    seeded = {p.principal_key: p for p in seed_policies(SEED_FILE, tenant_id="default")}
    changed = client.put("/admin/policies/human:*", json={"tools": ["answer_ask"], "knowledge_bases": []})
    assert changed.status_code == 200
    try:
        assert stack.services.policies.reseed(SEED_FILE, keys=["human:*"], tenant_id="default") == ["human:*"]
        assert client.get("/admin/policies/human:*").json() == seeded["human:*"].model_dump()
        with pytest.raises(NotFound):
            stack.services.policies.reseed(SEED_FILE, keys=["agent:not-in-the-file"])
    finally:
        stack.services.policies.reseed(SEED_FILE, keys=["human:*"], tenant_id="default")


def test_the_cli_has_a_reseed_command() -> None:
    from citegate.clients.cli import build_parser, cmd_policies_reseed

    args = build_parser().parse_args(["policies", "reseed", "service:rag-service", "--file", "p.json"])
    assert args.run is cmd_policies_reseed and args.keys == ["service:rag-service"] and args.file == "p.json"


# -- defaults that block the obvious use ------------------------------------------------------------------


@pytest.fixture(scope="module")
def working_kb(client: TestClient) -> str:
    """A knowledge base as the README creates it: working (the default), never approved."""
    kb = client.post("/v1/kb", json={"name": "Isvel drafts " + uuid.uuid4().hex[:6]}).json()
    assert kb["status"] == "working"
    ingest(client, kb["kb_id"], text=TELQUARN, source_name="telquarn-draft.md")
    return str(kb["kb_id"])


def _v2_events(caller: TestClient, body: dict[str, Any], **headers: str) -> list[dict[str, Any]]:
    with caller.stream("POST", "/api/v2/query", json=body, headers=headers) as response:
        assert response.status_code == 200, response.read()
        return [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]


def _v2_sources(events: list[dict[str, Any]]) -> str:
    return json.dumps([e for e in events if e["message_type"] in (204, 302)])


def test_the_service_token_searches_working_knowledge_bases_on_chats_and_v2_query(
    client: TestClient, working_kb: str
) -> None:
    chat = client.post("/api/v1/agent/chats", json={}).json()["id"]
    reply = client.post(f"/api/v1/agent/chats/{chat}/messages", json={"content": QUESTION})
    assert reply.status_code == 200, reply.text
    assert working_kb in {s["collection_id"] for s in reply.json()["sources"]}
    assert "47 kilometres" in reply.json()["content"]

    events = _v2_events(client, {"query": QUESTION})
    assert "Telquarn" in _v2_sources(events) and 22 not in {e["message_type"] for e in events}


def test_anonymous_readers_do_not_see_working_knowledge_bases(client: TestClient, working_kb: str) -> None:
    events = _v2_events(client, {"query": QUESTION}, Authorization="")
    assert "Telquarn" not in _v2_sources(events)
    # An agent whose policy does not grant working docs reads approved ones only, on chats too.
    with _agent(client, {"tools": ["chat"], "knowledge_bases": ["*"]}) as agent:
        chat = agent.post("/api/v1/agent/chats", json={}).json()["id"]
        reply = agent.post(f"/api/v1/agent/chats/{chat}/messages", json={"content": QUESTION})
        assert working_kb not in {s["collection_id"] for s in reply.json()["sources"]}


def test_answer_ask_says_how_to_make_a_working_knowledge_base_readable(
    client: TestClient, working_kb: str
) -> None:
    with _agent(client, {"tools": ["answer_ask"], "knowledge_bases": [working_kb]}) as agent:
        asked = agent.post("/answer/ask", json={"question": QUESTION})
    assert asked.status_code == 200, asked.text
    reason = asked.json()["noAnswerReason"]["reason"]
    assert "PATCH /v1/kb/{kb_id}" in reason and '"status": "approved"' in reason
    assert "includeWorkingDocs" in reason
    # The service token, whose policy grants working docs, gets its answer when it asks for them.
    included = client.post("/answer/ask", json={"question": QUESTION, "scope": {"includeWorkingDocs": True}})
    assert included.status_code == 200 and "47 kilometres" in included.json()["answer"]


def test_a_policy_granting_every_tool_grants_the_web(client: TestClient) -> None:
    searched = client.post("/api/v1/web/search", json={"query": "olympus mons"})
    # No provider is configured here: the policy admits the call, the route says what is missing.
    assert searched.status_code != 403 and searched.json()["error"] == "WEB_SEARCH_FAILED", searched.text
    me = client.get("/v1/me").json()
    assert me["tools"] == ["*"] and me["web"]["enabled"] is True
    with _agent(client, {"tools": ["*"], "knowledge_bases": ["*"], "web": {"enabled": False}}) as agent:
        refused = agent.post("/api/v1/web/search", json={"query": "olympus mons"})
        assert refused.status_code == 403 and refused.json()["error"] == "FORBIDDEN"


def _listed(caller: TestClient) -> set[str]:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    response = caller.post("/mcp", json=message, headers=MCP_HEADERS)
    assert response.status_code == 200, response.text
    return {tool["name"] for tool in response.json()["result"]["tools"]}


def test_mcp_lists_only_the_tools_a_caller_can_call(client: TestClient) -> None:
    assert {"web_search", "web_read", "rag_ingest", "rag_create_kb"} <= _listed(client)
    no_web_no_writes = {"tools": ["*"], "knowledge_bases": ["*"], "web": {"enabled": False}}
    with _agent(client, no_web_no_writes) as agent:
        listed = _listed(agent)
    assert not listed & {"web_search", "web_read"}, "the web is not allowed"
    assert not listed & {"rag_ingest", "rag_ingest_local_file", "rag_create_kb", "create_feedback"}, (
        "their write actions are not granted"
    )
    assert {"search", "ask", "rag_retrieve", "rag_list_kb"} <= listed
    with _agent(client, {"tools": ["rag_ingest", "web_read"], "write_actions": ["ingest"]}) as agent:
        assert _listed(agent) == {"rag_ingest", "rag_ingest_local_file"}
