"""Spec 000's Answer API and Agent Access, through the local gateway: section 10's acceptance
cases and section 9's codes (the feedback cases are in test_feedback.py)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from starlette.testclient import TestClient

from citegate.runtime.gateway import create_app
from tests.integration.conftest import ingest

COMPONENT = "publish/system/components/kunora-kgent"
MEMORY = (
    "Agent memory in kunora-kgent is configured in memory.yaml with the max_items setting, "
    "which defaults to 500 entries."
)
LIMITS = "The memory limit of kunora-kgent agents is 2 GB per agent process, set with memory_limit_mb."


@pytest.fixture(scope="module")
def corpus(client: TestClient) -> str:
    kb = client.post(
        "/v1/kb", json={"name": "kgent docs " + uuid.uuid4().hex[:6], "status": "approved"}
    ).json()["kb_id"]
    meta = {"project": "kunora-kgent", "version": "main"}
    ingest(
        client,
        kb,
        text=f"# Memory\n\n{MEMORY}\n\n## Limits\n\n{LIMITS}",
        source_name="memory.md",
        metadata={**meta, "path": f"{COMPONENT}/memory.md", "url": "/system/components/kunora-kgent/memory"},
    )
    ingest(
        client,
        kb,
        text="# Private\n\nThe deployment signing key rotates every 90 days.",
        source_name="private.md",
        metadata={**meta, "path": "internal/ops/keys.md"},
    )
    return kb


def _agent(client: TestClient, policy: dict[str, Any]) -> TestClient:
    agent_id = "agent-" + uuid.uuid4().hex[:8]
    client.put(f"/admin/policies/agent:{agent_id}", json=policy).raise_for_status()
    token = client.post(f"/admin/agents/{agent_id}/credentials", json={"kind": "token"}).json()["secret"]
    return TestClient(create_app(), headers={"Authorization": f"Bearer {token}"})


KGENT_POLICY = {
    "tools": ["search", "ask", "get_page", "get_context", "answer_sessions", "answer_turns"],
    "knowledge_bases": ["*"],
    "scope": {"projects": ["kunora-kgent"], "path_prefixes": [COMPONENT], "versions": ["main"]},
    "write_actions": ["feedback"],
}


def test_a_person_asks_from_the_page(corpus: str) -> None:
    anonymous = TestClient(create_app())
    response = anonymous.post(
        "/answer/ask",
        json={
            "caller": {"type": "human", "purpose": "page-question"},
            "scope": {"paths": [COMPONENT], "version": "main"},
            "question": "How is agent memory configured in kunora-kgent?",
        },
    )
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["answer"] and result["citations"] and result["confidence"] in ("high", "medium")
    citation = result["citations"][0]
    assert citation["path"] == f"{COMPONENT}/memory.md" and citation["sourceProject"] == "kunora-kgent"
    assert citation["version"] == "main" and citation["chunkId"].startswith("r_") and citation["anchor"]
    assert result["grounding"] and all(g["supported"] for g in result["grounding"])
    assert result["audit"]["requestId"] == response.headers["apigw-requestid"]
    assert result["audit"]["scope"] == f"main:{COMPONENT}"
    assert result["noAnswerReason"] is None


def test_an_anonymous_caller_on_an_authenticated_read_site_is_told_to_sign_in(client: TestClient) -> None:
    """Spec 000 6.1: in authenticated-read mode (the anonymous policy grants no reading tool) the
    caller must be identified first: 401 `unauthorized` ("who are you"), not 403 ("you may not"),
    in each family's code; a signed-in caller is then judged by its own policy."""
    original = client.get("/admin/policies/anonymous")
    assert original.status_code == 200, original.text
    kept = {k: v for k, v in original.json().items() if k not in ("principal_key", "tenant_id")}
    assert client.put("/admin/policies/anonymous", json={**kept, "tools": []}).status_code == 200
    try:
        anonymous = TestClient(create_app())
        for path, body, code in (
            ("/answer/ask", {"question": "How is agent memory configured?"}, "unauthorized"),
            ("/answer/sessions", {}, "unauthorized"),
            (
                "/agent/tools/create_feedback",
                {"eventType": "qa_feedback", "question": "memory?"},
                "unauthorized",
            ),
            ("/api/v2/query", {"query": "agent memory"}, "UNAUTHORIZED"),
        ):
            refused = anonymous.post(path, json=body)
            assert refused.status_code == 401, (path, refused.text)
            assert refused.json()["error"] == code and "sign in" in refused.json()["message"]
        # An identified caller without the tool is still 403: it is known, and may not.
        with _agent(client, {**KGENT_POLICY, "tools": ["search"]}) as agent:
            forbidden = agent.post("/answer/ask", json={"question": "memory?"})
            assert forbidden.status_code == 403 and forbidden.json()["error"] == "forbidden_tool"
    finally:
        assert client.put("/admin/policies/anonymous", json=kept).status_code == 200


def test_an_agent_reaching_outside_its_paths_gets_forbidden_scope(client: TestClient, corpus: str) -> None:
    with _agent(client, KGENT_POLICY) as agent:
        response = agent.post(
            "/agent/tools/ask", json={"scope": {"paths": ["internal/ops"]}, "question": "keys?"}
        )
        assert response.status_code == 403 and response.json()["error"] == "forbidden_scope"
        escape = agent.post(
            "/agent/tools/search",
            json={"scope": {"paths": [f"{COMPONENT}/../../../internal"]}, "query": "signing key"},
        )
        assert escape.json()["error"] == "forbidden_scope"
        # Without asking for more, the grant is the scope: the private page never shows up.
        found = agent.post("/agent/tools/search", json={"query": "deployment signing key rotates"}).json()
        assert all(r["citation"]["path"].startswith(COMPONENT) for r in found["results"])


def test_an_agent_calling_a_tool_it_was_not_granted_gets_forbidden_tool(
    client: TestClient, corpus: str
) -> None:
    with _agent(client, {**KGENT_POLICY, "tools": ["search"]}) as agent:
        response = agent.post("/agent/tools/get_context", json={"task": "configure memory"})
        assert response.status_code == 403 and response.json()["error"] == "forbidden_tool"


def test_no_answer_gives_a_reason_and_feedback_actions(corpus: str) -> None:
    result = (
        TestClient(create_app())
        .post(
            "/answer/ask",
            json={"question": "What is the boiling point of tungsten?", "scope": {"paths": [COMPONENT]}},
        )
        .json()
    )
    assert result["answer"] == "" and result["citations"] == [] and result["confidence"] == "low"
    assert result["noAnswerReason"]["code"] == "no_answer" and result["noAnswerReason"]["reason"]
    kinds = {a["type"]: a for a in result["actions"]}
    assert set(kinds) == {"create_feedback", "create_improvement_task"}
    assert (
        len(kinds["create_feedback"]["dedupeKey"]) == 64
        and "tungsten" not in kinds["create_feedback"]["dedupeKey"]
    )


def test_a_follow_up_turn_keeps_scope_and_citations(corpus: str) -> None:
    person = TestClient(create_app())
    created = person.post(
        "/answer/sessions",
        json={
            "scope": {"paths": [COMPONENT], "version": "main"},
            "question": "How is agent memory configured in kunora-kgent?",
        },
    )
    assert created.status_code == 201, created.text
    session = created.json()
    assert session["turns"][0]["citations"] and session["scope"]["paths"] == [COMPONENT]
    headers = {"X-Session-Token": session["sessionToken"]}
    follow = person.post(
        f"/answer/sessions/{session['sessionId']}/turns",
        headers=headers,
        json={"question": "What about its memory limits?"},
    )
    assert follow.status_code == 200, follow.text
    turn = follow.json()
    assert turn["turn"] == 2 and "2 GB" in turn["answer"]
    assert all(c["path"].startswith(COMPONENT) for c in turn["citations"])
    wider = person.post(
        f"/answer/sessions/{session['sessionId']}/turns",
        headers=headers,
        json={"question": "keys?", "scope": {"paths": ["internal"]}},
    )
    assert wider.status_code == 403 and wider.json()["error"] == "forbidden_scope"


def test_someone_else_using_the_session_id_gets_session_forbidden(client: TestClient, corpus: str) -> None:
    owner = _agent(client, KGENT_POLICY)
    session = owner.post("/answer/sessions", json={}).json()
    other = _agent(client, KGENT_POLICY)
    stolen = other.post(
        f"/answer/sessions/{session['sessionId']}/turns",
        headers={"X-Session-Token": session["sessionToken"]},
        json={"question": "memory?"},
    )
    assert stolen.status_code == 403 and stolen.json()["error"] == "session_forbidden"
    no_token = owner.post(f"/answer/sessions/{session['sessionId']}/turns", json={"question": "memory?"})
    assert no_token.json()["error"] == "session_forbidden"
    unknown = owner.post(
        "/answer/sessions/s_missing/turns", headers={"X-Session-Token": "x"}, json={"question": "memory?"}
    )
    assert unknown.json()["error"] == "session_forbidden"


def test_an_expired_session_gets_session_expired(client: TestClient, corpus: str, stack: Any) -> None:
    person = TestClient(create_app())
    session = person.post("/answer/sessions", json={}).json()
    table = stack.services.sessions._table
    table.update_item(
        Key={"session_id": session["sessionId"]},
        UpdateExpression="SET expires_at_epoch = :past",
        ExpressionAttributeValues={":past": int(time.time()) - 1},
    )
    expired = person.post(
        f"/answer/sessions/{session['sessionId']}/turns",
        headers={"X-Session-Token": session["sessionToken"]},
        json={"question": "memory?"},
    )
    assert expired.status_code == 410 and expired.json()["error"] == "session_expired"


def test_an_unreachable_answering_engine_is_ragflow_unavailable(
    corpus: str, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citegate.answers.openai_chat import OpenAIChatAnswerer

    monkeypatch.setitem(
        stack.services.__dict__,
        "answerer",
        OpenAIChatAnswerer(base_url="http://127.0.0.1:9/v1", api_key="k", model="m", timeout=0.5),
    )
    response = TestClient(create_app()).post(
        "/answer/ask",
        json={"question": "How is agent memory configured in kunora-kgent?", "scope": {"paths": [COMPONENT]}},
    )
    assert response.status_code == 503 and response.json()["error"] == "ragflow_unavailable"
    assert "answer" not in response.json()


def test_an_unreachable_index_is_search_unavailable(
    corpus: str, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citegate.knowledge.search.base import SearchUnavailable

    def down(**_: Any) -> Any:
        raise SearchUnavailable("connection refused")

    monkeypatch.setattr(stack.services.index, "search", down)
    response = TestClient(create_app()).post("/answer/ask", json={"question": "memory?"})
    assert response.status_code == 503 and response.json()["error"] == "search_unavailable"


def test_section_9_codes_for_bad_calls(client: TestClient, corpus: str) -> None:
    anonymous = TestClient(create_app())
    assert anonymous.post("/answer/ask", json={"question": ""}).json()["error"] == "invalid_request"
    assert (
        anonymous.post("/answer/ask", json={"question": "x", "colour": 1}).json()["error"]
        == "invalid_request"
    )
    bad_token = TestClient(create_app(), headers={"Authorization": "Bearer nope"})
    assert bad_token.post("/answer/ask", json={"question": "x"}).json()["error"] == "unauthorized"
    assert anonymous.post("/agent/tools/search", json={"query": "x"}).json()["error"] == "unauthorized"
    with _agent(client, {**KGENT_POLICY, "knowledge_bases": []}) as no_datasets:
        assert (
            no_datasets.post("/agent/tools/ask", json={"question": "memory?"}).json()["error"]
            == "dataset_not_allowed"
        )
    working = anonymous.post("/answer/ask", json={"question": "x", "scope": {"includeWorkingDocs": True}})
    assert working.status_code == 403 and working.json()["error"] == "forbidden_scope"


def test_get_page_and_get_context(client: TestClient, corpus: str) -> None:
    with _agent(client, KGENT_POLICY) as agent:
        page = agent.post("/agent/tools/get_page", json={"path": f"{COMPONENT}/memory.md", "version": "main"})
        assert page.status_code == 200, page.text
        body = page.json()
        assert [h["anchor"] for h in body["headings"]][:1] == ["memory"] and body["sections"]
        hidden = agent.post("/agent/tools/get_page", json={"path": "internal/ops/keys.md"})
        assert hidden.status_code == 403 and hidden.json()["error"] == "forbidden_scope"  # spec 000 case 2
        pack = agent.post(
            "/agent/tools/get_context", json={"task": "configure agent memory limits", "tokenBudget": 200}
        ).json()
        assert pack["tokensUsed"] <= 200 and pack["passages"]
        assert all(p["citation"]["path"].startswith(COMPONENT) for p in pack["passages"])
        assert {"omitted", "relatedPages"} <= set(pack)


def test_get_page_reads_the_page_the_standard_requests_scope_names(client: TestClient) -> None:
    """Spec 000 section 4's standard request has `scope.paths` and no `path`: get_page reads the page
    that one path names (a folder's path: its index page); none or several is a 400 naming `path`."""
    folder = "publish/system/components/kunora-pager-" + uuid.uuid4().hex[:6]
    kb = client.post("/v1/kb", json={"name": "pager " + uuid.uuid4().hex[:6], "status": "approved"}).json()[
        "kb_id"
    ]
    meta = {"project": "kunora-pager", "version": "main"}
    ingest(
        client,
        kb,
        text="# Pager\n\nThe pager overview page.",
        source_name="index.md",
        metadata={**meta, "path": f"{folder}/index.md"},
    )
    ingest(
        client,
        kb,
        text="# Setup\n\nInstall the pager with the setup script.",
        source_name="setup.md",
        metadata={**meta, "path": f"{folder}/setup.md"},
    )
    policy = {"tools": ["get_page"], "knowledge_bases": [kb], "scope": {"path_prefixes": [folder]}}

    def standard(**scope: Any) -> dict[str, Any]:
        return {
            "caller": {"type": "agent", "id": "kunora-coding-agent", "purpose": "implementation-support"},
            "scope": {"projects": ["kunora-pager"], "version": "main", "includeWorkingDocs": False, **scope},
            "question": "How is the pager set up?",
            "requireCitations": True,
        }

    with _agent(client, policy) as agent:
        page = agent.post("/agent/tools/get_page", json=standard(paths=[f"{folder}/setup.md"]))
        assert page.status_code == 200, page.text
        assert (
            page.json()["path"] == f"{folder}/setup.md" and page.json()["sections"][0]["heading"] == "Setup"
        )
        index = agent.post("/agent/tools/get_page", json=standard(paths=[folder]))
        assert index.status_code == 200, index.text
        assert index.json()["path"] == f"{folder}/index.md"
        # `path` still wins over the scope.
        named = agent.post(
            "/agent/tools/get_page", json={**standard(paths=[folder]), "path": f"{folder}/setup.md"}
        )
        assert named.json()["path"] == f"{folder}/setup.md"
        for scope in ({"paths": [f"{folder}/setup.md", f"{folder}/index.md"]}, {}):
            refused = agent.post("/agent/tools/get_page", json=standard(**scope))
            assert refused.status_code == 400, refused.text
            assert (
                refused.json()["error"] == "invalid_request" and refused.json()["details"]["field"] == "path"
            )
            assert "`path`" in refused.json()["message"]
        outside = agent.post("/agent/tools/get_page", json=standard(paths=["publish/other"]))
        assert outside.status_code == 403 and outside.json()["error"] == "forbidden_scope"


def test_the_no_answer_action_key_is_the_key_the_feedback_tool_computes(corpus: str) -> None:
    person = TestClient(create_app())
    body = {"question": "What is the boiling point of tungsten?", "scope": {"paths": [COMPONENT]}}
    result = person.post("/answer/ask", json=body).json()
    action = next(a for a in result["actions"] if a["type"] == "create_feedback")
    report = person.post(
        "/agent/tools/create_feedback",
        json={
            "eventType": action["eventType"],
            "question": body["question"],
            "scope": body["scope"],
            "citations": [],
        },
    )
    assert report.status_code == 200, report.text
    assert report.json()["dedupeKey"] == action["dedupeKey"]


def test_uncited_model_knowledge_only_where_the_policy_allows_it(
    client: TestClient, corpus: str, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citegate.answers.openai_chat import OpenAIChatAnswerer
    from tests.fakes.openai_server import FakeOpenAIServer

    body = {"question": "What is the boiling point of tungsten?", "requireCitations": False}
    with FakeOpenAIServer() as server:
        monkeypatch.setitem(
            stack.services.__dict__,
            "answerer",
            OpenAIChatAnswerer(base_url=server.url, api_key="k", model="decline", timeout=2),
        )
        with _agent(client, {**KGENT_POLICY, "model_fallback": True}) as allowed:
            labelled = allowed.post("/agent/tools/ask", json=body).json()
        with _agent(client, KGENT_POLICY) as strict:
            refused = strict.post("/agent/tools/ask", json=body).json()
        person = TestClient(create_app()).post("/answer/ask", json=body).json()
    # Agent tools always require citations, whatever the policy says.
    assert labelled["answerSource"] == "knowledge_base" and labelled["answer"] == ""
    assert refused["answer"] == "" and refused["noAnswerReason"]["code"] == "no_answer"
    # The anonymous public-read policy does not allow model knowledge either.
    assert person["answer"] == "" and person["diagnostics"]["requireCitations"].startswith("not granted")


def test_a_person_whose_policy_allows_model_knowledge_gets_it_labelled(
    client: TestClient, corpus: str, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citegate.answers.openai_chat import OpenAIChatAnswerer
    from citegate.governance.policy.model import Policy
    from tests.fakes.openai_server import FakeOpenAIServer

    anonymous = stack.services.policies.find("anonymous")
    stack.services.policies.put(Policy.model_validate({**anonymous.model_dump(), "model_fallback": True}))
    try:
        with FakeOpenAIServer() as server:
            monkeypatch.setitem(
                stack.services.__dict__,
                "answerer",
                OpenAIChatAnswerer(base_url=server.url, api_key="k", model="decline", timeout=2),
            )
            result = (
                TestClient(create_app())
                .post(
                    "/answer/ask",
                    json={"question": "What is the boiling point of tungsten?", "requireCitations": False},
                )
                .json()
            )
    finally:
        stack.services.policies.put(anonymous)
    assert result["answerSource"] == "model" and "tungsten" in result["answer"]
    assert result["citations"] == [] and result["confidence"] == "low"
    assert result["summary"].startswith("Not from the knowledge base")
