"""The authorizer function, as the gateway runs it, keeps accepted agent tokens: one credentials
table read for many requests, and a revocation through the admin route still applies to the very
next request in this process (PolicyStore.revoke_credential forgets the credential). The 60 s bound
for revocations made elsewhere is tests/unit/governance/identity/test_credential_cache.py's."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.integration.test_governance import _agent, _as


@pytest.fixture
def reads(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from citegate.container import services

    policies = services().policies
    seen: list[str] = []
    lookup = policies.agent_for_secret

    def counted(secret: str, kind: str) -> dict[str, Any] | None:
        seen.append(kind)
        return lookup(secret, kind)

    monkeypatch.setattr(policies, "agent_for_secret", counted)
    return seen


def test_an_agent_token_costs_one_read_until_it_is_revoked(client: TestClient, reads: list[str]) -> None:
    agent_id, token = _agent(client, {"tools": ["rag_list_kb"], "knowledge_bases": ["*"]})
    with _as(token) as agent:
        for _ in range(4):
            assert agent.get("/v1/kb").status_code == 200
        assert reads == ["token"]
        (credential,) = client.get(f"/admin/agents/{agent_id}/credentials").json()["credentials"]
        revoked = client.delete(f"/admin/agents/{agent_id}/credentials/{credential['credential_id']}")
        assert revoked.status_code == 200
        refused = agent.get("/v1/kb")
        assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"
        assert reads == ["token", "token"]  # looked up again, and found revoked
