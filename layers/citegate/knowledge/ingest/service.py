"""Accepting documents: validate, store the raw object, record the task, enqueue.

Nothing is half written: the raw object is stored before the task and the document record, and
the task is marked failed (with a 503 to the caller) if it cannot be enqueued.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import hashlib
import json
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from citegate.knowledge.ingest.parsing import SUPPORTED_MIME_TYPES, ParseError, detect_mime_type
from citegate.knowledge.schemas.documents import (
    DocumentRecord,
    IngestRequest,
    Task,
    TaskCounts,
    UploadRequest,
)
from citegate.knowledge.schemas.kb import KnowledgeBase
from citegate.platform import ids
from citegate.platform.dynamo import utc_now
from citegate.platform.errors import (
    Forbidden,
    InvalidRequest,
    PayloadTooLarge,
    StorageUnavailable,
    UnsupportedMediaType,
)
from citegate.platform.observability import logger
from citegate.platform.principal import Principal

if TYPE_CHECKING:
    from citegate.knowledge.ports import Ingestion

# Documents sent in the request body; anything larger is uploaded first (presigned PUT).
INLINE_FIELDS = frozenset({"text", "base64_file"})
UPLOAD_ROUTE = "POST /v1/kb/{kb_id}/uploads"


def raw_key(kb_id: str, document_id: str, sha256: str) -> str:
    return f"raw/{kb_id}/{document_id}/{sha256}"


def upload_prefix(kb_id: str) -> str:
    return f"uploads/{kb_id}/"


# Text in UTF-16 or UTF-32 holds NUL bytes, so only its byte order mark tells it from a binary file.
_UNICODE_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
PDF = "application/pdf"


def submitted_type(source: Source) -> str:
    """The supported type a document is parsed as, decided when it is submitted (415 otherwise),
    with parsing's own detection: the declared `mime_type`, else the name's extension, else the
    bytes. The bytes must agree: a binary file (an Office document, an image, an archive) is
    refused whatever its name or declared type says, and so is a "PDF" without a PDF header;
    neither could be parsed later."""
    name = source.source_name
    try:
        mime_type = detect_mime_type(source.data, source.mime_type, name)
    except ParseError as error:
        raise _unsupported(error.message, name) from error
    if source.data.startswith(_UNICODE_BOMS):
        return mime_type
    try:
        content = detect_mime_type(source.data, None, "")  # what the bytes alone are
    except ParseError as error:
        raise _unsupported(
            f"{name} is declared or named {mime_type}, but its content is binary, not text or PDF", name
        ) from error
    if mime_type == PDF and content != PDF:
        raise _unsupported(f"{name} is declared or named a PDF, but it has no PDF header", name)
    return mime_type


def _unsupported(reason: str, name: str) -> UnsupportedMediaType:
    return UnsupportedMediaType(
        f"{reason}; supported: Markdown, plain text, HTML and PDF",
        details={"source_name": name, "supported": sorted(SUPPORTED_MIME_TYPES)},
    )


@dataclass(frozen=True)
class Accepted:
    task: Task
    document_id: str


@dataclass(frozen=True)
class Source:
    data: bytes
    source_name: str
    mime_type: str | None
    upload_key: str | None = None


class IngestionService:
    def __init__(self, services: Ingestion) -> None:
        self._s = services

    # -- accepting ---------------------------------------------------------------------------

    def submit(self, kb: KnowledgeBase, request: IngestRequest, caller: Principal) -> Accepted:
        source = self._read_source(kb, request)
        if not source.data.strip():
            raise InvalidRequest("the document is empty", details={"field": request.source_field})
        accepted = self.accept(
            kb,
            source,
            title=request.title or "",
            metadata=request.metadata.model_dump(exclude_defaults=False),
        )
        logger.info(
            "document accepted",
            extra={
                "kb_id": kb.kb_id,
                "document_id": accepted.document_id,
                "task_id": accepted.task.task_id,
                "caller": caller.id,
            },
        )
        return accepted

    def accept(
        self,
        kb: KnowledgeBase,
        source: Source,
        *,
        title: str = "",
        metadata: dict[str, Any] | None = None,
        origin: dict[str, Any] | None = None,
        enqueue: bool = True,
        previous: DocumentRecord | Literal["unread"] | None = "unread",
    ) -> Accepted:
        """Store the document and its task, replacing any earlier version of the same source name.

        `origin` is what a source (citegate.knowledge.sources) records on the document: its id and
        the revision it was read at. With `enqueue=False` the caller hands the task to the queue
        itself (`enqueue_many`), several at a time. `previous`: the document's record as the caller
        just read it (None: there is none), saving a read per document."""
        mime_type = submitted_type(source)
        document_id = ids.document_id(kb.kb_id, source.source_name)
        sha256 = hashlib.sha256(source.data).hexdigest()
        key = raw_key(kb.kb_id, document_id, sha256)
        now = utc_now()
        task = Task(
            task_id=ids.new_task_id(),
            kb_id=kb.kb_id,
            document_id=document_id,
            status="queued",
            created_at=now,
            updated_at=now,
        )
        if previous == "unread":
            previous = self._s.documents.find(kb.kb_id, document_id)

        self._s.blobs.put(key, source.data, mime_type)
        self._s.tasks.create(task)
        record = DocumentRecord(
            kb_id=kb.kb_id,
            document_id=document_id,
            source_name=source.source_name,
            title=title,
            mime_type=mime_type,
            size_bytes=len(source.data),
            content_sha256=sha256,
            raw_key=key,
            status="queued",
            task_id=task.task_id,
            # What is indexed until this ingestion replaces it (and tells indexing to look for
            # stale parents: a document never indexed has none).
            counts=previous.counts if previous else TaskCounts(),
            metadata=metadata or {},
            created_at=previous.created_at if previous else now,
            updated_at=now,
            **(origin or {}),
        )
        if self._s.documents.put(record):
            self._s.kbs.add_documents(kb.kb_id, 1)
        if previous and previous.raw_key and previous.raw_key != key:
            self._s.blobs.delete_prefix(previous.raw_key)
        if source.upload_key:
            self._s.blobs.delete_prefix(source.upload_key)
        if enqueue:
            self._enqueue(task)
        return Accepted(task, document_id)

    def enqueue_many(self, task_ids: list[str]) -> None:
        """Hand tasks to the ingestion queue, ten to a request; StorageUnavailable if it refuses
        any (their records stay queued: a source's next sync hands them over again)."""
        sqs = self._s.aws.sqs
        for start in range(0, len(task_ids), 10):
            group = task_ids[start : start + 10]
            try:
                response = sqs.send_message_batch(
                    QueueUrl=self._s.ingest_queue_url,
                    Entries=[
                        {"Id": str(i), "MessageBody": json.dumps({"task_id": task_id})}
                        for i, task_id in enumerate(group)
                    ],
                )
            except Exception as error:
                raise StorageUnavailable(f"the ingestion queue is unavailable: {error}") from error
            if response.get("Failed"):
                reason = response["Failed"][0].get("Message") or "refused"
                raise StorageUnavailable(f"the ingestion queue refused a message: {reason}")

    def create_upload(self, kb: KnowledgeBase, request: UploadRequest) -> dict[str, Any]:
        upload_id = ids.new_upload_id()
        key = f"{upload_prefix(kb.kb_id)}{upload_id}"
        content_type = (
            request.mime_type or mimetypes.guess_type(request.source_name)[0] or "application/octet-stream"
        )
        expires = self._s.settings.upload_url_ttl_seconds
        return {
            "upload_id": upload_id,
            "s3_key": key,
            "url": self._s.blobs.presigned_put(key, content_type, expires),
            "method": "PUT",
            "headers": {"Content-Type": content_type},
            "expires_in": expires,
            "max_bytes": self._s.settings.max_document_bytes,
            "source_name": request.source_name,
        }

    def reindex(self, kb: KnowledgeBase) -> Task:
        """One task per stored document, grouped under a knowledge-base task whose status derives
        from theirs."""
        now = utc_now()
        children: list[Task] = []
        for document in self._s.documents.list(kb.kb_id):
            child = Task(
                task_id=ids.new_task_id(),
                kb_id=kb.kb_id,
                document_id=document.document_id,
                status="queued",
                created_at=now,
                updated_at=now,
            )
            self._s.tasks.create(child)
            self._s.documents.update_if_current(
                kb.kb_id,
                document.document_id,
                document.task_id,
                {"task_id": child.task_id, "status": "queued"},
            )
            children.append(child)
        parent = Task(
            task_id=ids.new_task_id(),
            kb_id=kb.kb_id,
            kind="reindex",
            status="succeeded" if not children else "queued",
            created_at=now,
            updated_at=now,
            children=[c.task_id for c in children],
        )
        self._s.tasks.create(parent)
        for child in children:
            self._enqueue(child)
        return parent

    def task_view(self, task: Task) -> Task:
        """A reindex task's status and counts are those of its document tasks."""
        if task.kind != "reindex" or not task.children:
            return task
        found = self._s.tasks.find_many(task.children)
        statuses = [found[c].status if c in found else "failed" for c in task.children]
        failed = [c for c in task.children if c not in found or found[c].status == "failed"]
        if any(s in ("queued", "running") for s in statuses):
            status = "running" if any(s != "queued" for s in statuses) else "queued"
        else:
            status = "failed" if failed else "succeeded"
        counts = task.counts.model_copy()
        counts.parents = sum(t.counts.parents for t in found.values())
        counts.children = sum(t.counts.children for t in found.values())
        error = None
        if failed and status == "failed":
            error = f"{len(failed)} of {len(statuses)} documents failed: " + ", ".join(failed[:10])
        return task.model_copy(update={"status": status, "counts": counts, "error": error})

    def delete_document(self, kb_id: str, document_id: str) -> dict[str, Any]:
        """Remove a document everywhere: the record is marked first (so running steps stop: their
        task is no longer the document's), then chunks, parents and files go, the record last.
        Stopped midway, the marked record is still there to say what is left to remove, and a
        source's next sync (or this call again) finishes it."""
        record = self._s.documents.get(kb_id, document_id)
        self._s.documents.update_if_current(
            kb_id, document_id, record.task_id, {"status": "deleting", "task_id": ids.new_task_id()}
        )
        chunks = self._s.index.delete_document(kb_id, document_id)
        parents = self._s.parents.delete_document(kb_id, document_id)
        files = self._s.blobs.delete_prefix(f"raw/{kb_id}/{document_id}/")
        if self._s.documents.delete(kb_id, document_id):
            self._s.kbs.add_documents(kb_id, -1)
        return {
            "kb_id": kb_id,
            "document_id": document_id,
            "source_name": record.source_name,
            "deleted": {"chunks": chunks, "parents": parents, "files": files},
        }

    # -- internals ----------------------------------------------------------------------------

    def _enqueue(self, task: Task) -> None:
        try:
            self._s.aws.sqs.send_message(
                QueueUrl=self._s.ingest_queue_url,
                MessageBody=json.dumps({"task_id": task.task_id}),
            )
        except Exception as error:
            reason = f"the ingestion queue is unavailable: {error}"
            self._s.tasks.update(task.task_id, status="failed", error=reason)
            raise StorageUnavailable(reason, details={"task_id": task.task_id}) from error

    def _read_source(self, kb: KnowledgeBase, request: IngestRequest) -> Source:
        settings = self._s.settings
        inline_limit = settings.max_inline_document_bytes
        if request.text is not None:
            data = request.text.encode()
            self._check_size(len(data), inline_limit, "text")
            return Source(data, request.source_name or "", request.mime_type)
        if request.base64_file is not None:
            # Reject before decoding: base64 is 4/3 of the decoded size.
            encoded = request.base64_file
            self._check_size(len(encoded) * 3 // 4 - encoded[-2:].count("="), inline_limit, "base64_file")
            try:
                data = base64.b64decode(request.base64_file, validate=True)
            except (binascii.Error, ValueError) as error:
                raise InvalidRequest(
                    "base64_file is not valid base64", details={"field": "base64_file"}
                ) from error
            return Source(data, request.source_name or "", request.mime_type)
        if request.s3_key is not None:
            return self._read_upload(kb, request)
        return self._read_local_file(request)

    def _read_upload(self, kb: KnowledgeBase, request: IngestRequest) -> Source:
        key = request.s3_key or ""
        if not key.startswith(upload_prefix(kb.kb_id)) or ".." in key:
            raise InvalidRequest(
                f"s3_key must be an upload of this knowledge base (from POST /v1/kb/{kb.kb_id}/uploads)",
                details={"field": "s3_key"},
            )
        size = self._s.blobs.size(key)
        if size is None:
            raise InvalidRequest(
                "nothing was uploaded at s3_key (or the upload expired)", details={"field": "s3_key"}
            )
        self._check_size(size, self._s.settings.max_document_bytes, "s3_key")
        return Source(self._s.blobs.get(key), request.source_name or "", request.mime_type, upload_key=key)

    def _read_local_file(self, request: IngestRequest) -> Source:
        settings = self._s.settings
        if not settings.local_runtime:
            raise Forbidden(
                "file_path ingestion is only available on the local runtime", details={"field": "file_path"}
            )
        root = settings.local_ingest_root
        if root is None:
            raise Forbidden(
                "file_path ingestion is disabled: set CITEGATE_LOCAL_INGEST_ROOT to the folder it may read",
                details={"field": "file_path"},
            )
        root = root.resolve()
        candidate = Path(request.file_path or "")
        try:
            path = (candidate if candidate.is_absolute() else root / candidate).resolve()
            # resolve() follows symlinks, so a link pointing outside the folder is refused too.
            if not path.is_relative_to(root):
                raise Forbidden(f"file_path must be inside {root}", details={"field": "file_path"})
            if not path.is_file():
                raise InvalidRequest(f"no such file: {request.file_path}", details={"field": "file_path"})
            self._check_size(path.stat().st_size, settings.max_document_bytes, "file_path")
            data = path.read_bytes()
        except (OSError, ValueError) as error:
            # A name the system refuses (too long, a NUL), a folder read as a file, a file that
            # went away or cannot be read: the caller's path, not a server failure.
            reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
            raise InvalidRequest(
                f"file_path cannot be read: {reason}", details={"field": "file_path"}
            ) from error
        source_name = request.source_name or str(path.relative_to(root))
        return Source(data, source_name, request.mime_type)

    @staticmethod
    def _check_size(size: int, limit: int, field: str) -> None:
        if size > limit:
            message = f"the document is {size} bytes; the limit for {field} is {limit} bytes"
            details: dict[str, Any] = {"field": field, "size": size, "limit": limit}
            if field in INLINE_FIELDS:  # inline documents must fit Lambda's 6 MB event: upload instead
                message += f"; upload it instead ({UPLOAD_ROUTE}, then ingest with s3_key)"
                details["upload_route"] = UPLOAD_ROUTE
            raise PayloadTooLarge(message, details=details)
