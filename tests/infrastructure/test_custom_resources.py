"""The deploy-time OpenSearch setup: it waits out a 403 while its role's new IAM grant propagates
(the domain's own policy delegates to IAM), and fits the index's replicas to the data nodes."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from opensearchpy.exceptions import AuthorizationException, RequestError

import citegate.knowledge.search.opensearch as opensearch

HANDLER = (
    Path(__file__).resolve().parents[2] / "infra" / "custom_resources" / "opensearch_setup" / "handler.py"
)
EVENT = {
    "RequestType": "Create",
    "ResourceProperties": {
        "Endpoint": "search-citegate.example.es.amazonaws.com",
        "Region": "eu-west-1",
        "Prefix": "citegate",
        "Dimension": "512",
        "Fusions": '[{"method": "min_max", "lexical_weight": 0.7, "rank_constant": 60}]',
    },
}


@pytest.fixture
def handler(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("opensearch_setup_handler", HANDLER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "FIRST_DELAY_S", 0.0)

    class Index:
        client = object()

        def close(self) -> None:
            pass

    monkeypatch.setattr(opensearch.OpenSearchIndex, "from_aws", classmethod(lambda cls, *a, **k: Index()))
    return module


def test_a_403_while_the_grant_propagates_is_retried(
    handler: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers: list[Any] = [AuthorizationException(403, "security_exception", {}), {"index": "citegate-chunks"}]

    def setup(*_: Any, **__: Any) -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(opensearch, "setup_opensearch", setup)
    result = handler.lambda_handler(EVENT, None)
    assert result["Data"]["Index"] == "citegate-chunks" and answers == []


def test_a_bad_request_is_not_retried(handler: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def setup(*_: Any, **__: Any) -> Any:
        calls.append(1)
        raise RequestError(400, "mapper_parsing_exception", {})

    monkeypatch.setattr(opensearch, "setup_opensearch", setup)
    with pytest.raises(RequestError):
        handler.lambda_handler(EVENT, None)
    assert calls == [1]


def test_the_index_gets_the_replicas_its_nodes_can_hold(
    handler: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0 on a single data node (a replica could never be assigned: the cluster would stay yellow)."""
    settings: list[tuple[str, Any]] = []

    class Indices:
        def put_settings(self, index: str, body: Any) -> None:
            settings.append((index, body))

    class Index:
        client = type("Client", (), {"indices": Indices()})()

        def close(self) -> None:
            pass

    monkeypatch.setattr(opensearch.OpenSearchIndex, "from_aws", classmethod(lambda cls, *a, **k: Index()))
    monkeypatch.setattr(opensearch, "setup_opensearch", lambda *a, **k: {"index": "citegate-chunks"})
    event = {**EVENT, "ResourceProperties": {**EVENT["ResourceProperties"], "Replicas": "0"}}
    handler.lambda_handler(event, None)
    assert settings == [("citegate-chunks", {"index": {"number_of_replicas": 0}})]
