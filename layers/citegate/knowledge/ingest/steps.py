"""The ingestion workflow's steps (see ingestion.asl.json), one Lambda task each, over a batch.

Each step takes the batch state (citegate.knowledge.ingest.batch) and returns it. A document that cannot
be ingested (a corrupt file, a superseded or deleted document) moves to `failed` with a readable
reason and the others go on; finalize records every outcome. A failure that retrying may fix (a
backend that did not answer) is raised, so the workflow retries the whole step: every step is
idempotent, so a retried step or a redelivered batch never creates a second copy of anything.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from citegate.knowledge.ingest import ledger
from citegate.knowledge.ingest.batch import (
    BatchState,
    DocumentRef,
    FailedDocument,
    stash_json,
    stash_vectors,
    unstash_json,
    unstash_vectors,
    work_prefix,
)
from citegate.platform import ids
from citegate.platform.observability import logger

if TYPE_CHECKING:
    from citegate.knowledge.ports import Ingestion
    from citegate.knowledge.schemas.documents import DocumentRecord
    from citegate.knowledge.search.base import ChunkRecord

StepEvent = dict[str, Any]

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


def _each_at_once(
    s: Ingestion, call: Callable[[_Item], _Result], items: Sequence[_Item]
) -> list[_Result | Exception]:
    """`call` on every item; in the items' order, each result or the exception its call raised
    (the caller decides which failures are the document's own).

    Per-document calls (a raw file from S3, a conditional update of a document record) wait on a
    backend: on AWS a step makes several at once (Settings.ingest_calls_at_once), so 50 round
    trips of 10-50 ms take the time of a few."""
    workers = min(s.settings.ingest_calls_at_once, len(items))

    def outcome(item: _Item) -> _Result | Exception:
        try:
            return call(item)
        except Exception as error:
            return error

    if workers <= 1:
        return [outcome(item) for item in items]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(outcome, items))


class PermanentStepError(Exception):
    """A failure of the whole batch that retrying cannot fix: the workflow's Retry skips it and its
    Catch marks the batch's documents failed with this message."""


class TransientStepError(Exception):
    """A failure worth retrying (a backend that did not answer)."""


def _current(records: dict[tuple[str, str], DocumentRecord], document: DocumentRef) -> DocumentRecord | str:
    """The document's record while this task may still ingest it, else why it may not."""
    record = records.get((document.kb_id, document.document_id))
    if record is None:
        return "the document was deleted while it was being ingested"
    if record.task_id != document.task_id:
        return f"superseded by a newer ingestion of the same source (task {record.task_id})"
    return record


def _error_code(error: Exception) -> str:
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _records(s: Ingestion, state: BatchState) -> dict[tuple[str, str], DocumentRecord]:
    return ledger.find_documents(s, [(d.kb_id, d.document_id) for d in state.documents])


# Why a document's stored raw file cannot be ingested: no retry brings it back, submitting it again does.
STORED_MISSING = "the stored document is missing; ingest it again"
STORED_ALTERED = "the stored document does not match its hash; ingest it again"


def parse(s: Ingestion, event: StepEvent) -> StepEvent:
    from citegate.knowledge.ingest.parsing import ParseError, parse_document

    state = BatchState.model_validate(event)
    records = _records(s, state)
    # Tasks an earlier delivery finished are left out: there is nothing to redo. Only the task says
    # running: the document record stays queued until finalize, one conditional write per
    # document fewer (DocumentRecord.status).
    running = ledger.update_tasks(s, {d.task_id: {"status": "running"} for d in state.documents})
    readable: list[tuple[DocumentRef, DocumentRecord]] = []
    for document in state.documents:
        if document.task_id not in running:
            continue
        record = _current(records, document)
        if isinstance(record, str):
            state.fail(document, record)
        else:
            readable.append((document, record))
    raws = _each_at_once(s, lambda pair: s.blobs.get(pair[1].raw_key), readable)
    parsed: dict[str, Any] = {}
    going: list[DocumentRef] = []
    for (document, record), data in zip(readable, raws, strict=True):
        if isinstance(data, Exception):
            if _error_code(data) not in ("NoSuchKey", "404"):
                raise data  # S3 did not answer: retry the step
            state.fail(document, STORED_MISSING)
            continue
        if record.content_sha256 and hashlib.sha256(data).hexdigest() != record.content_sha256:
            state.fail(document, STORED_ALTERED)  # the same bytes would come back on a retry
            continue
        try:
            result = parse_document(
                data, mime_type=record.mime_type, source_name=record.source_name, title=record.title or None
            )
        except ParseError as error:
            state.fail(document, str(error))
            continue
        except Exception as error:  # the bytes are what they are: no retry can parse them
            state.fail(document, f"the document could not be parsed: {error}")
            continue
        parsed[document.task_id] = {
            "text": result.text,
            "title": result.title,
            "mime_type": result.mime_type,
            "pages": [[p.start, p.end, p.page] for p in result.pages],
        }
        going.append(document)
    state.documents = going
    state.parsed = stash_json(s, state, "parsed", parsed)
    return state.dump()


def _chunks_of(document_id: str, parsed: dict[str, Any]) -> dict[str, Any]:
    from citegate.knowledge.ingest.chunking import chunk_document
    from citegate.knowledge.ingest.documents import PageSpan, ParsedDocument

    chunked = chunk_document(
        ParsedDocument(
            text=parsed["text"],
            title=parsed["title"],
            mime_type=parsed["mime_type"],
            pages=tuple(PageSpan(*p) for p in parsed["pages"]),
        )
    )
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
    return {"title": parsed["title"], "parents": parents, "children": children}


def chunk(s: Ingestion, event: StepEvent) -> StepEvent:
    state = BatchState.model_validate(event)
    parsed = unstash_json(s, state.parsed)
    chunks: dict[str, Any] = {}
    going: list[DocumentRef] = []
    for document in state.documents:
        try:
            chunks[document.task_id] = _chunks_of(document.document_id, parsed[document.task_id])
        except Exception as error:  # the same text chunks the same way: no retry can help
            state.fail(document, f"the document could not be chunked: {error}")
            continue
        document.parents = len(chunks[document.task_id]["parents"])
        document.children = len(chunks[document.task_id]["children"])
        going.append(document)
    state.documents = going
    state.parsed = None
    state.chunks = stash_json(s, state, "chunks", chunks)
    return state.dump()


def embed(s: Ingestion, event: StepEvent) -> StepEvent:
    """One embedding call for every child of the batch (the cache skips unchanged text)."""
    state = BatchState.model_validate(event)
    chunks = unstash_json(s, state.chunks)
    texts = [c["text"] for d in state.documents for c in chunks[d.task_id]["children"]]
    embedder = s.embedder
    before = (getattr(embedder, "hits", 0), getattr(embedder, "misses", 0))
    vectors = embedder.embed_documents(texts) if texts else np.zeros((0, embedder.dimension), np.float32)
    state.vectors = stash_vectors(s, state, vectors)
    state.model_id = embedder.model_id
    state.reused = getattr(embedder, "hits", 0) - before[0]
    state.embedded = getattr(embedder, "misses", 0) - before[1]
    return state.dump()


def index(s: Ingestion, event: StepEvent) -> StepEvent:
    """Parents to the parent store, then every document's children to the index in one commit."""
    from citegate.knowledge.search.base import ChunkRecord

    state = BatchState.model_validate(event)
    if state.model_id != s.embedder.model_id:
        raise TransientStepError("the embedding model changed while the batch was being ingested")
    chunks = unstash_json(s, state.chunks)
    vectors = unstash_vectors(s, state.vectors)
    records = _records(s, state)
    kbs: dict[str, Any] = {}
    upserts: list[tuple[DocumentRef, list[ChunkRecord]]] = []
    parents: dict[tuple[str, str], list[dict[str, Any]]] = {}
    new: set[tuple[str, str]] = set()  # documents never indexed before: no stale parents to find
    offset = 0
    for document in state.documents:
        rows = vectors[offset : offset + document.children]
        offset += document.children
        record = _current(records, document)
        if document.kb_id not in kbs:
            kbs[document.kb_id] = s.kbs.find(document.kb_id)
        kb = kbs[document.kb_id]
        if kb is None:
            record = "the knowledge base was deleted while the document was being ingested"
        if isinstance(record, str):
            state.fail(document, record)
            continue
        work = chunks[document.task_id]
        if record.counts.parents == 0:
            new.add((document.kb_id, document.document_id))
        meta = record.metadata
        title = record.title or work["title"] or record.source_name
        document.title = title
        upserts.append(
            (
                document,
                [
                    ChunkRecord(
                        ref_id=c["ref_id"],
                        kb_id=document.kb_id,
                        tenant_id=kb.tenant_id,
                        document_id=document.document_id,
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
                        vector=rows[i],
                    )
                    for i, c in enumerate(work["children"])
                ],
            )
        )
        parents[(document.kb_id, document.document_id)] = [
            {
                **p,
                "kb_id": document.kb_id,
                "document_id": document.document_id,
                "source_name": record.source_name,
                "title": title,
            }
            for p in work["parents"]
        ]
    # Parents first: a chunk that can be found always has its parent to show.
    ledger.replace_parents(s, parents, new)
    indexed = _upsert(s, state, upserts)
    state.documents = [d for d in state.documents if d.task_id in indexed]
    return state.dump()


def _upsert(
    s: Ingestion, state: BatchState, upserts: Sequence[tuple[DocumentRef, list[ChunkRecord]]]
) -> set[str]:
    """Index the batch with one commit where the engine can; returns the task ids indexed."""
    if not upserts:
        return set()
    bulk = getattr(s.index, "upsert_documents", None)
    if bulk is not None:
        try:
            bulk([(d.kb_id, d.document_id, chunks) for d, chunks in upserts])
            return {d.task_id for d, _ in upserts}
        except ValueError:
            pass  # a chunk the batch may not write (see upsert_documents): find which document
    indexed: set[str] = set()
    for document, chunk_records in upserts:
        try:
            s.index.upsert_document(document.kb_id, document.document_id, chunk_records)
        except ValueError as error:
            state.fail(document, f"the document could not be indexed: {error}")
            continue
        indexed.add(document.task_id)
    return indexed


def _record_failures(s: Ingestion, failed: Sequence[FailedDocument]) -> None:
    """A failure never overrides a finished outcome (another delivery may have finished the task)."""
    changed = ledger.update_tasks(s, {f.task_id: {"status": "failed", "error": f.error} for f in failed})
    failing = [f for f in failed if f.task_id in changed]
    updates = _each_at_once(
        s,
        lambda f: s.documents.update_if_current(
            f.kb_id, f.document_id, f.task_id, {"status": "failed", "error": f.error}
        ),
        failing,
    )
    _raise_first(updates)
    for document in failing:
        logger.warning("ingestion failed", extra={"task_id": document.task_id, "reason": document.error})


def _raise_first(outcomes: Sequence[object]) -> None:
    """A backend that did not answer fails the step (the workflow retries it; every write is
    idempotent), after every other call has been made."""
    for outcome in outcomes:
        if isinstance(outcome, Exception):
            raise outcome


def finalize(s: Ingestion, event: StepEvent) -> StepEvent:
    state = BatchState.model_validate(event)
    succeeded: dict[str, dict[str, Any]] = {}

    def mark_indexed(document: DocumentRef) -> bool:
        changes: dict[str, Any] = {"status": "indexed", "counts": _counts(document), "error": None}
        if document.title:
            changes["title"] = document.title
        return s.documents.update_if_current(document.kb_id, document.document_id, document.task_id, changes)

    _raise_first(_each_at_once(s, mark_indexed, state.documents))
    for document in state.documents:
        counts = _counts(document)
        succeeded[document.task_id] = {"status": "succeeded", "counts": counts, "error": None}
        logger.info(
            "document indexed", extra={"task_id": document.task_id, "kb_id": document.kb_id, **counts}
        )
    # This execution indexed them: succeeded even if a duplicate delivery marked one failed.
    ledger.update_tasks(s, succeeded, reopen=True)
    _record_failures(s, state.failed)
    if state.work_files:
        s.blobs.delete_prefix(work_prefix(state.batch_id))
    return _summary(state)


def _counts(document: DocumentRef) -> dict[str, int]:
    return {"parents": document.parents, "children": document.children}


def mark_failed(s: Ingestion, event: StepEvent) -> StepEvent:
    """The Catch: a step failed for the whole batch; its documents fail with the step's reason."""
    state = BatchState.model_validate(event)
    reason = failure_reason(state.error or {})
    for document in state.documents:
        state.fail(document, reason)
    state.documents = []
    _record_failures(s, state.failed)
    # Unconditionally: the failed step may have written work files its output never announced.
    s.blobs.delete_prefix(work_prefix(state.batch_id))
    return _summary(state)


def _summary(state: BatchState) -> StepEvent:
    return {
        "batch_id": state.batch_id,
        "succeeded": [d.task_id for d in state.documents],
        "failed": [{"task_id": f.task_id, "error": f.error} for f in state.failed],
        "embedded": state.embedded,
        "reused": state.reused,
    }


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
