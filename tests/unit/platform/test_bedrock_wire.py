"""Bedrock's wire protocol as the loopback runtime checks it: SigV4 verified by botocore's own
signer, event-stream frames that botocore's decoder reads, errors in rest-json's shape. And the
translation of citegate's (OpenAI-shaped) chat messages into Converse's."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer
from tests.fakes.bedrock_server import ACCESS_KEY, SECRET_KEY, FakeBedrock, check_signature, event, exception

from citegate.answers.base import AnswererUnavailable, Evidence
from citegate.answers.bedrock_converse import BedrockConverseAnswerer
from citegate.platform import bedrock as wire

EVIDENCE = [
    Evidence(1, "r_0123456789abcdef", "Olympus Mons rises 22 km above Mars. It is a shield volcano.", 1.0)
]
HAIKU = "anthropic.claude-3-5-haiku-20241022-v1:0"


def signed(body: bytes, *, secret: str = SECRET_KEY, region: str = "us-east-1") -> tuple[str, dict[str, str]]:
    """A Converse request signed the way botocore signs it."""
    url = "http://127.0.0.1:1/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"
    request = AWSRequest(method="POST", url=url, data=body, headers={"Content-Type": "application/json"})
    SigV4Auth(Credentials(ACCESS_KEY, secret), "bedrock", region).add_auth(request)
    headers = {name.lower(): value for name, value in request.headers.items()}
    headers["host"] = "127.0.0.1:1"
    return url, headers


def test_the_verifier_accepts_botocores_signature_and_rejects_any_change() -> None:
    body = b'{"messages": []}'
    url, headers = signed(body)
    assert check_signature("POST", url, headers, body) is None
    # The body, the path, a signed header, the key or the scope changed after signing: refused.
    assert check_signature("POST", url, headers, b'{"messages": [1]}') is not None
    assert check_signature("POST", url.replace("converse", "invoke"), headers, body) is not None
    assert check_signature("POST", url, {**headers, "content-type": "text/plain"}, body) is not None
    assert check_signature("POST", *signed(body, secret="not-the-secret"), body) == (
        "InvalidSignatureException",
        "The request signature we calculated does not match the signature you provided.",
    )
    assert check_signature("POST", *signed(body, region="eu-west-1"), body)[0] == "InvalidSignatureException"  # type: ignore[index]
    assert check_signature("POST", url, {k: v for k, v in headers.items() if k != "authorization"}, body)


def test_every_call_the_clients_make_carries_a_valid_signature(bedrock: FakeBedrock) -> None:
    answerer = BedrockConverseAnswerer(model_id=HAIKU, region="us-east-1", endpoint_url=bedrock.url)
    answerer.answer("How high is Olympus Mons?", EVIDENCE)
    [call] = bedrock.calls
    assert call["signature_ok"] is True
    # The model id travels percent-encoded in the path; the credential scope is bedrock's.
    assert call["path"] == "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"
    assert "/us-east-1/bedrock/aws4_request" in call["headers"]["authorization"]
    assert call["headers"]["content-type"] == "application/json"


def test_a_wrong_secret_or_region_is_refused_and_reported_without_detail(
    bedrock: FakeBedrock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    answerer = BedrockConverseAnswerer(model_id=HAIKU, region="us-east-1", endpoint_url=bedrock.url)
    with pytest.raises(AnswererUnavailable, match=r"may not be used \(InvalidSignatureException\)"):
        answerer.answer("How high?", EVIDENCE)
    assert [c["signature_ok"] for c in bedrock.calls] == [False]
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    elsewhere = BedrockConverseAnswerer(model_id=HAIKU, region="eu-west-1", endpoint_url=bedrock.url)
    with pytest.raises(AnswererUnavailable, match="InvalidSignatureException"):
        elsewhere.answer("How high?", EVIDENCE)


def test_event_stream_frames_are_what_botocores_decoder_reads() -> None:
    data = event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Olympus"}})
    total, header_length = struct.unpack(">II", data[:8])
    assert total == len(data) and header_length > 0
    buffer = EventStreamBuffer()
    buffer.add_data(data + exception("throttlingException", "slow down"))
    first, second = list(buffer)
    assert first.headers[":event-type"] == "contentBlockDelta"
    assert first.headers[":message-type"] == "event"
    assert json.loads(first.payload) == {"contentBlockIndex": 0, "delta": {"text": "Olympus"}}
    assert second.headers[":exception-type"] == "throttlingException"
    corrupt = EventStreamBuffer()
    corrupt.add_data(event("messageStop", {"stopReason": "end_turn"}, corrupt=True))
    with pytest.raises(ChecksumMismatch):
        list(corrupt)


def test_chat_messages_become_converse_turns() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "How high is Olympus Mons?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"query": "a"}'},
                },
                {"id": "t2", "type": "function", "function": {"name": "search", "arguments": "not json"}},
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "found a"},
        {"role": "tool", "tool_call_id": "t2", "content": ""},
        {"role": "user", "content": "And Everest?"},
    ]
    system, turns = wire.converse_messages(messages)
    assert system == [{"text": "Be brief."}]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"], "alternating, tool results merged"
    assert turns[1]["content"] == [
        {"toolUse": {"toolUseId": "t1", "name": "search", "input": {"query": "a"}}},
        {"toolUse": {"toolUseId": "t2", "name": "search", "input": {}}},
    ]
    assert turns[2]["content"] == [
        {"toolResult": {"toolUseId": "t1", "content": [{"text": "found a"}]}},
        {"toolResult": {"toolUseId": "t2", "content": [{"text": ""}]}},
        {"text": "And Everest?"},
    ]
    tools = wire.converse_tools(
        [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    )
    assert tools == [
        {"toolSpec": {"name": "search", "description": "search", "inputSchema": {"json": {"type": "object"}}}}
    ]


@pytest.mark.parametrize(
    "response",
    [
        None,
        "<html>",
        {"output": {}},
        {"output": {"message": {"content": "text"}}},
        {"output": {"message": {"content": [1]}}},
    ],
)
def test_a_reply_that_is_not_a_converse_response_is_refused(response: Any) -> None:
    with pytest.raises(ValueError):
        wire.read_converse(response)


def test_bedrock_is_never_sent_to_the_embedded_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """`citegate serve` points AWS_ENDPOINT_URL at its embedded endpoint, which has no Bedrock."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
    assert (
        wire.runtime_client("eu-west-1").meta.endpoint_url
        == "https://bedrock-runtime.eu-west-1.amazonaws.com"
    )
    explicit = wire.runtime_client("eu-west-1", endpoint_url="https://vpce-1.bedrock-runtime.example")
    assert explicit.meta.endpoint_url == "https://vpce-1.bedrock-runtime.example"
