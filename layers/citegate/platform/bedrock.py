"""Amazon Bedrock's runtime (`bedrock-runtime`), called with the function's own IAM role.

No API key and no secret: boto3 signs every call with the role's credentials (SigV4, service name
`bedrock`). The answerer, the embedder and the chat models share what is here: how the client is
built (botocore's standard retry mode retries throttling and 5xx with jittered exponential
backoff) and what a failure is called when it reaches a caller.

A failure's description names its kind and Bedrock's error code, never its message: Bedrock's
AccessDeniedException text carries the role's ARN and the account id, a ValidationException's can
quote the request. The full error goes to the log.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Bedrock's error codes by what they mean to a caller. Event-stream errors arrive with the first
# letter in lower case (throttlingException): `error_code` capitalises them.
THROTTLED = frozenset({"ThrottlingException", "TooManyRequestsException", "ServiceQuotaExceededException"})
DENIED = frozenset(
    {
        "AccessDeniedException",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "ExpiredTokenException",
        "IncompleteSignature",
    }
)
REFUSED = frozenset({"ValidationException"})
NOT_FOUND = frozenset({"ResourceNotFoundException"})

DEFAULT_ATTEMPTS = 3


def runtime_client(
    region: str,
    *,
    endpoint_url: str | None = None,
    timeout: float = 30.0,
    max_attempts: int = DEFAULT_ATTEMPTS,
    pool: int = 10,
) -> Any:
    """A `bedrock-runtime` client. `max_attempts` counts the first call: a throttled call is tried
    again after botocore's backoff, and `max_attempts` throttles in a row are a failure."""
    import boto3
    from botocore.config import Config

    config = Config(
        # AWS_ENDPOINT_URL points every other client at the embedded endpoint on one machine
        # (citegate serve), which has no Bedrock: Bedrock's endpoint is AWS's own unless
        # CITEGATE_BEDROCK_ENDPOINT_URL names one (a VPC endpoint, a test's loopback runtime).
        ignore_configured_endpoint_urls=True,
        retries={"mode": "standard", "total_max_attempts": max_attempts},
        connect_timeout=min(timeout, 10.0),
        read_timeout=timeout,
        max_pool_connections=pool,
    )
    session = boto3.session.Session(region_name=region)
    return session.client("bedrock-runtime", endpoint_url=endpoint_url, config=config)


class LazyClient:
    """One client, built on first use (importing boto3's service model costs a cold start)."""

    def __init__(self, build: Any) -> None:
        self._build = build
        self._client: Any = None
        self._lock = threading.Lock()

    def get(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._build()
            return self._client


def error_code(error: BaseException) -> str | None:
    """Bedrock's error code of a botocore ClientError (EventStreamError included), else None."""
    from botocore.exceptions import ClientError

    if not isinstance(error, ClientError):
        return None
    code = str(error.response.get("Error", {}).get("Code") or "")
    return code[:1].upper() + code[1:] if code else "UnknownError"


def http_status(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return None
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return int(status) if isinstance(status, int) else None


def describe_failure(error: BaseException) -> str:
    """What a caller may be told about a failed Bedrock call: its kind, never its text."""
    from botocore.exceptions import (
        BotoCoreError,
        ConnectionError,
        EndpointConnectionError,
        NoCredentialsError,
        ReadTimeoutError,
    )

    code = error_code(error)
    if code is not None:
        if code in THROTTLED:
            return f"the model answered HTTP 429 ({code}): Bedrock throttled every attempt"
        if code in DENIED:
            return (
                f"the model may not be used ({code}): model access is not enabled for this model "
                "in this account and region, or the service's role may not invoke it"
            )
        if code in NOT_FOUND:
            return f"the model was not found ({code}): check the model id and the region"
        if code in REFUSED:
            return f"the model refused the request ({code})"
        status = http_status(error)
        return f"the model answered HTTP {status} ({code})" if status else f"the model failed ({code})"
    if isinstance(error, ReadTimeoutError):
        return "the model did not answer in time"
    if isinstance(error, EndpointConnectionError | ConnectionError):
        return f"the model is unreachable: {type(error).__name__}"
    if isinstance(error, NoCredentialsError):
        return "the model is unreachable: no AWS credentials for Bedrock"
    if isinstance(error, BotoCoreError):
        return f"the model's reply was not usable ({type(error).__name__})"
    return f"the model's reply was not usable ({type(error).__name__})"


def failures() -> tuple[type[BaseException], ...]:
    """The exceptions a Bedrock call raises for a failure outside our code: botocore's own, and a
    reply that does not parse (a 200 whose body is not JSON)."""
    from botocore.eventstream import ParserError
    from botocore.exceptions import BotoCoreError, ClientError

    # ParserError: an event-stream frame that does not decode (a bad CRC, a cut prelude).
    return (ClientError, BotoCoreError, ParserError, ValueError, RecursionError)


# Converse speaks its own message shape; citegate builds OpenAI-shaped chat messages everywhere
# ({"role", "content", "tool_calls"?, "tool_call_id"?}). These translate one to the other.


def converse_messages(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(system blocks, messages) for Converse. Tool results become the user's toolResult blocks;
    consecutive turns of one role are merged, as Converse wants user and assistant to alternate."""
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role == "system":
            if content:
                system.append({"text": str(content)})
            continue
        if role == "tool":
            result = {
                "toolUseId": str(message.get("tool_call_id")),
                "content": [{"text": str(content or "")}],
            }
            add("user", [{"toolResult": result}])
            continue
        blocks: list[dict[str, Any]] = [{"text": str(content)}] if content else []
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except (ValueError, RecursionError):
                arguments = {}
            blocks.append(
                {
                    "toolUse": {
                        "toolUseId": str(call.get("id")),
                        "name": str(function.get("name")),
                        "input": arguments if isinstance(arguments, dict) else {},
                    }
                }
            )
        add("assistant" if role == "assistant" else "user", blocks or [{"text": " "}])
    return system, out


def converse_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI function tools as Converse toolSpecs."""
    specs = []
    for tool in tools:
        function = tool.get("function") or {}
        specs.append(
            {
                "toolSpec": {
                    "name": str(function.get("name")),
                    "description": str(function.get("description") or function.get("name")),
                    "inputSchema": {"json": function.get("parameters") or {"type": "object"}},
                }
            }
        )
    return specs


@dataclass(frozen=True)
class ConverseReply:
    text: str
    tool_uses: tuple[tuple[str, str, dict[str, Any]], ...]  # (toolUseId, name, input)
    stop_reason: str
    input_tokens: int
    output_tokens: int


def read_converse(response: Any) -> ConverseReply:
    """A Converse response, its shape checked: ValueError when it is not one."""
    if not isinstance(response, dict):
        raise ValueError("the reply is not a Converse response")
    message = (
        (response.get("output") or {}).get("message") if isinstance(response.get("output"), dict) else None
    )
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        raise ValueError("the Converse response has no message content")
    texts: list[str] = []
    uses: list[tuple[str, str, dict[str, Any]]] = []
    for block in content:
        if not isinstance(block, dict):
            raise ValueError("a content block is not an object")
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        use = block.get("toolUse")
        if isinstance(use, dict):
            given = use.get("input")
            uses.append(
                (str(use.get("toolUseId")), str(use.get("name")), given if isinstance(given, dict) else {})
            )
    usage = response.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return ConverseReply(
        "".join(texts),
        tuple(uses),
        str(response.get("stopReason") or ""),
        int(usage.get("inputTokens") or 0),
        int(usage.get("outputTokens") or 0),
    )


def stream_text(events: Iterable[Any]) -> Iterator[str]:
    """The text deltas of a ConverseStream's event stream. An error event mid-stream surfaces as
    botocore's EventStreamError (a ClientError) while iterating; a stream that ends without
    messageStop broke off, which is a ValueError."""
    stopped = False
    for event in events:
        if not isinstance(event, dict):
            raise ValueError("a stream event is not an object")
        delta = (event.get("contentBlockDelta") or {}).get("delta") or {}
        text = delta.get("text") if isinstance(delta, dict) else None
        if isinstance(text, str) and text:
            yield text
        if "messageStop" in event:
            stopped = True
    if not stopped:
        raise ValueError("the ConverseStream ended without messageStop")
