"""Reading chat completions without trusting their shape (citegate.answers.completion)."""

from __future__ import annotations

from typing import Any

import pytest

from citegate.answers.completion import MalformedReply, chunk_delta, reply_message, stream_text


def completion(message: Any) -> dict[str, Any]:
    return {"object": "chat.completion", "choices": [{"index": 0, "message": message}]}


def test_a_completion_gives_its_text_and_tool_calls() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "retrieve_knowledge", "arguments": "{}"}}
    message = reply_message(completion({"content": "hello", "tool_calls": [call]}))
    assert message.content == "hello"
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == [("c1", "retrieve_knowledge", "{}")]
    assert reply_message(completion({"content": None})).content == ""
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert reply_message(completion({"content": parts})).content == "ab"


@pytest.mark.parametrize(
    "reply",
    [
        "<html>502 Bad Gateway</html>",  # what the client hands back for a body that is not JSON
        [1, 2, 3],
        None,
        {"object": "list", "data": []},
        {"choices": "lots"},
        {"choices": []},
        {"choices": [7]},
        {"choices": [{"message": "hi"}]},
        completion({"content": 42}),
        completion({"content": "x", "tool_calls": "call"}),
        completion({"content": "x", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}),
    ],
)
def test_anything_else_is_malformed(reply: Any) -> None:
    with pytest.raises(MalformedReply):
        reply_message(reply)


def chunk(delta: Any) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}


def test_a_stream_gives_its_text_delta_by_delta() -> None:
    chunks = [chunk({"role": "assistant"}), chunk({"content": "Olym"}), chunk({"content": "pus"}), chunk({})]
    assert list(stream_text([*chunks, {"choices": [], "usage": {}}])) == ["Olym", "pus"]
    assert chunk_delta({"choices": [{"index": 0}]}) == ""


@pytest.mark.parametrize(
    "chunks",
    [
        [],  # no chunk at all: HTML or plain JSON sent as an event stream parses to nothing
        [chunk({"role": "assistant"}), chunk({})],  # chunks, but no text
        [{"choices": "lots"}],
        [[1, 2, 3]],
        [chunk({"content": "ok"}), chunk({"content": 5})],
        [chunk({"content": "ok"}), chunk("text")],
    ],
)
def test_a_stream_of_anything_else_is_malformed(chunks: list[Any]) -> None:
    with pytest.raises(MalformedReply):
        list(stream_text(chunks))
