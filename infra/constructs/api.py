"""The two front doors (PRODUCT.md, "Decisions"): one HTTP API per kind of caller, same functions.

An HTTP API route takes one authorizer, so:
- the public API (pages, services, token and JWT callers, anonymous public-read) routes every
  `principal` route through the Lambda REQUEST authorizer: simple responses, payload 2.0. The
  authorizer always authorizes and hands the handler either a principal or `auth_error`, so the
  handler answers 401 in the decided JSON error shape (API Gateway's own denial has a fixed body).
  It runs on every request (no identity source, results caching off): anonymous requests have no
  Authorization header to key a cache on, and an identity source would make API Gateway answer
  them 401 itself without calling the authorizer.
- the agent API routes the same paths with IAM authorization: SigV4-signed agents, whose IAM
  principal the handler maps to an agent identity.
`GET /healthz` is open on both. Both stages have default route throttling and JSON access logs.
Both have a `$default` route (no authorizer) to a small function that answers a request no route
matches in the project's JSON error shape, as the local gateway does (infra/unmatched_route).

The APIs, their stages and the authorizer are here, in the top-level stack; each route (with its
integration and invoke permission) is made by `add_routes` in the nested stack of its function.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from aws_cdk import CfnOutput, CustomResource, Duration, RemovalPolicy
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import custom_resources as cr

from citegate.api import routes
from citegate.platform import resources
from constructs import Construct, IConstruct
from infra.constructs import acknowledge, acknowledge_provider
from infra.constructs.endpoint_function import (
    POLICY_SEED_FUNCTION,
    POLICY_SEED_SPEC,
    EndpointFunction,
    FunctionSpec,
)

REPO = Path(__file__).resolve().parents[2]
POLICY_SEED_CODE = REPO / "infra" / "custom_resources" / "policy_seed"
UNMATCHED_ROUTE_CODE = REPO / "infra" / "unmatched_route"
UNMATCHED_ROUTE_FUNCTION = "unmatched_route"
# Reads nothing, writes nothing: the shared layer's routes and error shapes only.
UNMATCHED_ROUTE_SPEC = FunctionSpec(
    "The $default route: requests no route matches, in the JSON error shape", memory_mb=256, timeout_s=5
)
# The reviewed seed policies (the local stack seeds the same file).
SEED_FILE = REPO / "config" / "policies.json"

MakeFunction = Callable[..., EndpointFunction]

# Where the authorizer finds the bearer token's secret (infra.stack names the other secrets' variables).
API_TOKEN_SECRET_ENV = "RAG_API_TOKEN_SECRET_ARN"

ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "extendedRequestId": "$context.extendedRequestId",
    "requestTime": "$context.requestTime",
    "ip": "$context.identity.sourceIp",
    "userAgent": "$context.identity.userAgent",
    "httpMethod": "$context.httpMethod",
    "routeKey": "$context.routeKey",
    "path": "$context.path",
    "status": "$context.status",
    "protocol": "$context.protocol",
    "responseLength": "$context.responseLength",
    "responseLatency": "$context.responseLatency",
    "integrationLatency": "$context.integrationLatency",
    "integrationError": "$context.integrationErrorMessage",
    "authorizerError": "$context.authorizer.error",
    "principalType": "$context.authorizer.principal_type",
    "principalId": "$context.authorizer.principal_id",
    "iamUserArn": "$context.identity.userArn",
}


def camel(name: str) -> str:
    return "".join(part.title() for part in name.replace("-", "_").split("_"))


def route_id(route: routes.Route) -> str:
    """A construct id from the route key: POST /v1/kb/{kb_id}/ask -> PostV1KbKbIdAsk."""
    words = re.findall(r"[A-Za-z0-9]+", f"{route.method.lower()} {route.path}".replace("_", " "))
    return "".join(word.title() for word in words)


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        make_function: MakeFunction,
        page_origins: Sequence[str],
        throttle_rate: float,
        throttle_burst: int,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        prefix = f"{resources.APP}-{stage}"

        # Spec 004's bearer token (RAG_API_TOKEN), generated at deploy time. The authorizer gets the
        # secret's ARN (RAG_API_TOKEN_SECRET_ARN) and reads the value at run time: a value (or a
        # dynamic reference, which CloudFormation resolves into it) in the environment would be
        # readable by anyone with lambda:GetFunctionConfiguration.
        self.api_token = secretsmanager.Secret(
            self,
            "ApiToken",
            secret_name=f"{resources.APP}/{stage}/rag-api-token",
            description="citegate: the spec 004 bearer token (RAG_API_TOKEN) of the service principal",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                exclude_punctuation=True, password_length=48
            ),
            removal_policy=removal_policy,
        )
        acknowledge(
            self.api_token,
            "AwsSolutions-SMG4",
            "A static bearer token shared with existing spec 004 clients: rotating it needs those "
            "clients updated together, so it is rotated on purpose, not by a schedule.",
        )

        self.authorizer_function = make_function(
            self,
            routes.AUTHORIZER_FUNCTION,
            environment={API_TOKEN_SECRET_ENV: self.api_token.secret_arn},
        )
        # GetSecretValue on this one secret, for the authorizer only (not grant_read: no Describe).
        self.authorizer_function.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["secretsmanager:GetSecretValue"], resources=[self.api_token.secret_arn]
            )
        )
        # Bound to the public API (in this stack) when the first route uses it.
        self.principal_authorizer = authorizers.HttpLambdaAuthorizer(
            "PrincipalAuthorizer",
            self.authorizer_function.live,
            authorizer_name=f"{prefix}-principal",
            response_types=[authorizers.HttpLambdaResponseType.SIMPLE],
            identity_source=[],
            results_cache_ttl=Duration.seconds(0),
        )
        self.iam_authorizer = authorizers.HttpIamAuthorizer()
        self.open_route = apigwv2.HttpNoneAuthorizer()

        self.public_api = apigwv2.HttpApi(
            self,
            "PublicApi",
            api_name=f"{prefix}-api",
            description="citegate: pages, services and token callers (Lambda authorizer)",
            create_default_stage=False,
            # One definition (citegate.platform.resources.CORS) for this API and the local gateway's answer.
            cors_preflight=apigwv2.CorsPreflightOptions(
                allow_origins=list(page_origins),
                allow_methods=[apigwv2.CorsHttpMethod[m] for m in resources.CORS.allow_methods],
                allow_headers=list(resources.CORS.allow_headers),
                expose_headers=list(resources.CORS.expose_headers),
                max_age=Duration.seconds(resources.CORS.max_age_seconds),
            )
            if page_origins
            else None,
        )
        self.agent_api = apigwv2.HttpApi(
            self,
            "AgentApi",
            api_name=f"{prefix}-agents",
            description="citegate: agents with SigV4-signed requests (IAM authorization)",
            create_default_stage=False,
        )
        self.public_stage = self._stage(
            "Public",
            self.public_api,
            f"{prefix}-api",
            throttle_rate,
            throttle_burst,
            log_retention,
            removal_policy,
        )
        self.agent_stage = self._stage(
            "Agent",
            self.agent_api,
            f"{prefix}-agents",
            throttle_rate,
            throttle_burst,
            log_retention,
            removal_policy,
        )

        self.routes: dict[str, dict[str, apigwv2.HttpRoute]] = {"public": {}, "agent": {}}

        CfnOutput(
            self,
            "PublicApiUrl",
            value=self.public_stage.url,
            description="Public front door (Lambda authorizer: bearer token, JWT, anonymous)",
        )
        CfnOutput(
            self,
            "AgentApiUrl",
            value=self.agent_stage.url,
            description="Agent front door (IAM authorization: SigV4-signed requests)",
        )
        CfnOutput(
            self,
            "ApiTokenSecretArn",
            value=self.api_token.secret_arn,
            description="Secrets Manager secret holding RAG_API_TOKEN",
        )

    def add_routes(self, scope: Construct, function: EndpointFunction) -> None:
        """The function's routes (routes.ROUTES) on both front doors, made in `scope` (the function's
        nested stack): per door one integration, and per route the route and its invoke permission."""
        integrations_by_door: dict[str, integrations.HttpLambdaIntegration] = {}
        for route in routes.ROUTES:
            if route.function != function.name:
                continue
            for door, api in (("public", self.public_api), ("agent", self.agent_api)):
                if door not in integrations_by_door:
                    integrations_by_door[door] = integrations.HttpLambdaIntegration(
                        f"{door.title()}{camel(route.function)}Integration",
                        function.live,
                        payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0,
                    )
                if route.auth == "none":
                    authorizer: apigwv2.IHttpRouteAuthorizer = self.open_route
                elif door == "public":
                    authorizer = self.principal_authorizer
                else:
                    authorizer = self.iam_authorizer
                created = apigwv2.HttpRoute(
                    scope,
                    f"{door.title()}{route_id(route)}",
                    http_api=api,
                    route_key=apigwv2.HttpRouteKey.with_(route.path, apigwv2.HttpMethod[route.method]),
                    integration=integrations_by_door[door],
                    authorizer=authorizer,
                )
                self.routes[door][route.route_key] = created
                if route.auth == "none":
                    acknowledge(
                        created,
                        "AwsSolutions-APIG4",
                        f"{route.route_key} is open by decision (PRODUCT.md: it answers without a "
                        "token); it reports health only.",
                    )

    def add_unmatched_route(self, scope: Construct, *, make_function: MakeFunction) -> EndpointFunction:
        """`$default` on both doors: what no route matches answers 404/405 in the JSON error shape.
        Made in `scope` (a nested stack, like every route: the top level holds shared resources)."""
        function = make_function(
            scope, UNMATCHED_ROUTE_FUNCTION, spec=UNMATCHED_ROUTE_SPEC, code_dir=UNMATCHED_ROUTE_CODE
        )
        for door, api in (("public", self.public_api), ("agent", self.agent_api)):
            route = apigwv2.HttpRoute(
                scope,
                f"{door.title()}DefaultRoute",
                http_api=api,
                route_key=apigwv2.HttpRouteKey.DEFAULT,
                integration=integrations.HttpLambdaIntegration(
                    f"{door.title()}UnmatchedRouteIntegration",
                    function.live,
                    payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0,
                ),
                authorizer=self.open_route,
            )
            acknowledge(
                route,
                "AwsSolutions-APIG4",
                "The $default route only refuses: it answers 404/405 for requests no route matches, "
                "before any credential is looked at (as the local gateway does), and reads nothing.",
            )
        return function

    def _stage(
        self,
        name: str,
        api: apigwv2.HttpApi,
        log_name: str,
        rate: float,
        burst: int,
        retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> apigwv2.HttpStage:
        log_group = logs.LogGroup(
            self,
            f"{name}AccessLogs",
            log_group_name=f"/aws/apigateway/{log_name}/access",
            retention=retention,
            removal_policy=removal_policy,
        )
        stage = apigwv2.HttpStage(
            self,
            f"{name}Stage",
            http_api=api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(rate_limit=rate, burst_limit=burst),
        )
        cfn_stage: apigwv2.CfnStage = stage.node.default_child  # type: ignore[assignment]
        cfn_stage.access_log_settings = apigwv2.CfnStage.AccessLogSettingsProperty(
            destination_arn=log_group.log_group_arn,
            format=json.dumps(ACCESS_LOG_FORMAT, separators=(",", ":")),
        )
        return stage

    def add_policy_seed(
        self,
        *,
        make_function: MakeFunction,
        policies_table: IConstruct,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> CustomResource:
        """Seed the server-held policies at deploy time (only keys that are missing)."""
        seed = make_function(self, POLICY_SEED_FUNCTION, spec=POLICY_SEED_SPEC, code_dir=POLICY_SEED_CODE)
        provider_logs = logs.LogGroup(
            self, "PolicySeedProviderLogs", retention=log_retention, removal_policy=removal_policy
        )
        provider = cr.Provider(
            self, "PolicySeedProvider", on_event_handler=seed.function, log_group=provider_logs
        )
        acknowledge_provider(provider, seed.function.function_arn)
        stage = self.node.try_get_context("stage") or "dev"
        seed_policies = CustomResource(
            self,
            "SeedPolicies",
            service_token=provider.service_token,
            resource_type="Custom::CitegatePolicySeed",
            properties={
                "Stage": str(stage),
                # Minified: a change to the seed file re-runs the seeding on the next deploy.
                "Seed": json.dumps(json.loads(SEED_FILE.read_text()), separators=(",", ":"), sort_keys=True),
            },
        )
        # The function names the table by its fixed name (no reference CloudFormation could order
        # by), so the seeding waits for the table it writes explicitly.
        seed_policies.node.add_dependency(policies_table)
        return seed_policies
