"""One sync of a source: what the source holds now against what the knowledge base holds from it.

Exact and incremental, by content hash per document (a revision the source gives, a Git blob id
or an ETag, spares reading what did not change): a new or changed document is handed to
ingestion (which replaces the old chunks, never adding beside them), an unchanged one is left
alone (no embedding), one gone from the source is deleted with its chunks, in this same sync. A
rename is a delete and an add.

A sync is requested (`start`: the lease taken, the run recorded `queued`) and done apart
(`execute`, the `source_sync_worker` function, which the ingestion queue's consumer starts as an
execution of the ingestion state machine), so a request answers at once however large the source.

Stopped at any point (a killed process, a timed-out Lambda), the knowledge base stays
consistent: every document is its old version, or its new one queued for ingestion, or marked
`deleting`; the next sync deletes what was marked, hands over what was left queued
(`requeued`) and goes on. Two syncs of a source never run at once: each holds the source's lease
(a conditional write, citegate.knowledge.sources.store), renewed as it goes.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
import uuid
from typing import TYPE_CHECKING, Any

from citegate.knowledge.ingest.service import Source as Submitted
from citegate.knowledge.sources import kinds
from citegate.knowledge.sources.model import Common, RunFailure, SyncRun, Trigger
from citegate.platform.dynamo import utc_now
from citegate.platform.errors import CitegateError, DocumentNotFound
from citegate.platform.observability import logger

if TYPE_CHECKING:
    from citegate.knowledge.schemas.documents import DocumentRecord
    from citegate.knowledge.schemas.kb import KnowledgeBase
    from citegate.knowledge.sources.model import Source
    from citegate.knowledge.sources.ports import Syncing

# A run holds the lease this long without renewing it; it renews every quarter of that.
LEASE_SECONDS = 600.0
ENQUEUE_EVERY = 50  # accepted documents handed to the queue together (and lost at most, if killed)
MAX_FAILURES = 50  # failures kept on the run record (all are counted)
MAX_TASK_IDS = 1000
# A document in one of these states holds (or will hold) what it says: the same content is skipped.
CURRENT = ("indexed", "queued", "running")


class LeaseLost(Exception):
    """Another run took the source's lease (this one stalled past its time): stop writing."""


def new_run_id() -> str:
    return "run_" + uuid.uuid4().hex[:16]


def summary(run: SyncRun) -> dict[str, Any]:
    """What the source item keeps of its latest run."""
    return {
        "run_id": run.run_id,
        "status": run.status,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "counts": run.counts.model_dump(),
        "error": run.error,
    }


def listing_of(s: Syncing, source: Source, known: dict[str, tuple[str, str]]) -> kinds.Listing:
    """What the source holds now; `known`: path -> (revision, URL) of what the knowledge base holds."""
    settings = source.typed_settings()
    if settings.kind == "folder":
        return kinds.folder_listing(settings, s.settings)
    if settings.kind == "git":
        return kinds.git_listing(settings, s.settings)
    if settings.kind == "s3":
        return kinds.s3_listing(settings, s.aws.s3)
    from citegate.knowledge.sources.website import website_listing

    return website_listing(settings, s.page_fetcher, known)


def document_metadata(settings: Common, entry: kinds.Entry, version: str) -> dict[str, Any]:
    path = "/".join(p for p in (settings.path_prefix.strip("/"), entry.path) if p)
    return {
        "project": settings.project,
        "path": path,
        "version": settings.version or version,
        "url": entry.url or kinds.page_url(settings, entry.path),
    }


class SourceSync:
    def __init__(self, s: Syncing, *, lease_seconds: float = LEASE_SECONDS) -> None:
        self._s = s
        self._lease = lease_seconds

    def start(
        self, kb: KnowledgeBase, source: Source, *, trigger: Trigger = "api", caller: str = ""
    ) -> SyncRun:
        """Take the source's lease (SyncInProgress while another run holds it) and record a run
        `queued`: what a request answers with before the sync function (`execute`) does the work."""
        s = self._s
        run_id = new_run_id()
        held = s.sources.acquire(kb.kb_id, source.source_id, run_id, self._lease)
        run = SyncRun(
            run_id=run_id,
            kb_id=kb.kb_id,
            source_id=source.source_id,
            trigger=trigger,
            caller=caller,
            status="queued",
            started_at=utc_now(),
        )
        run.takes_over = self._close_stopped_run(held)
        s.sources.put_run(run)
        s.sources.update(kb.kb_id, source.source_id, {"last_run": summary(run)})
        return run

    def execute(self, kb: KnowledgeBase, source: Source, run: SyncRun) -> SyncRun:
        """Do a queued run's work (the sync function, from the ingestion queue): list, hand what is
        new or changed to ingestion, delete what is gone; the finished run. A run whose lease
        another run has taken meanwhile (it waited past the lease's time) is abandoned unrun."""
        s = self._s
        if not s.sources.renew(kb.kb_id, source.source_id, run.run_id, self._lease):
            run.status, run.finished_at = "abandoned", utc_now()
            run.error = "another sync took the source before this one started"
            s.sources.put_run(run)
            return run
        run.status, run.running_at = "running", utc_now()
        s.sources.put_run(run)
        s.sources.update(kb.kb_id, source.source_id, {"last_run": summary(run)})
        started = time.perf_counter()
        try:
            self._sync(kb, source, run, run.takes_over is not None)
            run.status = "succeeded"
        except kinds.SourceUnavailable as error:
            run.status, run.error = "failed", str(error)
        except LeaseLost:
            run.status, run.error = "failed", "another sync took over this source (this one stalled)"
        except CitegateError as error:  # the queue or a table did not answer
            run.status, run.error = "failed", error.message
        except Exception as error:
            logger.exception("source sync failed", extra={"source_id": source.source_id})
            run.status, run.error = "failed", f"{type(error).__name__}: {error}"
        run.finished_at = utc_now()
        run.duration_ms = round((time.perf_counter() - started) * 1000, 1)
        s.sources.put_run(run)
        s.sources.release(kb.kb_id, source.source_id, run.run_id, summary(run))
        logger.info(
            "source synced",
            extra={
                "kb_id": kb.kb_id,
                "source_id": source.source_id,
                "run_id": run.run_id,
                "status": run.status,
                **run.counts.model_dump(),
            },
        )
        return run

    def run(
        self, kb: KnowledgeBase, source: Source, *, trigger: Trigger = "api", caller: str = ""
    ) -> SyncRun:
        """Sync `source` now, in this process (`start` then `execute`); the finished run."""
        queued = self.start(kb, source, trigger=trigger, caller=caller)
        return self.execute(kb, self._s.sources.get(kb.kb_id, source.source_id), queued)

    def _close_stopped_run(self, source: Source) -> str | None:
        """A previous run still `queued` or `running` when its lease could be taken stopped before
        it finished (a killed worker, a timed-out Lambda): it is recorded as abandoned, and this
        run hands the documents it left queued to the queue again. Its id, or None."""
        last = source.last_run or {}
        if last.get("status") not in ("queued", "running"):
            return None
        for old in self._s.sources.runs(source.kb_id, source.source_id, limit=5):
            if old.run_id == last.get("run_id") and old.status in ("queued", "running"):
                old.status = "abandoned"
                old.error = "the sync stopped before it finished; the next run took over"
                old.finished_at = utc_now()
                self._s.sources.put_run(old)
        return str(last.get("run_id") or "") or None

    def _sync(self, kb: KnowledgeBase, source: Source, run: SyncRun, recovering: bool) -> None:
        s = self._s
        settings = source.typed_settings()
        documents = s.documents.list(kb.kb_id)
        by_name = {d.source_name: d for d in documents}
        held = {d.source_name: d for d in documents if d.source_id == source.source_id}
        prefix = settings.name_prefix
        known = {
            name[len(prefix) :]: (d.source_revision or "", str(d.metadata.get("url") or ""))
            for name, d in held.items()
            if name.startswith(prefix)
        }
        listing = listing_of(s, source, known)
        run.revision = listing.revision
        seen: set[str] = set()
        to_queue: list[str] = []
        stale: list[DocumentRecord] = []  # left queued by a stopped run: handed over again
        renewed = time.monotonic()
        limit = s.settings.max_document_bytes

        def keep_lease() -> None:
            nonlocal renewed
            if time.monotonic() - renewed > self._lease / 4:
                if not s.sources.renew(kb.kb_id, source.source_id, run.run_id, self._lease):
                    raise LeaseLost
                renewed = time.monotonic()

        def fail(name: str, reason: str) -> None:
            run.counts.failed += 1
            if len(run.failures) < MAX_FAILURES:
                run.failures.append(RunFailure(name=name, reason=reason))

        for entry in listing.entries:
            keep_lease()
            name = settings.name_prefix + entry.path
            seen.add(name)
            run.counts.seen += 1
            current = by_name.get(name)
            if current is not None and current.source_id and current.source_id != source.source_id:
                fail(name, f"the knowledge base's document {name!r} comes from source {current.source_id}")
                continue
            mine = current if current is not None and current.source_id == source.source_id else None
            metadata = document_metadata(settings, entry, listing.version)
            same_place = mine is not None and mine.status in CURRENT and mine.metadata == metadata
            if (
                mine is not None
                and same_place
                and (entry.not_modified or (entry.revision and mine.source_revision == entry.revision))
            ):
                run.counts.unchanged += 1
                if recovering and mine.status == "queued":
                    stale.append(mine)
                continue
            if entry.size is not None and entry.size > limit:
                fail(name, f"{entry.size} bytes; the limit is {limit} (CITEGATE_MAX_DOCUMENT_BYTES)")
                continue
            try:
                data = entry.read()
            except (OSError, LookupError) as error:
                fail(name, f"cannot be read: {error}")
                continue
            if len(data) > limit:
                fail(name, f"{len(data)} bytes; the limit is {limit} (CITEGATE_MAX_DOCUMENT_BYTES)")
                continue
            if mine is not None and same_place and mine.content_sha256 == hashlib.sha256(data).hexdigest():
                run.counts.unchanged += 1
                if entry.revision and mine.source_revision != entry.revision:
                    s.documents.update_if_current(
                        kb.kb_id, mine.document_id, mine.task_id, {"source_revision": entry.revision}
                    )
                if recovering and mine.status == "queued":
                    stale.append(mine)
                continue
            if not data.strip():
                fail(name, "the document is empty")
                continue
            try:
                accepted = s.ingestion.accept(
                    kb,
                    Submitted(data, name, entry.mime_type),
                    title=entry.title,
                    metadata=metadata,
                    origin={"source_id": source.source_id, "source_revision": entry.revision or None},
                    enqueue=False,
                    previous=current,
                )
            except CitegateError as error:
                if error.status >= 500:
                    raise
                fail(name, error.message)
                continue
            if current is None:
                run.counts.added += 1
            else:
                run.counts.changed += 1
            to_queue.append(accepted.task.task_id)
            if len(run.task_ids) < MAX_TASK_IDS:
                run.task_ids.append(accepted.task.task_id)
            if len(to_queue) >= ENQUEUE_EVERY:
                s.ingestion.enqueue_many(to_queue)
                to_queue = []
        s.ingestion.enqueue_many(to_queue)
        if stale:
            tasks = s.tasks.find_many([d.task_id for d in stale])
            queued = [t for t in tasks.values() if t.status == "queued"]
            s.ingestion.enqueue_many([t.task_id for t in queued])
            run.counts.requeued = len(queued)
        # Only a whole listing gets here (SourceUnavailable stops before): what it did not name is gone.
        for name, document in held.items():
            if name in seen:
                continue
            keep_lease()
            now = s.documents.find(kb.kb_id, document.document_id)
            if now is None:
                continue  # deleted meanwhile (DELETE on the document, an S3 event)
            if now.task_id != document.task_id:
                continue  # written again since the listing (an S3 event): not this run's to delete
            with contextlib.suppress(DocumentNotFound):
                s.ingestion.delete_document(kb.kb_id, document.document_id)
            run.counts.deleted += 1
