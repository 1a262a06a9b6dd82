"""The local stack in-process on the embedded AWS endpoint, and an HTTP client through the gateway."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

TOKEN = "test-token-123"


@pytest.fixture(scope="session")
def local_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    monkeypatch = pytest.MonkeyPatch()
    data_root = tmp_path_factory.mktemp("data")
    ingest_root = tmp_path_factory.mktemp("ingest-root")
    monkeypatch.setenv("RAG_DATA_ROOT", str(data_root))
    monkeypatch.setenv("RAG_API_TOKEN", TOKEN)
    # The hashing embedder is a fast test double; the real embedders have their own tests.
    monkeypatch.setenv("CITEGATE_EMBEDDER", "hashing")
    monkeypatch.setenv("CITEGATE_LOCAL_INGEST_ROOT", str(ingest_root))
    monkeypatch.setenv("CITEGATE_STAGE", "test")
    # Every call of a worker's whole session comes from the test client's one address, hundreds a
    # minute: the per-address limit (600/min) would refuse them. Principals' limits still apply;
    # how limits are counted is tested in test_call_costs.py.
    monkeypatch.setenv("CITEGATE_IP_RATE_LIMIT", "1000000")
    yield {"data_root": data_root, "ingest_root": ingest_root, "monkeypatch": monkeypatch}
    monkeypatch.undo()


@pytest.fixture(scope="session")
def stack(local_env: dict[str, Any]) -> Iterator[Any]:
    from citegate.platform.settings import get_settings, reset_settings
    from citegate.runtime.stack import LocalStack

    reset_settings()
    running = LocalStack(get_settings()).start()
    yield running
    running.stop()


@pytest.fixture(scope="session")
def client(stack: Any) -> Iterator[TestClient]:
    from citegate.runtime.gateway import create_app

    with TestClient(create_app(), headers={"Authorization": f"Bearer {TOKEN}"}) as test_client:
        yield test_client


@pytest.fixture
def kb(client: TestClient) -> str:
    """A fresh knowledge base per test, so tests never see each other's documents."""
    kb_id = "kb-" + uuid.uuid4().hex[:10]
    response = client.post("/v1/kb", json={"kb_id": kb_id, "name": f"test {kb_id}"})
    assert response.status_code == 201, response.text
    return kb_id


def wait_for_task(client: TestClient, task_id: str, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        task = client.get(f"/v1/tasks/{task_id}").json()
        if task["status"] in ("succeeded", "failed"):
            return dict(task)
        time.sleep(0.1)
    raise AssertionError(f"task {task_id} did not finish within {timeout}s: {task}")


def audited(stack: Any, request_id: str, timeout: float = 10) -> list[Any]:
    """The audit records of one request, once written (a stream's record is written as it ends)."""
    deadline = time.monotonic() + timeout
    while True:
        records = [
            r
            for r in stack.services.audit.list(stack.settings.default_tenant, limit=1000)
            if r.request_id == request_id
        ]
        if records or time.monotonic() > deadline:
            return records
        time.sleep(0.1)


def ingest(client: TestClient, kb_id: str, **body: Any) -> dict[str, Any]:
    response = client.post(f"/v1/kb/{kb_id}/documents", json=body)
    assert response.status_code == 202, response.text
    return wait_for_task(client, response.json()["task_id"])


SAMPLES = Path(__file__).resolve().parents[2] / "samples"
