"""Stopping `citegate serve` and starting it again loses nothing, however it stopped: resumed tasks
finish at once, the data folder belongs to one server, and a lost or damaged raw file fails its
document, not the server."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.conftest import TOKEN

FAST = {"CITEGATE_EMBEDDER": "hashing"}


def _wait(client: httpx.Client, task_id: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = client.get(f"/v1/tasks/{task_id}")
        assert response.status_code == 200, response.text
        task = response.json()
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


def _accept(client: httpx.Client, kb_id: str, texts: dict[str, str]) -> list[str]:
    task_ids = []
    for source_name, text in texts.items():
        response = client.post(f"/v1/kb/{kb_id}/documents", json={"text": text, "source_name": source_name})
        assert response.status_code == 202, response.text
        task_ids.append(response.json()["task_id"])
    return task_ids


def _rest_of_output(server: Any) -> str:
    """What the server printed after its ready line (read once it has exited)."""
    assert server.process.poll() is not None
    return str(server.process.stdout.read())


def _resumed(ready_line: str) -> int:
    return int(re.search(r"resumed (\d+) tasks", ready_line).group(1))  # type: ignore[union-attr]


def _meanwhile(url: str, paths: list[str], stop: threading.Event, errors: list[str]) -> threading.Thread:
    """A client busy on other routes from the moment the restarted server listens: its request
    threads load their functions while the queue consumer makes its first pass (where the
    import race was). Connections made before the gateway is up wait for it. Server errors are
    collected in `errors`."""

    def run() -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as c:
            while not stop.is_set():
                for path in paths:
                    with contextlib.suppress(httpx.TransportError):  # not listening yet
                        response = c.get(path)
                        if response.status_code >= 500:
                            errors.append(f"{path}: {response.text}")
                    time.sleep(0.05)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_kill_9_during_ingestion_then_every_task_resumes_at_once(server_factory: Any) -> None:
    server = server_factory(FAST).start()
    with server.client() as client:
        assert client.post("/v1/kb", json={"kb_id": "resume", "name": "Resume"}).status_code == 201
        texts = {f"r{i}.md": f"# Part {i}\n\n" + f"Section {i} of the harbour log. " * 400 for i in range(8)}
        task_ids = _accept(client, "resume", texts)
    server.process.kill()  # kill -9, ingestion under way
    server.process.wait()

    # The busy clients below share one address: they may not be refused for it.
    again = server_factory({**FAST, "CITEGATE_IP_RATE_LIMIT": "1000000"}, data_root=server.data_root)
    stop = threading.Event()
    errors: list[str] = []
    busy = [
        _meanwhile(again.url, ["/v1/kb/resume", "/v1/kb/resume/documents", "/healthz"], stop, errors),
        _meanwhile(again.url, [f"/v1/tasks/{t}" for t in task_ids], stop, errors),
    ]
    try:
        again.start()
        ready = time.monotonic()
        assert _resumed(again.ready_line) > 0, again.ready_line
        with again.client() as client:
            # Before the fix the consumer's first pass crashed and these waited ~180 s for SQS.
            finished = [_wait(client, t, timeout=30) for t in task_ids]
    finally:
        stop.set()
        for thread in busy:
            thread.join(timeout=30)
    took = time.monotonic() - ready
    assert not errors, errors[:3]
    assert [t["status"] for t in finished] == ["succeeded"] * len(task_ids)
    assert took < 30, f"the resumed tasks took {took:.0f}s"
    assert again.stop() == 0
    output = _rest_of_output(again)
    for sign in ("queue consumer failed", "KeyError", "ImportError"):  # the import race's marks
        assert sign not in output, output[-3000:]


def _serve(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`citegate serve` run to its end (a server that refuses to start)."""
    return subprocess.run(
        [sys.executable, "-m", "citegate.clients.cli", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_second_server_on_the_same_folder_or_port_refuses_and_harms_nothing(
    server_factory: Any, tmp_path: Path
) -> None:
    first = server_factory(FAST).start()
    with first.client() as client:
        assert client.post("/v1/kb", json={"kb_id": "before", "name": "Before"}).status_code == 201
    journal = first.data_root / "aws" / "journal.jsonl"
    before = (journal.stat().st_ino, journal.stat().st_size, sorted(os.listdir(first.data_root)))

    refused = _serve(server_factory(FAST, data_root=first.data_root).env)
    assert refused.returncode != 0
    assert f"the data folder {first.data_root.resolve()} is in use by another citegate server" in (
        refused.stderr
    )
    assert f"(pid {first.process.pid})" in refused.stderr
    assert "citegate ready" not in refused.stdout
    # Nothing was touched: no compaction replaced the journal, nothing new in the folder.
    assert (journal.stat().st_ino, journal.stat().st_size, sorted(os.listdir(first.data_root))) == before

    # Its own folder but the first one's port: it stops before touching its folder.
    other = server_factory(FAST, data_root=tmp_path / "other")
    refused = _serve({**other.env, "PORT": str(first.port)})
    assert refused.returncode != 0
    assert f"cannot listen on 127.0.0.1:{first.port}" in refused.stderr
    assert os.listdir(other.data_root) == ["citegate.lock"], "no journal, no index, no provisioning"

    with first.client() as client:  # the first one keeps serving, and journaling
        assert client.post("/v1/kb", json={"kb_id": "after", "name": "After"}).status_code == 201
        [task_id] = _accept(client, "after", {"a.md": "# After\n\nWritten after the refusal. " * 20})
        assert _wait(client, task_id)["status"] == "succeeded"
    first.process.kill()  # no clean shutdown: only the journal keeps what it wrote
    first.process.wait()

    again = server_factory(FAST, data_root=first.data_root).start()
    with again.client() as client:
        assert client.get("/v1/kb/before").status_code == 200
        assert client.get("/v1/kb/after").json()["document_count"] == 1
        assert client.get(f"/v1/tasks/{task_id}").json()["status"] == "succeeded"
    assert again.stop() == 0


def test_a_missing_or_corrupted_raw_file_fails_its_document_not_the_server(server_factory: Any) -> None:
    server = server_factory(FAST).start()
    with server.client() as client:
        assert client.post("/v1/kb", json={"kb_id": "raw", "name": "Raw"}).status_code == 201
        texts = {f"f{i}.md": f"# File {i}\n\nThe {i}th stored raw file. " * 30 for i in range(4)}
        task_ids = _accept(client, "raw", texts)
        done = [_wait(client, t) for t in task_ids]
        assert {t["status"] for t in done} == {"succeeded"}
        records = [client.get(f"/v1/kb/raw/documents/{t['document_id']}").json() for t in done]
    assert server.stop() == 0
    blobs = server.data_root / "aws" / "blobs"
    missing, corrupted = records[0], records[1]
    (blobs / missing["content_sha256"]).unlink()
    (blobs / corrupted["content_sha256"]).write_bytes(b"# File 1\n\nNot what was stored.")

    # It starts; the two writes are left out of the replay with a warning each (test_journal_blobs.py).
    again = server_factory(FAST, data_root=server.data_root).start()
    with again.client() as client:
        assert client.get("/v1/kb/raw").json()["document_count"] == 4
        reindex = client.post("/v1/kb/raw/reindex").json()
        task = _wait(client, reindex["task_id"])
        children = [client.get(f"/v1/tasks/{c}").json() for c in task["children"]]
        by_document = {c["document_id"]: c for c in children}
        for record in (missing, corrupted):
            child = by_document[record["document_id"]]
            assert child["status"] == "failed"
            assert child["error"] == "the stored document is missing; ingest it again"
        assert {by_document[r["document_id"]]["status"] for r in records[2:]} == {"succeeded"}
        assert task["status"] == "failed" and task["error"].startswith("2 of 4 documents failed")
        # Ingesting it again brings the document back, stored whole.
        [retry] = _accept(client, "raw", {"f1.md": texts["f1.md"]})
        assert _wait(client, retry)["status"] == "succeeded"
    stored = (blobs / corrupted["content_sha256"]).read_bytes()
    assert hashlib.sha256(stored).hexdigest() == corrupted["content_sha256"]
    assert again.stop() == 0
