"""The shapes of every AWS resource citegate uses, in one place.

The CDK app (infra/) and the local stack (citegate.runtime) both build their tables, bucket, queues
and state machine from these definitions, so the two cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

APP = "citegate"


@dataclass(frozen=True)
class IndexShape:
    name: str
    partition_key: str
    sort_key: str | None = None


@dataclass(frozen=True)
class TableShape:
    logical: str
    partition_key: str
    sort_key: str | None = None
    ttl_attribute: str | None = None
    indexes: tuple[IndexShape, ...] = ()

    def physical_name(self, stage: str) -> str:
        return f"{APP}-{stage}-{self.logical}"

    def key_attributes(self) -> list[str]:
        keys = [self.partition_key] + ([self.sort_key] if self.sort_key else [])
        for index in self.indexes:
            keys += [index.partition_key] + ([index.sort_key] if index.sort_key else [])
        return list(dict.fromkeys(keys))


# Knowledge bases, by id; the tenant index lists a tenant's knowledge bases.
KBS = TableShape("kbs", "kb_id", indexes=(IndexShape("by_tenant", "tenant_id", "kb_id"),))
# Documents of a knowledge base (document_id is derived from kb_id and source_name).
DOCUMENTS = TableShape("documents", "kb_id", "document_id")
# Ingestion and reindex tasks; finished tasks expire after TASK_TTL_DAYS.
TASKS = TableShape("tasks", "task_id", ttl_attribute="expires_at")
# Parent chunks, by document: context for answers and the display side of citations.
PARENTS = TableShape("parents", "doc_key", "parent_id")
# Embeddings by model and content hash: re-ingesting or reindexing embeds only what changed.
EMBEDDINGS = TableShape("embeddings", "cache_key")

# Server-held policy, one item per principal key ("agent:<id>", "human:*", "anonymous", ...).
POLICIES = TableShape("policies", "principal_key")
# Agent tokens and spec 002 caller agent keys, by the SHA-256 of the secret (never the secret).
CREDENTIALS = TableShape(
    "credentials", "credential_hash", indexes=(IndexShape("by_agent", "agent_id", "credential_id"),)
)
# One audit record per call, by tenant and time; the caller index lists one caller's calls.
AUDIT = TableShape(
    "audit",
    "tenant_id",
    "sk",
    ttl_attribute="expires_at",
    indexes=(IndexShape("by_caller", "caller_key", "sk"),),
)
# Fixed-window counters for rate limits and token budgets.
COUNTERS = TableShape("counters", "counter_key", ttl_attribute="expires_at")

# Answer sessions (spec 000 section 7); DynamoDB's TTL deletes late, so code checks expires_at too.
SESSIONS = TableShape("sessions", "session_id", ttl_attribute="expires_at_epoch")
# Powertools idempotency records (its default attribute names): a retry returns the first result.
IDEMPOTENCY = TableShape("idempotency", "id", ttl_attribute="expiration")
# Feedback and improvement tasks, deduplicated by dedupeKey; the kind index lists them by recency.
FEEDBACK = TableShape("feedback", "record_id", indexes=(IndexShape("by_kind", "kind", "last_seen"),))

# Web search results (1 h) and read pages (6 h; kept 24 h longer for ETag/Last-Modified revalidation).
WEB_CACHE = TableShape("web_cache", "cache_key", ttl_attribute="expires_at")

# Agent chats (spec 001) and their messages, under their owner: a chat item ("chat#<id>") and its
# messages ("msg#<id>#<time>#<message id>") share the owner's partition, so another caller's chat
# is simply not found; the recency index lists an owner's chats by last update.
CHATS = TableShape(
    "chats",
    "owner_key",
    "sk",
    indexes=(IndexShape("by_updated", "owner_key", "updated_sk"),),
)

# Knowledge-base sources ("source#<id>") and their sync runs ("run#<source id>#<started>#<run id>"),
# under their knowledge base; the source item holds the sync lease (citegate.knowledge.sources.store).
SOURCES = TableShape("sources", "kb_id", "sk")
# Insights (citegate.insights): question signals derived from audit records (`{tenant}#signal`, by
# time, with the audit's TTL), gap groups (`{tenant}#group`) and the grouping's state (`{tenant}#state`).
INSIGHTS = TableShape("insights", "pk", "sk", ttl_attribute="expires_at")

TABLES: tuple[TableShape, ...] = (
    KBS,
    DOCUMENTS,
    TASKS,
    PARENTS,
    EMBEDDINGS,
    POLICIES,
    CREDENTIALS,
    AUDIT,
    COUNTERS,
    SESSIONS,
    IDEMPOTENCY,
    FEEDBACK,
    WEB_CACHE,
    CHATS,
    SOURCES,
    INSIGHTS,
)
# Audit records' retention unless CITEGATE_AUDIT_RETENTION_DAYS says otherwise (Settings.audit_ttl_days).
AUDIT_TTL_DAYS = 400
LOCAL_AUDIT_TTL_DAYS = 7
TASK_TTL_DAYS = 30


@dataclass(frozen=True)
class QueueShape:
    logical: str
    visibility_timeout_seconds: int
    max_receive_count: int | None = None
    dead_letter: str | None = None
    retention_seconds: int = 4 * 24 * 3600

    def physical_name(self, stage: str) -> str:
        return f"{APP}-{stage}-{self.logical}"


INGEST_CONSUMER_TIMEOUT_SECONDS = 30
# A message stays invisible well beyond the consumer's timeout (AWS recommends 6x) so that a slow
# consumer never sees its own message delivered twice; after 5 failed receives it goes to the DLQ.
INGEST_DLQ = QueueShape("ingest-dlq", visibility_timeout_seconds=60, retention_seconds=14 * 24 * 3600)
INGEST_QUEUE = QueueShape(
    "ingest",
    visibility_timeout_seconds=6 * INGEST_CONSUMER_TIMEOUT_SECONDS,
    max_receive_count=5,
    dead_letter=INGEST_DLQ.logical,
)
QUEUES: tuple[QueueShape, ...] = (INGEST_DLQ, INGEST_QUEUE)


def bucket_name(stage: str, account: str = "000000000000") -> str:
    """Raw documents and ingestion work files. Bucket names are global, so the account is in it."""
    return f"{APP}-{stage}-{account}-documents"


STATE_MACHINE_LOGICAL = "ingestion"
ASL_PATH = Path(__file__).parents[1] / "knowledge" / "ingest" / "ingestion.asl.json"

# The state machine's Lambda tasks, keyed by the placeholder the ASL file uses for their ARN.
INGESTION_STEP_FUNCTIONS: dict[str, str] = {
    "ParseFunctionArn": "ingest_parse",
    "ChunkFunctionArn": "ingest_chunk",
    "EmbedFunctionArn": "ingest_embed",
    "IndexFunctionArn": "ingest_index",
    "FinalizeFunctionArn": "ingest_finalize",
    "MarkFailedFunctionArn": "ingest_mark_failed",
    # A source sync requested over the API or by the schedule (citegate.knowledge.sources).
    "SyncFunctionArn": "source_sync_worker",
}


def state_machine_name(stage: str) -> str:
    return f"{APP}-{stage}-{STATE_MACHINE_LOGICAL}"


def function_name(stage: str, function: str) -> str:
    return f"{APP}-{stage}-{function.replace('_', '-')}"


# Every function is called through this alias, which the deploy moves to each newly published
# version (infra/constructs/endpoint_function.py): SnapStart applies to versions, not $LATEST.
SERVING_ALIAS = "live"


def invoke_target(stage: str, function: str) -> str:
    """The name one function invokes another by: its live alias (citegate-<stage>-<function>:live)."""
    return f"{function_name(stage, function)}:{SERVING_ALIAS}"


@dataclass(frozen=True)
class CorsShape:
    """CORS of the public HTTP API (infra/constructs/api.py) and of the local gateway, which answers
    preflights as API Gateway does. The page origins are per deployment: the CDK context
    `page_origins` in AWS, CITEGATE_ALLOWED_ORIGINS locally (the origins cookie requests may come from)."""

    allow_methods: tuple[str, ...]
    allow_headers: tuple[str, ...]  # lower case, as API Gateway compares them
    expose_headers: tuple[str, ...]
    max_age_seconds: int


# What a page on another origin (a docs-site widget, the console) needs: every route's method, the
# credential headers (bearer, spec 002's caller agent key, spec 000's session token), JSON bodies,
# chats' idempotency keys, MCP's headers; and to read the request id, Location and Retry-After.
CORS = CorsShape(
    allow_methods=("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"),
    allow_headers=(
        "authorization",
        "content-type",
        "idempotency-key",
        "last-event-id",
        "mcp-protocol-version",
        "mcp-session-id",
        "x-caller-agent-key",
        "x-request-id",
        "x-session-token",
    ),
    expose_headers=("apigw-requestid", "location", "retry-after", "x-request-id"),
    max_age_seconds=3600,
)
