"""Issue 30: LangChain's `ChatOpenAI` (langchain-openai, a dev dependency) pointed at citegate over
loopback, invoke and stream, offline: tiktoken is never asked for an encoding (it would download
one), so neither call needs the network.

What LangChain keeps of a citegate completion: the content with its `[n]` markers, the finish
reason, the model, the completion id and (with `include_response_headers`) the response headers,
whose request id finds the call's audit record and its cited chunks. Its Chat Completions parser
(langchain-openai 1.7) drops `message.annotations` and the `citations`/`citegate` fields, so the
citation objects are read with the `openai` SDK (docs/openai.md says so)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

from tests.integration.conftest import TOKEN, audited
from tests.integration.openai_compat.test_openai_sdk import planets, service  # noqa: F401


@pytest.fixture(autouse=True)
def no_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    """tiktoken would fetch its encodings from the network on first use: make any use fail."""
    import tiktoken

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("tiktoken was asked for an encoding (a download)")

    monkeypatch.setattr(tiktoken, "get_encoding", refuse)
    monkeypatch.setattr(tiktoken, "encoding_for_model", refuse)


def chat(live_url: str, model: str) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=f"{live_url}/v1",
        api_key=TOKEN,  # type: ignore[arg-type]
        model=model,
        max_retries=0,
        timeout=60,
        include_response_headers=True,
    )


def test_invoke_answers_with_its_markers(live_url: str, planets: str, stack: Any) -> None:  # noqa: F811
    reply = chat(live_url, f"citegate/{planets}").invoke(
        [SystemMessage("Answer briefly."), HumanMessage("What colour is the surface of Mars?")]
    )
    assert isinstance(reply, AIMessage)
    content = str(reply.content)
    assert "red" in content and "[1]" in content
    meta = reply.response_metadata
    assert meta["finish_reason"] == "stop" and meta["model_name"] == f"citegate/{planets}"
    request_id = meta["headers"]["apigw-requestid"]
    assert meta["id"] == f"chatcmpl-{request_id}"
    assert reply.usage_metadata and reply.usage_metadata["output_tokens"] > 0
    (record,) = audited(stack, request_id)
    assert (record.route, record.status, record.tool) == ("POST /v1/chat/completions", 200, "ask")
    assert record.cited_chunk_ids  # the passages behind the markers, by the request id


def test_stream_delivers_the_answer_in_pieces(live_url: str, planets: str) -> None:  # noqa: F811
    # Scoped to the planets base: "citegate" alone searches every base the suite's other modules
    # made on the shared stack, whose passages can outrank Mars's (a decline seen in CI).
    pieces = list(chat(live_url, f"citegate/{planets}").stream("What colour is the surface of Mars?"))
    assert all(isinstance(p, AIMessageChunk) for p in pieces)
    texts = [str(p.content) for p in pieces if p.content]
    assert len(texts) > 1, "one delta per few words, not one block"
    whole = pieces[0]
    for piece in pieces[1:]:
        whole += piece
    content = str(whole.content)
    assert "".join(texts) == content and "red" in content and "[1]" in content
    assert whole.response_metadata.get("finish_reason") == "stop"


def test_a_model_the_caller_lacks_is_langchains_not_found(live_url: str) -> None:
    import openai

    with pytest.raises(openai.NotFoundError) as missing:
        chat(live_url, "gpt-4o").invoke("What colour is Mars?")
    assert missing.value.code == "model_not_found"
