"""A document whose stored raw file is gone or altered fails alone, with a reason that says what
to do, and is not retried; the others in its batch or reindex go on."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from citegate.knowledge.ingest import steps
from tests.integration.conftest import wait_for_task
from tests.integration.test_ingest_workflow import _batch, _entered, _history, _reopen


def _documents(client: TestClient, kb: str, n: int) -> list[dict[str, Any]]:
    """n documents submitted together (one batch), once they are indexed."""
    accepted = [
        client.post(
            f"/v1/kb/{kb}/documents",
            json={"text": f"Stored file {i}. " * 60, "source_name": f"stored{i}.txt"},
        ).json()
        for i in range(n)
    ]
    done = [wait_for_task(client, a["task_id"]) for a in accepted]
    assert {t["status"] for t in done} == {"succeeded"}
    return done


def test_parse_fails_a_document_whose_stored_bytes_do_not_match_its_hash(
    client: TestClient, kb: str, stack: Any
) -> None:
    s = stack.services
    done = _documents(client, kb, 3)
    refs = [_reopen(s, kb, t["document_id"]) for t in done]
    altered = s.documents.get(kb, refs[1].document_id)
    s.blobs.put(altered.raw_key, b"Stored file 1, but not as it was submitted. " * 60, "text/plain")
    gone = s.documents.get(kb, refs[2].document_id)
    s.aws.s3.delete_object(Bucket=s.bucket, Key=gone.raw_key)

    state = steps.parse(s, _batch(*refs))
    assert [d["task_id"] for d in state["documents"]] == [refs[0].task_id]
    assert [(f["task_id"], f["error"]) for f in state["failed"]] == [
        (refs[1].task_id, steps.STORED_ALTERED),
        (refs[2].task_id, steps.STORED_MISSING),
    ]
    assert steps.STORED_ALTERED == "the stored document does not match its hash; ingest it again"

    summary = steps.finalize(s, steps.index(s, steps.embed(s, steps.chunk(s, state))))
    assert summary["succeeded"] == [refs[0].task_id]
    assert s.tasks.get(refs[1].task_id).error == steps.STORED_ALTERED
    record = s.documents.get(kb, refs[1].document_id)
    assert (record.status, record.error) == ("failed", steps.STORED_ALTERED)


def test_a_record_without_a_hash_is_not_checked(client: TestClient, kb: str, stack: Any) -> None:
    """Records written before content_sha256 existed have none: their bytes are taken as stored."""
    s = stack.services
    [done] = _documents(client, kb, 1)
    ref = _reopen(s, kb, done["document_id"])
    assert s.documents.update_if_current(kb, ref.document_id, ref.task_id, {"content_sha256": ""})
    state = steps.parse(s, _batch(ref))
    assert [d["task_id"] for d in state["documents"]] == [ref.task_id] and not state["failed"]


def test_a_reindex_fails_only_the_document_whose_raw_file_was_altered_without_retrying(
    client: TestClient, kb: str, stack: Any
) -> None:
    s = stack.services
    done = _documents(client, kb, 3)
    altered = s.documents.get(kb, done[0]["document_id"])
    s.blobs.put(altered.raw_key, b"tampered", "text/plain")

    reindex = client.post(f"/v1/kb/{kb}/reindex").json()
    task = wait_for_task(client, reindex["task_id"])
    children = {c: client.get(f"/v1/tasks/{c}").json() for c in task["children"]}
    by_document = {c["document_id"]: c for c in children.values()}
    assert task["status"] == "failed" and task["error"].startswith("1 of 3 documents failed")
    assert by_document[altered.document_id]["status"] == "failed"
    assert by_document[altered.document_id]["error"] == steps.STORED_ALTERED
    assert {by_document[t["document_id"]]["status"] for t in done[1:]} == {"succeeded"}
    events = _history(stack, by_document[altered.document_id]["task_id"])
    assert not [e for e in events if e["type"] in ("LambdaFunctionFailed", "TaskFailed")], "not retried"
    assert "Parse" in _entered(events)
