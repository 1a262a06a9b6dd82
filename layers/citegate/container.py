"""The composition root: every client, store and engine is built here, lazily, once per process.

Handlers call `services()` inside a request; tests build `Services(settings=...)` with fakes or
call `reset_services()` after changing the environment. Importing it is cheap (handlers import it
at cold start): settings (pydantic) and every client are imported when first needed.
"""

from __future__ import annotations

import os
import threading
from functools import cached_property
from typing import TYPE_CHECKING, Any

from citegate.platform import resources

if TYPE_CHECKING:
    from citegate.agents.chats.store import ChatStore
    from citegate.agents.models import ModelRegistry
    from citegate.answers.base import Answerer
    from citegate.answers.feedback import FeedbackService
    from citegate.answers.sessions import SessionStore
    from citegate.governance.audit import AuditLog
    from citegate.governance.policy.store import PolicyStore
    from citegate.governance.ratelimit import Counters
    from citegate.insights.store import InsightsStore
    from citegate.knowledge.embedding.base import Embedder
    from citegate.knowledge.ingest.service import IngestionService
    from citegate.knowledge.search.base import SearchIndex
    from citegate.knowledge.sources.ports import PageFetcher
    from citegate.knowledge.sources.service import SourceService
    from citegate.knowledge.sources.store import SourceStore
    from citegate.knowledge.store.blobs import BlobStore
    from citegate.knowledge.store.documents import DocumentStore
    from citegate.knowledge.store.kbs import KbStore
    from citegate.knowledge.store.parents import ParentStore
    from citegate.knowledge.store.tasks import TaskStore
    from citegate.platform.aws import AwsClients
    from citegate.platform.settings import Settings
    from citegate.web.service import WebService


class Services:
    def __init__(
        self,
        settings: Settings | None = None,
        *,
        aws: AwsClients | None = None,
        index: SearchIndex | None = None,
        embedder: Embedder | None = None,
        answerer: Answerer | None = None,
    ) -> None:
        if settings is None:
            from citegate.platform.settings import get_settings

            settings = get_settings()
        self.settings = settings
        self._lock = threading.RLock()
        self._tables: dict[str, Any] = {}
        if aws is not None:
            self.__dict__["aws"] = aws
        if index is not None:
            self.__dict__["index"] = index
        if embedder is not None:
            self.__dict__["embedder"] = embedder
        if answerer is not None:
            self.__dict__["answerer"] = answerer

    def table(self, shape: resources.TableShape) -> Any:
        """The boto3 Table resource of `shape`, built once: boto3 builds a resource class per
        call (about a millisecond), and the workflow's steps reach the same tables every batch."""
        name = shape.physical_name(self.settings.stage)
        with self._lock:
            table = self._tables.get(name)
            if table is None:
                table = self._tables[name] = self.aws.dynamodb.Table(name)
        return table

    @cached_property
    def aws(self) -> AwsClients:
        from citegate.platform.aws import AwsClients

        return AwsClients(self.settings)

    @cached_property
    def kbs(self) -> KbStore:
        from citegate.knowledge.store.kbs import KbStore

        return KbStore(self.table(resources.KBS))

    @cached_property
    def documents(self) -> DocumentStore:
        from citegate.knowledge.store.documents import DocumentStore

        return DocumentStore(self.table(resources.DOCUMENTS))

    @cached_property
    def tasks(self) -> TaskStore:
        from citegate.knowledge.store.tasks import TaskStore

        return TaskStore(self.table(resources.TASKS))

    @cached_property
    def parents(self) -> ParentStore:
        from citegate.knowledge.store.parents import ParentStore

        return ParentStore(self.table(resources.PARENTS))

    @cached_property
    def policies(self) -> PolicyStore:
        from citegate.governance.policy.store import PolicyStore

        return PolicyStore(self.table(resources.POLICIES), self.table(resources.CREDENTIALS))

    @cached_property
    def audit(self) -> AuditLog:
        from citegate.governance.audit import AuditLog
        from citegate.governance.signals import SignalLog

        return AuditLog(self.table(resources.AUDIT), signals=SignalLog(self.table(resources.INSIGHTS)))

    @cached_property
    def counters(self) -> Counters:
        from citegate.governance.ratelimit import Counters

        return Counters(self.table(resources.COUNTERS))

    @cached_property
    def sessions(self) -> SessionStore:
        from citegate.answers.sessions import SessionStore

        return SessionStore(self.table(resources.SESSIONS))

    @cached_property
    def feedback(self) -> FeedbackService:
        from citegate.answers.feedback import build_feedback_service

        return build_feedback_service(self)

    @cached_property
    def insights(self) -> InsightsStore:
        from citegate.insights.store import InsightsStore

        return InsightsStore(self.table(resources.INSIGHTS))

    @cached_property
    def web(self) -> WebService:
        from citegate.web.cache import WebCache
        from citegate.web.search import make_provider
        from citegate.web.service import WebConfig, WebService

        config = WebConfig.from_settings(self.settings)
        return WebService(
            config,
            counters=self.counters,
            cache=WebCache(self.table(resources.WEB_CACHE)),
            provider=make_provider(config.search_provider, config.search_base_url, config.search_api_key),
        )

    @cached_property
    def bucket(self) -> str:
        return self.settings.bucket or resources.bucket_name(self.settings.stage)

    @cached_property
    def blobs(self) -> BlobStore:
        from citegate.knowledge.store.blobs import BlobStore

        return BlobStore(self.aws.s3, self.bucket)

    @cached_property
    def ingest_queue_url(self) -> str:
        if self.settings.ingest_queue_url:
            return self.settings.ingest_queue_url
        name = resources.INGEST_QUEUE.physical_name(self.settings.stage)
        return str(self.aws.sqs.get_queue_url(QueueName=name)["QueueUrl"])

    @cached_property
    def state_machine_arn(self) -> str:
        if self.settings.state_machine_arn:
            return self.settings.state_machine_arn
        name = resources.state_machine_name(self.settings.stage)
        account = self.aws.account_id
        return f"arn:aws:states:{self.settings.region}:{account}:stateMachine:{name}"

    @cached_property
    def embedder(self) -> Embedder:
        from citegate.knowledge.embedding import build_embedder
        from citegate.knowledge.embedding.cache import CachedEmbedder
        from citegate.knowledge.store.embeddings import DynamoEmbeddingCache
        from citegate.platform.secrets import secret_value

        s = self.settings
        inner = build_embedder(
            s.embedder,
            threads=s.embedder_threads,
            openai_base_url=s.embedding_base_url,
            openai_api_key=secret_value(s.embedding_api_key, s.embedding_api_key_secret_arn),
            openai_model=s.embedding_model,
            dimension=s.embedding_dimension,
            bedrock_model=s.bedrock_embedding_model_id,
            bedrock_region=s.bedrock_region or s.region,
            bedrock_endpoint_url=s.bedrock_endpoint_url,
        )
        return CachedEmbedder(inner, DynamoEmbeddingCache(self.table(resources.EMBEDDINGS)))

    @cached_property
    def index(self) -> SearchIndex:
        s = self.settings
        if s.search_engine == "opensearch":
            from citegate.knowledge.search.opensearch import OpenSearchIndex

            if not s.opensearch_url:
                raise ValueError("CITEGATE_SEARCH_ENGINE=opensearch needs OPENSEARCH_URL")
            if s.opensearch_auth == "aws-sigv4":
                from urllib.parse import urlparse

                host = urlparse(s.opensearch_url).hostname or s.opensearch_url
                return OpenSearchIndex.from_aws(
                    host,
                    s.region,
                    prefix=s.opensearch_index_prefix,
                    dimension=self.embedder.dimension,
                    auto_setup=s.opensearch_auto_setup,
                )
            return OpenSearchIndex.from_url(
                s.opensearch_url,
                prefix=s.opensearch_index_prefix,
                dimension=self.embedder.dimension,
                auto_setup=s.opensearch_auto_setup,
            )
        from citegate.knowledge.search.embedded import EmbeddedSearchIndex

        # One index per embedding model: vectors of different models never share a matrix.
        return EmbeddedSearchIndex(s.index_dir / self.embedder.model_id, dimension=self.embedder.dimension)

    @cached_property
    def answerer(self) -> Answerer:
        s = self.settings
        if s.llm_provider == "bedrock":
            from citegate.answers.bedrock_converse import BedrockConverseAnswerer

            if not s.bedrock_model_id:
                raise ValueError("CITEGATE_LLM_PROVIDER=bedrock needs CITEGATE_BEDROCK_MODEL_ID")
            return BedrockConverseAnswerer(
                model_id=s.bedrock_model_id,
                region=s.bedrock_region or s.region,
                endpoint_url=s.bedrock_endpoint_url,
                timeout=s.llm_timeout_seconds,
                verify_citations=s.llm_verify_citations,
            )
        if s.llm_base_url and s.llm_model:
            from citegate.answers.openai_chat import OpenAIChatAnswerer
            from citegate.platform.secrets import secret_value

            return OpenAIChatAnswerer(
                base_url=s.llm_base_url,
                api_key=secret_value(s.llm_api_key, s.llm_api_key_secret_arn),
                model=s.llm_model,
                timeout=s.llm_timeout_seconds,
                verify_citations=s.llm_verify_citations,
            )
        from citegate.answers.extractive import ExtractiveAnswerer

        return ExtractiveAnswerer()

    @cached_property
    def chat_models(self) -> ModelRegistry:
        from citegate.agents.models import ModelRegistry

        return ModelRegistry.from_settings(self.settings)

    @cached_property
    def chats(self) -> ChatStore:
        from citegate.agents.chats.store import ChatStore

        return ChatStore(self.table(resources.CHATS))

    @cached_property
    def ingestion(self) -> IngestionService:
        from citegate.knowledge.ingest.service import IngestionService

        return IngestionService(self)

    @cached_property
    def sources(self) -> SourceStore:
        from citegate.knowledge.sources.store import SourceStore

        return SourceStore(self.table(resources.SOURCES))

    @cached_property
    def source_service(self) -> SourceService:
        from citegate.knowledge.sources.service import SourceService

        return SourceService(self)

    @cached_property
    def page_fetcher(self) -> PageFetcher:
        from citegate.web.crawl import WebPageFetcher
        from citegate.web.service import WebConfig

        return WebPageFetcher(WebConfig.from_settings(self.settings))

    def close(self) -> None:
        index = self.__dict__.get("index")
        if index is not None:
            index.close()


_services: Services | None = None
_services_lock = threading.Lock()


def services() -> Services:
    global _services
    if _services is None:
        with _services_lock:
            if _services is None:
                _services = Services()
    return _services


def set_services(instance: Services | None) -> None:
    """Install (or clear) the process-wide services; the local stack and tests use it."""
    global _services
    with _services_lock:
        if _services is not None and _services is not instance:
            _services.close()
        _services = instance


def reset_services() -> None:
    set_services(None)


# Every handler imports this module at load: in a SnapStart function, the first request's lazy work
# (clients, models) is done before the snapshot (citegate.api.snapstart; a no-op anywhere else).
if os.environ.get("CITEGATE_RUNTIME") == "aws":
    from citegate.api import snapstart

    snapstart.register(services)
