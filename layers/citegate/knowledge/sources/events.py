"""S3 events keep an `s3` source current between its syncs (in AWS: EventBridge rules on the
buckets named in the CDK context `source_buckets`, infra/constructs/sources.py).

An object created or removed under a source's prefix changes that one document: the event is
mapped to every enabled `s3` source watching that bucket and prefix, and the document is made to
match what S3 holds *now* (the object read again, or found gone), so applying an event twice, or
late, does no harm. Events of one object are applied in the order of their sequencer: each
source keeps the newest sequencer it applied per object (SourceStore.advance_object), and an
event with an older one is dropped, so an old event never undoes a newer one.

Both shapes S3 sends are read: EventBridge's ("Object Created" / "Object Deleted", the key as
is) and S3 event notifications' (`Records`, the key URL-encoded), bare or in SQS messages.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote_plus

from citegate.knowledge.ingest.selection import ingestible, select_names
from citegate.knowledge.ingest.service import Source as Submitted
from citegate.knowledge.sources import kinds
from citegate.knowledge.sources.model import S3Settings
from citegate.knowledge.sources.sync import CURRENT, document_metadata
from citegate.platform import ids
from citegate.platform.errors import CitegateError, DocumentNotFound
from citegate.platform.observability import logger

if TYPE_CHECKING:
    from citegate.knowledge.sources.model import Source
    from citegate.knowledge.sources.ports import Syncing

Change = Literal["created", "removed"]
# Sequencers are hex strings of varying length: compared right-padded with zeros (S3's rule).
SEQUENCER_WIDTH = 64


@dataclass(frozen=True)
class ObjectEvent:
    bucket: str
    key: str
    change: Change
    sequencer: str  # normalized: upper case, right-padded to SEQUENCER_WIDTH


def normalized_sequencer(value: str) -> str:
    return value.strip().upper().ljust(SEQUENCER_WIDTH, "0")


def _from_eventbridge(event: dict[str, Any]) -> list[ObjectEvent]:
    kind = event.get("detail-type")
    change: Change | None = (
        "created" if kind == "Object Created" else "removed" if kind == "Object Deleted" else None
    )
    detail = event.get("detail") or {}
    key = (detail.get("object") or {}).get("key")
    bucket = (detail.get("bucket") or {}).get("name")
    if change is None or not key or not bucket:
        return []
    sequencer = str((detail.get("object") or {}).get("sequencer") or "")
    return [ObjectEvent(str(bucket), str(key), change, normalized_sequencer(sequencer))]


def _from_record(record: dict[str, Any]) -> list[ObjectEvent]:
    name = str(record.get("eventName") or "")
    change: Change | None = None
    if name.startswith("ObjectCreated:"):
        change = "created"
    elif name.startswith("ObjectRemoved:"):
        change = "removed"
    s3 = record.get("s3") or {}
    key = (s3.get("object") or {}).get("key")
    bucket = (s3.get("bucket") or {}).get("name")
    if change is None or not key or not bucket:
        return []
    sequencer = str((s3.get("object") or {}).get("sequencer") or "")
    # Notification keys are URL-encoded (a space is "+").
    return [ObjectEvent(str(bucket), unquote_plus(str(key)), change, normalized_sequencer(sequencer))]


def object_events(event: dict[str, Any]) -> list[ObjectEvent]:
    """The object changes an event names (an EventBridge event, an S3 notification, or an SQS batch
    of either); other events name none."""
    if event.get("source") == "aws.s3" and "detail" in event:
        return _from_eventbridge(event)
    found: list[ObjectEvent] = []
    for record in event.get("Records") or []:
        if not isinstance(record, dict):
            continue
        if record.get("eventSource") == "aws:sqs":
            try:
                body = json.loads(str(record.get("body") or ""))
            except ValueError:
                continue
            if isinstance(body, dict):
                found.extend(object_events(body))
        elif record.get("eventSource") == "aws:s3":
            found.extend(_from_record(record))
    return found


def watching(sources: list[Source], bucket: str, key: str) -> list[Source]:
    """The enabled `s3` sources whose bucket and prefix hold this object."""
    out = []
    for source in sources:
        if source.kind != "s3" or not source.enabled:
            continue
        settings = source.typed_settings()
        assert isinstance(settings, S3Settings)
        if settings.bucket == bucket and key.startswith(settings.prefix.lstrip("/")):
            out.append(source)
    return out


def apply_events(s: Syncing, events: list[ObjectEvent]) -> list[dict[str, Any]]:
    """Apply each event to the sources watching its object; what happened, one entry per source.
    An error that a retry may cure (a table or the queue not answering) is raised after the
    event's order marker is put back, so the retried event is applied, not dropped."""
    outcomes: list[dict[str, Any]] = []
    sources = [source for source in s.sources.all() if source.kind == "s3"] if events else []
    for event in events:
        for source in watching(sources, event.bucket, event.key):
            outcome = {"kb_id": source.kb_id, "source_id": source.source_id, "key": event.key}
            previous = s.sources.advance_object(source.kb_id, source.source_id, event.key, event.sequencer)
            if previous is None:
                outcomes.append({**outcome, "outcome": "stale"})
                continue
            try:
                result = apply_object(s, source, event.key)
            except Exception:
                s.sources.restore_object(source.kb_id, source.source_id, event.key, event.sequencer, previous)
                raise
            outcomes.append({**outcome, "outcome": result})
            logger.info("source object event applied", extra={**outcome, "outcome": result})
    return outcomes


def apply_object(s: Syncing, source: Source, key: str) -> str:
    """Make the source's document for object `key` match what S3 holds now: `added`, `changed`,
    `unchanged`, `deleted`, `ignored` (not a file the source takes), `absent` (gone, and no
    document), or `failed: <reason>`."""
    settings = source.typed_settings()
    assert isinstance(settings, S3Settings)
    kb = s.kbs.find(source.kb_id)
    if kb is None:
        return "ignored"
    path = key[len(settings.prefix.lstrip("/")) :].lstrip("/")
    taken, _ = select_names(
        [path],
        include=settings.include,
        exclude=settings.exclude,
        keep_source_copies=settings.keep_source_copies,
    )
    if not path or key.endswith("/") or not ingestible(path) or not taken:
        return "ignored"
    name = settings.name_prefix + path
    current = s.documents.find(kb.kb_id, ids.document_id(kb.kb_id, name))
    if current is not None and current.source_id and current.source_id != source.source_id:
        return f"failed: the knowledge base's document {name!r} comes from source {current.source_id}"
    mine = current if current is not None and current.source_id == source.source_id else None
    try:
        found = s.aws.s3.get_object(Bucket=settings.bucket, Key=key)
    except Exception as error:
        if _missing(error):
            if mine is None:
                return "absent"
            try:
                s.ingestion.delete_document(kb.kb_id, mine.document_id)
            except DocumentNotFound:
                return "absent"
            return "deleted"
        raise
    revision = f"s3:{found.get('ETag', '')}"
    entry = kinds.Entry(path, read=lambda: b"", revision=revision)
    metadata = document_metadata(settings, entry, settings.version)
    same_place = mine is not None and mine.status in CURRENT and mine.metadata == metadata
    if mine is not None and same_place and mine.source_revision == revision:
        return "unchanged"
    limit = s.settings.max_document_bytes
    size = int(found.get("ContentLength") or 0)
    if size > limit:
        return f"failed: {size} bytes; the limit is {limit} (CITEGATE_MAX_DOCUMENT_BYTES)"
    data = bytes(found["Body"].read())
    if mine is not None and same_place and mine.content_sha256 == hashlib.sha256(data).hexdigest():
        s.documents.update_if_current(kb.kb_id, mine.document_id, mine.task_id, {"source_revision": revision})
        return "unchanged"
    if not data.strip():
        return "failed: the document is empty"
    try:
        s.ingestion.accept(
            kb,
            Submitted(data, name, None),
            metadata=metadata,
            origin={"source_id": source.source_id, "source_revision": revision},
            previous=current,
        )
    except CitegateError as error:
        if error.status >= 500:
            raise
        return f"failed: {error.message}"
    return "added" if current is None else "changed"


def _missing(error: Exception) -> bool:
    code = str(getattr(error, "response", {}).get("Error", {}).get("Code", ""))
    return code in ("NoSuchKey", "404", "NotFound")
