"""A knowledge base answered by a Bedrock model, through the local gateway: the answerer and the chat
model the container builds from CITEGATE_LLM_PROVIDER=bedrock, talking to the loopback Bedrock
runtime (real boto3, real SigV4, real Converse and ConverseStream shapes)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from starlette.testclient import TestClient

from citegate.agents.models import ModelRegistry
from citegate.container import Services, services
from citegate.platform.settings import Settings
from citegate.runtime.gateway import create_app
from tests.fakes.bedrock_server import ROLE_ARN, FakeBedrock
from tests.integration.conftest import ingest

MARS = (
    "# Mars\n\nOlympus Mons on Mars is the tallest volcano in the solar system. "
    "It rises about 22 km above the surrounding plains.\n\n"
    "## Moons\n\nMars has two small moons, Phobos and Deimos."
)


@pytest.fixture(scope="module")
def mars_kb(client: TestClient) -> str:
    kb = client.post("/v1/kb", json={"name": "bedrock mars " + uuid.uuid4().hex[:6], "status": "approved"})
    kb_id = str(kb.json()["kb_id"])
    ingest(client, kb_id, text=MARS, source_name="mars.md", metadata={"url": "https://example.org/mars"})
    return kb_id


@pytest.fixture
def on_bedrock(bedrock: FakeBedrock, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Point the running stack's answerer and chat models at Bedrock (`model`), built by the
    container from settings, as a deploy with llm_provider=bedrock builds them."""

    def use(model: str) -> FakeBedrock:
        settings = Settings(
            CITEGATE_LLM_PROVIDER="bedrock",
            CITEGATE_BEDROCK_MODEL_ID=model,
            CITEGATE_BEDROCK_ENDPOINT_URL=bedrock.url,
            CITEGATE_LLM_TIMEOUT="5",
            AWS_REGION="us-east-1",
        )
        built = Services(settings=settings)
        monkeypatch.setitem(services().__dict__, "answerer", built.answerer)
        monkeypatch.setitem(services().__dict__, "chat_models", ModelRegistry.from_settings(settings))
        return bedrock

    return use


def test_a_bedrock_model_answers_with_bound_citations(
    client: TestClient, mars_kb: str, on_bedrock: Any
) -> None:
    server = on_bedrock("anthropic.claude-3-5-haiku-20241022-v1:0")
    body = client.post(f"/v1/kb/{mars_kb}/ask", json={"question": "How high is Olympus Mons?"}).json()
    assert body["no_answer"] is False, body
    assert body["answer"].endswith("[1]") and "Olympus Mons" in body["answer"]
    assert body["used_refs"] == [c["ref_id"] for c in body["citations"]]
    assert body["citations"][0]["url"] == "https://example.org/mars"
    assert body["stats"]["answerer"] == "bedrock-converse"
    assert body["stats"]["model"] == "anthropic.claude-3-5-haiku-20241022-v1:0"
    [call] = [c for c in server.calls if c["operation"] == "converse"]
    assert call["signature_ok"] and call["body"]["toolConfig"]["toolChoice"] == {
        "tool": {"name": "cited_answer"}
    }


def test_forged_citations_from_bedrock_are_no_answer(
    client: TestClient, mars_kb: str, on_bedrock: Any
) -> None:
    on_bedrock("forge-all")
    body = client.post(f"/v1/kb/{mars_kb}/ask", json={"question": "How high is Olympus Mons?"}).json()
    assert body["no_answer"] is True and body["citations"] == []


@pytest.mark.parametrize("model", ["throttle-always", "access-denied"])
def test_bedrock_failures_are_model_unavailable_and_leak_nothing(
    client: TestClient, mars_kb: str, on_bedrock: Any, model: str
) -> None:
    on_bedrock(model)
    response = client.post(f"/v1/kb/{mars_kb}/ask", json={"question": "How high is Olympus Mons?"})
    assert response.status_code == 503, response.text
    assert response.json()["error"] == "model_unavailable"
    # What kind of failure, for the operator; never Bedrock's own text (the role, the account).
    kind = "ThrottlingException" if model == "throttle-always" else "AccessDeniedException"
    assert kind in response.json()["message"]
    for secret in (ROLE_ARN, "123456789012", "127.0.0.1"):
        assert secret not in response.text


def test_the_dual_agent_streams_a_bedrock_summary(client: TestClient, mars_kb: str, on_bedrock: Any) -> None:
    agent_id = "agent-" + uuid.uuid4().hex[:8]
    client.put(
        f"/admin/policies/agent:{agent_id}", json={"tools": ["query_v2"], "knowledge_bases": [mars_kb]}
    ).raise_for_status()
    token = client.post(f"/admin/agents/{agent_id}/credentials", json={"kind": "token"}).json()["secret"]
    reader = TestClient(create_app(), headers={"Authorization": f"Bearer {token}"})
    server = on_bedrock("agent-tools")
    with reader.stream("POST", "/api/v2/query", json={"query": "How high is Olympus Mons?"}) as response:
        assert response.status_code == 200, response.read()
        events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]
    searched = [e["arguments"] for e in events if e["message_type"] == 301]
    assert searched == [{"query": "Olympus Mons height", "top_k": 3}, {"query": "Mars volcano", "top_k": 3}]
    answer = "".join(e["content"] for e in events if e["message_type"] == 1)
    assert answer == "Olympus Mons rises about 22 km [1] and is very old . Done."
    assert events[-1] == {"message_type": 0}
    assert [c["operation"] for c in server.calls] == ["converse", "converse", "converse-stream"]
    assert all(c["signature_ok"] for c in server.calls)
