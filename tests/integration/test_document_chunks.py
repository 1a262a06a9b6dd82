"""GET /v1/kb/{kb_id}/documents/{document_id}/chunks: what a document became, for the console's
chunk viewer: its parents and their children, whose ref ids are the ones retrieval returns and
resolve_refs resolves, under the same scope and tool rules as reading the document itself."""

from __future__ import annotations

from starlette.testclient import TestClient

from tests.integration.conftest import ingest
from tests.integration.test_governance import _agent, _as

SECTIONS = "\n\n".join(
    f"## Section {n}\n\n" + f"Olympus note {n} explains the volcano's {n}th flank in some detail. " * 12
    for n in range(1, 5)
)


def test_a_documents_chunks_are_its_parents_and_the_children_retrieval_cites(
    client: TestClient, kb: str
) -> None:
    task = ingest(client, kb, text=f"# Mars\n\n{SECTIONS}", source_name="mars.md")
    assert task["status"] == "succeeded", task
    document_id = task["document_id"]

    response = client.get(f"/v1/kb/{kb}/documents/{document_id}/chunks")
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["kb_id"], body["document_id"], body["source_name"]) == (kb, document_id, "mars.md")
    assert body["truncated"] is False
    parents, children = body["parents"], body["children"]
    assert len(parents) == task["counts"]["parents"] and len(children) == task["counts"]["children"]
    assert [p["index"] for p in parents] == sorted(p["index"] for p in parents)
    assert [c["position"] for c in children] == sorted(c["position"] for c in children)
    # Every child belongs to a listed parent, and every parent has children.
    parent_ids = {p["parent_id"] for p in parents}
    assert {c["parent_id"] for c in children} == parent_ids
    assert any(c["heading"] == "Section 3" for c in children)  # merged parents keep each child's own heading

    # The ref ids are the ones retrieval returns and resolve_refs resolves to the same parent.
    hits = client.post(f"/v1/kb/{kb}/retrieve", json={"query": "Olympus note 3 flank", "top_k": 50}).json()
    by_ref = {c["ref_id"]: c for c in children}
    assert hits["results"] and all(hit["ref_id"] in by_ref for hit in hits["results"])
    first = hits["results"][0]["ref_id"]
    resolved = client.post(f"/v1/kb/{kb}/resolve_refs", json={"ref_ids": [first]}).json()["citations"][0]
    assert resolved["parent_id"] == by_ref[first]["parent_id"]


def test_chunks_follow_the_callers_scope_and_tools(client: TestClient, kb: str) -> None:
    inside = ingest(
        client,
        kb,
        text="# In\n\nVisible text.",
        source_name="in.md",
        metadata={"project": "kgent", "version": "main"},
    )
    outside = ingest(
        client,
        kb,
        text="# Out\n\nHidden text.",
        source_name="out.md",
        metadata={"project": "other", "version": "main"},
    )
    scoped = {
        "tools": ["rag_list_documents"],
        "knowledge_bases": [kb],
        "working_docs": True,
        "scope": {"projects": ["kgent"]},
    }
    _, token = _agent(client, scoped)
    with _as(token) as agent:
        assert agent.get(f"/v1/kb/{kb}/documents/{inside['document_id']}/chunks").status_code == 200
        hidden = agent.get(f"/v1/kb/{kb}/documents/{outside['document_id']}/chunks")
        assert hidden.status_code == 404 and hidden.json()["error"] == "document_not_found"
        assert "Hidden" not in hidden.text
        missing = agent.get(f"/v1/kb/{kb}/documents/d_nope/chunks")
        assert missing.status_code == 404 and missing.json()["error"] == "document_not_found"

    _, no_tool = _agent(client, {"tools": ["rag_retrieve"], "knowledge_bases": [kb], "working_docs": True})
    with _as(no_tool) as agent:
        refused = agent.get(f"/v1/kb/{kb}/documents/{inside['document_id']}/chunks")
        assert refused.status_code == 403 and refused.json()["error"] == "forbidden"
