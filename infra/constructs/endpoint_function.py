"""One construct for every Lambda function, and the table of what each function may touch.

Every function (the routes', the authorizer, the queue consumer, the six ingestion steps, the
OpenSearch setup custom resource) is an `EndpointFunction`: Python 3.12, `handler.lambda_handler`
from its own folder (a streaming entry: the folder's run.sh under the Lambda Web Adapter), the
shared layer plus the dependency layers it needs, X-Ray active tracing, Powertools settings, its
own log group with a retention, and its own role.

Callers reach a function through its `live` alias (`EndpointFunction.live`: the API's
integrations and authorizer, the queue's event source, the state machine, the function URLs and
the functions that invoke others), which CDK moves to a newly published version on every change
of code, layers or configuration. So SnapStart can apply (it snapshots published versions only,
never `$LATEST`): on for the functions a caller waits on (`snap_starts`) where the stage turns it
on (`FunctionSettings.snap_start`; prod by default).

Least privilege: `FUNCTION_SPECS` says, per function, which tables it reads or writes, which S3
prefixes it may get, put, delete or list, whether it may send to the ingestion queue or start the
state machine, and how it uses the search domain. It was derived from the code paths in
layers/citegate (stores, ingestion service and steps, knowledge bases, retrieval, answers) and the
handlers; `grant_resources` turns it into IAM statements and nothing else grants anything.

Nested stacks (CloudFormation allows 500 resources per stack; a function with one route is about
ten: role, policy, log group, function, and per front door a route, an integration and a
permission): every routed function lives in the nested stack of its group with its routes. The
group follows from the route's path (`ROUTE_GROUPS`), or `FunctionSpec.group` says it. Adding an
endpoint is one FUNCTION_SPECS entry (and its route in routes.py); `RESOURCE_BUDGET` fails the synth
of any stack that outgrows it, naming the fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from aws_cdk import ArnFormat, Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn

from citegate.api import routes
from citegate.platform import resources
from constructs import Construct
from infra.constructs import acknowledge_wildcards

REPO = Path(__file__).resolve().parents[2]
FUNCTIONS_DIR = REPO / "functions"

# The runtime of every function: python3.12, the first Python runtime with SnapStart; the layers are
# built for it (infra/bundling.py PYTHON_VERSION).
RUNTIME = lambda_.Runtime.PYTHON_3_12

# read: GetItem/BatchGetItem/Query/Scan; write: read plus Put/Update/Delete/BatchWrite;
# put: PutItem only (append-only audit records); update: UpdateItem only (rate-limit counters).
TableAccess = Literal["read", "write", "put", "update"]
SearchAccess = Literal["none", "read", "write", "admin"]
ObjectAction = Literal["get", "put", "delete", "list"]
# Extra dependency layers beyond shared + base (see infra/bundling.py).
ExtraLayer = Literal["parsing", "answering", "embedder", "mcp", "llm", "auth", "stream"]
# How Lambda starts the function: the Python runtime calling `handler.lambda_handler`, or the
# Lambda Web Adapter running the folder's run.sh (the streaming entries: infra/constructs/streaming.py).
Entry = Literal["handler", "stream"]
# The nested stacks of endpoint functions (see the module doc).
StackGroup = Literal["knowledge", "answers", "agents", "admin"]
GROUP_DESCRIPTIONS: Mapping[StackGroup, str] = {
    "knowledge": "spec 004 knowledge bases, documents, tasks, retrieval and ask; /v1/me, /healthz",
    "answers": "spec 000 Answer API and agent tools, spec 002 knowledge entry",
    "agents": "spec 001 agent chats and web tools, spec 003 dual-agent query, MCP",
    "admin": "policies, agent credentials, audit, feedback administration",
}
# A route's path -> its function's nested stack (the longest matching prefix wins).
ROUTE_GROUPS: Mapping[str, StackGroup] = {
    "/healthz": "knowledge",
    "/v1/": "knowledge",
    "/answer/": "answers",
    "/agent/tools/": "answers",
    "/api/v1/knowledge/": "answers",
    "/api/v1/agent/": "agents",
    "/api/v1/web/": "agents",
    "/api/v2/": "agents",
    "/mcp": "agents",
    "/admin/": "admin",
}
# The functions that read a source's own bucket (infra/constructs/sources.py grants them exactly
# the buckets and prefixes of the CDK context `source_buckets`).
SOURCE_SYNC_WORKER = "source_sync_worker"
SOURCE_EVENTS = "source_events"

# Every stack (the top-level one and each nested one) must stay under this many resources: the
# rest of CloudFormation's 500 is headroom (and parameters and outputs have limits of their own).
RESOURCE_BUDGET = 300

# Lambda's maximum for functions behind API Gateway HTTP APIs is bounded by the 30 s integration
# timeout; 29 s leaves API Gateway time to return the function's own error.
API_TIMEOUT_S = 29


@dataclass(frozen=True)
class FunctionSpec:
    description: str
    memory_mb: int = 512
    timeout_s: int = API_TIMEOUT_S
    # TableShape.logical -> the kinds of access it needs
    tables: Mapping[str, frozenset[TableAccess]] = field(default_factory=dict)
    objects: Mapping[str, frozenset[ObjectAction]] = field(default_factory=dict)  # S3 prefix -> actions
    send_to_queue: bool = False
    start_execution: bool = False
    search: SearchAccess = "none"
    layers: tuple[ExtraLayer, ...] = ()
    # Functions (folders) this one may invoke with lambda:InvokeFunction, by name.
    invokes: tuple[str, ...] = ()
    # The nested stack (default: from the route's path, ROUTE_GROUPS).
    group: StackGroup | None = None
    entry: Entry = "handler"


def _acts(*names: ObjectAction) -> frozenset[ObjectAction]:
    return frozenset(names)


def _tables(**access: str) -> dict[str, frozenset[TableAccess]]:
    """_tables(kbs="read", audit="read+put") -> {"kbs": {"read"}, "audit": {"read", "put"}}."""
    return {name: frozenset(cast(list[TableAccess], value.split("+"))) for name, value in access.items()}


# Every audited route (citegate.api.http.http_handler + citegate.governance.calls.authorize): resolve the
# principal and its policy (policies: read; the IAM door scans policies for the caller's ARN), check
# the dataset (kbs: read), count the call against rate limits (counters: UpdateItem) and write the
# audit record (audit: PutItem, never read or delete).
# Token budgets read the day's counter before answering (counters: GetItem too).
GOVERNED = _tables(policies="read", kbs="read", counters="read+update", audit="put")


def governed(description: str, **kw: object) -> FunctionSpec:
    tables = {name: set(access) for name, access in GOVERNED.items()}
    for name, access in dict(kw.pop("tables", {})).items():  # type: ignore[call-overload]
        tables.setdefault(name, set()).update(access)
    return FunctionSpec(
        description,
        tables={n: frozenset(a) for n, a in tables.items()},
        **kw,  # type: ignore[arg-type]
    )


# The functions behind the MCP tools and /v1/me (citegate.clients.mcp_server.TOOL_FUNCTIONS; a test checks
# that the two agree): the only functions the /mcp function may invoke.
MCP_TOOL_FUNCTIONS: tuple[str, ...] = (
    "agent_ask",
    "agent_create_feedback",
    "agent_create_improvement_task",
    "agent_get_context",
    "agent_get_page",
    "agent_search",
    "document_delete",
    "document_ingest",
    "document_list",
    "kb_ask",
    "kb_create",
    "kb_list",
    "kb_reindex",
    "kb_resolve_refs",
    "kb_retrieve",
    "me",
    "task_get",
    "web_read",
    "web_search",
)


# What each function needs, from its code path in layers/citegate (stores, ingestion service and
# steps, governance, knowledge bases, retrieval, answers):
# - building the search index builds the embedder object (class attributes only: no model load and
#   no DynamoDB call), so only functions that embed text get the embedder layer; only the embed
#   step uses the embeddings cache (queries are embedded without it);
# - S3 HeadObject on a missing key answers 403 instead of 404 without s3:ListBucket on that prefix,
#   so functions that probe for an object may list that prefix.


# What a function that makes a knowledge base follow its source may do (the sync worker and the S3
# events function): the same as ingesting a document, plus reading and updating the source.
_SOURCE_WRITER: dict[str, Any] = {
    "tables": _tables(
        sources="read+write", kbs="read+write", documents="write", tasks="write", parents="write"
    ),
    "objects": {"raw/": _acts("put", "delete", "list")},
    "send_to_queue": True,
    "search": "write",
}


FUNCTION_SPECS: dict[str, FunctionSpec] = {
    "healthz": FunctionSpec(
        "GET /healthz: metadata and search checks (not audited)", tables=_tables(kbs="read"), search="read"
    ),
    "kb_create": governed("POST /v1/kb", tables=_tables(kbs="write")),
    "kb_list": governed("GET /v1/kb"),
    "kb_get": governed("GET /v1/kb/{kb_id}"),
    "kb_update": governed("PATCH /v1/kb/{kb_id}", tables=_tables(kbs="write")),
    "upload_create": governed(
        "POST /v1/kb/{kb_id}/uploads: presigned PUT (signed with this role, so it may put uploads/)",
        objects={"uploads/": _acts("put")},
    ),
    "document_ingest": governed(
        "POST /v1/kb/{kb_id}/documents: store raw, record task and document, enqueue",
        memory_mb=1024,
        tables=_tables(kbs="write", documents="write", tasks="write"),
        objects={
            "raw/": _acts("put", "delete", "list"),
            "uploads/": _acts("get", "delete", "list"),
        },
        send_to_queue=True,
    ),
    "document_list": governed("GET /v1/kb/{kb_id}/documents", tables=_tables(documents="read")),
    "document_get": governed("GET /v1/kb/{kb_id}/documents/{document_id}", tables=_tables(documents="read")),
    "document_chunks": governed(
        "GET /v1/kb/{kb_id}/documents/{document_id}/chunks: parents and children of a document",
        tables=_tables(documents="read", parents="read"),
        search="read",
    ),
    "document_delete": governed(
        "DELETE /v1/kb/{kb_id}/documents/{document_id}: record, chunks, parents, files",
        tables=_tables(kbs="write", documents="write", parents="write"),
        objects={"raw/": _acts("delete", "list")},
        search="write",
    ),
    "kb_reindex": governed(
        "POST /v1/kb/{kb_id}/reindex: one queued task per document",
        tables=_tables(documents="write", tasks="write"),
        send_to_queue=True,
    ),
    "task_get": governed("GET /v1/tasks/{task_id}", tables=_tables(tasks="read")),
    "source_create": governed("POST /v1/kb/{kb_id}/sources", tables=_tables(sources="write"), group="admin"),
    "source_list": governed("GET /v1/kb/{kb_id}/sources", tables=_tables(sources="read"), group="admin"),
    "source_get": governed(
        "GET /v1/kb/{kb_id}/sources/{source_id}", tables=_tables(sources="read"), group="admin"
    ),
    "source_update": governed(
        "PATCH /v1/kb/{kb_id}/sources/{source_id}", tables=_tables(sources="write"), group="admin"
    ),
    "source_runs": governed(
        "GET /v1/kb/{kb_id}/sources/{source_id}/runs", tables=_tables(sources="read"), group="admin"
    ),
    "source_delete": governed(
        "DELETE /v1/kb/{kb_id}/sources/{source_id}: the source, its runs and its documents",
        tables=_tables(sources="write", kbs="write", documents="write", parents="write"),
        objects={"raw/": _acts("delete", "list")},
        search="write",
        group="admin",
    ),
    "source_sync": governed(
        "POST /v1/kb/{kb_id}/sources/{source_id}/sync: take the lease, record the run queued, hand it "
        "to the ingestion queue",
        tables=_tables(sources="write"),
        send_to_queue=True,
        group="admin",
    ),
    "source_run_get": governed(
        "GET /v1/kb/{kb_id}/sources/{source_id}/runs/{run_id}", tables=_tables(sources="read"), group="admin"
    ),
    "kb_retrieve": governed(
        "POST /v1/kb/{kb_id}/retrieve: embeds the query, hybrid search",
        memory_mb=2048,
        search="read",
        layers=("embedder",),
    ),
    "kb_ask": governed(
        "POST /v1/kb/{kb_id}/ask: retrieve, parents as context, evidence-bound answer",
        memory_mb=2048,
        tables=_tables(parents="read", insights="put"),
        search="read",
        layers=("embedder", "answering"),  # the offline extractive answerer needs tantivy, jieba
    ),
    "kb_resolve_refs": governed("POST /v1/kb/{kb_id}/resolve_refs", search="read"),
    "knowledge_query": governed(
        "POST /api/v1/knowledge/query: spec 002 governed entry (caller agent key in the body)",
        memory_mb=2048,
        tables=_tables(credentials="read", documents="read"),
        search="read",
        layers=("embedder",),
    ),
    # Spec 000: the Answer API and Agent Access (one engine with kb_ask; sessions; tools).
    "answer_ask": governed(
        "POST /answer/ask: questions over every readable knowledge base, AnswerResult",
        memory_mb=2048,
        tables=_tables(parents="read", insights="put"),
        search="read",
        layers=("embedder", "answering"),
    ),
    "agent_ask": governed(
        "POST /agent/tools/ask: the same engine as /answer/ask",
        memory_mb=2048,
        tables=_tables(parents="read", insights="put"),
        search="read",
        layers=("embedder", "answering"),
    ),
    # OpenAI's Chat Completions protocol on the Answer API's engine (citegate.api.openai_compat).
    "openai_models": governed(
        "GET /v1/models: the knowledge bases the caller may ask, as OpenAI-compatible models",
        group="answers",
    ),
    "openai_chat_completions": governed(
        "POST /v1/chat/completions: a conversation's last question, answered with citations (JSON or SSE)",
        memory_mb=2048,
        tables=_tables(parents="read", insights="put"),
        search="read",
        layers=("embedder", "answering"),
        group="answers",
    ),
    "answer_session_create": governed(
        "POST /answer/sessions: a session bound to its owner (and an optional first turn)",
        memory_mb=2048,
        tables=_tables(parents="read", sessions="write", insights="put"),
        search="read",
        layers=("embedder", "answering"),
    ),
    "answer_session_turn": governed(
        "POST /answer/sessions/{sessionId}/turns: token, owner, scope and expiry checked per turn",
        memory_mb=2048,
        tables=_tables(parents="read", sessions="write", insights="put"),
        search="read",
        layers=("embedder", "answering"),
    ),
    "agent_search": governed(
        "POST /agent/tools/search: ranked passages with citations",
        memory_mb=2048,
        search="read",
        layers=("embedder",),
    ),
    "agent_get_context": governed(
        "POST /agent/tools/get_context: a ContextPack within a token budget",
        memory_mb=2048,
        search="read",
        layers=("embedder",),
    ),
    "agent_get_page": governed(
        "POST /agent/tools/get_page: a document's sections by path and version",
        tables=_tables(documents="read", parents="read"),
    ),
    "agent_create_feedback": governed(
        "POST /agent/tools/create_feedback: idempotent (Powertools) and deduplicated by dedupeKey",
        tables=_tables(feedback="write", idempotency="write", insights="put"),
    ),
    "agent_create_improvement_task": governed(
        "POST /agent/tools/create_improvement_task: idempotent and deduplicated",
        tables=_tables(feedback="write", idempotency="write", insights="put"),
    ),
    # Insights: the views fold new signals into the groups (embedding each new question once) and
    # read signals; the fix mark re-asks a group's questions (retrieval and the answerer); the task
    # goes through the feedback records. Every route that answers a question puts signals (its
    # audit's twin): the answer routes above, chat completions, spec 003's query and chat turns.
    "insights_gaps": governed(
        "GET /v1/insights/gaps: folds new signals into gap groups, then lists the groups",
        memory_mb=2048,
        tables=_tables(insights="write"),
        layers=("embedder",),
    ),
    "insights_summary": governed("GET /v1/insights/summary", tables=_tables(insights="read")),
    "insights_gap_fix": governed(
        "POST /v1/insights/gaps/{group_id}/fix: marks a group fixed and re-asks its questions",
        memory_mb=2048,
        tables=_tables(insights="write", parents="read"),
        search="read",
        layers=("embedder", "answering"),
    ),
    "insights_gap_task": governed(
        "POST /v1/insights/gaps/{group_id}/improvement_task: deduplicated improvement task",
        tables=_tables(insights="write", feedback="write", idempotency="write"),
    ),
    "admin_feedback_list": governed("GET /admin/feedback", tables=_tables(feedback="read")),
    "admin_feedback_close": governed(
        "POST /admin/feedback/{record_id}/close", tables=_tables(feedback="write")
    ),
    # Spec 001 web tools: outbound HTTPS to the web and the search provider (no VPC).
    "web_search": governed(
        "POST /api/v1/web/search: provider search, counted, cached", tables=_tables(web_cache="write")
    ),
    "web_read": governed(
        "POST /api/v1/web/read: SSRF-guarded fetch to Markdown, cached",
        memory_mb=1024,
        tables=_tables(web_cache="write"),
    ),
    "me": governed("GET /v1/me: the caller's principal and what its policy grants"),
    # Spec 003's dual agent and spec 001's chats: retrieval rounds and a cited summary (offline or
    # by a configured model), chats and their messages under their owner.
    "query_v2": governed(
        "POST /api/v2/query: retrieval rounds, document manager, streamed cited summary (SSE)",
        memory_mb=2048,
        tables=_tables(parents="read", insights="put"),
        search="read",
        layers=("embedder", "answering"),
    ),
    "agent_chat_create": governed("POST /api/v1/agent/chats", tables=_tables(chats="read+write")),
    "agent_chat_list": governed("GET /api/v1/agent/chats: the owner's chats", tables=_tables(chats="read")),
    "agent_chat_get": governed("GET /api/v1/agent/chats/{chat_id}", tables=_tables(chats="read")),
    "agent_chat_update": governed(
        "PATCH /api/v1/agent/chats/{chat_id}: rename", tables=_tables(chats="read+write")
    ),
    "agent_chat_delete": governed(
        "DELETE /api/v1/agent/chats/{chat_id}: the chat and its messages", tables=_tables(chats="read+write")
    ),
    "agent_chat_message": governed(
        "POST /api/v1/agent/chats/{chat_id}/messages: a cited turn (JSON or SSE), web where allowed",
        memory_mb=2048,
        tables=_tables(chats="read+write", parents="read", web_cache="write", insights="put"),
        search="read",
        layers=("embedder", "answering"),
    ),
    "agent_models_list": governed("GET /api/v1/agent/models: the models a caller may pick"),
    # MCP over streamable HTTP: no data access of its own. Each tool call invokes the tool route's
    # function with the caller's authorizer context, and that function authorizes and audits.
    "mcp": FunctionSpec(
        "POST /mcp: MCP server (stateless streamable HTTP); tools invoke their routes' functions",
        memory_mb=512,
        invokes=MCP_TOOL_FUNCTIONS,
        layers=("mcp",),
    ),
    "admin_policies_list": governed("GET /admin/policies"),
    "admin_policy_get": governed("GET /admin/policies/{principal_key}"),
    "admin_policy_put": governed("PUT /admin/policies/{principal_key}", tables=_tables(policies="write")),
    "admin_credential_create": governed(
        "POST /admin/agents/{agent_id}/credentials: issue (stores the hash only)",
        tables=_tables(credentials="write"),
    ),
    "admin_credential_list": governed(
        "GET /admin/agents/{agent_id}/credentials", tables=_tables(credentials="read")
    ),
    "admin_credential_revoke": governed(
        "DELETE /admin/agents/{agent_id}/credentials/{credential_id}", tables=_tables(credentials="write")
    ),
    "admin_audit_list": governed("GET /admin/audit", tables=_tables(audit="read")),
    routes.AUTHORIZER_FUNCTION: FunctionSpec(
        "Lambda authorizer: credentials to a principal (agent tokens are looked up by hash)",
        memory_mb=512,
        timeout_s=10,
        tables=_tables(credentials="read"),
        layers=("auth",),  # JWTs are verified here (joserfc) and nowhere else
    ),
    routes.INGEST_CONSUMER_FUNCTION: FunctionSpec(
        "SQS consumer: the batch's documents packed into Step Functions executions",
        memory_mb=256,
        timeout_s=resources.INGEST_CONSUMER_TIMEOUT_SECONDS,
        tables=_tables(tasks="read", documents="read"),
        start_execution=True,
    ),
    "ingest_parse": FunctionSpec(
        "Ingestion step: raw document to text (pypdf, trafilatura)",
        memory_mb=1769,  # one full vCPU: PDF and HTML parsing are CPU-bound
        timeout_s=300,
        tables=_tables(documents="write", tasks="write"),
        objects={"raw/": _acts("get"), "work/": _acts("put")},
        layers=("parsing",),
    ),
    "ingest_chunk": FunctionSpec(
        "Ingestion step: parent and child chunks",
        memory_mb=1024,
        timeout_s=120,
        objects={"work/": _acts("get", "put")},
    ),
    "ingest_embed": FunctionSpec(
        "Ingestion step: embed children (cached by model and content hash)",
        memory_mb=3008,  # ~2 vCPUs for the model's two threads, and room for its weights
        timeout_s=900,
        tables=_tables(embeddings="write"),
        objects={"work/": _acts("get", "put")},
        layers=("embedder",),
    ),
    "ingest_index": FunctionSpec(
        "Ingestion step: parents to DynamoDB, children to OpenSearch",
        memory_mb=1024,
        timeout_s=300,
        tables=_tables(documents="read", kbs="read", parents="write"),
        objects={"work/": _acts("get")},
        search="write",
    ),
    "source_scheduler": FunctionSpec(
        "Scheduled source syncs (EventBridge Scheduler): queue a sync run of each due source on the "
        "ingestion queue, audit each",
        memory_mb=256,
        timeout_s=300,
        tables=_tables(sources="read+write", kbs="read", audit="put"),
        send_to_queue=True,
    ),
    SOURCE_SYNC_WORKER: FunctionSpec(
        "The sync function (a task of the ingestion state machine): list a source, queue what changed "
        "on the ingestion queue, delete what is gone, record the run",
        memory_mb=1024,
        timeout_s=900,
        **_SOURCE_WRITER,
    ),
    SOURCE_EVENTS: FunctionSpec(
        "S3 events of a source's bucket (EventBridge): ingest or delete that one object's document, "
        "in the order of the object's sequencer",
        memory_mb=1024,
        timeout_s=120,
        **_SOURCE_WRITER,
    ),
    "ingest_finalize": FunctionSpec(
        "Ingestion step: mark the task succeeded, remove work files",
        memory_mb=256,
        timeout_s=60,
        tables=_tables(documents="write", tasks="write"),
        objects={"work/": _acts("delete", "list")},
    ),
    "ingest_mark_failed": FunctionSpec(
        "Ingestion step: record the failure reason, remove work files",
        memory_mb=256,
        timeout_s=60,
        tables=_tables(documents="write", tasks="write"),
        objects={"work/": _acts("delete", "list")},
    ),
}

# The deploy-time OpenSearch setup (infra/custom_resources/opensearch_setup), not under functions/.
OPENSEARCH_SETUP_FUNCTION = "opensearch_setup"
OPENSEARCH_SETUP_SPEC = FunctionSpec(
    "Custom resource: OpenSearch index template, index and search pipelines",
    memory_mb=512,
    timeout_s=300,
    search="admin",
)

# Deploy-time seeding of the server-held policies (infra/custom_resources/policy_seed): it only adds
# missing keys (a conditional PutItem), so it needs PutItem on the policies table and nothing else.
POLICY_SEED_FUNCTION = "policy_seed"
POLICY_SEED_SPEC = FunctionSpec(
    "Custom resource: write the reviewed seed policies that are missing",
    memory_mb=512,
    timeout_s=120,
    tables=_tables(policies="put"),
)


def function_folders() -> list[str]:
    return sorted(p.name for p in FUNCTIONS_DIR.iterdir() if (p / "handler.py").is_file())


def check_specs() -> list[str]:
    """Every route's function must have a folder (there is nothing to deploy otherwise). Returns the
    folders without a FUNCTION_SPECS entry: they deploy with `spec_for`'s minimal default, and the
    infrastructure tests fail until their grants are written down."""
    folders = set(function_folders())
    for route in routes.ROUTES:
        if route.function not in folders:
            raise ValueError(f"route {route.route_key} names a missing function folder {route.function!r}")
    return sorted(folders - set(FUNCTION_SPECS))


def spec_for(name: str) -> FunctionSpec:
    """The function's spec; a routed function without one gets the governed baseline only (it can
    authorize and audit, nothing more: a missing grant fails closed, never open)."""
    if name in FUNCTION_SPECS:
        return FUNCTION_SPECS[name]
    if any(route.function == name for route in routes.ROUTES):
        return governed(f"{name}: no FUNCTION_SPECS entry yet (governed baseline only)")
    raise KeyError(f"no FUNCTION_SPECS entry for {name!r}")


def group_of(name: str) -> StackGroup:
    """The nested stack of a routed function: its spec's group, else its routes' (they must agree)."""
    spec = spec_for(name)
    if spec.group is not None:
        return spec.group
    found: set[StackGroup] = set()
    for route in routes.ROUTES:
        if route.function != name:
            continue
        prefixes = [p for p in ROUTE_GROUPS if route.path == p or route.path.startswith(p)]
        if not prefixes:
            raise ValueError(
                f"route {route.route_key} matches no ROUTE_GROUPS prefix: add one, or set "
                f"FUNCTION_SPECS[{name!r}].group (infra/constructs/endpoint_function.py)"
            )
        found.add(ROUTE_GROUPS[max(prefixes, key=len)])
    if len(found) != 1:
        raise ValueError(
            f"{name}: its routes fall in groups {sorted(found)}; set FUNCTION_SPECS[{name!r}].group"
        )
    return found.pop()


def routed_functions() -> list[str]:
    """Every routed function once, in the order of routes.ROUTES."""
    return list(dict.fromkeys(route.function for route in routes.ROUTES))


@dataclass(frozen=True)
class FunctionSettings:
    """What every function shares: stage, architecture, logging and the common environment."""

    stage: str
    architecture: lambda_.Architecture
    log_level: str
    log_retention: logs.RetentionDays
    removal_policy: RemovalPolicy
    environment: Mapping[str, str]
    # SnapStart on the functions a caller waits on (see snap_starts); costs a cache charge per
    # published version, so the config turns it on for prod only unless told otherwise.
    snap_start: bool = False


def snap_starts(name: str, spec: FunctionSpec) -> bool:
    """Whether SnapStart applies to this function where the stage enables it: every route's function
    and the authorizer (a caller waits on their cold start). Not the ingestion steps and the queue
    consumer (asynchronous), the custom resources (run once per deploy), nor the streaming entries:
    their web server runs as a process beside the runtime, and the Lambda Web Adapter layer they use
    (LWA_LAYER_VERSION) predates the adapter's SnapStart hooks."""
    if spec.entry != "handler":
        return False
    return name == routes.AUTHORIZER_FUNCTION or any(route.function == name for route in routes.ROUTES)


class EndpointFunction(Construct):
    """A citegate Lambda function: one folder, one handler, shared layers, its own role and logs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        spec: FunctionSpec,
        settings: FunctionSettings,
        layers: Sequence[lambda_.ILayerVersion],
        environment: Mapping[str, str] | None = None,
        code_dir: Path | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.name = name
        self.spec = spec
        self.stage = settings.stage
        self.function_name = resources.function_name(settings.stage, name)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"citegate {settings.stage} {name}: {spec.description}"[:1000],
        )
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=f"/aws/lambda/{self.function_name}",
            retention=settings.log_retention,
            removal_policy=settings.removal_policy,
        )
        env = {
            **settings.environment,
            "POWERTOOLS_SERVICE_NAME": resources.APP,
            "POWERTOOLS_METRICS_NAMESPACE": resources.APP,
            "LOG_LEVEL": settings.log_level,
            "POWERTOOLS_LOG_LEVEL": settings.log_level,
            **(lwa_environment() if spec.entry == "stream" else {}),
            **(environment or {}),
        }
        self.function = lambda_.Function(
            self,
            "Function",
            function_name=self.function_name,
            description=spec.description[:256],
            runtime=RUNTIME,
            architecture=settings.architecture,
            handler=STREAM_HANDLER if spec.entry == "stream" else "handler.lambda_handler",
            code=lambda_.Code.from_asset(
                str(code_dir or FUNCTIONS_DIR / name), exclude=["__pycache__", "*.pyc"]
            ),
            layers=list(layers),
            memory_size=spec.memory_mb,
            timeout=Duration.seconds(spec.timeout_s),
            environment=env,
            tracing=lambda_.Tracing.ACTIVE,
            role=self.role,
            log_group=self.log_group,
            snap_start=(
                lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS
                if settings.snap_start and snap_starts(name, spec)
                else None
            ),
            # Prod keeps the versions it replaces (an alias can be moved back); other stages don't.
            current_version_options=lambda_.VersionOptions(removal_policy=settings.removal_policy),
        )
        # What every caller invokes (see the module doc): a published version, never $LATEST.
        self.live = lambda_.Alias(
            self, "Live", alias_name=resources.SERVING_ALIAS, version=self.function.current_version
        )
        if spec.entry == "stream":
            self.function.add_layers(lwa_layer(self, settings.architecture))
        # Its own log group only (no AWSLambdaBasicExecutionRole: that allows every log group).
        self.log_group.grant_write(self.role)
        acknowledge_wildcards(
            self,
            "Active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no "
            "resource-level permissions, so IAM requires Resource '*'.",
            ["*"],
        )

    # ------------------------------------------------------------------ grants

    def grant_resources(
        self,
        *,
        tables: Mapping[str, dynamodb.ITable],
        bucket: s3.IBucket | None = None,
        queue: sqs.IQueue | None = None,
        state_machine: sfn.IStateMachine | None = None,
    ) -> None:
        """Turn this function's spec into IAM statements on the given resources (see the module doc).

        `tables` is keyed by TableShape.logical. Search access is granted by the search construct,
        which also writes the domain's access policy.
        """
        shapes = {shape.logical: shape for shape in resources.TABLES}
        index_arns = []
        for logical, access in sorted(self.spec.tables.items()):
            table = tables[logical]
            table_arn = table.table_arn
            if "write" in access:
                table.grant_read_write_data(self.role)
            elif "read" in access:
                table.grant_read_data(self.role)
            if access & {"read", "write"} and shapes[logical].indexes:
                index_arns.append(f"{table_arn}/index/*")  # what CDK's table grants add
            single = sorted(_SINGLE_ACTIONS[a] for a in access if a in _SINGLE_ACTIONS)
            if single and "write" not in access:
                # On the table only: PutItem and UpdateItem mean nothing on an index.
                self.role.add_to_principal_policy(iam.PolicyStatement(actions=single, resources=[table_arn]))
        acknowledge_wildcards(
            self,
            "Table read/write grants include the table's own global secondary indexes "
            "(<table arn>/index/*), which the stores query (kbs by_tenant, credentials by_agent, "
            "audit by_caller).",
            index_arns,
        )
        if self.spec.objects:
            if bucket is None:
                raise ValueError(f"{self.name} needs the documents bucket")
            for statement in object_statements(bucket, self.spec.objects):
                self.role.add_to_principal_policy(statement)
            bucket_arn = bucket.bucket_arn
            acknowledge_wildcards(
                self,
                "Object actions are scoped to one key prefix of the documents bucket per need "
                "(raw/, work/ or uploads/); the keys below it are per document and per task.",
                [f"{bucket_arn}/{prefix}*" for prefix in self.spec.objects],
            )
        if self.spec.send_to_queue:
            if queue is None:
                raise ValueError(f"{self.name} needs the ingestion queue")
            queue.grant_send_messages(self.role)
        if self.spec.start_execution:
            if state_machine is None:
                raise ValueError(f"{self.name} needs the state machine")
            state_machine.grant_start_execution(self.role)
        if self.spec.invokes:
            stack = Stack.of(self)
            # By name (every function's name is fixed): no reference to another stack's function.
            arns = [
                stack.format_arn(
                    service="lambda",
                    resource="function",
                    resource_name=resources.function_name(self.stage, target),
                    arn_format=ArnFormat.COLON_RESOURCE_NAME,
                )
                for target in self.spec.invokes
            ]
            # The callee's live alias only: what citegate.platform.resources.invoke_target names.
            self.role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["lambda:InvokeFunction"],
                    resources=[f"{arn}:{resources.SERVING_ALIAS}" for arn in arns],
                )
            )


# The streaming entries run under the AWS Lambda Web Adapter (citegate.api.stream_app): its public
# layer, as an exec wrapper that starts the folder's run.sh and streams the app's response.
# Published by AWS in every commercial region from this account (China: other accounts).
LWA_ACCOUNT = "753240598075"
LWA_LAYER_VERSION = 26
STREAM_HANDLER = "run.sh"
LWA_PORT = 8000  # any port but 9001 (the Runtime API) and 3000 (Lambda Insights)


def lwa_environment() -> dict[str, str]:
    from citegate.api.stream_app import READY_PATH

    return {
        "AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap",
        "AWS_LWA_INVOKE_MODE": "response_stream",
        "AWS_LWA_PORT": str(LWA_PORT),
        "AWS_LWA_READINESS_CHECK_PATH": READY_PATH,
    }


def lwa_layer(scope: Construct, architecture: lambda_.Architecture) -> lambda_.ILayerVersion:
    name = (
        "LambdaAdapterLayerArm64"
        if architecture.name == lambda_.Architecture.ARM_64.name
        else "LambdaAdapterLayerX86"
    )
    arn = f"arn:{Aws.PARTITION}:lambda:{Aws.REGION}:{LWA_ACCOUNT}:layer:{name}:{LWA_LAYER_VERSION}"
    return lambda_.LayerVersion.from_layer_version_arn(scope, "WebAdapter", arn)


_SINGLE_ACTIONS: Mapping[str, str] = {"put": "dynamodb:PutItem", "update": "dynamodb:UpdateItem"}
_S3_ACTIONS: Mapping[str, str] = {"get": "s3:GetObject", "put": "s3:PutObject", "delete": "s3:DeleteObject"}


def object_statements(
    bucket: s3.IBucket, objects: Mapping[str, frozenset[ObjectAction]]
) -> list[iam.PolicyStatement]:
    """Object actions on `prefix*` only, and ListBucket restricted to the same prefixes."""
    bucket_arn = bucket.bucket_arn
    statements = []
    listed = []
    for prefix, actions in sorted(objects.items()):
        object_actions = sorted(_S3_ACTIONS[a] for a in actions if a in _S3_ACTIONS)
        if object_actions:
            statements.append(
                iam.PolicyStatement(actions=object_actions, resources=[f"{bucket_arn}/{prefix}*"])
            )
        if "list" in actions:
            listed.append(f"{prefix}*")
    if listed:
        statements.append(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket_arn],
                conditions={"StringLike": {"s3:prefix": listed}},
            )
        )
    return statements
