"""Every caller a principal, every call checked on the server and recorded.

Agents get their own policy (tools, knowledge bases, scope, files, write actions, rate limit)
through the admin routes, call with an agent token or spec 002's caller agent key, and are
refused with spec 000's codes in spec 000 6.2's order. Every call, refused ones included, leaves
exactly one audit record.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from starlette.testclient import TestClient

from citegate.runtime.gateway import create_app
from tests.integration.conftest import ingest


def _agent(client: TestClient, policy: dict[str, Any], kind: str = "token") -> tuple[str, str]:
    agent_id = "agent-" + uuid.uuid4().hex[:8]
    put = client.put(f"/admin/policies/agent:{agent_id}", json=policy)
    assert put.status_code == 200, put.text
    issued = client.post(f"/admin/agents/{agent_id}/credentials", json={"kind": kind})
    assert issued.status_code == 201, issued.text
    return agent_id, issued.json()["secret"]


def _as(secret: str) -> TestClient:
    return TestClient(create_app(), headers={"Authorization": f"Bearer {secret}"})


@pytest.fixture
def docs_kb(client: TestClient) -> str:
    kb = client.post("/v1/kb", json={"name": "governed docs", "status": "approved"}).json()["kb_id"]
    inside = {"project": "kgent", "path": "publish/kgent/memory.md", "version": "main"}
    outside = {"project": "kgent", "path": "private/kgent/secrets.md", "version": "main"}
    ingest(
        client,
        kb,
        text="Agent memory is configured in memory.yaml. " * 10,
        source_name="memory.md",
        metadata=inside,
    )
    ingest(
        client,
        kb,
        text="The private signing secret lives in the vault. " * 10,
        source_name="secrets.md",
        metadata=outside,
    )
    return kb


def test_an_agent_sees_only_its_granted_scope(client: TestClient, docs_kb: str) -> None:
    _, token = _agent(
        client,
        {
            "tools": ["rag_retrieve"],
            "knowledge_bases": [docs_kb],
            "scope": {"path_prefixes": ["publish/kgent"]},
        },
    )
    with _as(token) as agent:
        for query in ["agent memory", "private signing secret vault"]:
            results = agent.post(f"/v1/kb/{docs_kb}/retrieve", json={"query": query, "top_k": 20}).json()[
                "results"
            ]
            assert results and all("vault" not in r["chunk_text"] for r in results)


def test_checks_fail_with_spec_000_codes(client: TestClient, docs_kb: str) -> None:
    other = client.post("/v1/kb", json={"name": "not granted", "status": "approved"}).json()["kb_id"]
    _, token = _agent(client, {"tools": ["rag_retrieve"], "knowledge_bases": [docs_kb]})
    with _as(token) as agent:
        tool = agent.post(f"/v1/kb/{docs_kb}/ask", json={"question": "memory?"})
        assert tool.status_code == 403 and tool.json()["details"]["reason"] == "forbidden_tool"
        dataset = agent.post(f"/v1/kb/{other}/retrieve", json={"query": "memory"})
        assert dataset.status_code == 403 and dataset.json()["details"]["reason"] == "dataset_not_allowed"
        write = agent.post(f"/v1/kb/{docs_kb}/documents", json={"text": "x", "source_name": "x.txt"})
        assert write.status_code == 403 and write.json()["details"]["reason"] == "forbidden_tool"
        invalid = agent.post(f"/v1/kb/{docs_kb}/retrieve", json={"query": ""})
        assert invalid.status_code == 400 and invalid.json()["error"] == "invalid_request"


def test_a_tool_grant_without_the_write_action_cannot_write(client: TestClient, docs_kb: str) -> None:
    _, token = _agent(client, {"tools": ["rag_ingest"], "knowledge_bases": [docs_kb]})
    with _as(token) as agent:
        refused = agent.post(f"/v1/kb/{docs_kb}/documents", json={"text": "x", "source_name": "x.txt"})
        assert refused.status_code == 403 and refused.json()["error"] == "forbidden"


def test_an_agent_without_a_policy_gets_nothing(client: TestClient, docs_kb: str) -> None:
    agent_id = "agent-" + uuid.uuid4().hex[:8]
    token = client.post(f"/admin/agents/{agent_id}/credentials", json={"kind": "token"}).json()["secret"]
    with _as(token) as agent:
        response = agent.post(f"/v1/kb/{docs_kb}/retrieve", json={"query": "memory"})
        assert response.status_code == 403 and response.json()["details"]["reason"] == "forbidden_tool"


def test_revoked_and_unknown_tokens_are_401(client: TestClient, docs_kb: str) -> None:
    agent_id, token = _agent(client, {"tools": ["rag_retrieve"], "knowledge_bases": [docs_kb]})
    with _as(token) as agent:
        assert agent.post(f"/v1/kb/{docs_kb}/retrieve", json={"query": "memory"}).status_code == 200
        credential = client.get(f"/admin/agents/{agent_id}/credentials").json()["credentials"][0]
        assert "secret" not in credential and "credential_hash" not in credential
        assert (
            client.delete(f"/admin/agents/{agent_id}/credentials/{credential['credential_id']}").status_code
            == 200
        )
        revoked = agent.post(f"/v1/kb/{docs_kb}/retrieve", json={"query": "memory"})
        assert revoked.status_code == 401 and revoked.json()["error"] == "unauthorized"
    with _as("cgat_unknown_token") as stranger:
        assert stranger.get("/v1/kb").status_code == 401


def test_agents_cannot_use_the_admin_routes(client: TestClient, docs_kb: str) -> None:
    _, token = _agent(client, {"tools": ["rag_retrieve"], "knowledge_bases": [docs_kb]})
    with _as(token) as agent:
        assert agent.get("/admin/policies").status_code == 403
        assert agent.put("/admin/policies/agent:me", json={"tools": ["*"]}).status_code == 403


def test_nothing_crosses_tenants(client: TestClient, docs_kb: str, stack: Any) -> None:
    from citegate.governance.policy.model import Policy

    stack_services = stack.services
    agent_id = "tenant-b-" + uuid.uuid4().hex[:6]

    stack_services.policies.put(
        Policy(
            principal_key=f"agent:{agent_id}",
            tenant_id="tenant-b",
            tools=["*"],
            knowledge_bases=["*"],
            write_actions=["admin"],
        )
    )
    secret = stack_services.policies.issue_credential(agent_id, "tenant-b", "token")["secret"]
    with _as(secret) as other_tenant:
        assert other_tenant.get(f"/v1/kb/{docs_kb}").status_code == 404
        assert other_tenant.post(f"/v1/kb/{docs_kb}/retrieve", json={"query": "memory"}).status_code == 404
        assert docs_kb not in [kb["kb_id"] for kb in other_tenant.get("/v1/kb").json()["knowledge_bases"]]
        assert other_tenant.get("/admin/policies").json()["policies"] == [
            p for p in other_tenant.get("/admin/policies").json()["policies"] if p["tenant_id"] == "tenant-b"
        ]


def test_every_call_leaves_one_audit_record_refusals_included(client: TestClient, docs_kb: str) -> None:
    agent_id, token = _agent(client, {"tools": ["rag_retrieve"], "knowledge_bases": [docs_kb]})
    with _as(token) as agent:
        ok = agent.post(f"/v1/kb/{docs_kb}/retrieve", json={"query": "agent memory", "top_k": 3})
        refused = agent.post(f"/v1/kb/{docs_kb}/ask", json={"question": "memory?"})
    records = client.get("/admin/audit", params={"caller": f"agent:{agent_id}"}).json()["records"]
    by_request = {r["request_id"]: r for r in records}
    assert len(records) == 2 and len(by_request) == 2
    allowed = by_request[ok.headers["apigw-requestid"]]
    assert allowed["decision"] == "allow" and allowed["tool"] == "rag_retrieve"
    assert allowed["query"] == "agent memory" and allowed["result_count"] == len(ok.json()["results"])
    assert allowed["retrieved_chunk_ids"] == [r["ref_id"] for r in ok.json()["results"]]
    assert allowed["knowledge_bases"] == [docs_kb] and allowed["latency_ms"] > 0
    assert allowed["effective_scope"] is not None
    denied = by_request[refused.headers["apigw-requestid"]]
    assert denied["decision"] == "deny" and denied["reason"] == "forbidden" and denied["status"] == 403


def test_unauthenticated_calls_are_audited_too(client: TestClient) -> None:
    response = client.get("/v1/kb", headers={"Authorization": "Bearer wrong"})
    assert response.status_code == 401
    records = client.get("/admin/audit", params={"caller": "unauthenticated:unauthenticated"}).json()[
        "records"
    ]
    assert response.headers["apigw-requestid"] in {r["request_id"] for r in records}


def test_a_failed_audit_write_fails_the_call(
    client: TestClient, docs_kb: str, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_: Any) -> None:
        raise ConnectionError("audit table unreachable")

    monkeypatch.setattr(stack.services.audit, "write", broken)
    read = client.post(f"/v1/kb/{docs_kb}/retrieve", json={"query": "memory"})
    assert read.status_code == 503 and read.json()["error"] == "audit_unavailable"
    write = client.post(f"/v1/kb/{docs_kb}/documents", json={"text": "new", "source_name": "new.txt"})
    assert write.status_code == 503
    monkeypatch.undo()
    names = [d["source_name"] for d in client.get(f"/v1/kb/{docs_kb}/documents").json()["documents"]]
    assert "new.txt" not in names, "nothing was changed by a call that could not be audited"


def test_rate_limit_holds_under_concurrent_calls(client: TestClient, docs_kb: str) -> None:
    _, token = _agent(
        client, {"tools": ["rag_list_kb"], "knowledge_bases": ["*"], "rate_limit_per_minute": 5}
    )
    with _as(token) as agent, ThreadPoolExecutor(max_workers=8) as pool:
        responses = list(pool.map(lambda _: agent.get("/v1/kb"), range(12)))
    statuses = sorted(r.status_code for r in responses)
    # The window may roll over mid-burst; never more than the limit per window gets through.
    assert statuses.count(200) in (5, 10) and statuses.count(429) == 12 - statuses.count(200)
    limited = next(r for r in responses if r.status_code == 429)
    assert limited.json()["error"] == "rate_limited" and int(limited.headers["Retry-After"]) >= 1


def test_spec_002_caller_agent_key_sees_only_granted_files(client: TestClient, docs_kb: str) -> None:
    _, key = _agent(
        client,
        {"tools": ["ka_retrieve"], "knowledge_bases": [docs_kb], "files": {docs_kb: ["memory.md"]}},
        kind="caller_key",
    )
    body = {
        "query": "private signing secret vault",
        "agent_id": "ka-agent",
        "user_id": "user_123",
        "metadata": {"caller_agent_key": key, "caller_agent_id": "mm-agent"},
        "options": {"top_k": 5},
    }
    response = TestClient(create_app()).post("/api/v1/knowledge/query", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["success"] is True and result["total"] == len(result["results"])
    assert all(r["source"] == "memory.md" for r in result["results"])
    assert {"file_id", "chunk_id"} <= set(result["results"][0]["metadata"]) and "query_time_ms" in result

    stats = (
        TestClient(create_app())
        .post("/api/v1/knowledge/query", json={**body, "query": "知識庫有多少文件？"})
        .json()
    )
    assert stats["type"] == "stats" and stats["results"] == []
    assert stats["knowledge_bases"][0]["file_count"] == 1, "statistics also show only granted files"

    bad = TestClient(create_app()).post(
        "/api/v1/knowledge/query", json={**body, "metadata": {"caller_agent_key": "cgak_nope"}}
    )
    assert bad.status_code == 401


def test_spec_002_empty_knowledge_base_gets_guidance(client: TestClient) -> None:
    empty = client.post("/v1/kb", json={"name": "empty", "status": "approved"}).json()["kb_id"]
    _, key = _agent(client, {"tools": ["ka_retrieve"], "knowledge_bases": [empty]}, kind="caller_key")
    result = (
        TestClient(create_app(), headers={"X-Caller-Agent-Key": key})
        .post("/api/v1/knowledge/query", json={"query": "anything?"})
        .json()
    )
    assert result["success"] is True and result["type"] == "empty" and result["guidance"]


def test_spec_002_unreachable_knowledge_base_is_unavailable_without_web_fallback(
    client: TestClient, docs_kb: str, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citegate.knowledge.search.base import SearchUnavailable

    _, key = _agent(client, {"tools": ["ka_retrieve"], "knowledge_bases": [docs_kb]}, kind="caller_key")

    def down(**_: Any) -> Any:
        raise SearchUnavailable("connection refused")

    monkeypatch.setattr(stack.services.index, "search", down)
    response = TestClient(create_app(), headers={"X-Caller-Agent-Key": key}).post(
        "/api/v1/knowledge/query", json={"query": "agent memory"}
    )
    assert response.status_code == 503
    assert (
        response.json()["error"] == "search_unavailable"
        and response.json()["details"]["web_fallback"] is False
    )


def test_a_spent_token_budget_refuses_further_answers(client: TestClient, docs_kb: str) -> None:
    _, token = _agent(
        client, {"tools": ["rag_ask"], "knowledge_bases": [docs_kb], "token_budget_per_day": 50}
    )
    with _as(token) as agent:
        first = agent.post(f"/v1/kb/{docs_kb}/ask", json={"question": "How is agent memory configured?"})
        assert first.status_code == 200
        second = agent.post(f"/v1/kb/{docs_kb}/ask", json={"question": "How is agent memory configured?"})
        assert second.status_code == 429 and "token budget" in second.json()["message"]
        assert int(second.headers["Retry-After"]) >= 1


def test_me_reports_the_callers_grants(client: TestClient, docs_kb: str) -> None:
    _, token = _agent(client, {"tools": ["rag_retrieve"], "knowledge_bases": [docs_kb]})
    with _as(token) as agent:
        me = agent.get("/v1/me").json()
    assert me["principal"]["type"] == "agent" and me["tools"] == ["rag_retrieve"]
    assert TestClient(create_app()).get("/v1/me").status_code == 401
