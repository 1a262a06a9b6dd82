"""An OpenAI-compatible chat model as answerer, with JSON-schema structured output.

The model sees numbered passages and must return {"answer", "used_refs"}; it is never trusted:
the server binds its output to the candidate set afterwards (validate.py). Unreachable, timing
out, or returning malformed output twice: AnswererUnavailable (503 model_unavailable), never an
invented answer.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from citegate.answers.base import AnswererUnavailable, Draft, Evidence
from citegate.answers.completion import MalformedReply, reply_message
from citegate.answers.prompting import (
    ANSWER,
    ANSWER_SCHEMA,
    MODEL_ONLY_PROMPT,
    SYSTEM_PROMPT,
    VERIFY_PROMPT,
    VERIFY_SCHEMA,
    answer_with,
    model_only_messages,
    parse_answer,
    render_claims,
    render_passages,
    verify_with,
)
from citegate.answers.verify import Claim

# The prompt and reply pieces live in prompting.py (shared with the Bedrock answerer); their names
# stay importable from here.
__all__ = [
    "ANSWER_SCHEMA",
    "MODEL_ONLY_PROMPT",
    "SYSTEM_PROMPT",
    "VERIFY_PROMPT",
    "VERIFY_SCHEMA",
    "OpenAIChatAnswerer",
    "parse_answer",
    "render_claims",
    "render_passages",
]


class OpenAIChatAnswerer:
    name = "openai-chat"

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        timeout: float = 30.0,
        max_tokens: int = 700,
        verify_citations: bool = False,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self._api_key = api_key or "not-needed"
        self._timeout = timeout
        self._max_tokens = max_tokens
        self._client: Any = None
        self._lock = threading.Lock()
        self._schema_supported = True
        # The optional second call that judges each citation (citegate.answers.verify).
        self.verify_citations = verify_citations

    def _openai(self) -> Any:
        with self._lock:
            if self._client is None:
                import openai

                self._client = openai.OpenAI(
                    base_url=self.base_url, api_key=self._api_key, timeout=self._timeout, max_retries=1
                )
            return self._client

    def _complete(
        self,
        messages: list[dict[str, str]],
        schema: tuple[str, dict[str, Any]] = ANSWER,
    ) -> str:
        import openai

        if self._schema_supported:
            response_format: dict[str, Any] = {
                "type": "json_schema",
                "json_schema": {"name": schema[0], "strict": True, "schema": schema[1]},
            }
        else:
            response_format = {"type": "json_object"}
        try:
            completion = self._openai().chat.completions.create(
                model=self.model,
                messages=messages,
                temperature=0,
                max_tokens=self._max_tokens,
                response_format=response_format,
            )
        except openai.BadRequestError as error:
            if self._schema_supported and "response_format" in str(error):
                self._schema_supported = False  # an older server: fall back to plain JSON mode
                return self._complete(messages, schema)
            raise AnswererUnavailable(f"the model refused the request ({type(error).__name__})") from error
        except (openai.APIConnectionError, openai.APITimeoutError) as error:
            raise AnswererUnavailable(f"the model is unreachable: {type(error).__name__}") from error
        except openai.APIStatusError as error:
            raise AnswererUnavailable(f"the model answered HTTP {error.status_code}") from error
        except (openai.OpenAIError, ValueError, RecursionError) as error:
            # A 200 whose body is not JSON (the client's JSON decoding fails), or is refused by it.
            # The error's own text can name hosts: it goes to the log, not to the caller.
            raise AnswererUnavailable(
                f"the model's reply was not a chat completion ({type(error).__name__})"
            ) from error
        return _content(completion)

    def answer(self, question: str, evidence: Sequence[Evidence], context: str | None = None) -> Draft:
        return answer_with(self._complete, self.model, question, evidence, context)


def _verify(self: OpenAIChatAnswerer, question: str, claims: Sequence[Claim]) -> list[bool]:
    """Per claim, whether the model judges the passage to support the sentence (prompting.verify_with)."""
    return verify_with(self._complete, question, claims)


OpenAIChatAnswerer.verify = _verify  # type: ignore[attr-defined]


def _model_only(self: OpenAIChatAnswerer, question: str) -> str:
    """An uncited answer from the model's own knowledge, for policies that allow it (labelled by
    the caller as not coming from the knowledge base)."""
    import openai

    try:
        completion = self._openai().chat.completions.create(
            model=self.model,
            messages=model_only_messages(question),
            temperature=0,
            max_tokens=300,
        )
    except (openai.APIConnectionError, openai.APITimeoutError, openai.APIStatusError) as error:
        raise AnswererUnavailable(f"the model is unreachable: {type(error).__name__}") from error
    except (openai.OpenAIError, ValueError, RecursionError) as error:
        raise AnswererUnavailable(
            f"the model's reply was not a chat completion ({type(error).__name__})"
        ) from error
    answer = _content(completion).strip()
    if not answer:
        raise AnswererUnavailable("the model's reply was empty")
    return answer


def _content(completion: Any) -> str:
    """The reply's text; a reply that is not a chat completion (HTML, an error object, a list, a
    number where the text should be) is AnswererUnavailable, not something to repair."""
    try:
        return reply_message(completion).content
    except MalformedReply as error:
        raise AnswererUnavailable(f"the model's reply was not a chat completion: {error}") from error


OpenAIChatAnswerer.answer_from_model = _model_only  # type: ignore[attr-defined]
