"""CITEGATE_CHAT_MODELS lists Bedrock models too (`"provider": "bedrock"`): the chat models a caller
may pick (spec 001's /api/v1/agent/models, chats, /api/v2/query) beside OpenAI-compatible ones,
called through Converse with the IAM role's credentials, against the loopback Bedrock runtime
(tests/fakes/bedrock_server.py: real SigV4 checked, real wire shapes)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.fakes.bedrock_server import REGION, FakeBedrock

from citegate.agents.models import OFFLINE_MODEL_ID, BedrockChatModel, ChatModel, ModelRegistry
from citegate.platform.errors import ModelUnavailable
from citegate.platform.settings import Settings

CLAUDE = {"id": "claude", "provider": "bedrock", "model": "us.anthropic.claude-3-5-haiku-20241022-v1:0"}
NOVA = {"id": "amazon.nova-lite-v1:0", "provider": "bedrock", "label": "Nova Lite", "tools": False}
LOCAL = {"id": "local-llama", "model": "llama3", "base_url": "http://127.0.0.1:9/v1"}


def registry(entries: list[dict[str, Any]], **settings: Any) -> ModelRegistry:
    return ModelRegistry.from_settings(
        Settings(CITEGATE_CHAT_MODELS=json.dumps(entries), AWS_REGION=REGION, **settings)
    )


def test_bedrock_models_are_listed_beside_openai_compatible_ones() -> None:
    models = registry([CLAUDE, NOVA, LOCAL], CITEGATE_DEFAULT_CHAT_MODEL="claude")
    listed = {spec.id: spec for spec in models.models()}
    assert list(listed) == ["claude", "amazon.nova-lite-v1:0", "local-llama", OFFLINE_MODEL_ID]
    claude, nova = listed["claude"], listed["amazon.nova-lite-v1:0"]
    assert (claude.provider, claude.model, claude.region) == ("bedrock", CLAUDE["model"], REGION)
    assert claude.base_url is None and claude.api_key is None and claude.api_key_secret_arn is None
    assert claude.describe() == {
        "id": "claude",
        "label": "claude",
        "offline": False,
        "tool_calling": True,
        "model_knowledge": True,
    }
    assert (nova.model, nova.label, nova.describe()["tool_calling"]) == (NOVA["id"], "Nova Lite", False)
    assert models.default_id == "claude"
    assert isinstance(models.client(claude, 5.0), BedrockChatModel)
    assert type(models.client(listed["local-llama"], 5.0)) is ChatModel


def test_the_configured_bedrock_model_and_the_listed_ones_together() -> None:
    models = registry(
        [CLAUDE], CITEGATE_LLM_PROVIDER="bedrock", CITEGATE_BEDROCK_MODEL_ID="amazon.nova-pro-v1:0"
    )
    assert [s.id for s in models.models()] == ["amazon.nova-pro-v1:0", "claude", OFFLINE_MODEL_ID]
    assert models.default_id == "amazon.nova-pro-v1:0"
    assert all(s.provider == "bedrock" for s in models.models() if not s.offline)


def test_a_listed_bedrock_model_answers_and_streams_through_the_loopback_runtime(
    bedrock: FakeBedrock,
) -> None:
    models = registry([CLAUDE, NOVA], CITEGATE_BEDROCK_ENDPOINT_URL=bedrock.url)
    spec = models.get("claude")
    chat = models.client(spec, 5.0)
    reply = chat.complete([{"role": "user", "content": "Say hello."}])
    assert isinstance(reply.content, str)
    call = bedrock.calls[-1]
    # The request names the entry's Bedrock model id (an inference profile here), signed by SigV4.
    assert (call["operation"], call["model"], call["signature_ok"]) == ("converse", CLAUDE["model"], True)
    pieces = list(chat.stream([{"role": "user", "content": "Summarize."}]))
    assert pieces and "".join(pieces).strip()
    assert bedrock.calls[-1]["operation"] == "converse-stream"
    assert bedrock.calls[-1]["model"] == CLAUDE["model"]
    models.client(models.get("amazon.nova-lite-v1:0"), 5.0).complete([{"role": "user", "content": "Hi"}])
    assert bedrock.calls[-1]["model"] == "amazon.nova-lite-v1:0"  # no "model": the id is Bedrock's


def test_an_entrys_region_is_the_one_it_signs_for(bedrock: FakeBedrock) -> None:
    models = registry([{**CLAUDE, "region": "ap-southeast-2"}], CITEGATE_BEDROCK_ENDPOINT_URL=bedrock.url)
    spec = models.get("claude")
    assert spec.region == "ap-southeast-2"
    with pytest.raises(ModelUnavailable):  # the loopback runtime is in REGION: a signature for another
        models.client(spec, 5.0).complete([{"role": "user", "content": "Hi"}])
    assert bedrock.calls and not bedrock.calls[-1]["signature_ok"]
    assert "/ap-southeast-2/bedrock/" in bedrock.calls[-1]["headers"]["authorization"]


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ({**CLAUDE, "base_url": "http://127.0.0.1:9/v1"}, "remove base_url"),
        ({**CLAUDE, "api_key_secret_arn": "arn:aws:secretsmanager:x"}, "remove api_key_secret_arn"),
        ({"id": "x", "provider": "vertex"}, "provider is openai or bedrock"),
        ({"id": "x", "model": "y"}, "needs a base_url"),
        ({"provider": "bedrock"}, "an object with an id"),
    ],
)
def test_a_contradicting_entry_is_refused_at_start(entry: dict[str, Any], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        registry([entry])
