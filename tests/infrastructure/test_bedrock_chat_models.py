"""`citegate:bedrock_chat_model_ids`: more Bedrock models a caller may pick in chats and
/api/v2/query (CITEGATE_CHAT_MODELS), whichever provider answers. The functions that list or take a
chat model are told them; those that call one (and their streaming twins) may invoke exactly their
ARNs; no other function is granted them, and no secret is involved."""

from __future__ import annotations

import json
from typing import Any

import pytest
from infra.constructs.streaming import stream_name
from tests.infrastructure.synth import Synth, synthesize
from tests.infrastructure.test_bedrock_iam import bedrock_statements, config, resources_of
from tests.infrastructure.test_stack import STAGE, functions_by_name

NOVA = "amazon.nova-lite-v1:0"
PROFILE = "eu.anthropic.claude-3-5-haiku-20241022-v1:0"
BOTH_ACTIONS = ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"]
Resources = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def synth() -> Synth:
    return synthesize({"stage": STAGE, "citegate:bedrock_chat_model_ids": f"{NOVA},{PROFILE}"})


def env_of(res: Resources, function: str) -> dict[str, str]:
    return dict(res[functions_by_name(res)[function]]["Properties"]["Environment"]["Variables"])


def test_chat_functions_are_told_the_bedrock_chat_models(synth: Synth) -> None:
    res = synth.resources
    expected = [{"id": NOVA, "provider": "bedrock"}, {"id": PROFILE, "provider": "bedrock"}]
    for function in ("agent_models_list", "agent_chat_message", "query_v2", stream_name("query_v2")):
        assert json.loads(env_of(res, function)["CITEGATE_CHAT_MODELS"]) == expected, function
    for function in ("kb_ask", "openai_chat_completions", "kb_list"):
        assert "CITEGATE_CHAT_MODELS" not in env_of(res, function), function
    # The answering provider stays OpenAI-compatible (or offline): only the chat models are Bedrock's.
    assert "CITEGATE_LLM_PROVIDER" not in env_of(res, "query_v2")


def test_only_the_functions_that_call_a_chat_model_may_invoke_them(synth: Synth) -> None:
    res = synth.resources
    haiku = PROFILE.removeprefix("eu.")
    callers = ("agent_chat_message", "query_v2", stream_name("agent_chat_message"), stream_name("query_v2"))
    for function in callers:
        statements = bedrock_statements(res, function)
        assert statements and all(s["Action"] == BOTH_ACTIONS for s in statements), function
        granted = [arn for s in statements for arn in resources_of(s)]
        assert f"arn:<AWS::Partition>:bedrock:<AWS::Region>::foundation-model/{NOVA}" in granted
        profiles = [a for a in granted if ":inference-profile/" in a]
        assert len(profiles) == 1 and profiles[0].endswith(f":inference-profile/{PROFILE}")
        routed = [a for a in granted if a.endswith(f"::foundation-model/{haiku}")]
        assert routed and all(":bedrock:eu-" in a for a in routed), routed
        assert len(granted) == 2 + len(routed), granted  # exactly these ARNs
    for function in ("agent_models_list", "kb_ask", "openai_chat_completions", "agent_chat_create"):
        assert bedrock_statements(res, function) == [], function


def test_the_context_is_checked() -> None:
    both = config(
        llm_provider="bedrock", bedrock_model_id=NOVA, bedrock_chat_model_ids=[NOVA, PROFILE, PROFILE]
    )
    assert both.bedrock_chat_model_ids == (PROFILE,)  # the answering model is listed already
    assert config().bedrock_chat_model_ids == ()
