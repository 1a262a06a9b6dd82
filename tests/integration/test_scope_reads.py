"""The caller's scope beneath every read (issue 19), and spec 000's codes and standard request.

One agent is scoped to one project (`kgent`), one path prefix (`publish/kgent`) and one version
(`main`) of one knowledge base; the data also holds the same page in `v2`, another project under
the same prefix, the same project under another prefix, and another knowledge base with the same
page. Every document outside the scope carries the marker `zqout` (in its text and its file name),
so "nothing outside the scope comes back" is checked on the whole response of every read route.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from starlette.testclient import TestClient

from citegate.runtime.gateway import create_app
from tests.integration.conftest import ingest
from tests.integration.test_governance import _agent, _as

QUESTION = "How is agent memory configuration done?"
PAGE = "publish/kgent/memory.md"
SCOPE = {"projects": ["kgent"], "path_prefixes": ["publish/kgent"], "versions": ["main"]}
TOOLS = [
    "search",
    "ask",
    "get_page",
    "get_context",
    "create_feedback",
    "create_improvement_task",
    "answer_ask",
    "answer_sessions",
    "answer_turns",
    "rag_retrieve",
    "rag_ask",
    "rag_resolve_refs",
    "rag_list_documents",
    "ka_retrieve",
    "chat",
    "query_v2",
]


def _text(marker: str) -> str:
    return (
        f"# Agent memory\n\nAgent memory configuration is done in memory.yaml ({marker}). "
        f"The agent memory configuration keeps {marker} notes for each session. " * 4
    )


class World:
    def __init__(self, client: TestClient) -> None:
        suffix = uuid.uuid4().hex[:6]
        self.kb = client.post("/v1/kb", json={"name": f"scoped {suffix}", "status": "approved"}).json()[
            "kb_id"
        ]
        self.other_kb = client.post("/v1/kb", json={"name": f"other {suffix}", "status": "approved"}).json()[
            "kb_id"
        ]
        docs = [
            (self.kb, "memory-main.md", "zqinside", {"project": "kgent", "path": PAGE, "version": "main"}),
            (self.kb, "zqout-v2.md", "zqout-version", {"project": "kgent", "path": PAGE, "version": "v2"}),
            (
                self.kb,
                "zqout-project.md",
                "zqout-project",
                {"project": "other", "path": "publish/kgent/other.md", "version": "main"},
            ),
            (
                self.kb,
                "zqout-path.md",
                "zqout-path",
                {"project": "kgent", "path": "private/kgent/memory.md", "version": "main"},
            ),
            (self.other_kb, "zqout-kb.md", "zqout-kb", {"project": "kgent", "path": PAGE, "version": "main"}),
        ]
        self.documents: dict[str, str] = {}  # document_id -> source name
        for kb_id, name, marker, metadata in docs:
            done = ingest(client, kb_id, text=_text(marker), source_name=name, metadata=metadata)
            assert done["status"] == "succeeded", done
            self.documents[done["document_id"]] = name
        # Every chunk id of both knowledge bases, as the service token sees them.
        self.refs: list[str] = []
        for kb_id in (self.kb, self.other_kb):
            found = client.post(f"/v1/kb/{kb_id}/retrieve", json={"query": QUESTION, "top_k": 50}).json()
            self.refs += [r["ref_id"] for r in found["results"]]
        self.agent_id, self.token = _agent(
            client,
            {
                "tools": TOOLS,
                "knowledge_bases": [self.kb],
                "scope": SCOPE,
                "write_actions": ["feedback", "improvement_task"],
            },
        )
        issued = client.post(f"/admin/agents/{self.agent_id}/credentials", json={"kind": "caller_key"})
        assert issued.status_code == 201, issued.text
        self.caller_key = issued.json()["secret"]

    def agent(self) -> TestClient:
        return TestClient(create_app(), headers={"Authorization": f"Bearer {self.token}"})


@pytest.fixture(scope="module")
def world(client: TestClient) -> World:
    return World(client)


def _standard(**extra: Any) -> dict[str, Any]:
    """Spec 000 section 4's standard request, as its example sends it."""
    return {
        "caller": {"type": "agent", "id": "kunora-coding-agent", "purpose": "implementation-support"},
        "scope": {
            "projects": ["kgent"],
            "paths": ["publish/kgent"],
            "version": "main",
            "includeWorkingDocs": False,
        },
        "question": QUESTION,
        "requireCitations": True,
        **extra,
    }


def _ok(response: Any) -> str:
    assert response.status_code in (200, 201), response.text
    return str(response.text)


def _sse(agent: TestClient, path: str, body: dict[str, Any]) -> str:
    with agent.stream("POST", path, json=body) as response:
        assert response.status_code == 200, response.read()
        return "\n".join(response.iter_lines())


# Each read route, called the way a client would with the scoped agent's credentials: the whole
# response text, and whether it must show the in-scope document (a check that the route read at all).
Read = Callable[[World, TestClient], str]
READS: dict[str, tuple[Read, bool]] = {
    "agent search": (lambda w, a: _ok(a.post("/agent/tools/search", json=_standard(topK=50))), True),
    "agent ask": (lambda w, a: _ok(a.post("/agent/tools/ask", json=_standard(topK=50))), False),
    "agent get_page": (lambda w, a: _ok(a.post("/agent/tools/get_page", json={"path": PAGE})), True),
    "agent get_context": (lambda w, a: _ok(a.post("/agent/tools/get_context", json=_standard())), True),
    "answer ask": (lambda w, a: _ok(a.post("/answer/ask", json=_standard(topK=50))), False),
    "answer session": (lambda w, a: _ok(a.post("/answer/sessions", json=_standard())), False),
    "v1 retrieve": (
        lambda w, a: _ok(a.post(f"/v1/kb/{w.kb}/retrieve", json={"query": QUESTION, "top_k": 50})),
        True,
    ),
    "v1 ask": (
        lambda w, a: _ok(a.post(f"/v1/kb/{w.kb}/ask", json={"question": QUESTION, "top_k": 50})),
        False,
    ),
    "v1 resolve_refs": (
        lambda w, a: _ok(a.post(f"/v1/kb/{w.kb}/resolve_refs", json={"ref_ids": w.refs})),
        True,
    ),
    "v1 documents list": (lambda w, a: _ok(a.get(f"/v1/kb/{w.kb}/documents")), True),
    "v1 documents get": (
        lambda w, a: "\n".join(a.get(f"/v1/kb/{w.kb}/documents/{d}").text for d in w.documents),
        True,
    ),
    "knowledge query": (
        lambda w, a: _ok(
            TestClient(create_app(), headers={"X-Caller-Agent-Key": w.caller_key}).post(
                "/api/v1/knowledge/query", json={"query": QUESTION, "options": {"top_k": 50}}
            )
        ),
        True,
    ),
    "knowledge query stats": (
        lambda w, a: _ok(
            TestClient(create_app(), headers={"X-Caller-Agent-Key": w.caller_key}).post(
                "/api/v1/knowledge/query", json={"query": "how many files are there?"}
            )
        ),
        True,
    ),
    "chat message": (
        lambda w, a: _ok(
            a.post(
                f"/api/v1/agent/chats/{a.post('/api/v1/agent/chats', json={}).json()['id']}/messages",
                json={"content": QUESTION},
            )
        ),
        False,
    ),
    "query v2": (lambda w, a: _sse(a, "/api/v2/query", {"query": QUESTION}), False),
}


@pytest.mark.parametrize("route", list(READS))
def test_no_read_route_returns_anything_outside_the_agents_scope(world: World, route: str) -> None:
    read, shows_inside = READS[route]
    with world.agent() as agent:
        text = read(world, agent).lower()
    assert "zqout" not in text, f"{route} returned data outside the agent's scope"
    if shows_inside:
        assert "zqinside" in text or "memory-main.md" in text, f"{route} read nothing at all"


# --- scope leaks, one named test each -----------------------------------------------------------


def test_get_page_without_a_version_gives_the_scopes_version_and_honours_scope_version(
    client: TestClient, world: World
) -> None:
    with world.agent() as agent:
        page = agent.post("/agent/tools/get_page", json={"path": PAGE}).json()
    assert page["version"] == "main" and "zqinside" in json.dumps(page)
    # An agent granted both versions gets the one its body's scope asks for.
    _, token = _agent(
        client,
        {
            "tools": ["get_page"],
            "knowledge_bases": [world.kb],
            "scope": {**SCOPE, "versions": ["main", "v2"]},
        },
    )
    with _as(token) as agent:
        for version, marker in (("v2", "zqout-version"), ("main", "zqinside")):
            page = agent.post("/agent/tools/get_page", json={"path": PAGE, "scope": {"version": version}})
            assert page.status_code == 200, page.text
            assert page.json()["version"] == version and marker in page.text


def test_resolve_refs_resolves_nothing_outside_the_scope(world: World) -> None:
    with world.agent() as agent:
        resolved = agent.post(f"/v1/kb/{world.kb}/resolve_refs", json={"ref_ids": world.refs}).json()
    assert resolved["citations"], "the in-scope refs resolve"
    assert all(c["version"] == "main" and c["project"] == "kgent" for c in resolved["citations"])
    assert all(c["path"].startswith("publish/kgent/") for c in resolved["citations"])
    assert len(resolved["citations"]) + len(resolved["missing"]) == len(world.refs)


def test_documents_list_and_get_show_only_documents_in_the_scope(world: World) -> None:
    with world.agent() as agent:
        listed = agent.get(f"/v1/kb/{world.kb}/documents").json()["documents"]
        assert [d["source_name"] for d in listed] == ["memory-main.md"]
        for document_id, name in world.documents.items():
            got = agent.get(f"/v1/kb/{world.kb}/documents/{document_id}")
            if name == "memory-main.md":
                assert got.status_code == 200
            else:  # outside the scope reads exactly like a document that does not exist
                assert got.status_code in (403, 404) and "zqout" not in got.text, got.text


def test_knowledge_query_naming_a_knowledge_base_not_granted_is_refused(world: World) -> None:
    entry = TestClient(create_app(), headers={"X-Caller-Agent-Key": world.caller_key})
    for kb_id in (world.other_kb, "kb-" + uuid.uuid4().hex[:10]):  # not granted; does not exist
        refused = entry.post("/api/v1/knowledge/query", json={"query": QUESTION, "knowledge_bases": [kb_id]})
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"] == "forbidden"
        assert refused.json()["details"]["reason"] == "dataset_not_allowed"
    granted = entry.post("/api/v1/knowledge/query", json={"query": QUESTION, "knowledge_bases": [world.kb]})
    assert granted.status_code == 200 and granted.json()["type"] == "retrieval"


def test_knowledge_query_statistics_count_only_files_in_the_scope(world: World) -> None:
    entry = TestClient(create_app(), headers={"X-Caller-Agent-Key": world.caller_key})
    stats = entry.post("/api/v1/knowledge/query", json={"query": "知識庫有多少文件？"}).json()
    assert stats["type"] == "stats"
    assert [f["file_name"] for kb in stats["knowledge_bases"] for f in kb["files"]] == ["memory-main.md"]


# --- codes --------------------------------------------------------------------------------------


def test_get_page_outside_the_grant_is_forbidden_scope(world: World) -> None:
    with world.agent() as agent:
        for body in (
            {"path": "private/kgent/memory.md"},
            {"path": PAGE, "version": "v2"},
            {"path": PAGE, "scope": {"version": "v2"}},
        ):
            refused = agent.post("/agent/tools/get_page", json=body)
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"] == "forbidden_scope" and "zqout" not in refused.text


def test_search_and_get_context_without_a_granted_knowledge_base_are_dataset_not_allowed(
    client: TestClient,
) -> None:
    _, nothing = _agent(client, {"tools": ["search", "get_context"], "knowledge_bases": []})
    # Granted only a working knowledge base, without working docs: nothing it may read either.
    working = client.post("/v1/kb", json={"name": "working " + uuid.uuid4().hex[:6]}).json()
    assert working["status"] == "working"
    _, unreadable = _agent(
        client, {"tools": ["search", "get_context"], "knowledge_bases": [working["kb_id"]]}
    )
    for token in (nothing, unreadable):
        with _as(token) as agent:
            for path in ("/agent/tools/search", "/agent/tools/get_context"):
                refused = agent.post(path, json=_standard(scope=None))
                assert refused.status_code == 403, refused.text
                assert refused.json()["error"] == "dataset_not_allowed"


def test_a_refused_write_action_is_forbidden_action_not_forbidden_tool(client: TestClient) -> None:
    _, token = _agent(client, {"tools": ["create_feedback", "create_improvement_task"]})
    with _as(token) as agent:
        for path, action in (
            ("/agent/tools/create_feedback", "feedback"),
            ("/agent/tools/create_improvement_task", "improvement_task"),
        ):
            refused = agent.post(path, json=_standard(scope=None))
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"] == "forbidden_action"
            assert refused.json()["details"]["action"] == action


# --- the standard request -----------------------------------------------------------------------

SPEC_000_ROUTES = [
    "/agent/tools/search",
    "/agent/tools/ask",
    "/agent/tools/get_page",
    "/agent/tools/get_context",
    "/agent/tools/create_feedback",
    "/agent/tools/create_improvement_task",
    "/answer/ask",
    "/answer/sessions",
]


def _for(path: str, body: dict[str, Any]) -> dict[str, Any]:
    # get_page names its page; everything else a tool does not use is accepted as sent.
    return {**body, "path": PAGE} if path.endswith("get_page") else body


@pytest.mark.parametrize("path", SPEC_000_ROUTES)
def test_every_spec_000_route_accepts_the_standard_request(world: World, path: str) -> None:
    with world.agent() as agent:
        response = agent.post(path, json=_for(path, _standard()))
    assert response.status_code in (200, 201), response.text
    assert "zqout" not in response.text.lower()


@pytest.mark.parametrize("path", SPEC_000_ROUTES)
def test_query_works_as_well_as_question(world: World, path: str) -> None:
    body = _standard()
    body["query"] = body.pop("question")
    with world.agent() as agent:
        response = agent.post(path, json=_for(path, body))
    assert response.status_code in (200, 201), response.text


@pytest.mark.parametrize("path", SPEC_000_ROUTES)
def test_unknown_fields_are_still_refused_by_name(world: World, path: str) -> None:
    with world.agent() as agent:
        response = agent.post(path, json=_for(path, _standard(requireCitation=True)))
    assert response.status_code == 400 and response.json()["error"] == "invalid_request"
    assert "requireCitation" in response.text


# --- no route reads without a scope ---------------------------------------------------------------

# The unscoped reads (the ingestion pipeline's own) and the modules allowed to use them.
UNSCOPED_READS = (".documents.list(", ".documents.get(", ".documents.find(", ".get_chunks(", ".parents.list(")
MAY_READ_UNSCOPED = {
    "layers/citegate/knowledge/store/documents.py",
    "layers/citegate/knowledge/store/parents.py",
    "layers/citegate/knowledge/search/base.py",  # chunks_in: get_chunks under the caller's filter
    "layers/citegate/knowledge/ingest/service.py",
    "layers/citegate/knowledge/ingest/steps.py",
    "layers/citegate/knowledge/ingest/consumer.py",
    # a source's sync (and deletion) compares the source with every document it brought: a writer
    # of the knowledge base (the ingest or sources write action), answered with counts, not documents
    "layers/citegate/knowledge/sources/sync.py",
    "layers/citegate/knowledge/sources/service.py",
    # an S3 event of a source's bucket: the one document that object maps to (the service's own)
    "layers/citegate/knowledge/sources/events.py",
    "layers/citegate/agents/tools.py",  # get_page: the parents of a document read through list_in
    # the chunk viewer: the parents of a document read through get_in
    "layers/citegate/knowledge/document_chunks.py",
}


def test_no_handler_or_read_path_reads_documents_or_chunks_without_a_scope() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    offenders = []
    for path in sorted([*root.glob("functions/*/handler.py"), *root.glob("layers/citegate/**/*.py")]):
        relative = path.relative_to(root).as_posix()
        if relative in MAY_READ_UNSCOPED:
            continue
        text = path.read_text(encoding="utf-8")
        offenders += [f"{relative}: {call}" for call in UNSCOPED_READS if call in text]
    assert not offenders, "read through list_in / get_in / chunks_in with the caller's scope: " + ", ".join(
        offenders
    )
