"""Stopping `citegate serve` and starting it again loses nothing."""

from __future__ import annotations

import time
from typing import Any

import httpx

FAST = {"CITEGATE_EMBEDDER": "hashing"}


def _wait(client: httpx.Client, task_id: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        task = client.get(f"/v1/tasks/{task_id}").json()
        if task["status"] in ("succeeded", "failed"):
            return dict(task)
        time.sleep(0.2)
    raise AssertionError(f"task {task_id} did not finish")


def test_a_restart_keeps_knowledge_bases_documents_tasks_and_the_index(server_factory: Any) -> None:
    server = server_factory(FAST).start()
    assert server.ready_line.startswith("citegate ready on http://127.0.0.1:")
    with server.client() as client:
        assert client.post("/v1/kb", json={"kb_id": "durable", "name": "Durable"}).status_code == 201
        accepted = client.post(
            "/v1/kb/durable/documents",
            json={
                "text": "# Lighthouses\n\nThe Eddystone lighthouse stands on rocks. " * 40,
                "source_name": "l.md",
            },
        ).json()
        task = _wait(client, accepted["task_id"])
        assert task["status"] == "succeeded"
        documents = client.get("/v1/kb/durable/documents").json()["documents"]
        health = client.get("/healthz").json()
    assert server.stop() == 0

    again = server_factory(FAST, data_root=server.data_root).start()
    with again.client() as client:
        assert client.get("/v1/kb/durable").json()["document_count"] == 1
        assert client.get("/v1/kb/durable/documents").json()["documents"] == documents
        assert client.get(f"/v1/tasks/{accepted['task_id']}").json() == task
        assert (
            client.get("/healthz").json()["checks"]["search"]["chunks"]
            == health["checks"]["search"]["chunks"]
        )
        # The restored state is live: a reindex from the stored raw document works.
        reindex = client.post("/v1/kb/durable/reindex").json()
        assert _wait(client, reindex["task_id"])["status"] == "succeeded"
    assert again.stop() == 0
