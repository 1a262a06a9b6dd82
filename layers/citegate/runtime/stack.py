"""The local stack: embedded AWS (durable), resources from their shapes, the queue's event source,
the search index and the embedder, all in this process. `make serve` runs it behind the gateway."""

from __future__ import annotations

import fcntl
import importlib
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from citegate.api.routes import INGEST_CONSUMER_FUNCTION
from citegate.container import Services, set_services
from citegate.governance.policy.store import SEED_FILE as POLICY_SEED_FILE
from citegate.platform import resources
from citegate.platform.observability import logger
from citegate.platform.settings import Settings, get_settings, reset_settings
from citegate.runtime.aws_endpoint import EmbeddedAws
from citegate.runtime.imports import serialize_imports
from citegate.runtime.poller import QueuePoller
from citegate.runtime.provision import provision
from citegate.runtime.scheduler import SourceScheduler
from citegate.runtime.ttl import AuditOverflow, TtlSweeper

LOCAL_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "citegate-local",
    "AWS_SECRET_ACCESS_KEY": "citegate-local-secret",
    "AWS_SESSION_TOKEN": "",
}

# In the data root, locked (flock) by the server that owns the folder for as long as it runs.
LOCK_FILE = "citegate.lock"


class DataRootInUse(RuntimeError):
    """Another process holds the data folder: a second server must not touch it."""


@dataclass
class DataRootLock:
    """The data folder belongs to one server: it holds an exclusive flock on `LOCK_FILE` for its
    whole life. The kernel releases it when the process ends, however it ends (kill -9 too), so
    a restart never finds a stale lock. The file holds the owner's pid, for the refusal message;
    it is never removed (a removed file could be locked by two processes at once)."""

    path: Path
    fd: int

    @classmethod
    def claim(cls, data_root: Path) -> DataRootLock:
        data_root.mkdir(parents=True, exist_ok=True)
        path = data_root / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by child processes
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip()
            os.close(fd)
            owner = "another citegate server" + (f" (pid {holder})" if holder.isdigit() else "")
            raise DataRootInUse(
                f"the data folder {data_root.resolve()} is in use by {owner}; stop that server first, "
                "or give this one its own folder (RAG_DATA_ROOT)"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the only descriptor releases the lock
            self.fd = -1


@dataclass
class LocalStack:
    settings: Settings = field(default_factory=get_settings)
    persist: bool = True
    poll: bool = True
    aws: EmbeddedAws | None = None
    services: Services | None = None
    poller: QueuePoller | None = None
    sweeper: TtlSweeper | None = None
    scheduler: SourceScheduler | None = None
    info: dict[str, Any] = field(default_factory=dict)
    data_lock: DataRootLock | None = None

    def claim(self) -> LocalStack:
        """Take the data folder, or raise DataRootInUse before anything in it is touched."""
        if self.data_lock is None:
            self.data_lock = DataRootLock.claim(self.settings.data_root)
        return self

    def start(self) -> LocalStack:
        # Before any thread of the stack runs: every function of the service loads in this process.
        serialize_imports()
        self.claim()
        data_root = self.settings.data_root
        self.aws = EmbeddedAws(data_root / "aws" if self.persist else None)
        self.aws.start()
        # Every boto3 client in this process now talks to the embedded endpoint with fake keys.
        os.environ["AWS_ENDPOINT_URL"] = self.aws.endpoint_url
        os.environ["AWS_REGION"] = os.environ["AWS_DEFAULT_REGION"] = self.settings.region
        for key, value in LOCAL_CREDENTIALS.items():
            if value:
                os.environ[key] = value
            else:
                os.environ.pop(key, None)
        os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
        reset_settings()

        import boto3

        session = boto3.session.Session(region_name=self.settings.region)
        s = Services(self.settings)
        self.info = provision(session, self.settings.stage, s.bucket)
        restored = self.aws.restore()
        self.aws.start_recording()  # the journal is compacted in the background as it grows
        self.info["restored_writes"] = restored

        s.__dict__["ingest_queue_url"] = self.info["queues"][resources.INGEST_QUEUE.logical]
        s.__dict__["state_machine_arn"] = self.info["state_machine_arn"]
        self.services = s
        set_services(s)
        seed = self.settings.policy_seed_file or POLICY_SEED_FILE
        self.info["seeded_policies"] = s.policies.seed(seed, tenant_id=self.settings.default_tenant)
        self.info["resumed_tasks"] = self._resume_unfinished_tasks(s)
        if self.poll:
            self.poller = QueuePoller(
                s.aws.sqs, s.ingest_queue_url, INGEST_CONSUMER_FUNCTION, self.settings.region
            )
            self.poller.start()
            # The background work AWS does by itself: event source mappings above, TTL here.
            overflow = AuditOverflow(
                self.settings.data_root / "audit-archive",
                max_records=self.settings.local_audit_max_records,
                retention_days=self.settings.audit_ttl_days,
            )
            dynamodb = session.client("dynamodb")
            self.sweeper = TtlSweeper(dynamodb, self.settings.stage, audit_overflow=overflow)
            self.sweeper.start()
            # EventBridge Scheduler's part: the sources whose schedule is due are synced.
            self.scheduler = SourceScheduler(self.settings.local_scheduler_seconds)
            self.scheduler.start()
        return self

    def warm_up(self) -> threading.Thread:
        """Load in the background what the first ingestion or question would otherwise wait for:
        about 3.5 s on 2 cores (the local embedding model 1.9 s, jieba's dictionary 1.3 s, the PDF
        parser 0.4 s). Each loads once under its own lock, so a request that arrives first waits
        for the load in progress instead of starting another."""
        thread = threading.Thread(target=self._warm, name="warm-up", daemon=True)
        thread.start()
        return thread

    def _warm(self) -> None:
        from citegate.knowledge.search.analysis import analyze

        try:
            if self.services is not None and self.settings.embedder in ("use", "e5"):  # never a remote call
                self.services.embedder.embed_query("warm up")
            analyze("预热")
            for parser in ("pypdf", "trafilatura"):
                importlib.import_module(parser)
        except Exception:  # the first request will load what it needs, and report what is wrong
            logger.warning("warming up the local stack failed", exc_info=True)

    @staticmethod
    def _resume_unfinished_tasks(s: Services) -> int:
        """Queues and executions do not survive a restart; tasks that were under way go back on the queue."""
        import json

        from citegate.knowledge.sources.service import sync_message

        resumed = 0
        for task in s.tasks.unfinished():
            if task.kind == "ingest":
                s.aws.sqs.send_message(
                    QueueUrl=s.ingest_queue_url, MessageBody=json.dumps({"task_id": task.task_id})
                )
                resumed += 1
        # Source syncs requested but not begun (a run `queued`) go back on the queue too; one
        # that was running is left to its lease (the next sync finishes it).
        for source in s.sources.all():
            last = source.last_run or {}
            if last.get("status") == "queued":
                run = s.sources.find_run(source.kb_id, source.source_id, str(last.get("run_id")))
                if run is not None and run.status == "queued":
                    s.aws.sqs.send_message(QueueUrl=s.ingest_queue_url, MessageBody=sync_message(run))
                    resumed += 1
        return resumed

    def stop(self) -> None:
        if self.poller:
            self.poller.stop()
        if self.sweeper:
            self.sweeper.stop()
        if self.scheduler:
            self.scheduler.stop()
        set_services(None)
        if self.aws:
            self.aws.stop()
        self.release()

    def release(self) -> None:
        """Give the data folder up (after the journal is closed)."""
        if self.data_lock is not None:
            self.data_lock.release()
            self.data_lock = None

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
