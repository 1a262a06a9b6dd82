"""The citegate stack: one top-level stack composed of the domain constructs, with nested stacks for
the functions (CloudFormation's 500-resource limit applies per stack).

    Data        tables (resources.TABLES), documents bucket, ingestion queue and its DLQ
    Layers      shared `citegate` layer and the dependency layers (infra/bundling.py)
    Search      OpenSearch domain, its IAM access policy, the deploy-time setup custom resource
    Api         two HTTP APIs (Lambda authorizer / IAM) with their stages, the authorizer function,
                the policy seed
    Monitoring  alarms and a dashboard
  nested:
    Ingestion   six step functions, the state machine (the shared ASL), the SQS consumer
    <Group>Endpoints  per StackGroup: the functions of routes.ROUTES in that group, with their
                routes on both APIs (infra/constructs/endpoints.py)

Every function is an EndpointFunction made by `Functions.create`, which applies the function's
spec (FUNCTION_SPECS): layers, memory, timeout, environment, and its least-privilege grants.

Configuration comes from CDK context (cdk.json or `-c key=value`); see `CitegateConfig`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aws_cdk import Annotations, Arn, ArnFormat, CfnOutput, NestedStack, RemovalPolicy, Stack, Tags
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn

from citegate.api import routes
from citegate.platform import resources
from constructs import Construct
from infra import bundling
from infra.constructs import acknowledge, acknowledge_wildcards, bedrock
from infra.constructs.api import Api, camel
from infra.constructs.data import Data
from infra.constructs.endpoint_function import (
    FUNCTIONS_DIR,
    GROUP_DESCRIPTIONS,
    EndpointFunction,
    FunctionSettings,
    FunctionSpec,
    check_specs,
    group_of,
    routed_functions,
    spec_for,
)
from infra.constructs.endpoints import EndpointStack, ResourceBudget, resource_counts
from infra.constructs.ingestion import Ingestion
from infra.constructs.layers import Layers, architecture_of
from infra.constructs.monitoring import Monitoring
from infra.constructs.search import Search, SearchSettings
from infra.constructs.sources import (
    SYNC_STEP,
    SourceBucket,
    SourceEvents,
    SourceSchedule,
    grant_bucket_reads,
    source_buckets,
)
from infra.constructs.state import StateRefs
from infra.constructs.web_hosting import WebHosting

REPO = Path(__file__).resolve().parents[1]
CONTEXT_PREFIX = "citegate:"
# Lambda gives one full vCPU per 1,769 MB.
MB_PER_VCPU = 1769


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value if str(v))
    return tuple(part.strip() for part in str(value).split(",") if part.strip())


# Per-stage blocks in cdk.json: {"citegate:stages": {"<stage>": {"<field>": value, ...}}}. A value
# given as `citegate:<field>` context (-c on the command line) wins over the stage's block.
STAGES_KEY = CONTEXT_PREFIX + "stages"
# Every `<field>` a stage block (or `citegate:<field>` context) may set.
CONTEXT_FIELDS: frozenset[str] = frozenset(
    {
        "architecture",
        "embedder",
        "embedding_base_url",
        "embedding_model",
        "embedding_dimension",
        "embedding_api_key_secret",
        "llm_base_url",
        "llm_model",
        "llm_verify_citations",
        "llm_api_key_secret",
        "llm_provider",
        "bedrock_model_id",
        "bedrock_embedding_model_id",
        "bedrock_region",
        "bedrock_profile_regions",
        "bedrock_chat_model_ids",
        "github_repository",
        "github_token_secret",
        "oidc_issuer",
        "oidc_audience",
        "oidc_jwks_url",
        "skip_dependency_layer_build",
        "layer_build_dir",
        "page_origins",
        "log_level",
        "log_retention_days",
        "audit_retention_days",
        "throttle_rate",
        "throttle_burst",
        "versioned_bucket",
        "alarm_topic",
        "source_buckets",
        "ingest_reserved_concurrency",
        "snap_start",
        "opensearch_version",
        "opensearch_instance_type",
        "opensearch_data_nodes",
        "opensearch_volume_gb",
        "opensearch_zone_awareness",
        "opensearch_master_type",
        "opensearch_index_prefix",
        "opensearch_chinese_analyzer",
    }
)
# Secret values are never configuration: refuse them, and say what to set instead.
PLAINTEXT_SECRET_FIELDS: Mapping[str, str] = {
    "api_token": "the stack generates it (output ApiTokenSecretArn)",
    "llm_api_key": "llm_api_key_secret",
    "embedding_api_key": "embedding_api_key_secret",
    "github_token": "github_token_secret",
}

# The environment variables that carry a secret's ARN (the API token's is in infra.constructs.api).
# Functions read the value at run time with secretsmanager:GetSecretValue: the value is in no
# template, environment or function configuration.
LLM_API_KEY_SECRET_ENV = "CITEGATE_LLM_API_KEY_SECRET_ARN"
EMBEDDING_API_KEY_SECRET_ENV = "CITEGATE_EMBEDDING_API_KEY_SECRET_ARN"
GITHUB_TOKEN_SECRET_ENV = "CITEGATE_GITHUB_TOKEN_SECRET_ARN"


@dataclass(frozen=True)
class SecretRef:
    """A Secrets Manager secret by reference: its full ARN, or its name (then the ARN is partial,
    which GetSecretValue accepts as SecretId, and IAM matches it with the random `-??????` suffix)."""

    value: str

    def __post_init__(self) -> None:
        if not self.value or any(c.isspace() for c in self.value):
            raise ValueError(f"not a Secrets Manager secret name or ARN: {self.value!r}")
        if self.value.startswith("arn:") and ":secretsmanager:" not in self.value:
            raise ValueError(f"not a Secrets Manager ARN: {self.value!r}")

    @property
    def is_arn(self) -> bool:
        return self.value.startswith("arn:")

    def arn(self, scope: Construct) -> str:
        """What the function is told (SecretId for GetSecretValue)."""
        if self.is_arn:
            return self.value
        return Arn.format(
            {
                "service": "secretsmanager",
                "resource": "secret",
                "resource_name": self.value,
                "arn_format": ArnFormat.COLON_RESOURCE_NAME,
            },
            Stack.of(scope),
        )

    def policy_resource(self, scope: Construct) -> str:
        """What IAM matches: a full ARN as is; a name with Secrets Manager's six-character suffix."""
        return self.value if self.is_arn else f"{self.arn(scope)}-??????"


def _secret(value: Any) -> SecretRef | None:
    return SecretRef(str(value)) if value else None


@dataclass(frozen=True)
class CitegateConfig:
    """Deployment settings. Context keys: `stage`, and `citegate:<field>` for the others."""

    stage: str = "dev"
    # x86_64: the machines that build and test citegate (developers, CI) are x86_64, so the layer's
    # native wheels (numpy, tantivy, lxml, pydantic-core) are the ones the tests exercise, and the
    # embedder's measured throughput holds. arm64 (Graviton, ~20% cheaper per GB-second) works too:
    # -c citegate:architecture=arm64 builds the layers for manylinux2014_aarch64.
    architecture: str = "x86_64"
    # "use": the offline USE model in its own layer; "openai": an OpenAI-compatible (or Bedrock
    # fronted) embeddings endpoint set by embedding_base_url / embedding_model / embedding_dimension.
    embedder: str = "use"
    embedding_base_url: str | None = None
    embedding_model: str | None = None
    embedding_dimension: int | None = None
    llm_base_url: str | None = None
    llm_model: str | None = None
    # The configured model judges whether each cited passage supports its sentence before the
    # answer leaves (citegate.answers.verify): one more model call per answer.
    llm_verify_citations: bool = False
    # Secrets by reference only (Secrets Manager name or ARN, created outside the stack).
    llm_api_key_secret: SecretRef | None = None
    embedding_api_key_secret: SecretRef | None = None
    # "bedrock": the answering and chat model is bedrock_model_id on Amazon Bedrock, invoked with
    # the functions' roles (no key, no secret); embedder "bedrock" embeds with
    # bedrock_embedding_model_id. The region is the stack's unless bedrock_region is set;
    # bedrock_profile_regions narrows a cross-region inference profile's regions
    # (infra/constructs/bedrock.py).
    llm_provider: str = "openai"
    bedrock_model_id: str | None = None
    bedrock_embedding_model_id: str | None = None
    bedrock_region: str | None = None
    bedrock_profile_regions: tuple[str, ...] = ()
    # More Bedrock models a caller may pick in chats and /api/v2/query (CITEGATE_CHAT_MODELS), by
    # IAM like bedrock_model_id, whichever provider answers: ids, inference profiles or ARNs.
    bedrock_chat_model_ids: tuple[str, ...] = ()
    # Feedback sink: GitHub issues in "owner/repo", with a token secret.
    github_repository: str | None = None
    github_token_secret: SecretRef | None = None
    # People's JWTs (authenticated-read): the OIDC provider the authorizer verifies against.
    oidc_issuer: str | None = None
    oidc_audience: str | None = None
    oidc_jwks_url: str | None = None
    skip_dependency_layer_build: bool = False
    layer_build_dir: Path = REPO / "cdk.out" / ".layer-build"
    page_origins: tuple[str, ...] = ("http://localhost:8099",)
    log_level: str = "INFO"
    log_retention_days: int = 30
    # Days an audit record is kept (its TTL; CITEGATE_AUDIT_RETENTION_DAYS). Unset: 400.
    audit_retention_days: float | None = None
    throttle_rate: float = 50.0
    throttle_burst: int = 100
    versioned_bucket: bool = False
    # Where alarms notify: an SNS topic name in the deploy's own account and region (the template
    # stays environment-agnostic), or a full topic ARN. Required for prod.
    alarm_topic: str | None = None
    # The buckets (and prefixes) `s3` sources may follow: the sync and S3 events functions may read
    # them, and their object events keep the sources current (infra/constructs/sources.py).
    source_buckets: tuple[SourceBucket, ...] = ()
    # Reserved concurrency of the ingestion steps that take the burst (parse, embed); 0: none.
    # infra/constructs/ingestion.py says why these numbers.
    ingest_reserved_concurrency: int = 0
    # SnapStart on the functions callers wait on (infra/constructs/endpoint_function.py snap_starts).
    # Python SnapStart bills a snapshot cache per published version and a charge per restore, so
    # it is on for prod by default and off elsewhere unless set.
    snap_start: bool = False
    search: SearchSettings = field(default_factory=SearchSettings)

    @property
    def production(self) -> bool:
        return self.stage == "prod"

    @property
    def removal_policy(self) -> RemovalPolicy:
        return RemovalPolicy.RETAIN if self.production else RemovalPolicy.DESTROY

    @property
    def log_retention(self) -> logs.RetentionDays:
        return _retention(self.log_retention_days)

    @classmethod
    def from_context(cls, get: Any, environ: Mapping[str, str] | None = None) -> CitegateConfig:
        """`get(key)` reads CDK context (node.try_get_context)."""
        import os

        env = os.environ if environ is None else environ

        stage = str(get("stage") or "dev")
        stages = get(STAGES_KEY) or {}
        if not isinstance(stages, Mapping):
            raise ValueError(f"{STAGES_KEY} must map stage names to blocks of settings")
        block = stages.get(stage) or {}
        if not isinstance(block, Mapping):
            raise ValueError(f"{STAGES_KEY}.{stage} must be an object of settings")
        for name in [*block, *(n for n in PLAINTEXT_SECRET_FIELDS if get(CONTEXT_PREFIX + n) is not None)]:
            if name in PLAINTEXT_SECRET_FIELDS:
                raise ValueError(
                    f"{name} is a secret: configure it by reference, never as a value "
                    f"({PLAINTEXT_SECRET_FIELDS[name]})"
                )
            if name not in CONTEXT_FIELDS:
                raise ValueError(
                    f"{STAGES_KEY}.{stage}.{name} is not a setting; known: {sorted(CONTEXT_FIELDS)}"
                )

        def ctx(name: str, default: Any = None) -> Any:
            value = get(CONTEXT_PREFIX + name)
            if value is None or value == "":
                value = block.get(name)
            return default if value is None or value == "" else value

        production = stage == "prod"
        embedder = str(ctx("embedder", "use"))
        if embedder not in bundling.EMBEDDER_ROOTS:
            raise ValueError(f"citegate:embedder must be one of {sorted(bundling.EMBEDDER_ROOTS)}")
        dimension = ctx("embedding_dimension")
        bedrock = bedrock_settings(ctx, embedder)
        if embedder == "bedrock":
            dimension = bedrock["embedding_dimension"]
        if embedder == "openai" and not (ctx("embedding_base_url") and ctx("embedding_model") and dimension):
            raise ValueError(
                "citegate:embedder=openai needs citegate:embedding_base_url, citegate:embedding_model "
                "and citegate:embedding_dimension (the index's vector size is fixed at deploy time)"
            )
        search = SearchSettings(
            engine_version=str(ctx("opensearch_version", SearchSettings.engine_version)),
            instance_type=str(
                ctx("opensearch_instance_type", "r6g.large.search" if production else "t3.medium.search")
            ),
            data_nodes=int(ctx("opensearch_data_nodes", 2 if production else 1)),
            volume_gb=int(ctx("opensearch_volume_gb", 50 if production else 20)),
            zone_awareness=_bool(ctx("opensearch_zone_awareness", production)),
            dedicated_master_type=ctx("opensearch_master_type", "m6g.large.search" if production else None),
            index_prefix=str(ctx("opensearch_index_prefix", resources.APP)),
            chinese_analyzer=str(ctx("opensearch_chinese_analyzer", "smartcn")),
            dimension=int(dimension) if dimension else bundling.EMBEDDING_DIMENSIONS[embedder],
        )
        if bool(ctx("github_repository")) != bool(ctx("github_token_secret")):
            raise ValueError("citegate:github_repository and citegate:github_token_secret go together")
        skip = _bool(ctx("skip_dependency_layer_build", False)) or _bool(
            env.get("CITEGATE_SKIP_DEPENDENCY_LAYER_BUILD", "")
        )
        build_dir = ctx("layer_build_dir") or env.get("CITEGATE_LAYER_BUILD_DIR")
        config = cls(
            stage=stage,
            architecture=str(ctx("architecture", "x86_64")),
            embedder=embedder,
            embedding_base_url=ctx("embedding_base_url"),
            embedding_model=ctx("embedding_model"),
            embedding_dimension=int(dimension) if dimension else None,
            llm_base_url=None if bedrock["llm_provider"] == "bedrock" else ctx("llm_base_url"),
            llm_model=None if bedrock["llm_provider"] == "bedrock" else ctx("llm_model"),
            llm_provider=bedrock["llm_provider"],
            bedrock_model_id=bedrock["bedrock_model_id"],
            bedrock_embedding_model_id=bedrock["bedrock_embedding_model_id"],
            bedrock_region=bedrock["bedrock_region"],
            bedrock_profile_regions=bedrock["bedrock_profile_regions"],
            bedrock_chat_model_ids=bedrock["bedrock_chat_model_ids"],
            llm_verify_citations=_bool(ctx("llm_verify_citations", False)),
            llm_api_key_secret=_secret(ctx("llm_api_key_secret")),
            embedding_api_key_secret=_secret(ctx("embedding_api_key_secret")),
            github_repository=ctx("github_repository"),
            github_token_secret=_secret(ctx("github_token_secret")),
            oidc_issuer=ctx("oidc_issuer"),
            oidc_audience=ctx("oidc_audience"),
            oidc_jwks_url=ctx("oidc_jwks_url"),
            skip_dependency_layer_build=skip,
            layer_build_dir=Path(build_dir) if build_dir else cls.layer_build_dir,
            page_origins=_list(ctx("page_origins", "http://localhost:8099")),
            log_level=str(ctx("log_level", "INFO")).upper(),
            log_retention_days=int(ctx("log_retention_days", 90 if production else 30)),
            audit_retention_days=_positive(ctx("audit_retention_days"), "audit_retention_days"),
            throttle_rate=float(ctx("throttle_rate", 50)),
            throttle_burst=int(ctx("throttle_burst", 100)),
            versioned_bucket=_bool(ctx("versioned_bucket", production)),
            alarm_topic=ctx("alarm_topic"),
            source_buckets=source_buckets(_list(ctx("source_buckets"))),
            ingest_reserved_concurrency=_count(
                ctx("ingest_reserved_concurrency", DEFAULT_PROD_INGEST_CONCURRENCY if production else 0),
                "ingest_reserved_concurrency",
            ),
            snap_start=_bool(ctx("snap_start", production)),
            search=search,
        )
        topic = config.alarm_topic
        if topic and not topic.startswith("arn:") and not SNS_TOPIC_NAME.fullmatch(topic):
            raise ValueError(f"citegate:alarm_topic: {topic!r} is neither an SNS topic name nor an ARN")
        if production:
            problems = production_problems(ctx("page_origins"), ctx("oidc_issuer"), ctx("alarm_topic"))
            if problems:
                raise ValueError(
                    f"stage {stage} would deploy with development defaults. Set these in cdk.json "
                    f"({STAGES_KEY}.{stage}) or with -c {CONTEXT_PREFIX}<field>=<value>:\n  - "
                    + "\n  - ".join(problems)
                )
        return config


BEDROCK_TITAN_V2 = "amazon.titan-embed-text-v2:0"


def bedrock_settings(ctx: Any, embedder: str) -> dict[str, Any]:
    """The Bedrock settings from context, checked: a Bedrock model needs no key, so a key secret
    beside it is a mistake (it would be granted and never used), and is refused."""
    provider = str(ctx("llm_provider", "openai")).strip().lower()
    if provider not in ("openai", "bedrock"):
        raise ValueError(f"citegate:llm_provider must be openai or bedrock, not {provider!r}")
    model = ctx("bedrock_model_id")
    embedding_model = ctx("bedrock_embedding_model_id")
    if provider == "bedrock":
        if not model:
            raise ValueError(
                "citegate:llm_provider=bedrock needs citegate:bedrock_model_id (a model id such as "
                "anthropic.claude-3-5-haiku-20241022-v1:0, or a cross-region inference profile id "
                "such as us.anthropic.claude-3-5-haiku-20241022-v1:0)"
            )
        given = [n for n in ("llm_base_url", "llm_model", "llm_api_key_secret") if ctx(n)]
        if given:
            raise ValueError(
                f"citegate:llm_provider=bedrock calls Bedrock with the functions' IAM roles: "
                f"remove {', '.join('citegate:' + n for n in given)}"
            )
    elif model:
        raise ValueError("citegate:bedrock_model_id is used only with citegate:llm_provider=bedrock")
    dimension = ctx("embedding_dimension")
    if embedder == "bedrock":
        embedding_model = str(embedding_model or BEDROCK_TITAN_V2)
        if ctx("embedding_api_key_secret") or ctx("embedding_base_url"):
            raise ValueError(
                "citegate:embedder=bedrock calls Bedrock with the functions' IAM roles: remove "
                "citegate:embedding_base_url and citegate:embedding_api_key_secret"
            )
        titan = "titan-embed-text-v2" in embedding_model
        dimension = int(dimension or 1024)
        allowed = (256, 512, 1024) if titan else (1024,)
        if dimension not in allowed:
            raise ValueError(
                f"citegate:embedding_dimension={dimension}: {embedding_model} makes vectors of {allowed}"
            )
    elif embedding_model:
        raise ValueError("citegate:bedrock_embedding_model_id is used only with citegate:embedder=bedrock")
    return {
        "llm_provider": provider,
        "bedrock_model_id": str(model) if model else None,
        "bedrock_embedding_model_id": embedding_model,
        "bedrock_region": ctx("bedrock_region"),
        "bedrock_profile_regions": _list(ctx("bedrock_profile_regions")),
        "bedrock_chat_model_ids": tuple(
            dict.fromkeys(m for m in _list(ctx("bedrock_chat_model_ids")) if m != model)
        ),
        "embedding_dimension": dimension,
    }


# prod's reserved concurrency for each of ingest_parse and ingest_embed (ingestion.py says why).
DEFAULT_PROD_INGEST_CONCURRENCY = 10
SNS_TOPIC_NAME = re.compile(r"[A-Za-z0-9_-]{1,256}(?:\.fifo)?")
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0"})


def _is_local_or_plain(url: str) -> bool:
    """Not fit for production: not https, or a loopback/localhost host."""
    parsed = urlsplit(url)
    host = (parsed.hostname or "").lower()
    return parsed.scheme != "https" or host in _LOCAL_HOSTS or host.endswith(".localhost")


def production_problems(page_origins: Any, oidc_issuer: Any, alarm_topic: Any) -> list[str]:
    """What keeps a production stage on development defaults, one line per setting (empty: none).
    `page_origins` is the raw setting: None is unset; an explicit empty list means no pages."""
    problems = []
    if page_origins is None:
        problems.append(
            "page_origins: unset, so the API's and the documents bucket's CORS would allow "
            "http://localhost:8099; give the https origins of the pages that call the API "
            '(comma-separated), or [] in the stage block for "no browser pages"'
        )
    else:
        bad = [origin for origin in _list(page_origins) if _is_local_or_plain(origin)]
        if bad:
            problems.append(f"page_origins: {bad} are not https origins of real pages (localhost or http)")
    if not oidc_issuer:
        problems.append(
            "oidc_issuer: unset, so no person's JWT can be verified; give the https issuer URL of "
            "your OIDC provider (and oidc_audience)"
        )
    elif _is_local_or_plain(str(oidc_issuer)):
        problems.append(f"oidc_issuer: {oidc_issuer!r} is not an https issuer reachable from AWS")
    if not alarm_topic:
        problems.append(
            "alarm_topic: unset, so alarms would notify nobody; give an SNS topic name in the "
            "deploy's account and region (or its ARN) with the on-call subscriptions"
        )
    return problems


def _count(value: Any, name: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError) as error:
        raise ValueError(f"citegate:{name} must be a whole number, got {value!r}") from error
    if number < 0:
        raise ValueError(f"citegate:{name} must be 0 or more, got {number}")
    return number


RETENTIONS: Mapping[int, logs.RetentionDays] = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
}


def _positive(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if float(value) <= 0:
        raise ValueError(f"citegate:{name}={value} must be a number of days above 0")
    return float(value)


def _retention(days: int) -> logs.RetentionDays:
    if days in RETENTIONS:
        return RETENTIONS[days]
    raise ValueError(f"citegate:log_retention_days={days} is not a CloudWatch Logs retention")


class Functions:
    """Creates every EndpointFunction from its spec, with its layers, environment and grants."""

    def __init__(
        self,
        *,
        config: CitegateConfig,
        settings: FunctionSettings,
        layers: Layers,
        search: Search,
    ) -> None:
        self.config = config
        self.settings = settings
        self.layers = layers
        self.search = search
        self.created: dict[str, EndpointFunction] = {}

    def environment(
        self, name: str, spec: FunctionSpec, state: StateRefs, state_machine: sfn.IStateMachine | None
    ) -> dict[str, str]:
        env: dict[str, str] = {}
        if spec.objects:
            env["CITEGATE_BUCKET"] = state.bucket.bucket_name
        if spec.send_to_queue:
            env["CITEGATE_INGEST_QUEUE_URL"] = state.ingest_queue.queue_url
        if spec.start_execution and state_machine is not None:
            env["CITEGATE_STATE_MACHINE_ARN"] = state_machine.state_machine_arn
        # The search index is built with the embedder's dimension, so whoever searches needs the
        # embedder's settings too (building it loads no model).
        if spec.search != "none" or "embedder" in spec.layers:
            env.update(self.search.environment())
            env["CITEGATE_EMBEDDER"] = self.config.embedder
            env["CITEGATE_EMBEDDER_THREADS"] = str(max(1, round(spec.memory_mb / MB_PER_VCPU)))
            if self.config.embedder == "openai":
                env["CITEGATE_EMBEDDING_BASE_URL"] = str(self.config.embedding_base_url)
                env["CITEGATE_EMBEDDING_MODEL"] = str(self.config.embedding_model)
                env["CITEGATE_EMBEDDING_DIMENSION"] = str(self.config.embedding_dimension)
            if self.config.embedder == "bedrock":
                env["CITEGATE_BEDROCK_EMBEDDING_MODEL_ID"] = str(self.config.bedrock_embedding_model_id)
                env["CITEGATE_EMBEDDING_DIMENSION"] = str(self.config.embedding_dimension)
                if self.config.bedrock_region:
                    env["CITEGATE_BEDROCK_REGION"] = self.config.bedrock_region
        if name == routes.AUTHORIZER_FUNCTION:
            for key, value in (
                ("CITEGATE_OIDC_ISSUER", self.config.oidc_issuer),
                ("CITEGATE_OIDC_AUDIENCE", self.config.oidc_audience),
                ("CITEGATE_OIDC_JWKS_URL", self.config.oidc_jwks_url),
            ):
                if value:
                    env[key] = value
        # Every function that answers (an "answering" spec: the llm layer) may use the configured model.
        if "answering" in spec.layers and self.config.llm_base_url and self.config.llm_model:
            env["CITEGATE_LLM_BASE_URL"] = self.config.llm_base_url
            env["CITEGATE_LLM_MODEL"] = self.config.llm_model
            if self.config.llm_verify_citations:
                env["CITEGATE_LLM_VERIFY_CITATIONS"] = "true"
        if "answering" in spec.layers and self.config.llm_provider == "bedrock":
            env["CITEGATE_LLM_PROVIDER"] = "bedrock"
            env["CITEGATE_BEDROCK_MODEL_ID"] = str(self.config.bedrock_model_id)
            if self.config.bedrock_region:
                env["CITEGATE_BEDROCK_REGION"] = self.config.bedrock_region
            if self.config.llm_verify_citations:
                env["CITEGATE_LLM_VERIFY_CITATIONS"] = "true"
        if picks_chat_model(name, spec) and self.config.bedrock_chat_model_ids:
            env["CITEGATE_CHAT_MODELS"] = bedrock_chat_models(self.config)
        if "write" in spec.tables.get("feedback", frozenset()) and self.config.github_repository:
            env["CITEGATE_GITHUB_REPOSITORY"] = self.config.github_repository
        # Who writes audit records sets their TTL from it (DynamoDB's TTL then deletes them).
        if "put" in spec.tables.get("audit", frozenset()) and self.config.audit_retention_days:
            env["CITEGATE_AUDIT_RETENTION_DAYS"] = f"{self.config.audit_retention_days:g}"
        return env

    def secrets(self, name: str, spec: FunctionSpec) -> dict[str, SecretRef]:
        """Environment variable -> secret, for the functions that use the secret (and only those)."""
        config = self.config
        found: dict[str, SecretRef] = {}
        embeds = spec.search != "none" or "embedder" in spec.layers
        if embeds and config.embedder == "openai" and config.embedding_api_key_secret:
            found[EMBEDDING_API_KEY_SECRET_ENV] = config.embedding_api_key_secret
        answers = "answering" in spec.layers
        if answers and config.llm_base_url and config.llm_model and config.llm_api_key_secret:
            found[LLM_API_KEY_SECRET_ENV] = config.llm_api_key_secret
        writes_feedback = "write" in spec.tables.get("feedback", frozenset())
        if writes_feedback and config.github_repository and config.github_token_secret:
            found[GITHUB_TOKEN_SECRET_ENV] = config.github_token_secret
        return found

    def create(
        self,
        scope: Construct,
        name: str,
        *,
        environment: Mapping[str, str] | None = None,
        state_machine: sfn.IStateMachine | None = None,
        spec: FunctionSpec | None = None,
        code_dir: Path | None = None,
    ) -> EndpointFunction:
        """The function `name` (a folder under functions/, or `code_dir` with its own `spec`)."""
        if name in self.created:
            raise ValueError(f"function {name} created twice")
        spec = spec or spec_for(name)
        code_dir = code_dir or FUNCTIONS_DIR / name
        # The tables, bucket and queue by name, as this function's own stack sees them.
        state = StateRefs.of(scope, self.config.stage)
        secrets = self.secrets(name, spec)
        secret_env = {variable: secret.arn(scope) for variable, secret in secrets.items()}
        function = EndpointFunction(
            scope,
            camel(name),
            name=name,
            spec=spec,
            settings=self.settings,
            layers=self.layers.layers_for(name, spec.layers, bundling.folder_size(code_dir)),
            environment={
                **self.environment(name, spec, state, state_machine),
                **secret_env,
                **(environment or {}),
            },
            code_dir=code_dir,
        )
        for secret in secrets.values():
            grant_secret_value(function, secret.policy_resource(function))
        _grant_bedrock(self.config, function, spec, name)
        function.grant_resources(
            tables=state.tables,
            bucket=state.bucket,
            queue=state.ingest_queue,
            state_machine=state_machine,
        )
        if spec.search != "none":
            self.search.grant(function, spec.search)
        self.created[name] = function
        return function


# Spec 001's chats and spec 003's query: the routes whose caller picks a chat model by id.
CHAT_MODEL_TOOLS = frozenset({"chat", "query_v2"})


def picks_chat_model(name: str, spec: FunctionSpec) -> bool:
    """A function (or its streaming twin) that lists or uses the chat models a caller may pick."""
    base = name.removesuffix("_stream") if spec.entry == "stream" else name
    return any(r.function == base and r.tool in CHAT_MODEL_TOOLS for r in routes.ROUTES)


def bedrock_chat_models(config: CitegateConfig) -> str:
    """CITEGATE_CHAT_MODELS for the Bedrock chat models (citegate.agents.models.configured_model)."""
    region = {"region": config.bedrock_region} if config.bedrock_region else {}
    return json.dumps(
        [{"id": m, "provider": "bedrock", **region} for m in config.bedrock_chat_model_ids],
        separators=(",", ":"),
    )


def _grant_bedrock(config: CitegateConfig, function: EndpointFunction, spec: FunctionSpec, name: str) -> None:
    """Bedrock models by IAM: the answering model for the functions that answer (Converse and
    ConverseStream), the chat models a caller may pick for those of them that take one, the
    embedding model for those that embed (InvokeModel only)."""
    region = config.bedrock_region or Stack.of(function).region
    regions = config.bedrock_profile_regions
    if "answering" in spec.layers and config.llm_provider == "bedrock" and config.bedrock_model_id:
        bedrock.grant_invoke(
            function, config.bedrock_model_id, region=region, profile_regions=regions, stream=True
        )
    if "answering" in spec.layers and picks_chat_model(name, spec):
        for model_id in config.bedrock_chat_model_ids:
            bedrock.grant_invoke(function, model_id, region=region, profile_regions=regions, stream=True)
    embeds = spec.search != "none" or "embedder" in spec.layers
    if embeds and config.embedder == "bedrock" and config.bedrock_embedding_model_id:
        bedrock.grant_invoke(
            function, config.bedrock_embedding_model_id, region=region, profile_regions=regions, stream=False
        )


def grant_secret_value(function: EndpointFunction, secret_arn: str) -> None:
    """secretsmanager:GetSecretValue on one secret, for this function's role only (no Describe, no
    List: the function reads the value by the ARN in its environment)."""
    function.role.add_to_principal_policy(
        iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[secret_arn])
    )
    if secret_arn.endswith("-??????"):
        acknowledge_wildcards(
            function,
            "A secret configured by name: IAM matches its ARN with the six random characters Secrets "
            "Manager appends (<name>-??????), which name exactly one secret.",
            [secret_arn],
        )


class CitegateStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: CitegateConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        for name in check_specs():
            Annotations.of(self).add_warning_v2(
                f"citegate:missing-spec:{name}",
                f"functions/{name} has no FUNCTION_SPECS entry (infra/constructs/endpoint_function.py): "
                "it deploys with the governed baseline grants only.",
            )
        self.config = config
        stage = config.stage
        Tags.of(self).add("app", resources.APP)
        Tags.of(self).add("stage", stage)

        self.data = Data(
            self,
            "Data",
            stage=stage,
            page_origins=config.page_origins,
            removal_policy=config.removal_policy,
            versioned_bucket=config.versioned_bucket,
        )
        self.layers = Layers(
            self,
            "Layers",
            stage=stage,
            architecture=config.architecture,
            embedder=config.embedder,
            build_dir=config.layer_build_dir,
            skip_dependency_build=config.skip_dependency_layer_build,
            removal_policy=config.removal_policy,
        )
        self.search = Search(
            self,
            "Search",
            stage=stage,
            settings=config.search,
            removal_policy=config.removal_policy,
            log_retention=config.log_retention,
        )
        function_settings = FunctionSettings(
            stage=stage,
            architecture=architecture_of(config.architecture),
            log_level=config.log_level,
            log_retention=config.log_retention,
            removal_policy=config.removal_policy,
            environment={"CITEGATE_STAGE": stage, "CITEGATE_RUNTIME": "aws"},
            snap_start=config.snap_start,
        )
        self.functions = Functions(
            config=config, settings=function_settings, layers=self.layers, search=self.search
        )
        self.api = Api(
            self,
            "Api",
            stage=stage,
            make_function=self.functions.create,
            page_origins=config.page_origins,
            throttle_rate=config.throttle_rate,
            throttle_burst=config.throttle_burst,
            log_retention=config.log_retention,
            removal_policy=config.removal_policy,
        )
        # Nested stacks: ingestion, and the endpoint functions by group (their own resources only;
        # shared resources are referenced by name or passed as parameters).
        ingestion_stack = NestedStack(
            self, "IngestionStack", description="citegate ingestion: steps, state machine, queue consumer"
        )
        ingestion_stack.node.add_dependency(self.data)
        self.ingestion = Ingestion(
            ingestion_stack,
            "Ingestion",
            stage=stage,
            make_function=self.functions.create,
            queue=StateRefs.of(ingestion_stack, stage).ingest_queue,
            log_retention=config.log_retention,
            removal_policy=config.removal_policy,
            reserved_concurrency=config.ingest_reserved_concurrency,
        )
        # Scheduled source syncs feed the same queue: they live with ingestion.
        self.source_schedule = SourceSchedule(
            ingestion_stack, "SourceSchedule", stage=stage, make_function=self.functions.create
        )
        # The sync function (a task of the state machine) reads the source buckets; so does the S3
        # events function, whose rules are one per bucket (none when no bucket is named).
        self.source_sync = self.ingestion.steps[SYNC_STEP]
        grant_bucket_reads(self.source_sync, config.source_buckets)
        self.source_events = SourceEvents(
            ingestion_stack,
            "SourceEvents",
            buckets=config.source_buckets,
            make_function=self.functions.create,
        )
        by_group: dict[str, list[str]] = {}
        for name in routed_functions():
            by_group.setdefault(group_of(name), []).append(name)
        self.endpoints: dict[str, EndpointStack] = {}
        for group in GROUP_DESCRIPTIONS:  # a fixed order: logical ids do not depend on ROUTES' order
            if group in by_group:
                self.endpoints[group] = EndpointStack(
                    self,
                    f"{group.title()}Endpoints",
                    group=group,
                    functions=by_group[group],
                    make_function=self.functions.create,
                    api=self.api,
                    depends_on=[self.data],
                )
        self.nested_stacks: dict[str, NestedStack] = {"ingestion": ingestion_stack, **self.endpoints}
        self.opensearch_setup = self.search.add_setup(layers=self.layers, function_settings=function_settings)
        self.policy_seed = self.api.add_policy_seed(
            make_function=self.functions.create,
            policies_table=self.data.tables[resources.POLICIES.logical],
            log_retention=config.log_retention,
            removal_policy=config.removal_policy,
        )
        # The $default route lives with the other open route (GET /healthz) and its group's stack.
        open_group = group_of(next(r.function for r in routes.ROUTES if r.auth == "none"))
        self.unmatched_route = self.api.add_unmatched_route(
            self.endpoints[open_group], make_function=self.functions.create
        )
        ingestion_functions = {fn.name: fn for fn in self.ingestion.steps.values()}
        ingestion_functions[self.ingestion.consumer.name] = self.ingestion.consumer
        ingestion_functions[self.source_schedule.function.name] = self.source_schedule.function
        ingestion_functions[self.source_events.function.name] = self.source_events.function
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            stage=stage,
            dead_letter_queue=self.data.dead_letter_queue,
            ingest_queue=self.data.ingest_queue,
            apis={"public": self.api.public_api, "agent": self.api.agent_api},
            ingestion_functions=ingestion_functions,
            state_machine=self.ingestion.state_machine,
            alarm_topic=config.alarm_topic,
            search=self.search,
            authorizer=self.api.authorizer_function,
            reserved_ingestion=self.ingestion.reserved,
        )
        # The pages (widget.js, console/) behind CloudFront; the console calls the public API. Its
        # CloudFront origin goes in `page_origins` for the API's CORS (docs/deploy.md): the API
        # cannot name the distribution itself, whose CSP names the API (a cycle).
        self.web = WebHosting(
            self,
            "Web",
            api_urls=[self.api.public_api.api_endpoint],
            upload_origin=f"https://{self.data.bucket.bucket_regional_domain_name}",
            oidc_issuer=config.oidc_issuer,
            removal_policy=config.removal_policy,
            log_retention=config.log_retention,
        )
        self.node.add_validation(
            ResourceBudget(self, {stack.node.id: stack for stack in self.nested_stacks.values()})
        )

        CfnOutput(self, "DocumentsBucketName", value=self.data.bucket.bucket_name)
        CfnOutput(self, "IngestQueueUrl", value=self.data.ingest_queue.queue_url)
        CfnOutput(self, "StateMachineArn", value=self.ingestion.state_machine.state_machine_arn)
        CfnOutput(self, "OpenSearchEndpoint", value=self.search.endpoint_url)
        acknowledge(
            self,
            "AwsSolutions-L1",
            "citegate's functions run python3.12, the runtime its layers are built for (cp312, "
            "infra/bundling.py) and the first Python runtime with SnapStart.",
        )

    def resource_counts(self) -> dict[str, int]:
        """Resources per stack: this one (each nested stack counts once here) and each nested one."""
        return resource_counts(self, {stack.node.id: stack for stack in self.nested_stacks.values()})


__all__ = ["CitegateConfig", "CitegateStack", "Functions", "SecretRef", "camel", "grant_secret_value"]
