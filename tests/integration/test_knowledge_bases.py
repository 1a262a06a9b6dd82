"""Knowledge bases over HTTP with the spec 004 bearer token: create, list, get, update."""

from __future__ import annotations

import uuid

from starlette.testclient import TestClient


def test_create_get_list_and_update_a_knowledge_base(client: TestClient) -> None:
    kb_id = "handbook-" + uuid.uuid4().hex[:6]
    created = client.post("/v1/kb", json={"kb_id": kb_id, "name": "Handbook", "description": "How we work"})
    assert created.status_code == 201
    assert created.json()["status"] == "working"
    assert created.json()["tenant_id"] == "default"

    assert client.get(f"/v1/kb/{kb_id}").json()["name"] == "Handbook"
    listed = [kb["kb_id"] for kb in client.get("/v1/kb").json()["knowledge_bases"]]
    assert kb_id in listed

    patched = client.patch(f"/v1/kb/{kb_id}", json={"status": "approved", "name": "Team handbook"})
    assert patched.status_code == 200
    assert patched.json()["status"] == "approved"
    assert client.get(f"/v1/kb/{kb_id}").json()["name"] == "Team handbook"


def test_the_server_makes_an_id_from_the_name_when_none_is_given(client: TestClient) -> None:
    first = client.post("/v1/kb", json={"name": "Product Docs"}).json()
    second = client.post("/v1/kb", json={"name": "Product Docs"}).json()
    assert first["kb_id"].startswith("product-docs")
    assert second["kb_id"].startswith("product-docs-") and second["kb_id"] != first["kb_id"]
    chinese = client.post("/v1/kb", json={"name": "长城资料"}).json()
    assert chinese["kb_id"].startswith("kb-")


def test_a_taken_id_is_409_kb_exists(client: TestClient, kb: str) -> None:
    response = client.post("/v1/kb", json={"kb_id": kb, "name": "again"})
    assert response.status_code == 409
    assert response.json()["error"] == "kb_exists"


def test_unknown_knowledge_base_is_404_everywhere(client: TestClient) -> None:
    for method, path in [
        ("GET", "/v1/kb/nope"),
        ("PATCH", "/v1/kb/nope"),
        ("GET", "/v1/kb/nope/documents"),
        ("POST", "/v1/kb/nope/documents"),
        ("POST", "/v1/kb/nope/reindex"),
    ]:
        body = (
            {"text": "x", "source_name": "a.txt"}
            if method == "POST"
            else ({"name": "n"} if method == "PATCH" else None)
        )
        response = client.request(method, path, json=body)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"] == "kb_not_found"


def test_bad_bodies_are_400_naming_the_field(client: TestClient, kb: str) -> None:
    malformed = client.post("/v1/kb", content=b"{not json", headers={"Content-Type": "application/json"})
    assert malformed.status_code == 400 and malformed.json()["error"] == "invalid_request"

    wrong_type = client.post("/v1/kb", json={"name": 42})
    assert wrong_type.status_code == 400
    assert wrong_type.json()["details"]["fields"][0]["field"] == "name"

    bad_status = client.patch(f"/v1/kb/{kb}", json={"status": "published"})
    assert bad_status.status_code == 400 and "status" in bad_status.json()["message"]

    unknown_field = client.post("/v1/kb", json={"name": "x", "colour": "red"})
    assert unknown_field.status_code == 400 and "colour" in unknown_field.json()["message"]


def test_every_error_has_the_decided_shape(client: TestClient) -> None:
    body = client.get("/v1/kb/missing").json()
    assert set(body) == {"error", "message", "requestId", "details"}
    assert body["requestId"]
    unknown = client.get("/v1/nothing-here")
    assert unknown.status_code == 404 and unknown.json()["error"] == "not_found"
    wrong_method = client.put("/v1/kb")
    assert wrong_method.status_code == 405 and wrong_method.json()["error"] == "method_not_allowed"


def test_missing_or_wrong_token_is_401(client: TestClient) -> None:
    no_token = client.get("/v1/kb", headers={"Authorization": ""})
    assert no_token.status_code == 401 and no_token.json()["error"] == "unauthorized"
    wrong = client.get("/v1/kb", headers={"Authorization": "Bearer not-the-token"})
    assert wrong.status_code == 401 and wrong.json()["error"] == "unauthorized"
    basic = client.get("/v1/kb", headers={"Authorization": "Basic abc"})
    assert basic.status_code == 401


def test_healthz_answers_without_a_token(client: TestClient) -> None:
    response = client.get("/healthz", headers={"Authorization": ""})
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
    assert response.json()["checks"]["metadata"]["ok"] is True


def test_the_gateway_serves_the_openapi_document_and_docs(client: TestClient) -> None:
    document = client.get("/openapi.json", headers={"Authorization": ""})
    assert document.status_code == 200 and document.json()["openapi"] == "3.1.0"
    assert "/v1/kb/{kb_id}/ask" in document.json()["paths"]
    docs = client.get("/docs", headers={"Authorization": ""})
    assert docs.status_code == 200 and "/answer/ask" in docs.text
