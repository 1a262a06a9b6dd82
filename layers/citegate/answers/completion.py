"""Reading an OpenAI-compatible chat completion without trusting its shape.

The openai client builds its response objects without validating them: a server that answers 200
with HTML, a JSON error object, a list, or a completion whose `content` is a number hands back a
string or a half-built object. Everything here checks the shape and raises `MalformedReply` for
anything that is not a chat completion, so callers turn it into "the model is unavailable"
(never an invented or an empty answer, never a 500).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any


class MalformedReply(ValueError):
    """The model answered, but not with a chat completion (or a chunk of one)."""


@dataclass(frozen=True)
class RawToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as the model wrote it


@dataclass(frozen=True)
class Message:
    content: str
    tool_calls: tuple[RawToolCall, ...] = ()


def _field(value: Any, name: str) -> Any:
    """A field of a constructed response object (or of a dict); None when absent."""
    if isinstance(value, dict):
        return value.get(name)
    try:
        return getattr(value, name, None)
    except Exception:  # a half-built object may fail on access
        return None


def _text(value: Any, what: str) -> str:
    if value is None:
        return ""
    if isinstance(value, list) and all(isinstance(_field(part, "text"), str) for part in value):
        # Content as a list of parts ([{"type": "text", "text": ...}]), as some servers send it.
        return "".join(str(_field(part, "text")) for part in value)
    if not isinstance(value, str):
        raise MalformedReply(f"{what} is {type(value).__name__}, not text")
    return value


def _first_choice(reply: Any, what: str) -> Any:
    choices = _field(reply, "choices")
    if not isinstance(choices, list):
        raise MalformedReply(f"the {what} has no 'choices' list")
    if not choices:
        return None
    choice = choices[0]
    if isinstance(choice, str | bytes | int | float | bool | list):
        raise MalformedReply(f"the {what}'s first choice is not an object")
    return choice


def reply_message(completion: Any) -> Message:
    """The first choice's message of a chat completion, checked."""
    if isinstance(completion, str | bytes | list | int | float | bool) or completion is None:
        raise MalformedReply("the reply is not a chat completion object")
    choice = _first_choice(completion, "reply")
    if choice is None:
        raise MalformedReply("the reply has no choices")
    message = _field(choice, "message")
    if message is None or isinstance(message, str | bytes | list | int | float | bool):
        raise MalformedReply("the reply's first choice has no message object")
    content = _text(_field(message, "content"), "the message content")
    calls: list[RawToolCall] = []
    raw_calls = _field(message, "tool_calls")
    if raw_calls is not None and not isinstance(raw_calls, list):
        raise MalformedReply("the message's tool_calls is not a list")
    for raw in raw_calls or []:
        function = _field(raw, "function")
        name = _field(function, "name") if function is not None else None
        if not isinstance(name, str) or not name:
            raise MalformedReply("a tool call has no function name")
        arguments = _text(_field(function, "arguments"), "a tool call's arguments")
        calls.append(RawToolCall(_text(_field(raw, "id"), "a tool call's id"), name, arguments))
    return Message(content, tuple(calls))


def chunk_delta(chunk: Any) -> str:
    """The text a streamed chunk adds ("" for a chunk without text, such as the last one)."""
    if isinstance(chunk, str | bytes | list | int | float | bool) or chunk is None:
        raise MalformedReply("a streamed chunk is not a chat completion chunk")
    choice = _first_choice(chunk, "streamed chunk")
    if choice is None:
        return ""  # e.g. the usage chunk, which has no choices
    delta = _field(choice, "delta")
    if delta is None:
        return ""
    if isinstance(delta, str | bytes | list | int | float | bool):
        raise MalformedReply("a streamed chunk's delta is not an object")
    return _text(_field(delta, "content"), "a streamed delta")


def stream_text(chunks: Iterable[Any]) -> Iterator[str]:
    """The non-empty text deltas of a streamed completion. A stream that carries no chunk at all,
    or no text at all, is malformed: an empty reply is never passed off as an answer."""
    seen = produced = False
    for chunk in chunks:
        text = chunk_delta(chunk)
        seen = True
        if text:
            produced = True
            yield text
    if not seen:
        raise MalformedReply("the reply is not a chat completion stream")
    if not produced:
        raise MalformedReply("the streamed reply has no text")
