"""Spec 003's /api/v2/query through the local gateway: the dual agent as server-sent events.

Each test reads the stream the way spec 003's own client does (`data: <json>` lines) and checks
the message types, the tool calls, the streamed summary and its references.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from citegate.agents.models import ModelRegistry, ModelSpec
from citegate.container import services
from citegate.knowledge.search.base import SearchUnavailable
from citegate.runtime.gateway import create_app
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.conftest import ingest

SPEC_TYPES = {201, 301, 302, 1, 204, 0, 22}
MARS = (
    "# Mars\n\nOlympus Mons on Mars is the tallest volcano in the solar system. "
    "It rises about 22 km above the surrounding plains, nearly three times the height of Everest.\n\n"
    "## Moons\n\nMars has two small moons, Phobos and Deimos."
)
TEA = "# Tea\n\nGreen tea is steeped at about 80 degrees Celsius for two to three minutes."


def read_events(client: TestClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    with client.stream("POST", "/api/v2/query", json=body) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return [
            json.loads(line[len("data: ") :]) for line in response.iter_lines() if line.startswith("data: ")
        ]


def content_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["content"] for e in events if e["message_type"] == 1)


def caller(client: TestClient, policy: dict[str, Any], agent_id: str | None = None) -> TestClient:
    agent_id = agent_id or "agent-" + uuid.uuid4().hex[:8]
    client.put(f"/admin/policies/agent:{agent_id}", json=policy).raise_for_status()
    token = client.post(f"/admin/agents/{agent_id}/credentials", json={"kind": "token"}).json()["secret"]
    return TestClient(create_app(), headers={"Authorization": f"Bearer {token}"})


@pytest.fixture(scope="module")
def space_kb(client: TestClient) -> str:
    kb = client.post("/v1/kb", json={"name": "space " + uuid.uuid4().hex[:6], "status": "approved"})
    kb_id = str(kb.json()["kb_id"])
    ingest(client, kb_id, text=MARS, source_name="mars.md", metadata={"url": "https://example.org/mars"})
    ingest(client, kb_id, text=TEA, source_name="tea.md")
    return kb_id


@pytest.fixture(scope="module")
def reader(client: TestClient, space_kb: str) -> TestClient:
    """An agent that may use the query and read only the space knowledge base."""
    return caller(client, {"tools": ["query_v2"], "knowledge_bases": [space_kb]})


def test_the_offline_agents_search_several_times_and_stream_a_cited_summary(reader: TestClient) -> None:
    events = read_events(reader, {"query": "How high is Olympus Mons on Mars?"})
    types = [e["message_type"] for e in events]
    assert set(types) <= SPEC_TYPES and 22 not in types
    assert types[:2] == [201, 201] and types[-2:] == [204, 0]

    starts = [e for e in events if e["message_type"] == 301]
    ends = [e for e in events if e["message_type"] == 302]
    assert 2 <= len(starts) == len(ends) <= 3
    queries = [e["arguments"]["query"] for e in starts]
    assert len(set(queries)) == len(queries), "each round searches with different words"
    assert all(e["tool_name"] == "retrieve_knowledge" and e["arguments"]["top_k"] == 5 for e in starts)
    assert all(e["result"]["success"] for e in ends)
    first = ends[0]["result"]["results"][0]
    assert set(first) == {"content", "source", "score", "chunk_id", "doc_id", "doc_url"}

    deltas = [e["content"] for e in events if e["message_type"] == 1]
    assert len(deltas) > 1, "the summary is streamed in pieces"
    answer = "".join(deltas)
    assert "22 km" in answer
    references = events[-2]["content"]
    numbers = {int(n) for n in re.findall(r"\[(\d+)\]", answer)}
    assert numbers and numbers <= {r["id"] for r in references}
    assert [r["id"] for r in references] == list(range(1, len(references) + 1))
    scores = [r["score"] for r in references]
    assert scores == sorted(scores, reverse=True)
    assert len({r["chunk_id"] for r in references}) == len(references), "deduplicated by chunk"
    cited = references[min(numbers) - 1]
    assert cited["source"] == "Mars" or cited["source"] == "mars.md"
    assert cited["doc_url"] == "https://example.org/mars"
    assert len(cited["content_preview"]) <= 100


def found_count(events: list[dict[str, Any]]) -> int:
    """N of the status line "✅ Found N documents" (已检索到 N 个文档)."""
    status = next(e["content"] for e in events if e["message_type"] == 201 and "✅" in e["content"])
    return int(re.findall(r"\d+", status)[0])


def test_a_question_the_knowledge_base_cannot_answer_is_declined_plainly(reader: TestClient) -> None:
    events = read_events(reader, {"query": "What is the boiling point of tungsten?"})
    assert "could not find an answer" in content_of(events)
    assert "[" not in content_of(events), "a declined summary cites nothing"
    # The references are still what the retrieval agent found (spec 003: get_references()).
    assert events[-2]["message_type"] == 204 and len(events[-2]["content"]) == found_count(events)
    assert events[-1] == {"message_type": 0}


MOONS = [
    ("Phobos", "Mars"),
    ("Deimos", "Mars"),
    ("Io", "Jupiter"),
    ("Europa", "Jupiter"),
    ("Ganymede", "Jupiter"),
    ("Callisto", "Jupiter"),
    ("Titan", "Saturn"),
    ("Enceladus", "Saturn"),
    ("Mimas", "Saturn"),
    ("Rhea", "Saturn"),
    ("Miranda", "Uranus"),
    ("Ariel", "Uranus"),
    ("Titania", "Uranus"),
    ("Oberon", "Uranus"),
    ("Triton", "Neptune"),
    ("Nereid", "Neptune"),
]


def test_the_references_list_every_document_found_in_the_summarys_numbering(client: TestClient) -> None:
    """Spec 003: 204 is the document manager's get_references(): each chunk any round found, once,
    numbered 1..n by score; as many as the status line announced, also beyond the 12 documents
    the summary is given."""
    kb_id = client.post(
        "/v1/kb", json={"name": "moons " + uuid.uuid4().hex[:6], "status": "approved"}
    ).json()["kb_id"]
    for moon, planet in MOONS:
        text = f"# {moon}\n\n{moon} is a moon of {planet}. The moon {moon} orbits the planet {planet}."
        ingest(client, kb_id, text=text, source_name=f"{moon.lower()}.md")
    moons = caller(client, {"tools": ["query_v2"], "knowledge_bases": [kb_id]})
    events = read_events(moons, {"query": "Which moon orbits which planet?", "top_k": 20})
    found = {r["chunk_id"] for e in events if e["message_type"] == 302 for r in e["result"]["results"]}
    references = events[-2]["content"]
    assert len(found) > 12, f"the rounds should find more than the summary's 12 documents, got {len(found)}"
    assert len(references) == found_count(events) == len(found)
    assert {r["chunk_id"] for r in references} == found
    assert [r["id"] for r in references] == list(range(1, len(references) + 1))
    scores = [r["score"] for r in references]
    assert scores == sorted(scores, reverse=True)
    numbers = {int(n) for n in re.findall(r"\[(\d+)\]", content_of(events))}
    assert numbers <= {r["id"] for r in references}, "every marker names a reference"


def test_chinese_questions_get_chinese_status_messages(reader: TestClient) -> None:
    events = read_events(reader, {"query": "火星上的奥林匹斯山有多高？"})
    assert events[0] == {"message_type": 201, "content": "双智能体正在工作..."}


def test_the_policy_decides_which_knowledge_bases_the_tool_searches(
    client: TestClient, space_kb: str
) -> None:
    other = caller(client, {"tools": ["query_v2"], "knowledge_bases": ["kb-that-does-not-exist"]})
    events = read_events(other, {"query": "How high is Olympus Mons?"})
    found = [r for e in events if e["message_type"] == 302 for r in e["result"]["results"]]
    assert found == []
    assert events[-2]["content"] == []


def test_anonymous_callers_read_only_approved_knowledge_bases(client: TestClient) -> None:
    working = client.post("/v1/kb", json={"name": "drafts " + uuid.uuid4().hex[:6]}).json()["kb_id"]
    secret = "Zorblax-" + uuid.uuid4().hex[:8]
    draft = f"# Draft\n\nThe codename of the unreleased probe is {secret}."
    ingest(client, working, text=draft, source_name="d.md")
    anonymous = TestClient(create_app())
    events = read_events(anonymous, {"query": f"What is the codename {secret} of the unreleased probe?"})
    found = [r["content"] for e in events if e["message_type"] == 302 for r in e["result"]["results"]]
    assert not any(secret in text for text in found)
    assert secret not in content_of(events) and secret not in json.dumps(events[-2], ensure_ascii=False)


def test_bad_requests_are_refused_before_the_stream_starts(reader: TestClient) -> None:
    missing = reader.post("/api/v2/query", json={})
    assert missing.status_code == 400 and missing.json()["error"] == "INVALID_REQUEST"
    assert "query" in missing.text
    model = reader.post("/api/v2/query", json={"query": "hi", "model_id": "no-such-model"})
    assert model.status_code == 400 and model.json()["error"] == "MODEL_NOT_AVAILABLE"
    refused = TestClient(create_app(), headers={"Authorization": "Bearer wrong"})
    assert refused.post("/api/v2/query", json={"query": "hi"}).status_code == 401


def test_a_search_failure_midway_sends_an_error_and_ends_the_stream(
    reader: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(**_: Any) -> None:
        raise SearchUnavailable("connection refused")

    monkeypatch.setattr(services().index, "search", down)
    events = read_events(reader, {"query": "How high is Olympus Mons?"})
    assert [e["result"]["success"] for e in events if e["message_type"] == 302] == [False] * 2
    assert events[-2]["message_type"] == 22 and "unreachable" in events[-2]["content"]
    assert events[-1] == {"message_type": 0}


@pytest.fixture
def fake_models(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        specs = [
            ModelSpec(name, name, model=name, base_url=server.url, api_key="k")
            for name in ("agent-tools", "agent-stream-dies")
        ]
        monkeypatch.setitem(services().__dict__, "chat_models", ModelRegistry(specs))
        yield server


def test_a_tool_calling_model_picks_the_keywords_and_dangling_markers_never_reach_the_client(
    reader: TestClient, fake_models: FakeOpenAIServer
) -> None:
    events = read_events(reader, {"query": "How high is Olympus Mons?", "model_id": "agent-tools"})
    starts = [e["arguments"] for e in events if e["message_type"] == 301]
    assert starts == [{"query": "Olympus Mons height", "top_k": 3}, {"query": "Mars volcano", "top_k": 3}]
    answer = content_of(events)
    assert answer == "Olympus Mons rises about 22 km [1] and is very old . Done."
    assert "[9" not in "".join(e["content"] for e in events if e["message_type"] == 1)
    summary_request = fake_models.requests[-1]
    assert summary_request["stream"] is True and "[1] 来源：" in summary_request["messages"][-1]["content"]


def test_a_model_that_fails_midway_ends_the_stream_with_an_error(
    reader: TestClient, fake_models: FakeOpenAIServer
) -> None:
    events = read_events(reader, {"query": "How high is Olympus Mons?", "model_id": "agent-stream-dies"})
    assert [e["message_type"] for e in events if e["message_type"] == 301], "keywords searched anyway"
    assert content_of(events).startswith("Olympus Mons")
    assert events[-2]["message_type"] == 22
    assert events[-1] == {"message_type": 0}


def test_every_query_is_audited(client: TestClient, space_kb: str) -> None:
    agent_id = "agent-" + uuid.uuid4().hex[:8]
    audited = caller(client, {"tools": ["query_v2"], "knowledge_bases": [space_kb]}, agent_id)
    read_events(audited, {"query": "How high is Olympus Mons?"})
    records = client.get("/admin/audit", params={"caller": f"agent:{agent_id}"}).json()["records"]
    assert len(records) == 1
    record = records[0]
    assert record["route"] == "POST /api/v2/query" and record["tool"] == "query_v2"
    assert record["decision"] == "allow" and record["knowledge_bases"] == [space_kb]
    assert record["retrieved_chunk_ids"] and set(record["cited_chunk_ids"]) <= set(
        record["retrieved_chunk_ids"]
    )


def test_a_stream_that_cannot_be_audited_says_so_before_it_ends(
    reader: TestClient, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_: Any) -> None:
        raise ConnectionError("audit table unreachable")

    monkeypatch.setattr(stack.services.audit, "write", broken)
    events = read_events(reader, {"query": "How high is Olympus Mons?"})
    assert events[-2]["message_type"] == 22 and "audited" in events[-2]["content"]
    assert events[-1] == {"message_type": 0}
