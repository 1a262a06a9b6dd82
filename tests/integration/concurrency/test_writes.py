"""Many distinct writes at once: each lands as its own, each answer is its own request's, and two
callers served at the same time never borrow each other's identity."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import httpx

from tests.integration.conftest import TOKEN, wait_for_task

N = 16
T = TypeVar("T")


def _client(live_url: str, token: str = TOKEN) -> httpx.Client:
    return httpx.Client(base_url=live_url, headers={"Authorization": f"Bearer {token}"}, timeout=60)


def _at_once(
    live_url: str, work: Callable[[httpx.Client, int], T], n: int = N, token: str = TOKEN
) -> list[T]:
    """`work(client, i)` for i in range(n), each on its own connection, all at once."""

    def run(i: int) -> T:
        with _client(live_url, token) as client:
            return work(client, i)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(run, range(n)))


def _own_request_id(response: httpx.Response) -> bool:
    return bool(response.json().get("requestId") == response.headers["apigw-requestid"])


def test_knowledge_bases_created_at_once_are_each_their_own(live_url: str) -> None:
    run = uuid.uuid4().hex[:6]
    answers = _at_once(
        live_url, lambda c, i: c.post("/v1/kb", json={"kb_id": f"many-{run}-{i}", "name": f"Many {run} {i}"})
    )
    assert [a.status_code for a in answers] == [201] * N, [a.text for a in answers if a.status_code != 201]
    assert [a.json()["kb_id"] for a in answers] == [f"many-{run}-{i}" for i in range(N)]
    assert [a.json()["name"] for a in answers] == [f"Many {run} {i}" for i in range(N)]
    # And a second round for the same ids: every one is refused for its own id.
    again = _at_once(live_url, lambda c, i: c.post("/v1/kb", json={"kb_id": f"many-{run}-{i}", "name": "x"}))
    assert [a.status_code for a in again] == [409] * N
    assert all(f"many-{run}-{i}" in a.json()["message"] and _own_request_id(a) for i, a in enumerate(again))


def test_documents_ingested_at_once_each_land_with_their_own_content(live_url: str) -> None:
    kb = "ingest-" + uuid.uuid4().hex[:6]
    with _client(live_url) as client:
        assert client.post("/v1/kb", json={"kb_id": kb, "name": "at once"}).status_code == 201
    words = [f"zq{uuid.uuid4().hex[:8]}" for _ in range(N)]

    def submit(client: httpx.Client, i: int) -> httpx.Response:
        text = f"# Note {i}\n\nThe marker {words[i]} belongs to note {i} alone. " * 3
        return client.post(f"/v1/kb/{kb}/documents", json={"text": text, "source_name": f"note-{i}.md"})

    accepted = _at_once(live_url, submit)
    assert [a.status_code for a in accepted] == [202] * N, [a.text for a in accepted if a.status_code != 202]
    with _client(live_url) as client:
        tasks = [wait_for_task(client, a.json()["task_id"]) for a in accepted]
        assert [t["status"] for t in tasks] == ["succeeded"] * N, tasks
        assert [t["document_id"] for t in tasks] == [a.json()["document_id"] for a in accepted]
        documents = {d["document_id"]: d for d in client.get(f"/v1/kb/{kb}/documents").json()["documents"]}
        assert len(documents) == N
        for i, answer in enumerate(accepted):
            assert documents[answer.json()["document_id"]]["source_name"] == f"note-{i}.md"
        # Each document holds its own words, found by its own marker.
        for i, word in enumerate(words):
            hits = client.post(f"/v1/kb/{kb}/retrieve", json={"query": word, "top_k": 1}).json()["results"]
            assert hits and word in hits[0]["chunk_text"] and f"note {i} alone" in hits[0]["chunk_text"]


def test_feedback_reported_at_once_is_recorded_per_report(live_url: str) -> None:
    run = uuid.uuid4().hex[:6]

    def report(client: httpx.Client, i: int) -> httpx.Response:
        body = {
            "eventType": "qa_no_answer",
            "question": f"Where is setting {run}-{i} documented?",
            "scope": {"paths": ["publish/x"], "version": "main"},
            "citations": [],
        }
        return client.post("/agent/tools/create_feedback", json=body)

    answers = _at_once(live_url, report)
    assert [a.status_code for a in answers] == [200] * N, [a.text for a in answers if a.status_code != 200]
    records = [a.json()["record"] for a in answers]
    assert all(a.json()["created"] for a in answers)
    assert len({r["recordId"] for r in records}) == N
    with _client(live_url) as client:
        listed = client.get("/admin/feedback", params={"limit": "1000"}).json()["records"]
    question = {r["recordId"]: r["question"] for r in listed}
    assert [question[r["recordId"]] for r in records] == [
        f"Where is setting {run}-{i} documented?" for i in range(N)
    ]


def test_chat_messages_sent_at_once_are_answered_in_their_own_chats(live_url: str) -> None:
    run = uuid.uuid4().hex[:6]

    def chat(client: httpx.Client, i: int) -> tuple[str, httpx.Response]:
        created = client.post("/api/v1/agent/chats", json={"title": f"chat {run} {i}"})
        assert created.status_code == 201, created.text
        chat_id = created.json()["id"]
        sent = client.post(
            f"/api/v1/agent/chats/{chat_id}/messages", json={"content": f"question {run} {i}?"}
        )
        return chat_id, sent

    answers = _at_once(live_url, chat)
    assert [a.status_code for _, a in answers] == [200] * N, [a.text for _, a in answers]
    with _client(live_url) as client:
        for i, (chat_id, _) in enumerate(answers):
            stored = client.get(f"/api/v1/agent/chats/{chat_id}").json()
            assert stored["title"] == f"chat {run} {i}"
            contents = [m["content"] for m in stored["messages"] if m["type"] == "user"]
            assert contents == [f"question {run} {i}?"]


def test_two_callers_served_at_once_keep_their_own_identity_and_rights(live_url: str) -> None:
    """A limited agent and the service, interleaved: the agent's writes to a knowledge base it may
    not write are refused every time, the service's all land, and each is told who it is."""
    kb = "mixed-" + uuid.uuid4().hex[:6]
    agent_id = "limited-" + uuid.uuid4().hex[:6]
    with _client(live_url) as service:
        assert service.post("/v1/kb", json={"kb_id": kb, "name": "service only"}).status_code == 201
        policy = {"tools": ["me", "rag_ingest", "rag_list_kb"], "knowledge_bases": ["elsewhere"]}
        assert service.put(f"/admin/policies/agent:{agent_id}", json=policy).status_code == 200
        issued = service.post(f"/admin/agents/{agent_id}/credentials", json={"kind": "token"})
        agent_token = issued.json()["secret"]

    def call(i: int) -> tuple[str, httpx.Response, httpx.Response]:
        who = "agent" if i % 2 else "service"
        with _client(live_url, agent_token if who == "agent" else TOKEN) as client:
            me = client.get("/v1/me")
            body = {"text": f"Written by {who} {i}.", "source_name": f"{who}-{i}.md"}
            return who, me, client.post(f"/v1/kb/{kb}/documents", json=body)

    with ThreadPoolExecutor(N) as pool:
        answers = list(pool.map(call, range(N)))
    for who, me, written in answers:
        expected = agent_id if who == "agent" else "rag-service"
        assert me.status_code == 200 and me.json()["principal"]["id"] == expected, me.text
        assert written.status_code == (403 if who == "agent" else 202), written.text
    with _client(live_url) as service:
        for _, _, written in answers:
            if written.status_code == 202:
                wait_for_task(service, written.json()["task_id"])
        names = sorted(d["source_name"] for d in service.get(f"/v1/kb/{kb}/documents").json()["documents"])
    assert names == sorted(f"service-{i}.md" for i in range(0, N, 2))
