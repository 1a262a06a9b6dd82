"""Sources of a knowledge base: created, listed, read, updated, deleted, synced, their runs read.

Settings are checked when they are given (400 invalid_request, 403 for a folder the local runtime
may not read), so a sync meets only what the source itself holds.
"""

from __future__ import annotations

import builtins
import datetime as dt
import json
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from citegate.knowledge.sources import kinds
from citegate.knowledge.sources import sync as sync_module
from citegate.knowledge.sources.model import (
    CreateSourceRequest,
    FolderSettings,
    GitSettings,
    S3Settings,
    Source,
    SyncRun,
    Trigger,
    UpdateSourceRequest,
    WebsiteSettings,
)
from citegate.knowledge.sources.store import RunNotFound
from citegate.knowledge.sources.sync import SourceSync, new_run_id, summary
from citegate.platform.dynamo import utc_now
from citegate.platform.errors import DocumentNotFound, InvalidRequest, StorageUnavailable
from citegate.platform.observability import logger

if TYPE_CHECKING:
    from citegate.knowledge.schemas.kb import KnowledgeBase
    from citegate.knowledge.sources.ports import Syncing

AnySettings = FolderSettings | GitSettings | WebsiteSettings | S3Settings


def new_source_id() -> str:
    return "src_" + uuid.uuid4().hex[:12]


def next_sync_at(minutes: int | None, after: dt.datetime | None = None) -> str | None:
    if minutes is None:
        return None
    when = (after or dt.datetime.now(dt.UTC)) + dt.timedelta(minutes=minutes)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def sync_message(run: SyncRun) -> str:
    """The ingestion queue's message for a queued run (citegate.knowledge.ingest.consumer)."""
    return json.dumps({"source_sync": {"kb_id": run.kb_id, "source_id": run.source_id, "run_id": run.run_id}})


class SourceService:
    def __init__(self, s: Syncing, *, lease_seconds: float | None = None) -> None:
        self._s = s
        self._lease = lease_seconds

    @property
    def lease(self) -> float:
        # Read at each use, so a test (or a deployment's module) can shorten it.
        return self._lease if self._lease is not None else sync_module.LEASE_SECONDS

    def check(self, settings: AnySettings) -> None:
        """Refuse settings no sync could follow (400), or a folder this runtime may not read (403)."""
        config = self._s.settings
        if settings.base_url and urlparse(settings.base_url).scheme not in ("http", "https"):
            raise InvalidRequest(
                "settings.base_url must be an http(s) URL", details={"field": "settings.base_url"}
            )
        if isinstance(settings, FolderSettings):
            folder = kinds.confined_folder(settings.path, config)
            if not folder.is_dir():
                raise InvalidRequest(f"no such folder: {settings.path}", details={"field": "settings.path"})
        elif isinstance(settings, GitSettings):
            kinds.check_git_url(settings.url, config)
        elif isinstance(settings, WebsiteSettings):
            given = [u for u in (settings.start_url, settings.sitemap_url) if u]
            if not given:
                raise InvalidRequest(
                    "a website source needs settings.start_url or settings.sitemap_url",
                    details={"field": "settings.start_url"},
                )
            for url in (*given, *([settings.prefix] if settings.prefix else [])):
                if urlparse(url).scheme not in ("http", "https") or not urlparse(url).hostname:
                    raise InvalidRequest(f"{url!r} is not an http(s) URL", details={"field": "settings"})
        elif isinstance(settings, S3Settings) and settings.bucket != settings.bucket.lower():
            raise InvalidRequest(
                "settings.bucket is not a valid bucket name", details={"field": "settings.bucket"}
            )

    def create(self, kb: KnowledgeBase, request: CreateSourceRequest, caller: str) -> Source:
        self.check(request.settings)
        now = utc_now()
        source = Source(
            kb_id=kb.kb_id,
            source_id=new_source_id(),
            tenant_id=kb.tenant_id,
            name=request.name,
            kind=request.settings.kind,
            settings=request.settings.model_dump(),
            schedule_minutes=request.schedule_minutes,
            enabled=request.enabled,
            created_at=now,
            updated_at=now,
            created_by=caller,
            next_sync_at=next_sync_at(request.schedule_minutes),
        )
        return self._s.sources.create(source)

    def list(self, kb: KnowledgeBase) -> list[Source]:
        return sorted(self._s.sources.list(kb.kb_id), key=lambda s: s.created_at)

    def get(self, kb: KnowledgeBase, source_id: str) -> Source:
        return self._s.sources.get(kb.kb_id, source_id)

    def update(self, kb: KnowledgeBase, source_id: str, request: UpdateSourceRequest) -> Source:
        source = self._s.sources.get(kb.kb_id, source_id)
        changes: dict[str, Any] = {}
        remove: tuple[str, ...] = ()
        if request.settings is not None:
            if request.settings.kind != source.kind:
                raise InvalidRequest(
                    f"a source's kind stays {source.kind}; create another source for {request.settings.kind}",
                    details={"field": "settings.kind"},
                )
            self.check(request.settings)
            changes["settings"] = request.settings.model_dump()
        if request.name is not None:
            changes["name"] = request.name
        if request.enabled is not None:
            changes["enabled"] = request.enabled
        if request.clear_schedule:
            remove = ("schedule_minutes", "next_sync_at")
        elif request.schedule_minutes is not None:
            changes["schedule_minutes"] = request.schedule_minutes
            changes["next_sync_at"] = next_sync_at(request.schedule_minutes)
        return self._s.sources.update(kb.kb_id, source_id, changes, remove)

    def delete(self, kb: KnowledgeBase, source_id: str, *, keep_documents: bool = False) -> dict[str, Any]:
        """Delete the source and, unless `keep_documents`, every document it brought (its chunks
        with them); 409 sync_in_progress while it syncs (the lease is taken for the deletion)."""
        s = self._s
        run_id = new_run_id()
        s.sources.acquire(kb.kb_id, source_id, run_id, self.lease)
        deleted = detached = 0
        for document in s.documents.list(kb.kb_id):
            if document.source_id != source_id:
                continue
            if keep_documents:
                s.documents.update_if_current(
                    kb.kb_id, document.document_id, document.task_id, {"source_id": ""}
                )
                detached += 1
                continue
            try:
                s.ingestion.delete_document(kb.kb_id, document.document_id)
            except DocumentNotFound:
                continue
            deleted += 1
        s.sources.delete(kb.kb_id, source_id)
        return {
            "kb_id": kb.kb_id,
            "source_id": source_id,
            "deleted": {"documents": deleted},
            "kept": detached,
        }

    def request_sync(
        self, kb: KnowledgeBase, source_id: str, *, trigger: Trigger = "api", caller: str = ""
    ) -> SyncRun:
        """Take the source's lease, record a run `queued` and hand it to the ingestion queue, whose
        consumer starts the sync function; the queued run (409 sync_in_progress while another
        run holds the source; 503 storage_unavailable, the lease given back, if the queue refuses)."""
        s = self._s
        source = s.sources.get(kb.kb_id, source_id)
        run = SourceSync(s, lease_seconds=self.lease).start(kb, source, trigger=trigger, caller=caller)
        try:
            s.aws.sqs.send_message(QueueUrl=s.ingest_queue_url, MessageBody=sync_message(run))
        except Exception as error:
            run.status, run.finished_at = "failed", utc_now()
            run.error = f"the sync could not be queued: {error}"
            s.sources.put_run(run)
            s.sources.release(kb.kb_id, source_id, run.run_id, summary(run))
            raise StorageUnavailable("the ingestion queue is unavailable; retry") from error
        if source.schedule_minutes is not None:
            s.sources.update(kb.kb_id, source_id, {"next_sync_at": next_sync_at(source.schedule_minutes)})
        return run

    def execute(self, kb_id: str, source_id: str, run_id: str) -> SyncRun | None:
        """The sync function's work for one queued run; None when there is nothing to do (the
        source or its knowledge base is gone, or the run was already taken: a redelivery)."""
        s = self._s
        source = s.sources.find(kb_id, source_id)
        kb = s.kbs.find(kb_id)
        run = s.sources.find_run(kb_id, source_id, run_id)
        if source is None or kb is None or run is None or run.status != "queued":
            logger.info(
                "source sync not run",
                extra={
                    "kb_id": kb_id,
                    "source_id": source_id,
                    "run_id": run_id,
                    "status": run.status if run else None,
                },
            )
            return None
        return SourceSync(s, lease_seconds=self.lease).execute(kb, source, run)

    def sync(
        self, kb: KnowledgeBase, source_id: str, *, trigger: Trigger = "api", caller: str = ""
    ) -> SyncRun:
        """Sync now, in this process, and answer when done (scripts and tests; the API and the
        schedule use `request_sync`)."""
        source = self._s.sources.get(kb.kb_id, source_id)
        run = SourceSync(self._s, lease_seconds=self.lease).run(kb, source, trigger=trigger, caller=caller)
        if source.schedule_minutes is not None:
            self._s.sources.update(
                kb.kb_id, source_id, {"next_sync_at": next_sync_at(source.schedule_minutes)}
            )
        return run

    def run(self, kb: KnowledgeBase, source_id: str, run_id: str) -> SyncRun:
        self._s.sources.get(kb.kb_id, source_id)
        found = self._s.sources.find_run(kb.kb_id, source_id, run_id)
        if found is None:
            raise RunNotFound(
                f"run {run_id!r} not found for source {source_id!r}",
                details={"kb_id": kb.kb_id, "source_id": source_id, "run_id": run_id},
            )
        return found

    def runs(self, kb: KnowledgeBase, source_id: str, limit: int = 20) -> builtins.list[SyncRun]:
        self._s.sources.get(kb.kb_id, source_id)
        return self._s.sources.runs(kb.kb_id, source_id, limit)


__all__ = ["SourceService", "summary"]
