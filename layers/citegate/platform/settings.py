"""One settings object for the whole service, read from the environment when first asked for.

Nothing reads `os.environ` at import time: handlers call `get_settings()` inside a request, and
tests call `reset_settings()` after changing the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SecretStr

ModelT = TypeVar("ModelT", bound=BaseModel)


def from_environ(model: type[ModelT], environ: Mapping[str, str] | None = None) -> ModelT:
    """A settings model from the environment variables named by its fields' aliases.

    Plain pydantic does the parsing (strings to bools, ints, paths, secrets); pydantic-settings
    would do the same but costs a large share of a handler's import time.
    """
    env = os.environ if environ is None else environ
    aliases = {field.alias for field in model.model_fields.values() if field.alias}
    return model.model_validate({key: value for key, value in env.items() if key in aliases})


class Settings(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    # Deployment identity: resource names are derived from this prefix (see resources.py).
    stage: str = Field("local", alias="CITEGATE_STAGE")
    region: str = Field("us-east-1", alias="AWS_REGION")
    runtime: Literal["local", "aws"] = Field("local", alias="CITEGATE_RUNTIME")

    # Spec 004: the bearer token maps to a configured service principal.
    api_token: SecretStr | None = Field(None, alias="RAG_API_TOKEN")
    # In AWS, secrets arrive by reference (Secrets Manager ARNs); see citegate.platform.secrets.
    api_token_secret_arn: str | None = Field(None, alias="RAG_API_TOKEN_SECRET_ARN")
    llm_api_key_secret_arn: str | None = Field(None, alias="CITEGATE_LLM_API_KEY_SECRET_ARN")
    embedding_api_key_secret_arn: str | None = Field(None, alias="CITEGATE_EMBEDDING_API_KEY_SECRET_ARN")
    service_principal_id: str = Field("rag-service", alias="CITEGATE_SERVICE_PRINCIPAL")
    default_tenant: str = Field("default", alias="CITEGATE_DEFAULT_TENANT")

    # Resource locations. CDK sets them in AWS; locally they are derived from the stage names.
    bucket: str | None = Field(None, alias="CITEGATE_BUCKET")
    ingest_queue_url: str | None = Field(None, alias="CITEGATE_INGEST_QUEUE_URL")
    state_machine_arn: str | None = Field(None, alias="CITEGATE_STATE_MACHINE_ARN")

    # Identity: OIDC for people, local IAM credentials for SigV4 on one machine, rate limits.
    oidc_issuer: str | None = Field(None, alias="CITEGATE_OIDC_ISSUER")
    oidc_audience: str | None = Field(None, alias="CITEGATE_OIDC_AUDIENCE")
    oidc_jwks_url: str | None = Field(None, alias="CITEGATE_OIDC_JWKS_URL")
    maintainer_claim: str = Field("citegate:maintainer", alias="CITEGATE_MAINTAINER_CLAIM")
    local_iam_credentials: Path | None = Field(None, alias="CITEGATE_LOCAL_IAM_CREDENTIALS")
    default_rate_limit_per_minute: int = Field(120, alias="CITEGATE_DEFAULT_RATE_LIMIT")
    ip_rate_limit_per_minute: int = Field(600, alias="CITEGATE_IP_RATE_LIMIT")
    # Anonymous (public-read) callers are one principal: they are limited per client address
    # (API Gateway's sourceIp) and, all of them together, by a site-wide ceiling. The anonymous
    # policy's own rate_limit_per_minute is not used.
    anonymous_ip_rate_limit_per_minute: int = Field(30, ge=1, alias="CITEGATE_ANONYMOUS_IP_RATE_LIMIT")
    anonymous_rate_limit_per_minute: int = Field(1200, ge=1, alias="CITEGATE_ANONYMOUS_RATE_LIMIT")
    policy_seed_file: Path | None = Field(None, alias="CITEGATE_POLICY_SEED_FILE")

    # Optional sink for feedback and improvement tasks: GitHub issues (REST API).
    github_repository: str | None = Field(None, alias="CITEGATE_GITHUB_REPOSITORY")
    github_token: SecretStr | None = Field(None, alias="CITEGATE_GITHUB_TOKEN")
    github_api_url: str = Field("https://api.github.com", alias="CITEGATE_GITHUB_API_URL")

    # Web search and reading (spec 001 3.2). Provider "none" makes /api/v1/web/search answer
    # WEB_SEARCH_FAILED (not_configured). web_allow_loopback is for tests only.
    web_search_provider: Literal["none", "jina", "searxng"] = Field(
        "none", alias="CITEGATE_WEB_SEARCH_PROVIDER"
    )
    web_search_base_url: str | None = Field(None, alias="CITEGATE_WEB_SEARCH_URL")
    web_search_api_key: SecretStr | None = Field(None, alias="CITEGATE_WEB_SEARCH_API_KEY")
    web_search_rate_limit_per_minute: int = Field(10, alias="CITEGATE_WEB_SEARCH_RATE_LIMIT")
    web_search_ip_rate_limit_per_minute: int = Field(30, alias="CITEGATE_WEB_SEARCH_IP_RATE_LIMIT")
    web_max_page_bytes: int = Field(5 * 1024 * 1024, alias="CITEGATE_WEB_MAX_PAGE_BYTES")
    web_search_cache_seconds: int = Field(3600, alias="CITEGATE_WEB_SEARCH_CACHE_SECONDS")
    web_page_cache_seconds: int = Field(6 * 3600, alias="CITEGATE_WEB_PAGE_CACHE_SECONDS")
    web_max_timeout_seconds: float = Field(25.0, alias="CITEGATE_WEB_MAX_TIMEOUT")
    web_allow_loopback: bool = Field(False, alias="CITEGATE_WEB_ALLOW_LOOPBACK")
    # Chromium for wait_for_selector (never downloaded). Unset: the local runtime looks for
    # /usr/bin/chromium; "none" turns it off; without one such reads answer WEB_READ_FAILED.
    web_browser_path: str | None = Field(None, alias="CITEGATE_WEB_BROWSER")

    # Local state (spec 004's variable) and the local gateway's port (spec 004's port).
    data_root: Path = Field(Path(".data"), alias="RAG_DATA_ROOT")
    port: int = Field(8099, alias="PORT")

    # Days an audit record is kept: its TTL attribute (expires_at), after which DynamoDB's TTL (in
    # AWS) or the local TTL sweeper deletes it. Unset: 400 days in AWS, 7 on the local runtime,
    # whose embedded tables hold every record in memory (about 5 KB each).
    audit_retention_days: float | None = Field(None, gt=0, alias="CITEGATE_AUDIT_RETENTION_DAYS")
    # The local runtime keeps at most this many audit records in memory; older ones move to
    # RAG_DATA_ROOT/audit-archive/<day>.jsonl (removed after the retention). Not used in AWS.
    local_audit_max_records: int = Field(20_000, ge=100, alias="CITEGATE_LOCAL_AUDIT_MAX_RECORDS")

    # Ingestion limits.
    # Uploaded documents (presigned S3) may be this large; inline ones (text, base64) travel in the
    # Lambda event, which Lambda refuses over 6 MB (6,291,456 bytes) before the handler runs: 4 MiB
    # decoded is 5.59 MB in base64, leaving ~0.7 MB for the event's headers, request context,
    # metadata and JSON escaping (docs/api.md). Larger documents go through POST /v1/kb/{id}/uploads.
    max_document_bytes: int = Field(20 * 1024 * 1024, alias="CITEGATE_MAX_DOCUMENT_BYTES")
    max_inline_document_bytes: int = Field(4 * 1024 * 1024, alias="CITEGATE_MAX_INLINE_DOCUMENT_BYTES")
    # `file_path` ingestion is local-only and confined to this folder (unset: refused).
    local_ingest_root: Path | None = Field(None, alias="CITEGATE_LOCAL_INGEST_ROOT")
    upload_url_ttl_seconds: int = Field(900, alias="CITEGATE_UPLOAD_URL_TTL")
    # How often `citegate serve` looks for sources whose schedule is due (EventBridge Scheduler's
    # rate in AWS is infra's SCHEDULE_MINUTES).
    local_scheduler_seconds: float = Field(30.0, gt=0, alias="CITEGATE_LOCAL_SCHEDULER_SECONDS")
    # Per-document S3 and DynamoDB calls an ingestion step makes at once. Unset: 8 on AWS, where
    # each call waits on the network; 1 locally, where the embedded endpoint serves the calls in
    # this same process and concurrent ones only take turns for the GIL (measured slower).
    ingest_io_concurrency: int | None = Field(None, ge=1, le=32, alias="CITEGATE_INGEST_IO_CONCURRENCY")

    # Embedding: "use" (offline default), "e5" (offline, better, slower), "openai" (endpoint),
    # "bedrock" (Amazon Bedrock by IAM role: bedrock_embedding_model_id below).
    embedder: Literal["use", "e5", "openai", "bedrock", "hashing"] = Field("use", alias="CITEGATE_EMBEDDER")
    embedder_threads: int = Field(2, alias="CITEGATE_EMBEDDER_THREADS")
    embedding_base_url: str | None = Field(None, alias="CITEGATE_EMBEDDING_BASE_URL")
    embedding_api_key: SecretStr | None = Field(None, alias="CITEGATE_EMBEDDING_API_KEY")
    embedding_model: str | None = Field(None, alias="CITEGATE_EMBEDDING_MODEL")
    embedding_dimension: int | None = Field(None, alias="CITEGATE_EMBEDDING_DIMENSION")
    # Hybrid fusion's weight on BM25 (min-max); unset: the weight tuned for the embedder (retrieval.py).
    fusion_lexical_weight: float | None = Field(None, ge=0.0, le=1.0, alias="CITEGATE_FUSION_LEXICAL_WEIGHT")

    # Insights (citegate.insights): a gap question joins the nearest group at least this similar
    # (cosine, the configured embedder's vectors; tuned for "use" on the planted set's dev split,
    # docs/results/insights.md), else starts its own; views cover this many days unless told.
    insights_threshold: float = Field(0.65, ge=0.0, le=1.0, alias="CITEGATE_INSIGHTS_THRESHOLD")
    # Two groups whose centroids come at least this similar merge. Merging at the join threshold
    # merged distinct planted gaps (docs/results/insights.md), so only groups become alike merge.
    insights_merge_threshold: float = Field(0.9, ge=0.0, le=1.0, alias="CITEGATE_INSIGHTS_MERGE_THRESHOLD")
    insights_window_days: int = Field(30, ge=1, le=3660, alias="CITEGATE_INSIGHTS_WINDOW_DAYS")

    # Search: the embedded engine on one machine, OpenSearch when a URL is configured.
    search_engine: Literal["embedded", "opensearch"] = Field("embedded", alias="CITEGATE_SEARCH_ENGINE")
    opensearch_url: str | None = Field(None, alias="OPENSEARCH_URL")
    opensearch_index_prefix: str = Field("citegate", alias="CITEGATE_OPENSEARCH_INDEX_PREFIX")
    # "aws-sigv4" signs requests with the function's role (Amazon OpenSearch Service); "basic" uses
    # the URL's user:password. Readers in AWS may not create templates, so setup runs at deploy.
    opensearch_auth: Literal["basic", "aws-sigv4"] = Field("basic", alias="CITEGATE_OPENSEARCH_AUTH")
    opensearch_auto_setup: bool = Field(True, alias="CITEGATE_OPENSEARCH_AUTO_SETUP")

    # Answering: offline extractive answerer by default, any OpenAI-compatible chat endpoint if set.
    llm_base_url: str | None = Field(None, alias="CITEGATE_LLM_BASE_URL")
    llm_api_key: SecretStr | None = Field(None, alias="CITEGATE_LLM_API_KEY")
    llm_model: str | None = Field(None, alias="CITEGATE_LLM_MODEL")
    llm_timeout_seconds: float = Field(30.0, alias="CITEGATE_LLM_TIMEOUT")
    # A second model call judges whether each cited passage supports its sentence; unsupported
    # citations (and sentences left without one) are taken off. Off: it doubles the model calls.
    llm_verify_citations: bool = Field(False, alias="CITEGATE_LLM_VERIFY_CITATIONS")
    # Amazon Bedrock, called with the function's IAM role (no key, no secret): the answering and
    # chat model when llm_provider is "bedrock", the embedder when embedder is "bedrock". The
    # region defaults to AWS_REGION; the endpoint URL is for VPC endpoints and tests.
    llm_provider: Literal["openai", "bedrock"] = Field("openai", alias="CITEGATE_LLM_PROVIDER")
    bedrock_model_id: str | None = Field(None, alias="CITEGATE_BEDROCK_MODEL_ID")
    bedrock_embedding_model_id: str = Field(
        "amazon.titan-embed-text-v2:0", alias="CITEGATE_BEDROCK_EMBEDDING_MODEL_ID"
    )
    bedrock_region: str | None = Field(None, alias="CITEGATE_BEDROCK_REGION")
    bedrock_endpoint_url: str | None = Field(None, alias="CITEGATE_BEDROCK_ENDPOINT_URL")

    # Agents (spec 003's /api/v2/query, spec 001's chats). Chat models a caller may pick by id:
    # a JSON list of {"id", "model", "base_url", "api_key_secret_arn"?, "label"?, "tools"?}, or of
    # {"id", "provider": "bedrock", "model"?, "region"?, "label"?} for a Bedrock model by IAM role
    # (citegate.agents.models.configured_model); the offline model ("citegate-offline") is always
    # there, and the llm_* (or bedrock_model_id) model when one is set.
    chat_models: str | None = Field(None, alias="CITEGATE_CHAT_MODELS")
    default_chat_model: str | None = Field(None, alias="CITEGATE_DEFAULT_CHAT_MODEL")
    agent_max_retrieval_rounds: int = Field(3, ge=1, le=5, alias="CITEGATE_AGENT_MAX_ROUNDS")
    chat_history_tokens: int = Field(3000, ge=0, alias="CITEGATE_CHAT_HISTORY_TOKENS")
    # Spec 001 9.1: a cookie may carry the bearer credential; state-changing cookie requests must
    # come from one of these page origins (comma-separated), which is the CSRF defence.
    auth_cookie: str = Field("citegate_token", alias="CITEGATE_AUTH_COOKIE")
    allowed_origins: str = Field("", alias="CITEGATE_ALLOWED_ORIGINS")

    @property
    def local_runtime(self) -> bool:
        return self.runtime == "local"

    @property
    def audit_ttl_days(self) -> float:
        from citegate.platform.resources import AUDIT_TTL_DAYS, LOCAL_AUDIT_TTL_DAYS

        if self.audit_retention_days is not None:
            return self.audit_retention_days
        return LOCAL_AUDIT_TTL_DAYS if self.local_runtime else AUDIT_TTL_DAYS

    @property
    def ingest_calls_at_once(self) -> int:
        return self.ingest_io_concurrency or (1 if self.local_runtime else 8)

    @property
    def index_dir(self) -> Path:
        return self.data_root / "index"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return from_environ(Settings)


def reset_settings() -> None:
    get_settings.cache_clear()
