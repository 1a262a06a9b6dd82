"""One construct for every Lambda function, and the table of what each function may touch.

Every function (the routes', the authorizer, the queue consumer, the six ingestion steps, the
OpenSearch setup custom resource) is an `EndpointFunction`: Python 3.11, `handler.lambda_handler`
from its own folder, the shared layer plus the dependency layers it needs, X-Ray active tracing,
Powertools settings, its own log group with a retention, and its own role.

Least privilege: `FUNCTION_SPECS` says, per function, which tables it reads or writes, which S3
prefixes it may get, put, delete or list, whether it may send to the ingestion queue or start the
state machine, and how it uses the search domain. It was derived from the code paths in
layers/citegate (stores, ingestion service and steps, knowledge bases, retrieval, answers) and the
handlers; `grant_resources` turns it into IAM statements and nothing else grants anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from citegate import resources, routes

REPO = Path(__file__).resolve().parents[2]
FUNCTIONS_DIR = REPO / "functions"

TableAccess = Literal["read", "write"]
SearchAccess = Literal["none", "read", "write", "admin"]
ObjectAction = Literal["get", "put", "delete", "list"]
# Extra dependency layers beyond shared + base (see infra/bundling.py).
ExtraLayer = Literal["parsing", "embedder"]

# Lambda's maximum for functions behind API Gateway HTTP APIs is bounded by the 30 s integration
# timeout; 29 s leaves API Gateway time to return the function's own error.
API_TIMEOUT_S = 29


@dataclass(frozen=True)
class FunctionSpec:
    description: str
    memory_mb: int = 512
    timeout_s: int = API_TIMEOUT_S
    tables: Mapping[str, TableAccess] = field(default_factory=dict)  # TableShape.logical -> access
    objects: Mapping[str, frozenset[ObjectAction]] = field(default_factory=dict)  # S3 prefix -> actions
    send_to_queue: bool = False
    start_execution: bool = False
    search: SearchAccess = "none"
    layers: tuple[ExtraLayer, ...] = ()


def _acts(*names: ObjectAction) -> frozenset[ObjectAction]:
    return frozenset(names)


R: TableAccess = "read"
W: TableAccess = "write"

# What each function needs, from its code path:
# - every route checks the caller's knowledge base first (kbs read);
# - building the search index builds the embedder object (class attributes only, no model load and
#   no DynamoDB call), so only functions that embed get the embedder layer or the embeddings table;
# - S3 HeadObject on a missing key answers 403 instead of 404 without s3:ListBucket on that prefix,
#   so functions that probe for an object may list that prefix.
FUNCTION_SPECS: dict[str, FunctionSpec] = {
    "healthz": FunctionSpec("GET /healthz: metadata and search checks", tables={"kbs": R}, search="read"),
    "kb_create": FunctionSpec("POST /v1/kb", tables={"kbs": W}),
    "kb_list": FunctionSpec("GET /v1/kb", tables={"kbs": R}),
    "kb_get": FunctionSpec("GET /v1/kb/{kb_id}", tables={"kbs": R}),
    "kb_update": FunctionSpec("PATCH /v1/kb/{kb_id}", tables={"kbs": W}),
    "upload_create": FunctionSpec(
        "POST /v1/kb/{kb_id}/uploads: presigned PUT (signed with this role, so it may put uploads/)",
        tables={"kbs": R},
        objects={"uploads/": _acts("put")},
    ),
    "document_ingest": FunctionSpec(
        "POST /v1/kb/{kb_id}/documents: store raw, record task and document, enqueue",
        memory_mb=1024,
        tables={"kbs": W, "documents": W, "tasks": W},
        objects={
            "raw/": _acts("put", "delete", "list"),
            "uploads/": _acts("get", "delete", "list"),
        },
        send_to_queue=True,
    ),
    "document_list": FunctionSpec(
        "GET /v1/kb/{kb_id}/documents", tables={"kbs": R, "documents": R}
    ),
    "document_get": FunctionSpec(
        "GET /v1/kb/{kb_id}/documents/{document_id}", tables={"kbs": R, "documents": R}
    ),
    "document_delete": FunctionSpec(
        "DELETE /v1/kb/{kb_id}/documents/{document_id}: record, chunks, parents, files",
        tables={"kbs": W, "documents": W, "parents": W},
        objects={"raw/": _acts("delete", "list")},
        search="write",
    ),
    "kb_reindex": FunctionSpec(
        "POST /v1/kb/{kb_id}/reindex: one queued task per document",
        tables={"kbs": R, "documents": W, "tasks": W},
        send_to_queue=True,
    ),
    "task_get": FunctionSpec("GET /v1/tasks/{task_id}", tables={"tasks": R, "kbs": R}),
    "kb_retrieve": FunctionSpec(
        "POST /v1/kb/{kb_id}/retrieve: embeds the query, hybrid search",
        memory_mb=2048,
        tables={"kbs": R},
        search="read",
        layers=("embedder",),
    ),
    "kb_ask": FunctionSpec(
        "POST /v1/kb/{kb_id}/ask: retrieve, parents as context, evidence-bound answer",
        memory_mb=2048,
        tables={"kbs": R, "parents": R},
        search="read",
        layers=("embedder",),
    ),
    "kb_resolve_refs": FunctionSpec(
        "POST /v1/kb/{kb_id}/resolve_refs", tables={"kbs": R}, search="read"
    ),
    routes.AUTHORIZER_FUNCTION: FunctionSpec(
        "Lambda authorizer: credentials to a principal (touches no resource)", memory_mb=256, timeout_s=10
    ),
    routes.INGEST_CONSUMER_FUNCTION: FunctionSpec(
        "SQS consumer: one Step Functions execution per task",
        memory_mb=256,
        timeout_s=resources.INGEST_CONSUMER_TIMEOUT_SECONDS,
        tables={"tasks": R},
        start_execution=True,
    ),
    "ingest_parse": FunctionSpec(
        "Ingestion step: raw document to text (pypdf, trafilatura)",
        memory_mb=1769,  # one full vCPU: PDF and HTML parsing are CPU-bound
        timeout_s=300,
        tables={"documents": W, "tasks": W},
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
        tables={"embeddings": W},
        objects={"work/": _acts("get", "put")},
        layers=("embedder",),
    ),
    "ingest_index": FunctionSpec(
        "Ingestion step: parents to DynamoDB, children to OpenSearch",
        memory_mb=1024,
        timeout_s=300,
        tables={"documents": R, "kbs": R, "parents": W},
        objects={"work/": _acts("get")},
        search="write",
    ),
    "ingest_finalize": FunctionSpec(
        "Ingestion step: mark the task succeeded, remove work files",
        memory_mb=256,
        timeout_s=60,
        tables={"documents": W, "tasks": W},
        objects={"work/": _acts("delete", "list")},
    ),
    "ingest_mark_failed": FunctionSpec(
        "Ingestion step: record the failure reason, remove work files",
        memory_mb=256,
        timeout_s=60,
        tables={"documents": W, "tasks": W},
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


def function_folders() -> list[str]:
    return sorted(p.name for p in FUNCTIONS_DIR.iterdir() if (p / "handler.py").is_file())


def check_specs() -> None:
    """Every folder under functions/ has a spec and every spec a folder; every route's function too."""
    folders = set(function_folders())
    specs = set(FUNCTION_SPECS)
    if folders != specs:
        raise ValueError(
            f"functions/ and FUNCTION_SPECS differ: no spec for {sorted(folders - specs)}, "
            f"no folder for {sorted(specs - folders)}"
        )
    for route in routes.ROUTES:
        if route.function not in folders:
            raise ValueError(f"route {route.route_key} names a missing function {route.function!r}")


@dataclass(frozen=True)
class FunctionSettings:
    """What every function shares: stage, architecture, logging and the common environment."""

    stage: str
    architecture: lambda_.Architecture
    log_level: str
    log_retention: logs.RetentionDays
    removal_policy: RemovalPolicy
    environment: Mapping[str, str]


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
            **(environment or {}),
        }
        self.function = lambda_.Function(
            self,
            "Function",
            function_name=self.function_name,
            description=spec.description[:256],
            runtime=lambda_.Runtime.PYTHON_3_11,
            architecture=settings.architecture,
            handler="handler.lambda_handler",
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
        )
        # Its own log group only (no AWSLambdaBasicExecutionRole: that allows every log group).
        self.log_group.grant_write(self.role)

    # ------------------------------------------------------------------ grants

    def grant_resources(
        self,
        *,
        tables: Mapping[str, object],
        bucket: object | None = None,
        queue: object | None = None,
        state_machine: object | None = None,
    ) -> None:
        """Turn this function's spec into IAM statements on the given resources (see the module doc).

        tables: TableShape.logical -> dynamodb.ITable; bucket: s3.IBucket; queue: sqs.IQueue;
        state_machine: sfn.IStateMachine. Search access is granted by the search construct, which
        also writes the domain's access policy.
        """
        for logical, access in self.spec.tables.items():
            table = tables[logical]
            if access == "write":
                table.grant_read_write_data(self.role)  # type: ignore[attr-defined]
            else:
                table.grant_read_data(self.role)  # type: ignore[attr-defined]
        if self.spec.objects:
            if bucket is None:
                raise ValueError(f"{self.name} needs the documents bucket")
            for statement in object_statements(bucket, self.spec.objects):
                self.role.add_to_principal_policy(statement)
        if self.spec.send_to_queue:
            if queue is None:
                raise ValueError(f"{self.name} needs the ingestion queue")
            queue.grant_send_messages(self.role)  # type: ignore[attr-defined]
        if self.spec.start_execution:
            if state_machine is None:
                raise ValueError(f"{self.name} needs the state machine")
            state_machine.grant_start_execution(self.role)  # type: ignore[attr-defined]


_S3_ACTIONS: Mapping[str, str] = {"get": "s3:GetObject", "put": "s3:PutObject", "delete": "s3:DeleteObject"}


def object_statements(
    bucket: object, objects: Mapping[str, frozenset[ObjectAction]]
) -> list[iam.PolicyStatement]:
    """Object actions on `prefix*` only, and ListBucket restricted to the same prefixes."""
    bucket_arn: str = bucket.bucket_arn  # type: ignore[attr-defined]
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


def stack_of(scope: Construct) -> Stack:
    return Stack.of(scope)
