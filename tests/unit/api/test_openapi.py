"""The OpenAPI document: every route in it (and nothing else), committed up to date, well formed."""

from __future__ import annotations

import importlib
import json
import re
from typing import Any

import pytest

from citegate.api import openapi
from citegate.api.routes import ROUTES

HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return openapi.build_openapi()


def _operations(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (method.upper(), path)
        for path, item in doc["paths"].items()
        for method in item
        if method in HTTP_METHODS
    }


def test_every_route_and_nothing_else(document: dict[str, Any]) -> None:
    assert _operations(document) == {(r.method, r.path) for r in ROUTES}
    assert set(openapi.OPERATIONS) == {r.function for r in ROUTES}
    for route in ROUTES:
        operation = document["paths"][route.path][route.method.lower()]
        assert operation["operationId"] == route.function
        assert operation.get("x-citegate-tool") == route.tool


def test_every_path_parameter_is_declared(document: dict[str, Any]) -> None:
    for path, item in document["paths"].items():
        names = set(re.findall(r"\{(\w+)\}", path))
        for method, operation in item.items():
            declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
            assert declared == names, f"{method.upper()} {path}"
            assert all(p["required"] for p in operation.get("parameters", []) if p["in"] == "path")


def test_public_routes_need_no_credentials(document: dict[str, Any]) -> None:
    for route in ROUTES:
        security = document["paths"][route.path][route.method.lower()]["security"]
        if route.auth == "none":
            assert security == []
        else:
            anonymous = openapi.OPERATIONS[route.function].anonymous
            assert security and (anonymous or all(security)), route.function
    turns = document["paths"]["/answer/sessions/{sessionId}/turns"]["post"]["security"]
    assert all("sessionToken" in req for req in turns)


def test_committed_document_is_current(document: dict[str, Any]) -> None:
    assert openapi.DOCUMENT_PATH.exists(), "run: python -m citegate.api.openapi"
    committed = openapi.DOCUMENT_PATH.read_text(encoding="utf-8")
    assert committed == openapi.render(document), (
        "docs/openapi.json is stale: regenerate it with `python -m citegate.api.openapi`"
    )


def _refs(value: Any) -> set[str]:
    if isinstance(value, dict):
        return {v for k, v in value.items() if k == "$ref"} | {r for v in value.values() for r in _refs(v)}
    if isinstance(value, list):
        return {r for v in value for r in _refs(v)}
    return set()


def test_document_is_valid(document: dict[str, Any]) -> None:
    try:
        validator = importlib.import_module("openapi_spec_validator")
    except ImportError:
        validator = None
    if validator is not None:
        validator.validate(json.loads(openapi.render(document)))
    # The basic shape, checked either way.
    assert document["openapi"] == "3.1.0"
    assert document["info"]["title"] and document["info"]["version"]
    assert document["paths"] and all(path.startswith("/") for path in document["paths"])
    components = document["components"]
    assert {"schemas", "responses", "securitySchemes"} <= set(components)
    for ref in _refs(document):
        assert ref.startswith("#/components/"), ref
        _, _, kind, name = ref.split("/", 3)
        assert name in components[kind], f"dangling {ref}"
    for path, item in document["paths"].items():
        for method, operation in item.items():
            assert method in HTTP_METHODS
            assert operation["responses"], f"{method} {path}"
            success = [code for code in operation["responses"] if code.startswith("2")]
            assert len(success) == 1 or operation["operationId"] == "healthz"
            for code, response in operation["responses"].items():
                if code[0] in "45":
                    # The OpenAI-compatible routes answer in OpenAI's error shape.
                    name = "OpenAIError" if operation["x-error-family"] == "openai" else "Error"
                    assert response == {"$ref": f"#/components/responses/{name}{code}"}
            for requirement in operation["security"]:
                assert set(requirement) <= set(components["securitySchemes"])
    assert set(components["schemas"]["Error"]["required"]) == {"error", "message", "requestId", "details"}
    assert components["schemas"]["OpenAIError"]["required"] == ["error"]


def test_docs_page_is_self_contained(document: dict[str, Any]) -> None:
    page = openapi.docs_html(document)
    for fetching in ("<script", "<link", "src=", "@import", "url("):
        assert fetching not in page
    for route in ROUTES:
        assert f'id="op-{route.function}"' in page


def test_what_the_routes_answer_is_documented(document: dict[str, Any]) -> None:
    """Issue 28: the codes a client written from the document meets are in it."""
    put_policy = document["paths"]["/admin/policies/{principal_key}"]["put"]
    assert "409" in put_policy["responses"], "the bootstrap principal must keep admin"
    assert "bootstrap_admin_required" in json.dumps(put_policy)
    schemas = document["components"]["schemas"]
    retrieved = next(v for k, v in schemas.items() if k.startswith("RetrievedChunk"))
    assert {"score", "rank_score"} <= set(retrieved["properties"])
    page = next(v for k, v in schemas.items() if k.startswith("GetPageBody"))
    assert "path" not in page.get("required", []), "the standard request names its page in scope.paths"
    read = [v for k, v in schemas.items() if k.startswith("WebSearchResult") and "content" in v["properties"]]
    result = read[0]
    assert {"content", "error_code"} <= set(result["properties"])
    assert "size" in document["components"]["responses"]["Error413"]["description"]
