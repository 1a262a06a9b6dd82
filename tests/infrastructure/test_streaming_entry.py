"""The streaming routes are wired to stream in AWS (infra/constructs/streaming.py): each has a twin
function run by the Lambda Web Adapter, with 15 minutes, two function URLs with RESPONSE_STREAM
(public: the app has the authorizer function decide; agents: IAM), and the route's grants."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from infra.constructs.endpoint_function import LWA_ACCOUNT, STREAM_HANDLER
from infra.constructs.streaming import AGENTS_ALIAS, STREAM_TIMEOUT_S, stream_name, streaming_functions
from tests.infrastructure.synth import Synth, synthesize

from citegate.api import routes
from citegate.platform import resources

STAGE = "test"
REPO = Path(__file__).resolve().parents[2]
Resources = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def synth() -> Synth:
    return synthesize({"stage": STAGE})


def _of_type(res: Resources, kind: str) -> Resources:
    return {k: v for k, v in res.items() if v["Type"] == kind}


def _function(res: Resources, name: str) -> tuple[str, dict[str, Any]]:
    wanted = resources.function_name(STAGE, name)
    for logical, fn in _of_type(res, "AWS::Lambda::Function").items():
        if fn["Properties"].get("FunctionName") == wanted:
            return logical, fn["Properties"]
    raise AssertionError(f"no function {wanted}")


def _mentions(node: Any, logical: str) -> bool:
    if isinstance(node, dict):
        if node.get("Ref") == logical or node.get("Fn::GetAtt", [None])[0] == logical:
            return True
        return any(_mentions(v, logical) for v in node.values())
    if isinstance(node, list):
        return any(_mentions(v, logical) for v in node)
    return False


def test_the_streaming_routes_are_the_two_spec_routes_and_openais() -> None:
    streamed = {route.route_key for route in routes.ROUTES if route.streaming}
    assert streamed == {
        "POST /api/v2/query",
        "POST /api/v1/agent/chats/{chat_id}/messages",
        "POST /v1/chat/completions",
    }
    assert streaming_functions() == ["openai_chat_completions", "query_v2", "agent_chat_message"]


@pytest.mark.parametrize("function", ["query_v2", "agent_chat_message", "openai_chat_completions"])
def test_each_streaming_route_has_a_twin_under_the_web_adapter(synth: Synth, function: str) -> None:
    res = synth.resources
    _, props = _function(res, stream_name(function))
    _, original = _function(res, function)
    assert props["Handler"] == STREAM_HANDLER and original["Handler"] == "handler.lambda_handler"
    assert props["Code"] == original["Code"]  # the same folder: handler.py beside run.sh
    assert props["Timeout"] == STREAM_TIMEOUT_S >= 300 and original["Timeout"] <= 29
    env = props["Environment"]["Variables"]
    assert env["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"
    assert env["AWS_LWA_INVOKE_MODE"] == "response_stream"
    assert env["CITEGATE_STREAM_FUNCTION"] == function
    # Authentication stays in the authorizer function: no token secret, no OIDC settings here.
    assert not {"RAG_API_TOKEN_SECRET_ARN", "CITEGATE_OIDC_ISSUER"} & set(env)
    adapter = [layer for layer in props["Layers"] if LWA_ACCOUNT in str(layer)]
    assert len(adapter) == 1 and "LambdaAdapterLayerX86" in str(adapter[0])
    assert "us-east-1" not in str(adapter[0])  # the deploy's region, not the synth's
    # The original's layers, with its model in the stream layer beside auth (JWTs) and uvicorn:
    # shared, base, answering, stream and the adapter, Lambda's 5.
    layer_names = {
        v["Properties"]["LayerName"]: k
        for k, v in _of_type(res, "AWS::Lambda::LayerVersion").items()
        if "LayerName" in v["Properties"]  # (not CDK's BucketDeployment's own AWS CLI layer)
    }
    ref = {"Ref": layer_names[f"citegate-{STAGE}-deps-stream"]}
    assert ref in props["Layers"] and ref not in original["Layers"]
    embedder = {"Ref": layer_names[f"citegate-{STAGE}-deps-embedder-use"]}
    assert embedder in original["Layers"] and embedder not in props["Layers"]
    assert all(layer in props["Layers"] for layer in original["Layers"] if layer != embedder)
    assert len(props["Layers"]) == 5


@pytest.mark.parametrize("function", ["query_v2", "agent_chat_message"])
def test_its_urls_stream_public_authenticated_by_the_app_and_agents_by_iam(
    synth: Synth, function: str
) -> None:
    res = synth.resources
    logical, _ = _function(res, stream_name(function))
    urls = [u["Properties"] for u in _of_type(res, "AWS::Lambda::Url").values() if _mentions(u, logical)]
    aliases = {
        k: a for k, a in _of_type(res, "AWS::Lambda::Alias").items() if _mentions(a["Properties"], logical)
    }
    # Both URLs on aliases of one published version (a qualifier has one URL), never $LATEST.
    names = {a["Properties"]["Name"]: k for k, a in aliases.items()}
    assert set(names) == {AGENTS_ALIAS, resources.SERVING_ALIAS}
    versions = {json.dumps(a["Properties"]["FunctionVersion"]) for a in aliases.values()}
    assert len(versions) == 1
    by_auth = {u["AuthType"]: u for u in urls}
    assert set(by_auth) == {"NONE", "AWS_IAM"} and len(urls) == 2
    assert all(u["InvokeMode"] == "RESPONSE_STREAM" for u in urls)
    for auth, alias in (("NONE", resources.SERVING_ALIAS), ("AWS_IAM", AGENTS_ALIAS)):
        qualifier = by_auth[auth].get("Qualifier")
        assert qualifier == alias or _mentions(qualifier, names[alias]), auth
    # Anyone may call the public URL (the app decides); nobody gets the IAM one without a grant.
    public = [
        p["Properties"]
        for p in _of_type(res, "AWS::Lambda::Permission").values()
        if (_mentions(p["Properties"], logical) or _mentions(p["Properties"], names[resources.SERVING_ALIAS]))
        and p["Properties"].get("FunctionUrlAuthType") == "NONE"
    ]
    assert public and all(p["Principal"] == "*" for p in public)
    assert not [
        p
        for p in _of_type(res, "AWS::Lambda::Permission").values()
        if p["Properties"].get("FunctionUrlAuthType") == "AWS_IAM" and p["Properties"]["Principal"] == "*"
    ]


def _statements(res: Resources, name: str) -> list[dict[str, Any]]:
    role = _function(res, name)[1]["Role"]["Fn::GetAtt"][0]
    return [
        s
        for p in _of_type(res, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(found: list[dict[str, Any]]) -> set[str]:
    return {a for s in found for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}


def test_the_twin_may_do_what_the_route_does_and_invoke_the_authorizer(synth: Synth) -> None:
    res = synth.resources
    statements, actions = partial(_statements, res), _actions
    twin, original = statements(stream_name("query_v2")), statements("query_v2")
    (invoke,) = [s for s in twin if s["Action"] == "lambda:InvokeFunction"]
    # The authorizer's live alias (citegate.platform.resources.invoke_target), as the twin invokes it.
    assert resources.invoke_target(STAGE, routes.AUTHORIZER_FUNCTION) in str(invoke["Resource"])
    assert len(invoke["Resource"]) == 1 if isinstance(invoke["Resource"], list) else True
    assert actions(twin) - actions(original) == {"lambda:InvokeFunction"}
    assert not {"secretsmanager:GetSecretValue", "s3:PutObject", "sqs:SendMessage"} & actions(twin)


def test_both_urls_of_each_entry_are_stack_outputs(synth: Synth) -> None:
    outputs = synth.parent["Outputs"]
    for label in ("QueryV2", "AgentChatMessage"):
        assert f"{label}StreamUrl" in outputs and f"{label}AgentStreamUrl" in outputs


def test_the_openai_twin_serves_models_and_completions_on_one_url(synth: Synth) -> None:
    """An OpenAI client's one base URL in AWS: the chat completions' function URLs serve GET
    /v1/models too (routes.Route.stream_twin), with the grants, CORS and outputs that takes."""
    function = "openai_chat_completions"
    served = [route.route_key for route in routes.stream_routes(function)]
    assert served == ["GET /v1/models", "POST /v1/chat/completions"]
    handler = (REPO / "functions" / function / "handler.py").read_text()
    assert '@app.get("/v1/models")' in handler and '@app.post("/v1/chat/completions")' in handler
    res = synth.resources
    logical, _ = _function(res, stream_name(function))
    # The twin may do everything the models function may (and the authorizer besides).
    twin, models = _statements(res, stream_name(function)), _statements(res, "openai_models")
    assert models and _actions(models) <= _actions(twin)
    # Its public URL's CORS allows both methods (a page's front end lists models, then asks).
    urls = [u["Properties"] for u in _of_type(res, "AWS::Lambda::Url").values() if _mentions(u, logical)]
    (public,) = [u for u in urls if u["AuthType"] == "NONE"]
    assert set(public["Cors"]["AllowMethods"]) == {"GET", "POST"}
    outputs = synth.parent["Outputs"]
    for output in ("OpenaiChatCompletionsStreamUrl", "OpenaiChatCompletionsAgentStreamUrl"):
        assert all(key in outputs[output]["Description"] for key in served), output
    # The other twins keep to their own POST routes.
    for other in ("query_v2", "agent_chat_message"):
        assert {r.method for r in routes.stream_routes(other)} == {"POST"}
