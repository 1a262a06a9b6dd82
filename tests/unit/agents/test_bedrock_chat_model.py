"""Bedrock as a chat model (agents, chats): tool calling through Converse, token streaming through
ConverseStream's event stream, and failures midway as ModelUnavailable, against the loopback runtime."""

from __future__ import annotations

import time
from typing import Any

import pytest
from tests.fakes.bedrock_server import STREAM_PIECES, FakeBedrock

from citegate.agents.models import BedrockChatModel, ModelRegistry, ModelSpec
from citegate.platform.errors import ModelUnavailable
from citegate.platform.settings import Settings

TOOL = {
    "type": "function",
    "function": {
        "name": "retrieve_knowledge",
        "description": "Search the knowledge base.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}


def model(server: FakeBedrock, name: str) -> BedrockChatModel:
    spec = ModelSpec(name, name, model=name, provider="bedrock", region="us-east-1", endpoint_url=server.url)
    client = ModelRegistry([spec]).client(spec, 5.0)
    assert isinstance(client, BedrockChatModel)
    return client


def test_settings_make_the_bedrock_model_the_default_chat_model() -> None:
    settings = Settings(
        CITEGATE_LLM_PROVIDER="bedrock",
        CITEGATE_BEDROCK_MODEL_ID="us.anthropic.claude-3-5-haiku-20241022-v1:0",
        AWS_REGION="eu-west-1",
    )
    registry = ModelRegistry.from_settings(settings)
    spec = registry.get(None)
    assert spec.id == "us.anthropic.claude-3-5-haiku-20241022-v1:0" and spec.region == "eu-west-1"
    assert spec.describe()["tool_calling"] and not spec.offline and spec.api_key is None
    assert isinstance(registry.client(spec, 5.0), BedrockChatModel)


def test_tool_calls_round_trip_through_converse(bedrock: FakeBedrock) -> None:
    chat = model(bedrock, "agent-tools")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Plan searches."},
        {"role": "user", "content": "How high is Olympus Mons?"},
    ]
    reply = chat.complete(messages, tools=[TOOL])
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("tooluse_0", "retrieve_knowledge", {"query": "Olympus Mons height", "top_k": 3}),
        ("tooluse_1", "retrieve_knowledge", {"query": "Mars volcano", "top_k": 3}),
    ]
    first = bedrock.calls[-1]["body"]
    assert first["system"] == [{"text": "Plan searches."}]
    assert (
        first["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"] == TOOL["function"]["parameters"]
    )  # type: ignore[index]
    assert "toolChoice" not in first["toolConfig"], "the model decides whether to search"
    # The planner's next turn: its calls, their results (OpenAI-shaped), then Converse's blocks.
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": '{"query": "q"}'}}
                for c in reply.tool_calls
            ],
        }
    )
    messages += [{"role": "tool", "tool_call_id": c.id, "content": "found"} for c in reply.tool_calls]
    done = chat.complete(messages, tools=[TOOL])
    assert done.tool_calls == [] and done.content == "enough"
    second = bedrock.calls[-1]["body"]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert [b["toolResult"]["toolUseId"] for b in second[2]["content"]] == ["tooluse_0", "tooluse_1"]


def test_converse_stream_yields_each_delta_as_it_arrives(bedrock: FakeBedrock) -> None:
    bedrock.frame_delay = 0.1
    chat = model(bedrock, "agent-tools")
    chat._bedrock()  # the client is built (botocore loads its service model) before the clock starts
    started = time.perf_counter()
    stream = chat.stream([{"role": "user", "content": "Summarize."}], temperature=0.7)
    first = next(stream)
    first_after = time.perf_counter() - started
    rest = list(stream)
    assert [first, *rest] == STREAM_PIECES
    # The first delta is read before the stream is over: 9 frames at 0.1 s each take ~0.9 s.
    assert first_after < 0.6 < time.perf_counter() - started
    call = bedrock.calls[-1]
    assert call["operation"] == "converse-stream" and call["signature_ok"]
    assert call["body"] == {
        "messages": [{"role": "user", "content": [{"text": "Summarize."}]}],
        "inferenceConfig": {"temperature": 0.7},
    }
    kinds = [frame[frame.index(b":event-type") :][:40] for frame in bedrock.streamed_frames]
    assert kinds and all(
        b"contentBlockDelta" in k or b"message" in k or b"metadata" in k or b"contentBlock" in k
        for k in kinds
    )


@pytest.mark.parametrize(
    ("name", "pieces", "why"),
    [
        ("stream-dies", STREAM_PIECES[:2], "the model failed (ModelStreamErrorException)"),
        ("stream-throttled", [], "the model answered HTTP 429 (ThrottlingException)"),
        ("stream-cut", STREAM_PIECES[:1], "not usable (ValueError)"),
        ("stream-bad-crc", [], "not usable (ChecksumMismatch)"),
    ],
)
def test_a_stream_that_breaks_is_model_unavailable_after_what_it_sent(
    bedrock: FakeBedrock, name: str, pieces: list[str], why: str
) -> None:
    received: list[str] = []
    with pytest.raises(ModelUnavailable) as raised:
        for piece in model(bedrock, name).stream([{"role": "user", "content": "Summarize."}]):
            received.append(piece)
    assert received == pieces
    assert why in str(raised.value)
    assert "10.0.0.7" not in str(raised.value), "the stream error's own text stays in the log"


def test_a_stream_throttled_before_its_first_delta_is_tried_again(bedrock: FakeBedrock) -> None:
    with pytest.raises(ModelUnavailable):
        list(model(bedrock, "stream-throttled").stream([{"role": "user", "content": "Hi"}]))
    assert [c["operation"] for c in bedrock.calls] == ["converse-stream"] * 3
    bedrock.calls.clear()
    with pytest.raises(ModelUnavailable):
        list(model(bedrock, "stream-dies").stream([{"role": "user", "content": "Hi"}]))
    assert len(bedrock.calls) == 1, "text was sent: a failure after it is not retried"


def test_a_throttled_converse_is_retried_then_unavailable(bedrock: FakeBedrock) -> None:
    bedrock.throttle_next = 5
    with pytest.raises(ModelUnavailable, match=r"HTTP 429 \(ThrottlingException\)"):
        model(bedrock, "anything").complete([{"role": "user", "content": "Hi"}])
    assert len(bedrock.calls) == 3, "botocore's standard mode: three attempts"
