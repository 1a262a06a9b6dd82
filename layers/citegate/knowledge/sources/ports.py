"""What the sources domain reads, as Protocols (the composition root, citegate.container, has them
all; a test passes only what it uses)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from citegate.knowledge.ports import HasDocuments, HasKbs, HasTasks
from citegate.platform.ports import Aws, Configured

if TYPE_CHECKING:
    from citegate.knowledge.ingest.service import IngestionService
    from citegate.knowledge.sources.store import SourceStore


@dataclass(frozen=True)
class Page:
    """One HTTP answer as the website kind needs it: a 304 has no body."""

    url: str  # after redirects
    status: int
    body: bytes = b""
    content_type: str = ""
    etag: str | None = None
    last_modified: str | None = None


class PageFetcher(Protocol):
    """Fetches one URL under the web reader's rules (citegate.web: SSRF-safe, size-capped); raises
    LookupError for a URL it may not or cannot read (the reason in the message)."""

    def __call__(self, url: str, *, etag: str | None = None, last_modified: str | None = None) -> Page: ...


class HasSources(Protocol):
    @property
    def sources(self) -> SourceStore: ...


class HasIngestion(Protocol):
    @property
    def ingestion(self) -> IngestionService: ...


class HasPageFetcher(Protocol):
    @property
    def page_fetcher(self) -> PageFetcher: ...


class Syncing(
    Configured, Aws, HasKbs, HasDocuments, HasTasks, HasSources, HasIngestion, HasPageFetcher, Protocol
):
    """What a sync reads and writes: the settings (the data root, the local folder it may read),
    the AWS clients (S3 sources), the knowledge base and its documents, the sources table, the
    ingestion service it hands documents to, the web fetcher for websites, and the ingestion queue
    a requested sync is handed to."""

    @property
    def ingest_queue_url(self) -> str: ...
