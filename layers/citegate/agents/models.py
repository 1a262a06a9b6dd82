"""The chat models a caller may pick, and one client for any OpenAI-compatible one.

The offline model (`citegate-offline`) is always available: it answers extractively from the
knowledge base and has no knowledge of its own. Models configured in `CITEGATE_CHAT_MODELS` (and
the answering model of `CITEGATE_LLM_*` or `CITEGATE_BEDROCK_MODEL_ID`, when set) are reached over
the OpenAI chat API or Bedrock's Converse API (`"provider": "bedrock"`), with tool calling for the
retrieval agent and token streaming for the summary. An id that is not in the
registry is refused with MODEL_NOT_AVAILABLE (400) before any work starts.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from citegate.answers.completion import MalformedReply, reply_message, stream_text
from citegate.platform.errors import InvalidRequest, ModelUnavailable

if TYPE_CHECKING:
    from citegate.platform.settings import Settings

OFFLINE_MODEL_ID = "citegate-offline"


class ModelNotAvailable(InvalidRequest):
    kind = "model_not_available"


@dataclass(frozen=True)
class ModelSpec:
    id: str
    label: str
    model: str = ""  # the name the endpoint knows it by
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    api_key_secret_arn: str | None = None
    tools: bool = True  # whether the endpoint supports tool calling
    # "bedrock": Amazon Bedrock's Converse API with the function's IAM role (no base URL, no key).
    provider: str = "openai"
    region: str | None = None
    endpoint_url: str | None = None

    @property
    def offline(self) -> bool:
        return self.base_url is None and self.provider != "bedrock"

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "label": self.label,
            "offline": self.offline,
            "tool_calling": (not self.offline) and self.tools,
            # Only a real language model has knowledge of its own to fall back on.
            "model_knowledge": not self.offline,
        }


OFFLINE = ModelSpec(OFFLINE_MODEL_ID, "citegate offline (extractive, cited, no model knowledge)")


def configured_model(entry: Any, settings: Settings) -> ModelSpec:
    """One entry of CITEGATE_CHAT_MODELS: an OpenAI-compatible endpoint
    (`{"id", "model"?, "base_url", "api_key_secret_arn"?, "label"?, "tools"?}`) or, with
    `"provider": "bedrock"`, a Bedrock model or inference profile called with the function's IAM role
    (`{"id", "provider": "bedrock", "model"?, "region"?, "label"?}`: no URL, no key; the region
    defaults to CITEGATE_BEDROCK_REGION, then AWS_REGION)."""
    if not isinstance(entry, dict) or not entry.get("id"):
        raise ValueError(f"CITEGATE_CHAT_MODELS: each model is an object with an id, not {entry!r}")
    model_id = str(entry["id"])
    provider = str(entry.get("provider") or "openai")
    label, model = str(entry.get("label") or model_id), str(entry.get("model") or model_id)
    tools = bool(entry.get("tools", True))
    if provider == "bedrock":
        keyed = [k for k in ("base_url", "api_key", "api_key_secret_arn") if entry.get(k)]
        if keyed:
            raise ValueError(
                f"CITEGATE_CHAT_MODELS: {model_id!r} is a Bedrock model, called with the IAM role: "
                f"remove {', '.join(keyed)}"
            )
        return ModelSpec(
            model_id,
            label,
            model,
            tools=tools,
            provider="bedrock",
            region=str(entry.get("region") or settings.bedrock_region or settings.region),
            endpoint_url=settings.bedrock_endpoint_url,
        )
    if provider != "openai":
        raise ValueError(
            f"CITEGATE_CHAT_MODELS: {model_id!r}: provider is openai or bedrock, not {provider!r}"
        )
    if not entry.get("base_url"):
        raise ValueError(f"CITEGATE_CHAT_MODELS: {model_id!r} needs a base_url (or provider bedrock)")
    return ModelSpec(
        model_id,
        label,
        model,
        tools=tools,
        base_url=str(entry["base_url"]),
        api_key=entry.get("api_key"),
        api_key_secret_arn=entry.get("api_key_secret_arn"),
    )


class ModelRegistry:
    def __init__(self, specs: Sequence[ModelSpec], default_id: str | None = None) -> None:
        self._specs = {spec.id: spec for spec in specs}
        if OFFLINE_MODEL_ID not in self._specs:
            self._specs[OFFLINE_MODEL_ID] = OFFLINE
        if default_id is not None and default_id not in self._specs:
            raise ValueError(f"the default chat model {default_id!r} is not configured")
        online = [spec.id for spec in specs if not spec.offline]
        self.default_id = default_id or (online[0] if online else OFFLINE_MODEL_ID)
        self._clients: dict[str, ChatModel] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> ModelRegistry:
        specs: list[ModelSpec] = []
        if settings.llm_provider == "bedrock" and settings.bedrock_model_id:
            specs.append(
                ModelSpec(
                    id=settings.bedrock_model_id,
                    label=f"{settings.bedrock_model_id} (Amazon Bedrock)",
                    model=settings.bedrock_model_id,
                    provider="bedrock",
                    region=settings.bedrock_region or settings.region,
                    endpoint_url=settings.bedrock_endpoint_url,
                )
            )
        elif settings.llm_base_url and settings.llm_model:
            specs.append(
                ModelSpec(
                    id=settings.llm_model,
                    label=settings.llm_model,
                    model=settings.llm_model,
                    base_url=settings.llm_base_url,
                    api_key=settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
                    api_key_secret_arn=settings.llm_api_key_secret_arn,
                )
            )
        if settings.chat_models:
            try:
                entries = json.loads(settings.chat_models)
            except json.JSONDecodeError as error:
                raise ValueError(f"CITEGATE_CHAT_MODELS is not JSON: {error}") from error
            if not isinstance(entries, list):
                raise ValueError("CITEGATE_CHAT_MODELS is a JSON list of models")
            specs += [configured_model(entry, settings) for entry in entries]
        return cls(specs, settings.default_chat_model)

    def models(self) -> list[ModelSpec]:
        return list(self._specs.values())

    def get(self, model_id: str | None) -> ModelSpec:
        spec = self._specs.get(model_id or self.default_id)
        if spec is None:
            raise ModelNotAvailable(
                f"model {model_id!r} is not available",
                details={"model_id": model_id, "available": sorted(self._specs)},
            )
        return spec

    def client(self, spec: ModelSpec, timeout: float) -> ChatModel:
        with self._lock:
            client = self._clients.get(spec.id)
            if client is None:
                kind = BedrockChatModel if spec.provider == "bedrock" else ChatModel
                client = self._clients[spec.id] = kind(spec, timeout)
            return client


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class Reply:
    content: str
    tool_calls: list[ToolCall]


class ChatModel:
    """An OpenAI-compatible chat endpoint. Every transport failure is ModelUnavailable: callers
    never invent an answer when the model is down."""

    def __init__(self, spec: ModelSpec, timeout: float) -> None:
        self.spec = spec
        self._timeout = timeout
        self._client: Any = None
        self._lock = threading.Lock()

    def _openai(self) -> Any:
        with self._lock:
            if self._client is None:
                import openai

                from citegate.platform.secrets import secret_value

                key = self.spec.api_key or secret_value(None, self.spec.api_key_secret_arn)
                self._client = openai.OpenAI(
                    base_url=self.spec.base_url,
                    api_key=key or "not-needed",
                    timeout=self._timeout,
                    max_retries=1,
                )
            return self._client

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        temperature: float = 0.3,
    ) -> Reply:
        import openai

        try:
            completion = self._openai().chat.completions.create(
                model=self.spec.model,
                messages=messages,
                temperature=temperature,
                **({"tools": tools} if tools else {}),
            )
            # A 200 whose body is not a chat completion: not JSON, or JSON of another shape.
            message = reply_message(completion)
        except (openai.OpenAIError, ValueError, RecursionError) as error:
            raise ModelUnavailable(_why(error), details={"model_id": self.spec.id}) from error
        calls = []
        for call in message.tool_calls:
            try:
                arguments = json.loads(call.arguments or "{}")
            except (ValueError, RecursionError):
                arguments = {}
            calls.append(ToolCall(call.id, call.name, arguments if isinstance(arguments, dict) else {}))
        return Reply(content=message.content, tool_calls=calls)

    def stream(self, messages: list[dict[str, Any]], *, temperature: float = 0.3) -> Iterator[str]:
        """The reply's text as it is generated, delta by delta (never the accumulated text)."""
        import httpx
        import openai

        try:
            chunks = self._openai().chat.completions.create(
                model=self.spec.model, messages=messages, temperature=temperature, stream=True
            )
            yield from stream_text(chunks)
        # A stream can also break after it started: a dropped connection or a garbled chunk; or
        # never be one (a 200 of HTML, of plain JSON, of chunks of another shape, of no text).
        except (openai.OpenAIError, httpx.HTTPError, ValueError, RecursionError) as error:
            raise ModelUnavailable(_why(error), details={"model_id": self.spec.id}) from error


class BedrockChatModel(ChatModel):
    """A Bedrock model through Converse (tool calling) and ConverseStream (token streaming), with
    the function's IAM role. Failures are ModelUnavailable, described as the OpenAI path describes
    them (citegate.platform.bedrock.describe_failure): throttling is retried with backoff first."""

    def _bedrock(self) -> Any:
        from citegate.platform import bedrock

        with self._lock:
            if self._client is None:
                self._client = bedrock.runtime_client(
                    self.spec.region or "us-east-1",
                    endpoint_url=self.spec.endpoint_url,
                    timeout=self._timeout,
                )
            return self._client

    def _failure(self, error: BaseException) -> ModelUnavailable:
        import logging

        from citegate.platform import bedrock

        logging.getLogger(__name__).warning("bedrock chat model failed: %s", error)
        return ModelUnavailable(bedrock.describe_failure(error), details={"model_id": self.spec.id})

    def _request(self, messages: list[dict[str, Any]], temperature: float) -> dict[str, Any]:
        from citegate.platform import bedrock

        system, turns = bedrock.converse_messages(messages)
        request: dict[str, Any] = {
            "modelId": self.spec.model,
            "messages": turns,
            "inferenceConfig": {"temperature": temperature},
        }
        if system:
            request["system"] = system
        return request

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        temperature: float = 0.3,
    ) -> Reply:
        from citegate.platform import bedrock

        request = self._request(messages, temperature)
        if tools:
            request["toolConfig"] = {"tools": bedrock.converse_tools(tools)}
        try:
            reply = bedrock.read_converse(self._bedrock().converse(**request))
        except bedrock.failures() as error:
            raise self._failure(error) from error
        calls = [ToolCall(use_id, name, given) for use_id, name, given in reply.tool_uses]
        return Reply(content=reply.text, tool_calls=calls)

    def stream(self, messages: list[dict[str, Any]], *, temperature: float = 0.3) -> Iterator[str]:
        """ConverseStream's text deltas as they arrive; an error event or a broken stream midway
        is ModelUnavailable, like a failure before the first delta."""
        import random
        import time

        from citegate.platform import bedrock

        request = self._request(messages, temperature)
        for attempt in range(1, bedrock.DEFAULT_ATTEMPTS + 1):
            sent = False
            try:
                response = self._bedrock().converse_stream(**request)
                for piece in bedrock.stream_text(response["stream"]):
                    sent = True
                    yield piece
                return
            except bedrock.failures() as error:
                # Throttling delivered as the stream's first event (after the HTTP 200, where
                # botocore's retries cannot see it) is retried like a throttled call: jittered
                # backoff, until the attempts are spent. Once text was sent, nothing is retried.
                throttled = bedrock.error_code(error) in bedrock.THROTTLED
                if sent or not throttled or attempt == bedrock.DEFAULT_ATTEMPTS:
                    raise self._failure(error) from error
                time.sleep(random.uniform(0, 0.5 * 2**attempt))


def _why(error: Exception) -> str:
    import openai

    if isinstance(error, openai.APIStatusError):
        return f"the model answered HTTP {error.status_code}"
    if isinstance(error, openai.APITimeoutError):
        return "the model did not answer in time"
    if isinstance(error, openai.APIConnectionError):
        return "the model is unreachable"
    if isinstance(error, openai.OpenAIError):
        return f"the model refused the request: {type(error).__name__}"
    if isinstance(error, MalformedReply):
        return f"the model's reply was not a chat completion: {error}"
    if isinstance(error, ValueError | RecursionError):
        return f"the model's reply was not a chat completion: {type(error).__name__}"
    return f"the model's reply broke off: {type(error).__name__}"
