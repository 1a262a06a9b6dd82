"""Spec 000 section 7's answer sessions through the local gateway: the create response's shape,
turn numbers that never repeat, follow-ups that narrow (never widen) the session's scope, an
expired session that stays `session_expired` for its owner after the TTL sweeper removed it, and
failures that show callers no internals (section 9's codes with nothing from the exception)."""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from citegate.runtime.gateway import create_app
from tests.integration.conftest import ingest

COMPONENT = "publish/system/components/kunora-kgent"
MAIN_MEMORY = (
    "Agent memory in kunora-kgent is configured in memory.yaml with the max_items setting, "
    "which defaults to 500 entries."
)
V2_MEMORY = (
    "Agent memory in kunora-kgent v2 is configured in agent.toml with the memory_items key, "
    "which defaults to 800 entries."
)
OPS_LIMITS = "The memory limit of kunora-kgent agents is 2 GB per agent process, set with memory_limit_mb."
SESSION_KEYS = {
    "sessionId",
    "sessionToken",
    "sessionTokenHash",
    "owner",
    "scope",
    "turns",
    "limits",
    "createdAt",
    "expiresAt",
}


@pytest.fixture(scope="module")
def corpus(client: TestClient) -> str:
    """One component on two versions, and a sub-folder: enough to see a scope narrowed."""
    kb = client.post(
        "/v1/kb", json={"name": "kgent sessions " + uuid.uuid4().hex[:6], "status": "approved"}
    ).json()["kb_id"]
    for version, text in (("main", MAIN_MEMORY), ("v2", V2_MEMORY)):
        ingest(
            client,
            kb,
            text=f"# Memory\n\n{text}",
            source_name=f"memory-{version}.md",
            metadata={"project": "kunora-kgent", "version": version, "path": f"{COMPONENT}/memory.md"},
        )
    ingest(
        client,
        kb,
        text=f"# Limits\n\n{OPS_LIMITS}",
        source_name="limits.md",
        metadata={"project": "kunora-kgent", "version": "main", "path": f"{COMPONENT}/ops/limits.md"},
    )
    return kb


def _agent(client: TestClient, policy: dict[str, Any]) -> TestClient:
    agent_id = "agent-" + uuid.uuid4().hex[:8]
    client.put(f"/admin/policies/agent:{agent_id}", json=policy).raise_for_status()
    token = client.post(f"/admin/agents/{agent_id}/credentials", json={"kind": "token"}).json()["secret"]
    return TestClient(create_app(), headers={"Authorization": f"Bearer {token}"})


SESSION_POLICY = {
    "tools": ["search", "ask", "answer_sessions", "answer_turns"],
    "knowledge_bases": ["*"],
    "scope": {"projects": ["kunora-kgent"], "path_prefixes": [COMPONENT], "versions": ["main", "v2"]},
}


# Anonymous readers share one rate limit; the tests that ask many questions ask as a reader agent.
READER_POLICY = {
    "tools": ["answer_ask", "ask", "search", "answer_sessions", "answer_turns"],
    "knowledge_bases": ["*"],
    "rate_limit_per_minute": 1000,
}


@pytest.fixture
def person() -> Iterator[TestClient]:
    with TestClient(create_app()) as anonymous:
        yield anonymous


@pytest.fixture
def reader(client: TestClient) -> Iterator[TestClient]:
    with _agent(client, READER_POLICY) as agent:
        yield agent


def _turn(client: TestClient, session: dict[str, Any], body: dict[str, Any], token: str | None = None) -> Any:
    return client.post(
        f"/answer/sessions/{session['sessionId']}/turns",
        headers={"X-Session-Token": token or session["sessionToken"]},
        json=body,
    )


def test_the_create_response_has_section_7s_shape(person: TestClient, corpus: str) -> None:
    created = person.post(
        "/answer/sessions",
        json={
            "caller": {"type": "human"},
            "scope": {"paths": [COMPONENT], "version": "main"},
            "question": "How is agent memory configured in kunora-kgent?",
        },
    )
    assert created.status_code == 201, created.text
    session = created.json()
    assert set(session) == SESSION_KEYS
    # Section 4/7's names: the scope as a caller would send it, not the server's internal form.
    assert session["scope"] == {
        "projects": None,
        "paths": [COMPONENT],
        "version": "main",
        "includeWorkingDocs": False,
    }
    assert session["owner"] == {"type": "anonymous", "id": "anonymous"}
    assert session["limits"] == {"maxTurns": 8, "maxContextTokens": 12000}
    assert session["createdAt"] < session["expiresAt"]
    # The token is returned once; its hash (what the server keeps) is no credential.
    token = session["sessionToken"]
    assert session["sessionTokenHash"] == hashlib.sha256(token.encode()).hexdigest()
    [first] = session["turns"]
    assert first["turn"] == 1 and first["question"].startswith("How is agent memory")
    assert first["sessionId"] == session["sessionId"] and first["citations"]
    assert all(c["version"] == "main" for c in first["citations"])
    assert _turn(person, session, {"question": "x"}, token=session["sessionTokenHash"]).json()["error"] == (
        "session_forbidden"
    )

    empty = person.post("/answer/sessions", json={}).json()
    assert set(empty) == SESSION_KEYS and empty["turns"] == []
    assert empty["scope"] == {"projects": None, "paths": None, "version": None, "includeWorkingDocs": False}


def test_turn_numbers_stay_unique_after_old_turns_are_trimmed(
    reader: TestClient, corpus: str, stack: Any
) -> None:
    session = reader.post("/answer/sessions", json={"scope": {"paths": [COMPONENT]}}).json()
    numbers = []
    for n in range(1, 12):
        reply = _turn(reader, session, {"question": f"What about memory, question {n}?"})
        assert reply.status_code == 200, reply.text
        numbers.append(reply.json()["turn"])
    assert numbers == list(range(1, 12))
    kept = stack.services.sessions._table.get_item(Key={"session_id": session["sessionId"]})["Item"]
    assert [int(t["turn"]) for t in kept["turns"]] == list(range(4, 12))  # the 8 newest


def test_a_follow_up_may_narrow_the_session_scope_but_never_widen_it(
    client: TestClient, reader: TestClient, corpus: str
) -> None:
    session = reader.post("/answer/sessions", json={"scope": {"paths": [COMPONENT]}}).json()
    question = "How is agent memory configured in kunora-kgent?"

    on_v2 = _turn(reader, session, {"question": question, "scope": {"version": "v2"}})
    assert on_v2.status_code == 200, on_v2.text
    result = on_v2.json()
    assert result["audit"]["scope"] == f"v2:{COMPONENT}"
    assert result["citations"] and all(c["version"] == "v2" for c in result["citations"])

    in_ops = _turn(reader, session, {"question": "memory limit?", "scope": {"paths": [f"{COMPONENT}/ops"]}})
    assert in_ops.json()["audit"]["scope"] == f"*:{COMPONENT}/ops"
    assert all(c["path"].startswith(f"{COMPONENT}/ops/") for c in in_ops.json()["citations"])

    # Narrowing holds for its turn only: the next turn inherits the session's scope again.
    assert _turn(reader, session, {"question": question}).json()["audit"]["scope"] == f"*:{COMPONENT}"

    # Wider than the session's scope: refused, whatever the caller's policy would allow.
    wider = _turn(reader, session, {"question": question, "scope": {"paths": ["publish"]}})
    assert wider.status_code == 403 and wider.json()["error"] == "forbidden_scope"
    with _agent(client, SESSION_POLICY) as agent:
        pinned = agent.post("/answer/sessions", json={"scope": {"version": "main"}}).json()
        assert pinned["scope"]["version"] == "main" and pinned["scope"]["paths"] == [COMPONENT]
        other_version = _turn(agent, pinned, {"question": question, "scope": {"version": "v2"}})
        assert other_version.status_code == 403 and other_version.json()["error"] == "forbidden_scope"
        narrower = _turn(agent, pinned, {"question": question, "scope": {"projects": ["kunora-kgent"]}})
        assert narrower.status_code == 200, narrower.text
        assert all(c["version"] == "main" for c in narrower.json()["citations"])


def test_an_expired_session_stays_expired_for_its_owner_after_clean_up(
    client: TestClient, corpus: str, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("citegate.answers.sessions.SESSION_TTL_SECONDS", 1)
    owner = _agent(client, SESSION_POLICY)
    session = owner.post("/answer/sessions", json={}).json()
    time.sleep(2.1)
    assert _turn(owner, session, {"question": "memory?"}).json()["error"] == "session_expired"
    stack.sweeper.sweep_once()  # what the TTL sweeper does about a minute later
    table = stack.services.sessions._table
    assert "Item" not in table.get_item(Key={"session_id": session["sessionId"]})

    expired = _turn(owner, session, {"question": "memory?"})
    assert expired.status_code == 410 and expired.json()["error"] == "session_expired"
    # Anyone else still learns nothing: not the owner, or not the token, is session_forbidden.
    with _agent(client, SESSION_POLICY) as other:
        assert _turn(other, session, {"question": "memory?"}).json()["error"] == "session_forbidden"
    assert (
        _turn(owner, session, {"question": "memory?"}, token="wrong").json()["error"] == "session_forbidden"
    )
    no_token = owner.post(f"/answer/sessions/{session['sessionId']}/turns", json={"question": "memory?"})
    assert no_token.status_code == 403 and no_token.json()["error"] == "session_forbidden"
    owner.close()


# ":8443", not "8443": a random request id (a UUID's hex) can hold those four digits.
INTERNALS = ("127.0.0.1", "10.0.0.7", "port=9", ":8443", "HTTPConnectionPool", "Error code", "Traceback")


def _shows_no_internals(response: Any) -> None:
    for needle in INTERNALS:
        assert needle not in response.text, f"{needle!r} reached the caller: {response.text}"


def test_failures_show_callers_no_internals(
    client: TestClient, reader: TestClient, corpus: str, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citegate.answers.base import AnswererUnavailable
    from citegate.knowledge.search.base import SearchUnavailable

    session = reader.post("/answer/sessions", json={"scope": {"paths": [COMPONENT]}}).json()
    question = {"question": "How is agent memory configured in kunora-kgent?"}

    class RefusingModel:
        name = "openai-chat"

        def answer(self, *_: Any, **__: Any) -> Any:
            raise AnswererUnavailable(
                "the model refused the request: Error code: 400 - upstream 10.0.0.7:8443 rejected it"
            )

    with monkeypatch.context() as patch:
        patch.setitem(stack.services.__dict__, "answerer", RefusingModel())
        with _agent(client, SESSION_POLICY) as agent:
            for response in (
                reader.post("/answer/ask", json=question),
                _turn(reader, session, question),
                agent.post("/agent/tools/ask", json=question),
            ):
                assert response.status_code == 503 and response.json()["error"] == "ragflow_unavailable"
                _shows_no_internals(response)

    def unreachable(**_: Any) -> Any:
        raise SearchUnavailable(
            "OpenSearch unreachable during search: ConnectionError(HTTPConnectionPool(host='127.0.0.1', "
            "port=9): Max retries exceeded with url: /chunks/_search)"
        )

    monkeypatch.setattr(stack.services.index, "search", unreachable)
    with _agent(client, SESSION_POLICY) as agent:
        for response in (
            reader.post("/answer/ask", json=question),
            _turn(reader, session, question),
            agent.post("/agent/tools/search", json={"query": "agent memory"}),
            agent.post("/agent/tools/ask", json=question),
        ):
            assert response.status_code == 503 and response.json()["error"] == "search_unavailable"
            _shows_no_internals(response)
