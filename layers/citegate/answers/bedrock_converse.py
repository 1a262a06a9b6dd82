"""An Amazon Bedrock model as answerer, through the Converse API, called with the function's IAM role.

The same prompt, reply reading and repair turn as the OpenAI-compatible answerer (prompting.py),
so its drafts are bound and verified the same way. Structured output is a forced tool: the model
must call `cited_answer` (or `citation_verdicts`) whose input schema is the answer's JSON schema,
and its toolUse input is the reply. A model that takes no forced tool choice (Bedrock answers
ValidationException naming the tool choice) is asked for plain JSON instead, as an OpenAI-
compatible server without json_schema is.

Failures are AnswererUnavailable (503 model_unavailable), with the OpenAI path's descriptions:
throttling is retried with backoff by botocore (standard mode) and only then unavailable; access
denied or a model not enabled says so, without Bedrock's message (it names the role and account).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from citegate.answers.base import AnswererUnavailable, Draft, Evidence
from citegate.answers.prompting import (
    ANSWER,
    Messages,
    answer_with,
    model_only_messages,
    schema_instruction,
    verify_with,
)
from citegate.answers.verify import Claim
from citegate.platform import bedrock

logger = logging.getLogger(__name__)


class BedrockConverseAnswerer:
    name = "bedrock-converse"

    def __init__(
        self,
        *,
        model_id: str,
        region: str,
        endpoint_url: str | None = None,
        timeout: float = 30.0,
        max_tokens: int = 700,
        max_attempts: int = bedrock.DEFAULT_ATTEMPTS,
        verify_citations: bool = False,
    ) -> None:
        self.model = model_id
        self.region = region
        self._max_tokens = max_tokens
        self._client = bedrock.LazyClient(
            lambda: bedrock.runtime_client(
                region, endpoint_url=endpoint_url, timeout=timeout, max_attempts=max_attempts
            )
        )
        # Whether the model takes a forced tool choice; learnt from its first refusal.
        self._forced_tool = True
        # The optional second call that judges each citation (citegate.answers.verify).
        self.verify_citations = verify_citations
        # Tokens of this thread's current answer, for the draft's diagnostics (cost per question).
        self._calls = threading.local()

    def __repr__(self) -> str:
        return f"BedrockConverseAnswerer(model_id={self.model!r}, region={self.region!r})"

    def _converse(self, request: dict[str, Any]) -> bedrock.ConverseReply:
        try:
            reply = bedrock.read_converse(self._client.get().converse(modelId=self.model, **request))
        except bedrock.failures() as error:
            raise _unavailable(error) from error
        usage: dict[str, int] | None = getattr(self._calls, "usage", None)
        if usage is not None:
            usage["input_tokens"] = usage.get("input_tokens", 0) + reply.input_tokens
            usage["output_tokens"] = usage.get("output_tokens", 0) + reply.output_tokens
        return reply

    def _complete(self, messages: Messages, schema: tuple[str, dict[str, Any]] = ANSWER) -> str:
        """The reply to `messages`: the forced tool's input as JSON text, or the model's text."""
        import json

        from botocore.exceptions import ClientError

        name, json_schema = schema
        system, turns = bedrock.converse_messages(messages)
        request: dict[str, Any] = {
            "messages": turns,
            "inferenceConfig": {"maxTokens": self._max_tokens, "temperature": 0},
        }
        if self._forced_tool:
            if system:
                request["system"] = system
            request["toolConfig"] = {
                "tools": [
                    {
                        "toolSpec": {
                            "name": name,
                            "description": "Give your reply as this tool's input.",
                            "inputSchema": {"json": json_schema},
                        }
                    }
                ],
                "toolChoice": {"tool": {"name": name}},
            }
            try:
                reply = self._converse(request)
            except AnswererUnavailable as failure:
                error = failure.__cause__
                if not (
                    isinstance(error, ClientError)
                    and bedrock.error_code(error) == "ValidationException"
                    and "tool" in str(error.response.get("Error", {}).get("Message", "")).lower()
                ):
                    raise
                logger.info("model %s takes no forced tool choice: asking for JSON text", self.model)
                self._forced_tool = False
                return self._complete(messages, schema)
            for _, used, given in reply.tool_uses:
                if used == name:
                    return json.dumps(given, ensure_ascii=False)
            return reply.text  # it answered in text after all: read it as JSON
        request["system"] = [*system, {"text": schema_instruction(schema)}]
        return self._converse(request).text

    def answer(self, question: str, evidence: Sequence[Evidence], context: str | None = None) -> Draft:
        usage: dict[str, int] = {}
        self._calls.usage = usage
        try:
            draft = answer_with(self._complete, self.model, question, evidence, context)
        finally:
            self._calls.usage = None
        draft.diagnostics.update(usage)
        return draft

    def verify(self, question: str, claims: Sequence[Claim]) -> list[bool]:
        return verify_with(self._complete, question, claims)

    def answer_from_model(self, question: str) -> str:
        """An uncited answer from the model's own knowledge, for policies that allow it (labelled
        by the caller as not coming from the knowledge base)."""
        system, turns = bedrock.converse_messages(model_only_messages(question))
        reply = self._converse(
            {"system": system, "messages": turns, "inferenceConfig": {"maxTokens": 300, "temperature": 0}}
        )
        answer = reply.text.strip()
        if not answer:
            raise AnswererUnavailable("the model's reply was empty")
        return answer


def _unavailable(error: BaseException) -> AnswererUnavailable:
    # The caller gets the kind of failure; the log gets Bedrock's own message.
    logger.warning("bedrock converse failed: %s", error)
    return AnswererUnavailable(bedrock.describe_failure(error))
