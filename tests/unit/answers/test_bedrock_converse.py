"""The Bedrock answerer against the loopback Bedrock runtime: the Converse request it sends, the
forced-tool structured output, the same drafts (and so the same binding) as the OpenAI path, the
repair turn, the fallback to JSON text, and every failure as the OpenAI path reports it."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from tests.fakes.bedrock_server import ROLE_ARN, FakeBedrock
from tests.fakes.openai_server import FakeOpenAIServer

from citegate.answers.base import AnswererUnavailable, Evidence
from citegate.answers.bedrock_converse import BedrockConverseAnswerer
from citegate.answers.openai_chat import OpenAIChatAnswerer
from citegate.answers.prompting import ANSWER_SCHEMA, SYSTEM_PROMPT, VERIFY_SCHEMA
from citegate.answers.validate import bind
from citegate.answers.verify import verify_bound

EVIDENCE = [
    Evidence(1, "r_0123456789abcdef", "Olympus Mons rises 22 km above Mars. It is a shield volcano.", 1.0),
    Evidence(2, "r_fedcba9876543210", "Everest is 8.8 km high. It is in the Himalaya.", 0.5, title="Everest"),
]
HAIKU = "anthropic.claude-3-5-haiku-20241022-v1:0"
QUESTION = "How high is Olympus Mons?"


def answerer(server: FakeBedrock, model: str = HAIKU, **options: Any) -> BedrockConverseAnswerer:
    options.setdefault("max_attempts", 2)
    return BedrockConverseAnswerer(model_id=model, region="us-east-1", endpoint_url=server.url, **options)


def converse_calls(server: FakeBedrock, model: str | None = None) -> list[dict[str, Any]]:
    return [
        c for c in server.calls if c["operation"] == "converse" and (model is None or c["model"] == model)
    ]


def test_the_answer_is_the_forced_tools_input_bound_to_the_passages(bedrock: FakeBedrock) -> None:
    draft = answerer(bedrock).answer(QUESTION, EVIDENCE, context="What is on Mars?")
    assert draft.answer == "Olympus Mons rises 22 km above Mars. [1]"
    assert draft.used_refs == ("r_0123456789abcdef",) and not draft.declined
    assert draft.model == HAIKU
    assert draft.diagnostics["input_tokens"] > 0 and draft.diagnostics["output_tokens"] == 60
    bound = bind(draft, EVIDENCE)
    assert bound.used_refs == ["r_0123456789abcdef"] and bound.answer.endswith("[1]")

    [call] = converse_calls(bedrock)
    body = call["body"]
    assert body["system"] == [{"text": SYSTEM_PROMPT}]
    [turn] = body["messages"]
    assert turn["role"] == "user"
    text = turn["content"][0]["text"]
    assert text.startswith("Earlier questions in this conversation: What is on Mars?")
    assert "[1] ref=r_0123456789abcdef" in text and "[2] ref=r_fedcba9876543210 title='Everest'" in text
    assert body["inferenceConfig"] == {"maxTokens": 700, "temperature": 0}
    assert body["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "cited_answer",
                    "description": "Give your reply as this tool's input.",
                    "inputSchema": {"json": ANSWER_SCHEMA},
                }
            }
        ],
        "toolChoice": {"tool": {"name": "cited_answer"}},
    }


@pytest.mark.parametrize("behaviour", ["cite-first", "cite-foreign", "forge-all", "cite-mixed", "decline"])
def test_drafts_and_their_binding_are_the_openai_paths(bedrock: FakeBedrock, behaviour: str) -> None:
    """The two fakes answer by the same rules; the two answerers must propose the same drafts,
    which the server then binds identically (forged refs dropped, markers renumbered...)."""
    with FakeOpenAIServer() as openai_server:
        by_openai = OpenAIChatAnswerer(base_url=openai_server.url, api_key="k", model=behaviour)
        expected = by_openai.answer(QUESTION, EVIDENCE)
    got = answerer(bedrock, behaviour).answer(QUESTION, EVIDENCE)
    assert (got.answer, got.used_refs, got.declined, got.reason) == (
        expected.answer,
        expected.used_refs,
        expected.declined,
        expected.reason,
    )
    assert bind(got, EVIDENCE) == bind(expected, EVIDENCE)


def test_no_evidence_is_a_decline_without_a_call(bedrock: FakeBedrock) -> None:
    draft = answerer(bedrock).answer(QUESTION, [])
    assert draft.declined and not bedrock.calls


def test_malformed_output_gets_one_repair_turn_then_is_unavailable(bedrock: FakeBedrock) -> None:
    with pytest.raises(AnswererUnavailable, match="malformed output twice"):
        answerer(bedrock, "malformed").answer(QUESTION, EVIDENCE)
    first, repair = converse_calls(bedrock)
    assert len(first["body"]["messages"]) == 1
    roles = [m["role"] for m in repair["body"]["messages"]]
    assert roles == ["user", "assistant", "user"]
    assert "That was not valid" in repair["body"]["messages"][2]["content"][0]["text"]


def test_a_model_without_forced_tool_choice_is_asked_for_json_text(bedrock: FakeBedrock) -> None:
    model = answerer(bedrock, "no-forced-tool")
    draft = model.answer(QUESTION, EVIDENCE)
    assert draft.answer.endswith("[1]") and draft.used_refs == ("r_0123456789abcdef",)
    refused, fallback = converse_calls(bedrock)
    assert refused["body"]["toolConfig"]["toolChoice"] == {"tool": {"name": "cited_answer"}}
    assert "toolConfig" not in fallback["body"]
    assert fallback["body"]["system"][0] == {"text": SYSTEM_PROMPT}
    assert "JSON schema" in fallback["body"]["system"][1]["text"]
    model.answer(QUESTION, EVIDENCE)
    assert len(converse_calls(bedrock)) == 3, "learnt once: no second refused call"


def test_a_reply_in_text_instead_of_the_tool_is_read_as_json(bedrock: FakeBedrock) -> None:
    draft = answerer(bedrock, "text-json").answer(QUESTION, EVIDENCE)
    assert draft.answer.endswith("[1]")


def test_throttling_is_retried_with_backoff_then_answered(bedrock: FakeBedrock) -> None:
    draft = answerer(bedrock, "throttle-once").answer(QUESTION, EVIDENCE)
    assert draft.answer.endswith("[1]")
    assert len(converse_calls(bedrock)) == 2


def test_throttling_on_every_attempt_is_unavailable(bedrock: FakeBedrock) -> None:
    with pytest.raises(AnswererUnavailable) as raised:
        answerer(bedrock, "throttle-always", max_attempts=3).answer(QUESTION, EVIDENCE)
    assert (
        str(raised.value)
        == "the model answered HTTP 429 (ThrottlingException): Bedrock throttled every attempt"
    )
    assert len(converse_calls(bedrock)) == 3


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (
            "access-denied",
            "the model may not be used (AccessDeniedException): model access is not enabled for this "
            "model in this account and region, or the service's role may not invoke it",
        ),
        (
            "not-enabled",
            "the model may not be used (AccessDeniedException): model access is not enabled for this "
            "model in this account and region, or the service's role may not invoke it",
        ),
        ("validation", "the model refused the request (ValidationException)"),
    ],
)
def test_refusals_say_what_kind_and_nothing_of_bedrocks_message(
    bedrock: FakeBedrock, model: str, expected: str
) -> None:
    with pytest.raises(AnswererUnavailable) as raised:
        answerer(bedrock, model).answer(QUESTION, EVIDENCE)
    assert str(raised.value) == expected
    assert ROLE_ARN not in str(raised.value) and "123456789012" not in str(raised.value)
    assert len(converse_calls(bedrock)) == 1, "a refusal is not retried"


def test_an_unreachable_endpoint_is_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = BedrockConverseAnswerer(
        model_id=HAIKU, region="us-east-1", endpoint_url=f"http://127.0.0.1:{port}", max_attempts=1, timeout=2
    )
    with pytest.raises(AnswererUnavailable, match="the model is unreachable: EndpointConnectionError"):
        model.answer(QUESTION, EVIDENCE)


def test_verification_judges_each_citation_through_its_own_forced_tool(bedrock: FakeBedrock) -> None:
    model = answerer(bedrock, "cite-mixed", verify_citations=True)
    draft = model.answer(QUESTION, EVIDENCE)
    checked = verify_bound(QUESTION, bind(draft, EVIDENCE), EVIDENCE, model)
    assert checked.bound.answer == "Olympus Mons rises 22 km above Mars. [1]"
    assert checked.bound.removed == ["Olympus Mons is made of cheese."]
    judge = converse_calls(bedrock)[-1]["body"]
    assert judge["toolConfig"]["toolChoice"] == {"tool": {"name": "citation_verdicts"}}
    assert judge["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"] == VERIFY_SCHEMA


def test_model_knowledge_is_a_plain_converse_call(bedrock: FakeBedrock) -> None:
    text = answerer(bedrock).answer_from_model("At what temperature does tungsten boil?")
    assert "tungsten" in text
    body = converse_calls(bedrock)[-1]["body"]
    assert "toolConfig" not in body and body["inferenceConfig"]["maxTokens"] == 300
