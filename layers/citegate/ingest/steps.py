"""The ingestion workflow's steps, one Lambda task each (see ingestion.asl.json).

Steps pass only ids and S3 keys between them (Step Functions payloads are small); the work files
live under work/{task_id}/ and are removed when the task finishes. Every step is idempotent, so a
retried step or a redelivered message never creates a second copy of anything.
"""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING, Any

import numpy as np

from citegate import ids
from citegate.ingest.service import work_prefix
from citegate.observability import logger

if TYPE_CHECKING:
    from citegate.container import Services

StepEvent = dict[str, Any]


class PermanentStepError(Exception):
    """A failure that retrying cannot fix (a corrupt file, a superseded task): the workflow's
    Retry skips it and its Catch marks the task failed with this message."""


class TransientStepError(Exception):
    """A failure worth retrying (a backend that did not answer)."""


def _ids(event: StepEvent) -> tuple[str, str, str]:
    return event["task_id"], event["kb_id"], event["document_id"]


def _require_current(s: Services, event: StepEvent) -> Any:
    task_id, kb_id, document_id = _ids(event)
    record = s.documents.find(kb_id, document_id)
    if record is None:
        raise PermanentStepError("the document was deleted while it was being ingested")
    if record.task_id != task_id:
        raise PermanentStepError(
            f"superseded by a newer ingestion of the same source (task {record.task_id})"
        )
    return record


def parse(s: Services, event: StepEvent) -> StepEvent:
    from citegate.ingest.parsing import ParseError, parse_document

    task_id, kb_id, document_id = _ids(event)
    record = _require_current(s, event)
    s.tasks.update(task_id, status="running")
    s.documents.update_if_current(kb_id, document_id, task_id, {"status": "running"})
    data = s.blobs.get(record.raw_key)
    try:
        parsed = parse_document(
            data, mime_type=record.mime_type, source_name=record.source_name, title=record.title or None
        )
    except ParseError as error:
        raise PermanentStepError(str(error)) from error
    key = work_prefix(task_id) + "parsed.json"
    s.blobs.put_json(
        key,
        {
            "text": parsed.text,
            "title": parsed.title,
            "mime_type": parsed.mime_type,
            "pages": [[p.start, p.end, p.page] for p in parsed.pages],
        },
    )
    return {**event, "parsed_key": key}


def chunk(s: Services, event: StepEvent) -> StepEvent:
    from citegate.ingest.chunking import chunk_document
    from citegate.ingest.documents import PageSpan, ParsedDocument

    task_id, _, document_id = _ids(event)
    parsed = s.blobs.get_json(event["parsed_key"])
    document = ParsedDocument(
        text=parsed["text"],
        title=parsed["title"],
        mime_type=parsed["mime_type"],
        pages=tuple(PageSpan(*p) for p in parsed["pages"]),
    )
    chunked = chunk_document(document)
    parents = [
        {
            "parent_id": ids.parent_id(document_id, p.index),
            "index": p.index,
            "text": p.text,
            "heading": p.heading,
            "heading_path": list(p.heading_path),
            "anchor": p.anchor,
            "page": p.page,
        }
        for p in chunked.parents
    ]
    children = [
        {
            "ref_id": ids.ref_id(document_id, c.index, c.text),
            "index": c.index,
            "parent_id": ids.parent_id(document_id, c.parent_index),
            "text": c.text,
            "page": c.page,
            # The child's own section: merged parents can span several headings.
            "heading": c.heading or chunked.parents[c.parent_index].heading,
            "anchor": c.anchor or chunked.parents[c.parent_index].anchor,
        }
        for c in chunked.children
    ]
    key = work_prefix(task_id) + "chunks.json"
    s.blobs.put_json(key, {"title": document.title, "parents": parents, "children": children})
    return {**event, "chunks_key": key, "parents": len(parents), "children": len(children)}


def embed(s: Services, event: StepEvent) -> StepEvent:
    task_id = event["task_id"]
    chunks = s.blobs.get_json(event["chunks_key"])
    texts = [c["text"] for c in chunks["children"]]
    embedder = s.embedder
    before = (getattr(embedder, "hits", 0), getattr(embedder, "misses", 0))
    vectors = embedder.embed_documents(texts) if texts else np.zeros((0, embedder.dimension), np.float32)
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(vectors, dtype=np.float32), allow_pickle=False)
    key = work_prefix(task_id) + "vectors.npy"
    s.blobs.put(key, buffer.getvalue())
    reused = getattr(embedder, "hits", 0) - before[0]
    embedded = getattr(embedder, "misses", 0) - before[1]
    return {
        **event,
        "vectors_key": key,
        "model_id": embedder.model_id,
        "embedded": embedded,
        "reused": reused,
    }


def index(s: Services, event: StepEvent) -> StepEvent:
    from citegate.search.base import ChunkRecord

    _, kb_id, document_id = _ids(event)
    record = _require_current(s, event)
    kb = s.kbs.get(kb_id)
    chunks = s.blobs.get_json(event["chunks_key"])
    vectors = np.load(io.BytesIO(s.blobs.get(event["vectors_key"])), allow_pickle=False)
    if event.get("model_id") != s.embedder.model_id:
        raise TransientStepError("the embedding model changed while the document was being ingested")
    meta = record.metadata
    title = record.title or chunks["title"] or record.source_name
    records = [
        ChunkRecord(
            ref_id=c["ref_id"],
            kb_id=kb_id,
            tenant_id=kb.tenant_id,
            document_id=document_id,
            parent_id=c["parent_id"],
            source_name=record.source_name,
            text=c["text"],
            position=c["index"],
            title=title,
            page=c["page"],
            project=str(meta.get("project") or ""),
            path=str(meta.get("path") or ""),
            version=str(meta.get("version") or ""),
            url=str(meta.get("url") or ""),
            anchor=c.get("anchor") or "",
            heading=c.get("heading") or "",
            vector=vectors[i],
        )
        for i, c in enumerate(chunks["children"])
    ]
    # Parents first: a chunk that can be found always has its parent to show.
    s.parents.replace(
        kb_id,
        document_id,
        [
            {
                **p,
                "kb_id": kb_id,
                "document_id": document_id,
                "source_name": record.source_name,
                "title": title,
            }
            for p in chunks["parents"]
        ],
    )
    s.index.upsert_document(kb_id, document_id, records)
    return {**event, "title": title}


def finalize(s: Services, event: StepEvent) -> StepEvent:
    task_id, kb_id, document_id = _ids(event)
    counts = {"parents": int(event.get("parents", 0)), "children": int(event.get("children", 0))}
    changes = {"status": "indexed", "counts": counts, "error": None}
    if event.get("title"):
        changes["title"] = event["title"]
    s.documents.update_if_current(kb_id, document_id, task_id, changes)
    s.tasks.update(task_id, status="succeeded", counts=counts, error=None)
    s.blobs.delete_prefix(work_prefix(task_id))
    logger.info("document indexed", extra={"task_id": task_id, "kb_id": kb_id, **counts})
    return {"task_id": task_id, "status": "succeeded", **counts}


def mark_failed(s: Services, event: StepEvent) -> StepEvent:
    task_id, kb_id, document_id = _ids(event)
    reason = failure_reason(event.get("error") or {})
    s.tasks.update(task_id, status="failed", error=reason)
    s.documents.update_if_current(kb_id, document_id, task_id, {"status": "failed", "error": reason})
    s.blobs.delete_prefix(work_prefix(task_id))
    logger.warning("ingestion failed", extra={"task_id": task_id, "reason": reason})
    return {"task_id": task_id, "status": "failed", "error": reason}


def failure_reason(error: dict[str, Any]) -> str:
    """A readable reason from a Step Functions error: the step's own message when there is one."""
    cause = error.get("Cause") or ""
    try:
        detail = json.loads(cause)
        message = detail.get("errorMessage") or cause
    except (TypeError, ValueError):
        message = cause
    name = error.get("Error") or "Error"
    if name == "States.Timeout":
        return "an ingestion step timed out"
    return str(message or name)


STEPS = {
    "ingest_parse": parse,
    "ingest_chunk": chunk,
    "ingest_embed": embed,
    "ingest_index": index,
    "ingest_finalize": finalize,
    "ingest_mark_failed": mark_failed,
}
