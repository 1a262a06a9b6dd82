"""The OpenAI protocol's translation (citegate.api.openai_compat): messages to a conversation,
answers to annotations, content to deltas, errors to OpenAI's shape."""

from __future__ import annotations

import pytest

from citegate.api import routes
from citegate.api.openai_compat import (
    ChatCompletionRequest,
    ChatMessage,
    base_url_of,
    citation_url,
    conversation_of,
    deltas,
    failure_events,
    url_citations,
)
from citegate.platform.errors import (
    CitegateError,
    DatasetNotAllowed,
    InvalidRequest,
    ModelNotFound,
    RateLimited,
    Unauthorized,
    error_body,
    error_code,
    error_status,
)


def messages(*pairs: tuple[str, object]) -> list[ChatMessage]:
    return [ChatMessage.model_validate({"role": role, "content": content}) for role, content in pairs]


def test_the_last_user_message_is_the_question_and_earlier_ones_the_conversation() -> None:
    found = conversation_of(
        messages(
            ("system", "Answer briefly."),
            ("user", "What colour is Mars?"),
            ("assistant", "Red. [1]"),
            ("developer", "In English."),
            (
                "user",
                [
                    {"type": "text", "text": "Does it have"},
                    {"type": "image_url"},
                    {"type": "text", "text": "moons?"},
                ],
            ),
        )
    )
    assert found.question == "Does it have\nmoons?"
    assert found.earlier_questions == ["What colour is Mars?"]
    assert found.instruction == "Answer briefly.\nIn English."


@pytest.mark.parametrize(
    "conversation",
    [[("system", "x")], [("assistant", "hello")], [("user", "   ")], [("user", "x" * 4001)]],
)
def test_a_conversation_without_a_question_is_invalid(conversation: list[tuple[str, object]]) -> None:
    with pytest.raises(InvalidRequest):
        conversation_of(messages(*conversation))


def test_unknown_fields_are_ignored_and_known_ones_checked() -> None:
    request = ChatCompletionRequest.model_validate(
        {
            "model": "citegate",
            "messages": [{"role": "user", "content": "q", "tool_calls": []}],
            "n": 2,
            "response_format": {"type": "json_object"},
            "stream_options": {"include_usage": True, "other": 1},
        }
    )
    assert request.stream_options and request.stream_options.include_usage
    with pytest.raises(ValueError):
        ChatCompletionRequest.model_validate({"model": "citegate", "messages": [], "temperature": 1})
    with pytest.raises(ValueError):
        ChatCompletionRequest.model_validate(
            {"model": "citegate", "messages": [{"role": "user"}], "temperature": 9}
        )


def test_one_url_citation_per_cited_passage_on_the_first_sentence_carrying_its_marker() -> None:
    content = "Mars is red. [1] It has two moons. [2][1] Phobos is the larger. [2]"
    citations = [
        {
            "url": "https://docs.example/mars",
            "anchor": "colour",
            "title": "Mars",
            "kb_id": "k",
            "document_id": "d",
        },
        {"url": "", "anchor": "", "title": "", "heading": "Moons", "kb_id": "k", "document_id": "d2"},
        {"url": "https://never.cited", "anchor": "", "title": "x", "kb_id": "k", "document_id": "d3"},
    ]
    found = url_citations(content, citations, "https://api.example")
    assert [a["url_citation"]["url"] for a in found] == [
        "https://docs.example/mars#colour",
        "https://api.example/v1/kb/k/documents/d2",
    ]
    spans = [(a["url_citation"]["start_index"], a["url_citation"]["end_index"]) for a in found]
    assert [content[s:e] for s, e in spans] == ["Mars is red. [1]", "It has two moons. [2][1]"]
    assert [a["url_citation"]["title"] for a in found] == ["Mars", "Moons"]
    assert all(a["type"] == "url_citation" for a in found)


def test_a_url_with_its_own_fragment_keeps_it() -> None:
    citation = {"url": "https://d.example/p#here", "anchor": "there", "kb_id": "k", "document_id": "d"}
    assert citation_url(citation, "http://x") == "https://d.example/p#here"


def test_indexes_count_code_points_in_chinese_content() -> None:
    content = "火星是红色的。[1]它有两颗卫星。[2]"
    citations = [{"url": f"https://d/{n}", "kb_id": "k", "document_id": "d"} for n in (1, 2)]
    spans = [
        (a["url_citation"]["start_index"], a["url_citation"]["end_index"])
        for a in url_citations(content, citations, "")
    ]
    assert [content[s:e] for s, e in spans] == ["火星是红色的。[1]", "它有两颗卫星。[2]"]


def test_deltas_join_back_into_the_content() -> None:
    content = "  Mars is red. [1]\nIt has two moons, Phobos and Deimos. [2] "
    pieces = list(deltas(content, words=3))
    assert "".join(pieces) == content
    assert len(pieces) > 2 and all(pieces)
    assert list(deltas("")) == []


def test_the_base_url_is_the_one_the_caller_used() -> None:
    assert base_url_of({"host": "127.0.0.1:8080"}) == "http://127.0.0.1:8080"
    assert base_url_of({"host": "api.example", "x-forwarded-proto": "https"}) == "https://api.example"
    assert base_url_of({"host": "api.example"}) == "https://api.example"


@pytest.mark.parametrize(
    ("error", "status", "code", "kind"),
    [
        (InvalidRequest("bad"), 400, "invalid_request", "invalid_request_error"),
        (Unauthorized("who"), 401, "invalid_api_key", "authentication_error"),
        (DatasetNotAllowed("no"), 403, "dataset_not_allowed", "permission_error"),
        (ModelNotFound("none"), 404, "model_not_found", "invalid_request_error"),
        (RateLimited("slow"), 429, "rate_limit_exceeded", "rate_limit_error"),
    ],
)
def test_errors_in_openais_shape(error: CitegateError, status: int, code: str, kind: str) -> None:
    found = error_code(error, "openai")
    assert found == code and error_status(error, "openai") == status
    body = error_body(found, str(error), "req-1", {"x": 1}, family="openai")
    assert body == {"error": {"message": str(error), "type": kind, "param": None, "code": code}}


def test_a_stream_that_fails_ends_with_an_error_object() -> None:
    events = failure_events("model_unavailable", "the model is unreachable")
    assert events == [
        {
            "error": {
                "message": "the model is unreachable",
                "type": "server_error",
                "param": None,
                "code": "model_unavailable",
            }
        }
    ]


def test_the_routes_are_governed_by_the_ask_tool_in_the_openai_family() -> None:
    found = {r.route_key: r for r in routes.ROUTES if r.family == "openai"}
    assert set(found) == {"GET /v1/models", "POST /v1/chat/completions"}
    assert all(r.tool == "ask" and not r.anonymous for r in found.values())
    assert found["POST /v1/chat/completions"].streaming
    assert routes.family_of_path("/v1/chat/nothing") == "openai"
    assert routes.family_of_path("/v1/nothing") == "v1"


def test_a_system_message_reaches_a_model_answerer_for_the_form_only() -> None:
    from citegate.answers.base import Evidence, caller_instruction
    from citegate.answers.prompting import SYSTEM_PROMPT, answer_messages

    evidence = [Evidence(1, "r_1", "Mars is red.", 0.5)]
    with caller_instruction("  Answer in French.  "):
        system = answer_messages("What colour is Mars?", evidence, None)[0]["content"]
    assert system.startswith(SYSTEM_PROMPT) and system.endswith("add sources:\nAnswer in French.")
    assert answer_messages("What colour is Mars?", evidence, None)[0]["content"] == SYSTEM_PROMPT
