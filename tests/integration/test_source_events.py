"""S3 events keep an `s3` source current between syncs (issue 29): the `source_events` function,
given the events S3 sends (EventBridge's and S3 notifications' shapes, as AWS documents them), on
the embedded endpoint's bucket. A created object is ingested, a removed one deleted with its
chunks, an event applied twice or arriving after a newer one changes nothing, and the next sync
agrees with what the events did."""

from __future__ import annotations

import uuid
from typing import Any

from starlette.testclient import TestClient

from tests.integration.conftest import wait_for_task
from tests.integration.test_sources import _add, _chunks_by_document, _consistent, _documents, _page, _sync

ACCOUNT = "111122223333"


def eventbridge(kind: str, bucket: str, key: str, sequencer: str, etag: str = "") -> dict[str, Any]:
    """An EventBridge event of S3 ("Object Created" / "Object Deleted"), as AWS documents it."""
    obj: dict[str, Any] = {"key": key, "sequencer": sequencer}
    detail: dict[str, Any] = {
        "version": "0",
        "bucket": {"name": bucket},
        "object": obj,
        "request-id": "N4N7GDK58NMKJ12R",
        "requester": ACCOUNT,
        "source-ip-address": "192.0.2.1",
    }
    if kind == "Object Created":
        obj.update(size=1024, etag=etag.strip('"'))
        detail["reason"] = "PutObject"
    else:
        detail.update(reason="DeleteObject", **{"deletion-type": "Permanently Deleted"})
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": kind,
        "source": "aws.s3",
        "account": ACCOUNT,
        "time": "2026-11-28T09:00:00Z",
        "region": "us-east-1",
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": detail,
    }


def notification(event_name: str, bucket: str, encoded_key: str, sequencer: str) -> dict[str, Any]:
    """An S3 event notification (version 2.1), its key URL-encoded as S3 sends it."""
    return {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "awsRegion": "us-east-1",
                "eventTime": "2026-11-28T09:00:00.000Z",
                "eventName": event_name,
                "userIdentity": {"principalId": f"AWS:{ACCOUNT}"},
                "requestParameters": {"sourceIPAddress": "192.0.2.1"},
                "responseElements": {"x-amz-request-id": "C3D13FE58DE4C810", "x-amz-id-2": "FMyUVURIY8"},
                "s3": {
                    "s3SchemaVersion": "1.0",
                    "configurationId": "citegate-sources",
                    "bucket": {
                        "name": bucket,
                        "ownerIdentity": {"principalId": "A3NL1KOZZKExample"},
                        "arn": f"arn:aws:s3:::{bucket}",
                    },
                    "object": {"key": encoded_key, "size": 1024, "eTag": "d41d8cd9", "sequencer": sequencer},
                },
            }
        ]
    }


def deliver(event: dict[str, Any]) -> list[dict[str, Any]]:
    """The `source_events` function, in its own local execution environment, as Lambda runs it."""
    from citegate.runtime.functions import invoke

    return list(invoke("source_events", event)["applied"])


def test_s3_events_keep_a_source_current_in_sequencer_order(client: TestClient, kb: str, stack: Any) -> None:
    s3 = stack.services.aws.s3
    bucket = "events-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=bucket)
    for name in ("one", "two"):
        s3.put_object(Bucket=bucket, Key=f"manual/{name}.md", Body=_page(name.title(), name).encode())
    source = _add(client, kb, {"kind": "s3", "bucket": bucket, "prefix": "manual/", "project": "m"})
    sid = source["source_id"]
    assert _sync(client, kb, sid)["counts"]["added"] == 2

    # Created (an S3 notification; the key URL-encoded): ingested at once, with the source's metadata.
    s3.put_object(Bucket=bucket, Key="manual/new guide.md", Body=_page("New", "fresh").encode())
    created = notification("ObjectCreated:Put", bucket, "manual/new+guide.md", "0062A1B2C3D4E5F601")
    [applied] = deliver(created)
    assert (applied["source_id"], applied["key"], applied["outcome"]) == (sid, "manual/new guide.md", "added")
    document = _documents(client, kb)["new guide.md"]
    assert wait_for_task(client, document["task_id"])["status"] == "succeeded"
    assert document["metadata"]["project"] == "m" and document["source_id"] == sid
    # The same event again (a retry, a duplicate delivery): nothing new is written.
    assert [a["outcome"] for a in deliver(created)] == ["stale"]
    assert _documents(client, kb)["new guide.md"]["task_id"] == document["task_id"]

    # Changed (EventBridge's shape): the document's chunks are replaced, not added beside.
    s3.put_object(Bucket=bucket, Key="manual/one.md", Body=_page("One", "rewritten").encode())
    etag = s3.head_object(Bucket=bucket, Key="manual/one.md")["ETag"]
    [changed] = deliver(eventbridge("Object Created", bucket, "manual/one.md", "00617F08299329D189", etag))
    assert changed["outcome"] == "changed"
    assert wait_for_task(client, _documents(client, kb)["one.md"]["task_id"])["status"] == "succeeded"

    # Removed: the document leaves with its chunks. Then the object's older "created" event
    # arrives late (a lower sequencer, of another length): dropped, the document stays gone.
    s3.delete_object(Bucket=bucket, Key="manual/two.md")
    removed = eventbridge("Object Deleted", bucket, "manual/two.md", "00617F0A27B9F6A09B")
    assert [a["outcome"] for a in deliver(removed)] == ["deleted"]
    late = eventbridge("Object Created", bucket, "manual/two.md", "00617F08299329D1", '"x"')
    assert [a["outcome"] for a in deliver(late)] == ["stale"]
    assert "two.md" not in _documents(client, kb)

    # Outside the prefix, another bucket, an object already gone, something else entirely: nothing.
    s3.put_object(Bucket=bucket, Key="other/skip.md", Body=b"# skip\n\nnot followed")
    assert deliver(eventbridge("Object Created", bucket, "other/skip.md", "01", '"e"')) == []
    assert deliver(eventbridge("Object Created", "another-bucket", "manual/one.md", "01", '"e"')) == []
    ghost = deliver(eventbridge("Object Created", bucket, "manual/ghost.md", "02", '"e"'))
    assert [a["outcome"] for a in ghost] == ["absent"]
    assert deliver({"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}) == []

    _consistent(client, stack, kb, {"one.md", "new guide.md"})
    texts = " ".join(c.text for c in _chunks_by_document(stack, kb)["one.md"])
    assert "rewritten" in texts and "The one lighthouse" not in texts
    # The next sync agrees with what the events did: nothing to add, change or delete.
    agreed = _sync(client, kb, sid)["counts"]
    assert (agreed["added"], agreed["changed"], agreed["deleted"], agreed["unchanged"]) == (0, 0, 0, 2)
