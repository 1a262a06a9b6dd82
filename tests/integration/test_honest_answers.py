"""Issue 21, through the gateway: answers come only from sentences that answer, every family that
cites returns exactly what resolve_refs returns for the same refs, and the model path cannot bind
an answer to evidence it made up."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from citegate.answers.openai_chat import OpenAIChatAnswerer
from citegate.runtime.gateway import create_app
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.conftest import SAMPLES, ingest
from tests.unit.answers.test_honest_extractive import KUNORA

PROJECT = "kunora-kgent"
PATH = "docs/kunora-kgent"


@pytest.fixture(scope="module")
def docs(client: TestClient) -> str:
    """kunora-kgent's documentation and the Great Wall sample, in one approved knowledge base."""
    kb = client.post("/v1/kb", json={"name": "honest " + uuid.uuid4().hex[:6], "status": "approved"}).json()[
        "kb_id"
    ]
    for name, text in KUNORA.items():
        metadata = {"project": PROJECT, "version": "main", "path": f"{PATH}/{name}"}
        assert ingest(client, kb, text=text, source_name=name, metadata=metadata)["status"] == "succeeded"
    wall = (SAMPLES / "长城.md").read_text(encoding="utf-8")
    metadata = {"project": PROJECT, "version": "main", "path": f"{PATH}/great-wall.md"}
    assert ingest(client, kb, text=wall, source_name="长城.md", metadata=metadata)["status"] == "succeeded"
    return str(kb)


def resolved(client: TestClient, kb: str, refs: list[str]) -> list[dict[str, Any]]:
    body = client.post(f"/v1/kb/{kb}/resolve_refs", json={"ref_ids": refs}).json()
    assert body["missing"] == []
    return list(body["citations"])


def as_resolved(asked: dict[str, Any]) -> list[dict[str, Any]]:
    """`ask`'s citations as resolve_refs gives them: the same, less the answer sentences `ask` adds
    to each (which must be there, and be sentences of the answer)."""
    plain = []
    for citation in asked["citations"]:
        sentences = citation["answer_sentences"]
        assert sentences and all(s.rstrip("。.") in asked["answer"] for s in sentences), citation
        plain.append({k: v for k, v in citation.items() if k != "answer_sentences"})
    return plain


# -- what the extractive answerer quotes, on the /v1 ask route -------------------------------------


@pytest.mark.parametrize(
    "question",
    [
        "Who maintains kunora-kgent?",
        "What port does kunora-kgent listen on?",
        "What licence is kunora-kgent released under?",
        "How do I uninstall kunora-kgent?",
    ],
)
def test_what_the_docs_do_not_say_is_declined(client: TestClient, docs: str, question: str) -> None:
    body = client.post(f"/v1/kb/{docs}/ask", json={"question": question}).json()
    assert body["no_answer"] is True and body["citations"] == [] and body["used_refs"] == []
    # The reason names what is missing: from the passages found, or from the whole knowledge base.
    assert re.search(r"(?:passages found do|knowledge base does) not mention '", body["no_answer_reason"])


def test_kb_ask_cites_exactly_what_resolve_refs_returns(client: TestClient, docs: str) -> None:
    body = client.post(f"/v1/kb/{docs}/ask", json={"question": "Where is agent memory stored?"}).json()
    assert body["no_answer"] is False, body
    assert "~/.kgent/memory.db" in body["answer"] and "#" not in body["answer"]
    assert as_resolved(body) == resolved(client, docs, body["used_refs"])
    first = body["citations"][0]
    # The section the quoted sentence sits in, and the sentence inside the snippet.
    assert first["heading"] == "Agent memory" and first["anchor"] == "agent-memory"
    assert "Agent memory is stored in a local SQLite database" in first["snippet"]
    assert "#" not in first["snippet"]


def test_the_great_wall_is_answered_with_its_length_from_the_length_section(
    client: TestClient, docs: str
) -> None:
    body = client.post(f"/v1/kb/{docs}/ask", json={"question": "长城有多长？"}).json()
    assert body["no_answer"] is False, body
    assert "21,196.18 公里" in body["answer"] and "没有精确的答案" not in body["answer"]
    cited = next(c for c in body["citations"] if "21,196.18" in c["snippet"])
    assert cited["heading"] == "长度" and cited["anchor"] == "长度"
    assert as_resolved(body) == resolved(client, docs, body["used_refs"])


# -- the Answer API and Agent Access cite what resolve_refs returns ---------------------------------


def as_answer_citation(citation: dict[str, Any]) -> dict[str, Any]:
    """resolve_refs' citation in spec 000's shape (the fields both carry)."""
    return {
        "chunkId": citation["ref_id"],
        "snippet": citation["snippet"],
        "path": citation["path"],
        "url": citation["url"],
        "anchor": citation["anchor"],
        "title": citation["title"] or citation["source_name"],
        "sourceProject": citation["project"],
        "version": citation["version"],
        "kbId": citation["kb_id"],
    }


def assert_cites_resolution(client: TestClient, result: dict[str, Any]) -> None:
    assert result["citations"], result
    for citation in result["citations"]:
        (resolution,) = resolved(client, citation["kbId"], [citation["chunkId"]])
        assert {k: citation[k] for k in as_answer_citation(resolution)} == as_answer_citation(resolution)


def test_answer_api_citations_equal_their_resolution(client: TestClient, docs: str) -> None:
    result = TestClient(create_app()).post("/answer/ask", json={"question": "How long may a tool call run?"})
    assert result.status_code == 200, result.text
    body = result.json()
    assert "60 seconds" in body["answer"]
    assert_cites_resolution(client, body)


def test_agent_ask_citations_equal_their_resolution(client: TestClient, docs: str) -> None:
    agent_id = "agent-" + uuid.uuid4().hex[:8]
    policy = {"tools": ["ask"], "knowledge_bases": [docs], "scope": {"projects": [PROJECT]}}
    client.put(f"/admin/policies/agent:{agent_id}", json=policy).raise_for_status()
    token = client.post(f"/admin/agents/{agent_id}/credentials", json={"kind": "token"}).json()["secret"]
    agent = TestClient(create_app(), headers={"Authorization": f"Bearer {token}"})
    body = agent.post("/agent/tools/ask", json={"question": "How do I install kunora-kgent?"}).json()
    assert "pip install kunora-kgent" in body["answer"], body
    assert_cites_resolution(client, body)


def test_a_question_the_docs_do_not_answer_is_low_with_a_reason_and_actions(docs: str) -> None:
    body = (
        TestClient(create_app()).post("/answer/ask", json={"question": "Who maintains kunora-kgent?"}).json()
    )
    assert body["answer"] == "" and body["citations"] == [] and body["confidence"] == "low"
    assert body["noAnswerReason"]["code"] == "no_answer" and "maintains" in body["noAnswerReason"]["reason"]
    assert {a["type"] for a in body["actions"]} >= {"create_feedback", "create_improvement_task"}


# -- the model path --------------------------------------------------------------------------------


@pytest.fixture
def model(stack: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with FakeOpenAIServer() as server:

        def use(name: str, verify: bool = False) -> FakeOpenAIServer:
            answerer = OpenAIChatAnswerer(
                base_url=server.url, api_key="k", model=name, timeout=2.0, verify_citations=verify
            )
            monkeypatch.setitem(stack.services.__dict__, "answerer", answerer)
            return server

        yield use


QUESTION = {"question": "Where is agent memory stored?"}


@pytest.fixture(scope="module")
def mars(client: TestClient) -> str:
    """One short section: a passage's wider context (its parent) is the passage itself, so what
    the fake model quotes from the context is in the passage it cites."""
    kb = client.post("/v1/kb", json={"name": "mars " + uuid.uuid4().hex[:6]}).json()["kb_id"]
    text = "Olympus Mons on Mars is about 22 km high. It is the tallest volcano in the Solar System."
    assert ingest(client, kb, text=text, source_name="mars.txt")["status"] == "succeeded"
    return str(kb)


MARS = {"question": "How high is Olympus Mons?"}


def test_forged_refs_are_no_answer_whatever_the_markers_say(
    client: TestClient, docs: str, model: Any
) -> None:
    model("forge-all")  # "A made-up claim [1]." citing only a ref it was never given
    body = client.post(f"/v1/kb/{docs}/ask", json=QUESTION).json()
    assert body["no_answer"] is True and body["used_refs"] == [] and body["citations"] == []
    assert "made-up" not in body["answer"]
    assert body["stats"]["dropped_refs"] == ["r_00000000deadbeef"]


def test_a_sentence_whose_every_marker_was_dropped_is_removed_and_reported(
    client: TestClient, docs: str, model: Any
) -> None:
    model("cite-foreign")  # "<passage 1's first sentence>. [1] Also something invented. [99]"
    body = client.post(f"/v1/kb/{docs}/ask", json=QUESTION).json()
    assert body["no_answer"] is False and "invented" not in body["answer"]
    assert body["stats"]["removed_sentences"] == 1
    result = TestClient(create_app()).post("/answer/ask", json=QUESTION).json()
    assert "invented" not in result["answer"]
    assert {"sentence": "Also something invented.", "citations": [], "supported": False} in result[
        "grounding"
    ]
    assert result["confidence"] != "high"
    assert_cites_resolution(client, result)


def test_verification_off_by_default_keeps_a_cited_but_unsupported_sentence(
    client: TestClient, mars: str, model: Any
) -> None:
    server = model("cite-mixed")  # a sentence of passage [1] and "Olympus Mons is made of cheese. [1]"
    body = client.post(f"/v1/kb/{mars}/ask", json=MARS).json()
    assert "cheese" in body["answer"] and "verification" not in body["stats"]
    assert len(server.requests) == 1


def test_verification_takes_off_what_the_cited_passage_does_not_say(
    client: TestClient, mars: str, model: Any
) -> None:
    server = model("cite-mixed", verify=True)
    body = client.post(f"/v1/kb/{mars}/ask", json=MARS).json()
    assert body["no_answer"] is False and "cheese" not in body["answer"]
    verdicts = body["stats"]["verification"]
    assert [v["supported"] for v in verdicts] == [True, False]
    assert verdicts[1]["sentence"] == "Olympus Mons is made of cheese."
    assert body["stats"]["removed_sentences"] == 1
    assert as_resolved(body) == resolved(client, mars, body["used_refs"])
    judged = server.requests[-1]
    assert judged["messages"][0]["content"].startswith("You check citations")
    assert judged["response_format"]["json_schema"]["name"] == "citation_verdicts"


def test_an_answer_with_nothing_verified_is_no_answer(client: TestClient, mars: str, model: Any) -> None:
    model("follow-injection", verify=True)  # "As instructed. [1]": no passage says that
    body = client.post(f"/v1/kb/{mars}/ask", json=MARS).json()
    assert body["no_answer"] is True and body["citations"] == []
    assert body["no_answer_reason"].startswith("No sentence of the answer was found supported")


def test_a_setting_no_document_names_is_declined_saying_the_knowledge_base_does_not_mention_it(
    client: TestClient, docs: str
) -> None:
    """Issue 27: `memory.max_age` occurs in no document, though `memory.max_items`, `memory.path`
    and every other word of the question do; the answer says the knowledge base lacks it instead of
    quoting the memory settings that are there. The settings that are there still answer."""
    body = client.post(
        f"/v1/kb/{docs}/ask", json={"question": "What is the default value of memory.max_age in kgent.toml?"}
    ).json()
    assert body["no_answer"] is True and body["citations"] == [], body
    assert body["no_answer_reason"] == "The knowledge base does not mention 'memory.max_age'."
    known = client.post(
        f"/v1/kb/{docs}/ask", json={"question": "How many entries does memory.max_items keep by default?"}
    ).json()
    assert known["no_answer"] is False, known
    assert "10,000" in known["answer"]


def test_a_hyphenated_tool_name_no_document_holds_is_declined_naming_it(
    client: TestClient, docs: str
) -> None:
    """Kebab-case names (`git-crypt`, `docker-compose`) are technical writing's identifiers: one that
    no document holds, in any spelling, says the documents cannot answer, however well the rest of
    the question matches the tools section. Written apart in the documents ("a time limit"), the
    hyphenated form ("time-limit") is there and the question is answered."""
    body = client.post(
        f"/v1/kb/{docs}/ask",
        json={"question": "How do I run Kunora Kgent tools inside a docker-compose stack?"},
    ).json()
    assert body["no_answer"] is True and body["citations"] == [], body
    assert body["no_answer_reason"] == "The knowledge base does not mention 'docker-compose'."
    apart = client.post(
        f"/v1/kb/{docs}/ask", json={"question": "What is the time-limit of a tool call in the sandbox?"}
    ).json()
    assert apart["no_answer"] is False, apart
    assert "60 seconds" in apart["answer"]


def test_a_weakly_matched_question_with_a_word_no_document_holds_is_declined_naming_it(
    client: TestClient, docs: str
) -> None:
    """Off the knowledge base's subject, nothing matches well and some word of the question occurs
    in no document: the reason says which, rather than quoting the nearest sentence about storage."""
    body = client.post(
        f"/v1/kb/{docs}/ask", json={"question": "What is the best way to store fresh basil?"}
    ).json()
    assert body["no_answer"] is True and body["citations"] == [], body
    assert body["no_answer_reason"] == "The knowledge base does not mention 'fresh', 'basil'."
    # A question on the subject is answered though one of its words ("kept") occurs in no document.
    reworded = client.post(
        f"/v1/kb/{docs}/ask", json={"question": "Where is the agent's memory kept?"}
    ).json()
    assert reworded["no_answer"] is False, reworded
    assert "~/.kgent/memory.db" in reworded["answer"]
