"""The search engine: an Amazon OpenSearch Service domain, its access policy and its deploy-time setup.

Why a managed domain and not OpenSearch Serverless: citegate's hybrid search runs in search
pipelines (normalization-processor for min-max fusion, and score-ranker-processor for RRF, which
Serverless does not offer), writes chunks with their own `_id` (= ref_id, so a re-ingested document
replaces its chunks; Serverless vector collections refuse custom ids) and removes a document's
stale chunks with `delete_by_query` (not supported by Serverless). A domain runs all of it as the
local conformance suite expects.

Access: IAM only (SigV4-signed requests), decided by the functions' identity policies. Each role
that searches, indexes or sets the domain up carries path-scoped statements: readers may only POST
to the chunks index's `_search`, `_msearch`, `_mget` and `_count`; writers may also change documents
of that index and `_bulk`; only the setup function may touch templates and search pipelines. No
fine-grained access control: with no internal users there is nothing for it to map.

The domain's own access policy (its `AccessPolicies` property, set when the domain is created)
delegates to IAM: it allows `es:ESHttp*` on the domain's subresources to principals of this
account only (`arn:<partition>:iam::<account>:root`), so a request is allowed exactly when the
caller's identity policy allows it. That is the access the functions had before, because within
one account IAM allows a request that either the identity or the resource policy allows: naming
each role in the domain's policy restricted nobody. Why not name them anyway: most roles live in
nested stacks that need the domain's endpoint first, so the property cannot refer to them (a
cycle), and CDK's workaround (`Domain.add_access_policies`, a custom resource calling
es:UpdateDomainConfig) replies with the whole policy (about 14.7 KB for 16 roles with real ARNs);
CloudFormation refuses a custom-resource reply over 4,096 bytes (aws-cdk issue 29093), and the
first deploy rolled back. A property needs no reply at all, grows with nothing, and is in place
before any function can call the domain. tests/infrastructure/test_deploy.py keeps every
custom resource's reply under the limit; test_stack.py checks this policy.

At deploy time a custom resource calls `citegate.knowledge.search.opensearch.setup_opensearch` (index
template, index, one search pipeline per fusion config), so the functions never need setup rights.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from aws_cdk import CustomResource, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_opensearchservice as opensearch
from aws_cdk import custom_resources as cr

from citegate.platform import resources
from constructs import Construct
from infra.constructs import acknowledge, acknowledge_provider, acknowledge_wildcards
from infra.constructs.endpoint_function import (
    OPENSEARCH_SETUP_FUNCTION,
    OPENSEARCH_SETUP_SPEC,
    EndpointFunction,
    FunctionSettings,
)
from infra.constructs.layers import Layers

REPO = Path(__file__).resolve().parents[2]
SETUP_CODE = REPO / "infra" / "custom_resources" / "opensearch_setup"
OPENSEARCH_MODULE = REPO / "layers" / "citegate" / "knowledge" / "search" / "opensearch.py"

Access = Literal["read", "write", "admin"]

READ_PATHS = ("_search", "_msearch", "_mget", "_count")


@dataclass(frozen=True)
class SearchSettings:
    engine_version: str = "OpenSearch_2.19"  # 2.19+: score-ranker-processor (RRF) and pagination_depth
    instance_type: str = "t3.medium.search"
    data_nodes: int = 1
    volume_gb: int = 20
    zone_awareness: bool = False
    dedicated_master_type: str | None = None  # e.g. "m6g.large.search": three dedicated masters
    index_prefix: str = resources.APP
    chinese_analyzer: str = "smartcn"
    dimension: int = 512
    # Fusion configs whose search pipelines the setup creates (citegate.knowledge.search.base.FusionConfig).
    fusions: tuple[tuple[str, float, int], ...] = (("min_max", 0.7, 60), ("rrf", 0.7, 60))


def domain_name(stage: str) -> str:
    """OpenSearch domain names: 3-28 characters, lowercase letters, digits and hyphens."""
    name = f"{resources.APP}-{stage}"
    if not (3 <= len(name) <= 28) or not name.replace("-", "").isalnum() or not name.islower():
        raise ValueError(f"stage {stage!r} makes an invalid OpenSearch domain name {name!r}")
    return name


def index_name(prefix: str) -> str:
    # Mirrors citegate.knowledge.search.opensearch.index_name without importing opensearch-py at synth time.
    return f"{prefix}-chunks"


def access_policy(domain_arn: str) -> dict[str, object]:
    """The domain's resource policy: HTTP access for this account's principals, as their identity
    policies allow (a delegation to IAM; see the module docstring)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": iam.AccountRootPrincipal().arn},
                "Action": "es:ESHttp*",
                "Resource": f"{domain_arn}/*",
            }
        ],
    }


def replicas_for(data_nodes: int) -> int:
    """One replica when there is another data node to hold it; none on a single node, where a
    replica can never be assigned and the cluster would stay yellow."""
    return 1 if data_nodes > 1 else 0


def search_statements(domain_arn: str, prefix: str, access: Access) -> list[iam.PolicyStatement]:
    index_arn = f"{domain_arn}/{index_name(prefix)}"
    if access == "admin":
        return [
            iam.PolicyStatement(
                actions=["es:ESHttpGet", "es:ESHttpHead", "es:ESHttpPost", "es:ESHttpPut", "es:ESHttpDelete"],
                resources=[domain_arn, f"{domain_arn}/*"],
            )
        ]
    statements = [
        iam.PolicyStatement(
            actions=["es:ESHttpGet", "es:ESHttpHead"], resources=[index_arn, f"{index_arn}/*"]
        ),
        iam.PolicyStatement(
            actions=["es:ESHttpPost"], resources=[f"{index_arn}/{path}" for path in READ_PATHS]
        ),
    ]
    if access == "write":
        statements.append(
            iam.PolicyStatement(
                actions=["es:ESHttpPost", "es:ESHttpPut", "es:ESHttpDelete"],
                resources=[f"{index_arn}/*", f"{domain_arn}/_bulk"],
            )
        )
    return statements


class Search(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        settings: SearchSettings,
        removal_policy: RemovalPolicy,
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.settings = settings
        self.domain_name = domain_name(stage)
        # Built from the name, not the domain's attribute: the domain's own access policy uses it.
        self.domain_arn = stack.format_arn(service="es", resource="domain", resource_name=self.domain_name)

        self.log_groups = {
            kind: logs.LogGroup(
                self,
                f"{kind}Logs",
                log_group_name=f"/aws/opensearch/{self.domain_name}/{kind.lower()}",
                retention=log_retention,
                removal_policy=removal_policy,
            )
            for kind in ("SearchSlow", "IndexSlow", "Application")
        }
        # Our own resource policy (instead of the L2 Domain's custom resource) lets OpenSearch
        # write to those log groups and nothing else.
        logs_policy = logs.CfnResourcePolicy(
            self,
            "LogsPolicy",
            policy_name=f"{self.domain_name}-opensearch-logs",
            policy_document=stack.to_json_string(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "es.amazonaws.com"},
                            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                            "Resource": [f"{g.log_group_arn}" for g in self.log_groups.values()],
                            "Condition": {
                                "StringEquals": {"aws:SourceAccount": stack.account},
                                "ArnLike": {"aws:SourceArn": self.domain_arn},
                            },
                        }
                    ],
                }
            ),
        )

        zone_awareness = (
            opensearch.ZoneAwarenessConfig(enabled=True, availability_zone_count=2)
            if settings.zone_awareness
            else opensearch.ZoneAwarenessConfig(enabled=False)
        )
        self.domain = opensearch.Domain(
            self,
            "Domain",
            domain_name=self.domain_name,
            version=opensearch.EngineVersion.open_search(settings.engine_version.removeprefix("OpenSearch_")),
            capacity=opensearch.CapacityConfig(
                data_nodes=settings.data_nodes,
                data_node_instance_type=settings.instance_type,
                master_nodes=3 if settings.dedicated_master_type else None,
                master_node_instance_type=settings.dedicated_master_type,
                multi_az_with_standby_enabled=False,
            ),
            ebs=opensearch.EbsOptions(
                volume_size=settings.volume_gb, volume_type=ec2.EbsDeviceVolumeType.GP3
            ),
            zone_awareness=zone_awareness,
            encryption_at_rest=opensearch.EncryptionAtRestOptions(enabled=True),
            node_to_node_encryption=True,
            enforce_https=True,
            tls_security_policy=opensearch.TLSSecurityPolicy.TLS_1_2,
            logging=opensearch.LoggingOptions(
                slow_search_log_enabled=True,
                slow_search_log_group=self.log_groups["SearchSlow"],
                slow_index_log_enabled=True,
                slow_index_log_group=self.log_groups["IndexSlow"],
                app_log_enabled=True,
                app_log_group=self.log_groups["Application"],
            ),
            suppress_logs_resource_policy=True,
            removal_policy=removal_policy,
        )
        self.domain.node.add_dependency(logs_policy)
        # The access policy as the domain's own property: no custom resource, no reply (docstring).
        cfn_domain: opensearch.CfnDomain = self.domain.node.default_child  # type: ignore[assignment]
        cfn_domain.access_policies = access_policy(self.domain_arn)
        self.endpoint_url = f"https://{self.domain.domain_endpoint}"
        self.grantees: dict[str, Access] = {}

        acknowledge(
            self.domain,
            "AwsSolutions-OS1",
            "Public endpoint on purpose: only SigV4-signed requests of this account's principals "
            "whose identity policies allow them are accepted (the function roles, path-scoped), and "
            "a VPC would put every function in it (NAT gateways for the model endpoints, VPC "
            "endpoints for DynamoDB, S3, SQS and Step Functions).",
        )
        acknowledge(
            self.domain,
            "AwsSolutions-OS3",
            "Access is by IAM identity (the function roles' identity policies), not by source IP: "
            "Lambda has no fixed addresses outside a VPC.",
        )
        if not settings.dedicated_master_type:
            acknowledge(
                self.domain,
                "AwsSolutions-OS4",
                "Dedicated master nodes are a production setting (-c citegate:opensearch_master_type"
                "=...; on by default for stage prod); other stages run without.",
            )
        if not settings.zone_awareness:
            acknowledge(
                self.domain,
                "AwsSolutions-OS7",
                "Zone awareness is a production setting (-c citegate:opensearch_zone_awareness=true "
                "with an even number of data nodes; on by default for stage prod); other stages use "
                "one node.",
            )

    # ------------------------------------------------------------------ grants

    def grant(self, function: EndpointFunction, access: Access) -> None:
        """The function's identity policy (the domain's own policy delegates to IAM)."""
        # The domain's ARN as the function's own stack writes it (from the name: no cross-stack reference).
        function_stack = Stack.of(function)
        local_arn = function_stack.format_arn(service="es", resource="domain", resource_name=self.domain_name)
        statements = search_statements(local_arn, self.settings.index_prefix, access)
        for statement in statements:
            function.role.add_to_principal_policy(statement)
        self.grantees[function.name] = access
        acknowledge_wildcards(
            function,
            "OpenSearch HTTP access is scoped to the chunks index (documents are addressed by ref_id "
            "under it, queries by _search/_msearch/_mget/_count); only the deploy-time setup "
            "function may reach the whole domain (templates, search pipelines).",
            [r for statement in statements for r in statement.resources if "*" in r],
        )

    def environment(self) -> dict[str, str]:
        return {
            "CITEGATE_SEARCH_ENGINE": "opensearch",
            "OPENSEARCH_URL": self.endpoint_url,
            "CITEGATE_OPENSEARCH_INDEX_PREFIX": self.settings.index_prefix,
            # The domain accepts only SigV4-signed requests, and the deploy-time setup owns the
            # template, index and pipelines: the layer's OpenSearch client must sign and not set up.
            "CITEGATE_OPENSEARCH_AUTH": "aws-sigv4",
            "CITEGATE_OPENSEARCH_AUTO_SETUP": "false",
        }

    # ------------------------------------------------------------------ deploy-time setup

    def add_setup(self, *, layers: Layers, function_settings: FunctionSettings) -> CustomResource:
        """The custom resource that creates the template, the index and the search pipelines."""
        setup = EndpointFunction(
            self,
            "SetupFunction",
            name=OPENSEARCH_SETUP_FUNCTION,
            spec=OPENSEARCH_SETUP_SPEC,
            settings=function_settings,
            layers=layers.layers_for(OPENSEARCH_SETUP_FUNCTION, (), code_size=_size(SETUP_CODE)),
            code_dir=SETUP_CODE,
        )
        self.grant(setup, "admin")
        provider_logs = logs.LogGroup(
            self,
            "SetupProviderLogs",
            retention=function_settings.log_retention,
            removal_policy=function_settings.removal_policy,
        )
        provider = cr.Provider(
            self, "SetupProvider", on_event_handler=setup.function, log_group=provider_logs
        )
        fusions = [
            {"method": method, "lexical_weight": weight, "rank_constant": rank}
            for method, weight, rank in self.settings.fusions
        ]
        # A change to the setup code or to the index/pipeline bodies re-runs the setup on deploy.
        code_hash = hashlib.sha256(
            (SETUP_CODE / "handler.py").read_bytes() + OPENSEARCH_MODULE.read_bytes()
        ).hexdigest()[:16]
        resource = CustomResource(
            self,
            "Setup",
            service_token=provider.service_token,
            resource_type="Custom::CitegateOpenSearchSetup",
            properties={
                "Endpoint": self.domain.domain_endpoint,
                "Region": Stack.of(self).region,
                "Prefix": self.settings.index_prefix,
                "Dimension": str(self.settings.dimension),
                "ChineseAnalyzer": self.settings.chinese_analyzer,
                "Fusions": json.dumps(fusions, sort_keys=True),
                "Replicas": str(replicas_for(self.settings.data_nodes)),
                "CodeHash": code_hash,
            },
        )
        # What it writes: the domain (its endpoint is a property, so CloudFormation orders that), with
        # the setup role's identity policy in place (the function depends on it).
        resource.node.add_dependency(self.domain, setup.role)
        acknowledge_provider(provider, setup.function.function_arn)
        return resource


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


__all__ = ["Search", "SearchSettings", "access_policy", "domain_name", "replicas_for", "search_statements"]
