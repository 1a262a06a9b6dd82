"""What the knowledge domain's functions use, as Protocols: each names the stores and engines one
function (or one module) reads, so a caller passes the composition root or anything smaller that has
them, and a test passes only those."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from citegate.platform.ports import Aws, Configured, Tables

if TYPE_CHECKING:
    from citegate.knowledge.embedding.base import Embedder
    from citegate.knowledge.search.base import SearchIndex
    from citegate.knowledge.store.blobs import BlobStore
    from citegate.knowledge.store.documents import DocumentStore
    from citegate.knowledge.store.kbs import KbStore
    from citegate.knowledge.store.parents import ParentStore
    from citegate.knowledge.store.tasks import TaskStore


class HasKbs(Protocol):
    @property
    def kbs(self) -> KbStore: ...


class HasIndex(Protocol):
    @property
    def index(self) -> SearchIndex: ...


class HasEmbedder(Protocol):
    @property
    def embedder(self) -> Embedder: ...


class HasParents(Protocol):
    @property
    def parents(self) -> ParentStore: ...


class HasDocuments(Protocol):
    @property
    def documents(self) -> DocumentStore: ...


class HasBlobs(Protocol):
    @property
    def blobs(self) -> BlobStore: ...


class HasTasks(Protocol):
    @property
    def tasks(self) -> TaskStore: ...


class Retrieving(Configured, HasIndex, HasEmbedder, Protocol):
    """What `retrieval.retrieve` reads: the settings (fusion, timeouts), the index, the embedder."""


class ChunkSources(HasDocuments, HasIndex, HasParents, Protocol):
    """What the chunk viewer (`document_chunks`) reads."""


class Starting(Tables, Aws, Protocol):
    """What the queue's consumer (`ingest.consumer`) reads: the task and document tables, and the
    Step Functions client and state machine it starts executions on."""

    @property
    def state_machine_arn(self) -> str: ...


class Ingestion(
    Starting,
    Configured,
    HasKbs,
    HasDocuments,
    HasTasks,
    HasParents,
    HasBlobs,
    HasIndex,
    HasEmbedder,
    Protocol,
):
    """What the ingestion pipeline's service and steps (`ingest.service`, `ingest.steps`) read: the
    tables they write through, the raw objects, the index and the embedder, and where they hand
    work on."""

    @property
    def ingest_queue_url(self) -> str: ...
