"""The streaming entries: a second function per streaming route with function URLs that stream.

API Gateway's HTTP API cannot stream and gives up after 30 s, so each function whose routes are
`streaming` in citegate.api.routes (`/api/v2/query`, `/api/v1/agent/chats/{chat_id}/messages`,
`/v1/chat/completions`) gets a twin here, from the same folder, grants and layers, that Lambda runs
under the Lambda Web Adapter. A twin also serves the routes that name its function as their
`stream_twin` (GET /v1/models on the chat completions' twin, whose handler declares it and whose
grants cover it), so an OpenAI client's one base URL lists models and streams
(its folder's run.sh: citegate.api.stream_app under uvicorn) with 15 minutes to answer:

- the public URL (auth type NONE, `InvokeMode: RESPONSE_STREAM`) for pages, services and token or
  JWT callers, anonymous public-read callers included: the app invokes the authorizer function
  with the HTTP API's REQUEST event, as API Gateway does (so this function may invoke it, and
  nothing of authentication is duplicated here: no secret, no OIDC settings, no JWT library);
- the agents' URL (auth type AWS_IAM, on the alias `agents`): Lambda verifies the SigV4 signature
  (service `lambda`) and hands the app the caller's IAM principal, as the agent API does.

The HTTP API keeps its routes to the original function (JSON replies, and short streams as one
body). docs/architecture.md ("Streaming in AWS") gives the reasons for this entry.

Concurrency: function URLs have none of API Gateway's throttling, and a stream holds its execution
environment for as long as it runs (up to 15 minutes), so without a cap a burst of streams (or of
anonymous callers on the public URL) could take the account's concurrency from every other
function. In prod each twin reserves STREAM_RESERVED_CONCURRENCY (25) executions: at most that many
streams at once per route (about two new ones a second for 10-20 s answers), beyond which callers
get Lambda's 429, the twin's throttles alarm fires (monitoring.py) and the cap can be raised; and
those 25 stay available to the twin whatever the rest of the account does. Both URLs (public and
agents) share the function's reservation. Other stages reserve nothing by default, as ingestion
does, so a first deploy works on an account whose quota leaves no room (Lambda keeps 100
unreserved: prod's 10 + 10 for ingestion and 25 x 3 here need a quota of at least 195).
`stream_reserved_concurrency` on the app's config (CitegateConfig), when it has one, overrides it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from aws_cdk import CfnOutput, Duration, NestedStack, Stack
from aws_cdk import aws_lambda as lambda_

from citegate.api import routes
from citegate.platform import resources
from constructs import Construct
from infra.constructs.api import camel
from infra.constructs.endpoint_function import (
    FUNCTIONS_DIR,
    EndpointFunction,
    FunctionSpec,
    spec_for,
)

MakeFunction = Callable[..., EndpointFunction]

# Lambda's maximum: a multi-round query with a model summary, or a long chat turn, has room.
STREAM_TIMEOUT_S = 900
AGENTS_ALIAS = "agents"
# prod's reserved concurrency for each twin (module docstring).
STREAM_RESERVED_CONCURRENCY = 25


def streaming_functions() -> list[str]:
    """The functions with a streaming route, in route order."""
    return list(dict.fromkeys(route.function for route in routes.ROUTES if route.streaming))


def stream_name(function: str) -> str:
    return f"{function}_stream"


def stream_spec(function: str) -> FunctionSpec:
    """The route function's spec, with the stream entry, 15 minutes, and the authorizer to invoke."""
    base = spec_for(function)
    return dataclasses.replace(
        base,
        description=f"{base.description} [streaming entry: function URLs, Lambda Web Adapter]",
        timeout_s=STREAM_TIMEOUT_S,
        layers=tuple(dict.fromkeys((*base.layers, "stream"))),  # stream: uvicorn and the embedder
        invokes=tuple(dict.fromkeys((*base.invokes, routes.AUTHORIZER_FUNCTION))),
        entry="stream",
    )


def _stack_config(scope: Construct) -> object | None:
    """The app's CitegateConfig (the top-level stack's `config`), seen from a nested stack."""
    stack: Stack | None = Stack.of(scope)
    while isinstance(stack, NestedStack):
        stack = stack.nested_stack_parent
    return getattr(stack, "config", None)


def stream_reserved_concurrency(config: object | None) -> int:
    """Each twin's reserved concurrency: the config's `stream_reserved_concurrency` when it sets one,
    else STREAM_RESERVED_CONCURRENCY in prod and none (0) elsewhere."""
    configured = getattr(config, "stream_reserved_concurrency", None)
    if configured is not None:
        return int(configured)
    return STREAM_RESERVED_CONCURRENCY if getattr(config, "production", False) else 0


class StreamingEntry(Construct):
    """The streaming twin of one route function, with its two function URLs."""

    def __init__(
        self, scope: Construct, construct_id: str, *, function: str, make_function: MakeFunction
    ) -> None:
        super().__init__(scope, construct_id)
        config = _stack_config(self)
        self.function = make_function(
            scope,
            stream_name(function),
            spec=stream_spec(function),
            code_dir=FUNCTIONS_DIR / function,
            environment={"CITEGATE_STREAM_FUNCTION": function},
        )
        self.route_function = function
        self.route_keys = [route.route_key for route in routes.stream_routes(function)]
        self.methods = sorted({route.method for route in routes.stream_routes(function)})
        self.reserved_concurrency = stream_reserved_concurrency(config)
        if self.reserved_concurrency:
            cfn: lambda_.CfnFunction = self.function.function.node.default_child  # type: ignore[assignment]
            cfn.reserved_concurrent_executions = self.reserved_concurrency
        origins = list(getattr(config, "page_origins", []) or [])
        cors = (
            lambda_.FunctionUrlCorsOptions(
                allowed_origins=origins,
                # the methods of the routes it serves (routes.stream_routes: GET /v1/models too)
                allowed_methods=[lambda_.HttpMethod(m) for m in self.methods],
                allowed_headers=list(resources.CORS.allow_headers),
                exposed_headers=list(resources.CORS.expose_headers),
                max_age=Duration.seconds(resources.CORS.max_age_seconds),
            )
            if origins
            else None
        )
        # Each URL on its own alias of the same published version (a qualifier has one URL): the
        # public one on the live alias every function is called through, the agents' one beside it.
        self.public_url = self.function.live.add_function_url(
            auth_type=lambda_.FunctionUrlAuthType.NONE,
            invoke_mode=lambda_.InvokeMode.RESPONSE_STREAM,
            cors=cors,
        )
        self.agents_alias = lambda_.Alias(
            self, "AgentsAlias", alias_name=AGENTS_ALIAS, version=self.function.function.current_version
        )
        self.agents_url = self.agents_alias.add_function_url(
            auth_type=lambda_.FunctionUrlAuthType.AWS_IAM,
            invoke_mode=lambda_.InvokeMode.RESPONSE_STREAM,
        )
        top = Stack.of(self)
        while isinstance(top, NestedStack):
            top = top.nested_stack_parent  # type: ignore[assignment]
        label = camel(function)
        CfnOutput(
            top,
            f"{label}StreamUrl",
            value=self.public_url.url,
            description=f"Streaming entry of {function} (bearer token, JWT or anonymous; SSE as produced): "
            + ", ".join(self.route_keys),
        )
        CfnOutput(
            top,
            f"{label}AgentStreamUrl",
            value=self.agents_url.url,
            description=f"Streaming entry of {function} for agents (SigV4, service lambda): "
            + ", ".join(self.route_keys),
        )
