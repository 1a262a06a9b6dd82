"""S3 events of a source's bucket (issue 29): both shapes S3 sends are read, keys decoded as S3
encodes them, sequencers compared as S3 says (right-padded), and the per-object order marker lets
only a newer event through, and can be put back when applying one fails."""

from __future__ import annotations

import json
from typing import Any

from tests.unit.knowledge.test_sources import sources_table  # noqa: F401 - the fixture

from citegate.knowledge.sources.events import normalized_sequencer, object_events, watching
from citegate.knowledge.sources.model import Source


def _source(source_id: str, bucket: str, prefix: str, *, kind: str = "s3", enabled: bool = True) -> Source:
    settings: dict[str, Any] = {"kind": kind, "bucket": bucket, "prefix": prefix}
    if kind == "folder":
        settings = {"kind": "folder", "path": "x"}
    return Source(
        kb_id="kb",
        source_id=source_id,
        tenant_id="t",
        name=source_id,
        kind=kind,  # type: ignore[arg-type]
        settings=settings,
        enabled=enabled,
        created_at="2026-01-01T00:00:00.000Z",
        updated_at="2026-01-01T00:00:00.000Z",
    )


def test_both_event_shapes_are_read_and_keys_decoded() -> None:
    bridge = {
        "source": "aws.s3",
        "detail-type": "Object Deleted",
        "detail": {"bucket": {"name": "b"}, "object": {"key": "docs/a b.md", "sequencer": "0a"}},
    }
    record = {
        "eventSource": "aws:s3",
        "eventName": "ObjectCreated:CompleteMultipartUpload",
        "s3": {"bucket": {"name": "b"}, "object": {"key": "docs/r%C3%A9sum%C3%A9+1.md", "sequencer": "0B"}},
    }
    [removed] = object_events(bridge)
    assert (removed.bucket, removed.key, removed.change) == ("b", "docs/a b.md", "removed")
    [created] = object_events({"Records": [record]})
    assert (created.key, created.change) == ("docs/résumé 1.md", "created")
    # An SQS batch of either shape; and events that are not object changes name nothing.
    sqs = {
        "Records": [
            {"eventSource": "aws:sqs", "body": json.dumps(bridge)},
            {"eventSource": "aws:sqs", "body": "x"},
        ]
    }
    assert [e.key for e in object_events(sqs)] == ["docs/a b.md"]
    assert object_events({"source": "aws.s3", "detail-type": "Object Restore Completed", "detail": {}}) == []
    assert object_events({"Records": [{**record, "eventName": "ObjectTagging:Put"}]}) == []


def test_sequencers_compare_right_padded() -> None:
    # S3: "right pad the shorter value with zeros, then do a lexicographical comparison".
    assert normalized_sequencer("0055AED6DCD90281E5") < normalized_sequencer("0055AED6DCD90281E6")
    assert normalized_sequencer("0055aed6dcd90281e5") == normalized_sequencer("0055AED6DCD90281E500")
    assert normalized_sequencer("00617F08299329D1") < normalized_sequencer("00617F0A27B9F6A09B")


def test_an_object_maps_to_the_enabled_s3_sources_over_its_prefix() -> None:
    sources = [
        _source("a", "bkt", "docs/"),
        _source("b", "bkt", ""),
        _source("c", "bkt", "docs/other/"),
        _source("d", "other", "docs/"),
        _source("e", "bkt", "docs/", enabled=False),
        _source("f", "bkt", "", kind="folder"),
    ]
    assert [s.source_id for s in watching(sources, "bkt", "docs/x.md")] == ["a", "b"]


def test_the_order_marker_lets_only_a_newer_event_through(sources_table: Any) -> None:  # noqa: F811
    store = sources_table
    old, new = normalized_sequencer("00617F08"), normalized_sequencer("00617F09")
    assert store.advance_object("kb", "src", "k.md", new) == ""
    assert store.advance_object("kb", "src", "k.md", old) is None  # late: dropped
    assert store.advance_object("kb", "src", "k.md", new) is None  # again: dropped
    newer = normalized_sequencer("00617F0A")
    assert store.advance_object("kb", "src", "k.md", newer) == new
    store.restore_object("kb", "src", "k.md", newer, new)  # applying it failed: its retry may pass
    assert store.advance_object("kb", "src", "k.md", newer) == new
    store.restore_object("kb", "src", "k.md", old, "")  # not the marker's value: nothing changes
    assert store.advance_object("kb", "src", "k.md", newer) is None
