"""The extractive answerer answers only from sentences that answer (issue 21).

A small documentation set of our own (kunora-kgent) is chunked the way ingestion chunks it; the
questions the issue saw answered with headings and unrelated sentences must now decline with a
reason, the ones the documents answer must still be answered, and the sentence quoted must hold
what the question asks for.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from citegate.answers.base import Evidence
from citegate.answers.extractive import FOCUS_REASONS, NO_SENTENCE_REASON, ExtractiveAnswerer, follow_up_topic
from citegate.answers.validate import bind
from citegate.knowledge.citations import own_section
from citegate.knowledge.ingest.chunking import chunk_document, iter_headings
from citegate.knowledge.ingest.documents import ParsedDocument

SAMPLES = Path(__file__).resolve().parents[3] / "samples"
MARKER = re.compile(r"\s*\[\d+\]")

KUNORA = {
    "README.md": """# Kunora Kgent

Kunora Kgent is an agent runtime for coding assistants. It runs tools in a sandbox, keeps a memory
of past sessions and talks to any OpenAI-compatible model.

## Agent memory

Agent memory is stored in a local SQLite database under `~/.kgent/memory.db`. Set `memory.path` in
`kgent.toml` to move it, and `memory.max_items` to cap how many entries are kept (10,000 by default).
Entries older than 30 days are summarised and compacted every night.

## Tools

Tools are Python functions registered with the `@kgent.tool` decorator. Each call runs in a sandbox
with a time limit of 60 seconds; a tool that needs the network must declare it with `network=True`.
""",
    "install.md": """# Installing Kunora Kgent

Kunora Kgent needs Python 3.11 or newer. Install it with `pip install kunora-kgent`, then run
`kgent init` in your project folder to create `kgent.toml`.

## Configuration

The configuration file `kgent.toml` holds the model endpoint, the memory settings and the list of
enabled tools. Environment variables that start with `KGENT_` override the file.
""",
}


def chunked(documents: dict[str, str]) -> list[Evidence]:
    """Every child chunk of `documents` as evidence, titled and sectioned as ingestion does."""
    evidence: list[Evidence] = []
    for name, text in documents.items():
        title = next((h.text for h in iter_headings(text) if h.level == 1), name)
        for child in chunk_document(ParsedDocument(text=text, title=title)).children:
            number = len(evidence) + 1
            evidence.append(
                Evidence(
                    number, f"{name}#{child.index}", child.text, 1.0 / number, title, name, child.heading
                )
            )
    return evidence


@pytest.fixture(scope="module")
def answerer() -> ExtractiveAnswerer:
    return ExtractiveAnswerer()


@pytest.fixture(scope="module")
def kunora() -> list[Evidence]:
    return chunked(KUNORA)


def quoted(answer: str) -> list[str]:
    return [s.strip() for s in MARKER.split(answer) if s.strip()]


@pytest.mark.parametrize(
    ("question", "unmentioned"),
    [
        ("Who maintains kunora-kgent?", "'maintains'"),
        ("What port does kunora-kgent listen on?", "'port', 'listen'"),
        ("What licence is kunora-kgent released under?", "'licence'"),
        ("How do I uninstall kunora-kgent?", "'uninstall'"),
    ],
)
def test_questions_the_docs_do_not_answer_are_declined_with_a_reason(
    answerer: ExtractiveAnswerer, kunora: list[Evidence], question: str, unmentioned: str
) -> None:
    draft = answerer.answer(question, kunora)
    assert draft.declined and draft.answer == "" and draft.used_refs == ()
    assert draft.reason is not None and unmentioned in draft.reason


@pytest.mark.parametrize(
    ("question", "holds"),
    [
        ("Where is agent memory stored?", "~/.kgent/memory.db"),
        ("How long may a tool call run?", "60 seconds"),
        ("How do I install kunora-kgent?", "pip install kunora-kgent"),
        ("Which Python version does Kunora Kgent need?", "Python 3.11"),
    ],
)
def test_questions_the_docs_answer_are_answered_from_the_section_that_says_it(
    answerer: ExtractiveAnswerer, kunora: list[Evidence], question: str, holds: str
) -> None:
    draft = answerer.answer(question, kunora)
    assert not draft.declined, draft.reason
    by_ref = {e.ref_id: e for e in kunora}
    sentences = quoted(draft.answer)
    assert any(holds in s for s in sentences)
    for sentence, refs in draft.support:
        # Each quote sits in the own section of the passage it cites: the section its citation names.
        assert all(sentence in " ".join(own_section(by_ref[r].text).split()) for r in refs)


def test_a_heading_is_never_quoted(answerer: ExtractiveAnswerer, kunora: list[Evidence]) -> None:
    headings = {h.text for text in KUNORA.values() for h in iter_headings(text)}
    for question in ("What is Kunora Kgent?", "Agent memory", "Tools", "Kunora Kgent agent memory tools"):
        draft = answerer.answer(question, kunora)
        assert "#" not in draft.answer
        assert not any(s in headings for s in quoted(draft.answer))


def test_passages_of_headings_and_fragments_only_have_nothing_to_quote(answerer: ExtractiveAnswerer) -> None:
    evidence = [
        Evidence(1, "r1", "# Kunora Kgent\n\n## Agent memory\n\n## Tools", 1.0),
        Evidence(2, "r2", "Overview:\n\n- memory\n- tools", 0.9),
        Evidence(3, "r3", "and the tools it registers with the runtime at start", 0.8),
    ]
    draft = answerer.answer("What does Kunora Kgent do with agent memory and tools?", evidence)
    assert draft.declined and draft.reason == NO_SENTENCE_REASON


EDDYSTONE = (
    "The Eddystone Lighthouse stands on the Eddystone Rocks, south of Plymouth. Its first light was lit "
    "by Henry Winstanley, who had designed the tower."
)


@pytest.mark.parametrize(
    ("question", "focus"),
    [
        ("When was the first light of the Eddystone Lighthouse lit?", "time"),
        ("How many keepers did the Eddystone Lighthouse have for its first light?", "number"),
        ("长城是什么时候修建的？", "time"),
    ],
)
def test_focus_not_met_declines_with_its_reason(
    answerer: ExtractiveAnswerer, question: str, focus: str
) -> None:
    evidence = [Evidence(1, "r1", EDDYSTONE, 1.0), Evidence(2, "r2", "长城是人们为了防御而修建的工程。", 0.9)]
    draft = answerer.answer(question, evidence)
    assert draft.declined and draft.reason == FOCUS_REASONS[focus]


def test_focus_met_answers(answerer: ExtractiveAnswerer) -> None:
    draft = answerer.answer(
        "Who lit the first light of the Eddystone Lighthouse?", [Evidence(1, "r1", EDDYSTONE, 1.0)]
    )
    assert not draft.declined and "Henry Winstanley" in draft.answer


@pytest.mark.parametrize(
    "question",
    ["How long does the kettle take to boil water?", "How long does it take for the kettle to boil?"],
)
def test_a_measure_frame_is_the_focus_not_a_term_the_passage_must_mention(
    answerer: ExtractiveAnswerer, question: str
) -> None:
    """The words "long" and "take" in "how long does it take" ask for a duration, as 多久 does: a passage that
    gives the duration answers, though it says neither word; one that gives none declines."""
    kettle = [Evidence(1, "r1", "The kettle boils water in 2 minutes. It has a steel body.", 1.0)]
    draft = answerer.answer(question, kettle)
    assert not draft.declined and "2 minutes" in draft.answer
    vague = [Evidence(1, "r1", "The kettle boils water quickly. It has a steel body.", 1.0)]
    assert answerer.answer(question, vague).declined


def test_a_sentence_quoted_with_its_antecedent_keeps_both_through_binding(
    answerer: ExtractiveAnswerer,
) -> None:
    text = (
        "Mars has the largest volcano known in the Solar System, Olympus Mons. It is a shield volcano "
        "about 22 kilometres high. Mars has two small moons."
    )
    evidence = [Evidence(1, "r_aaaaaaaaaaaaaaaa", text, 1.0)]
    bound = bind(answerer.answer("How high is Olympus Mons?", evidence), evidence)
    assert bound.answer == (
        "Mars has the largest volcano known in the Solar System, Olympus Mons. [1] "
        "It is a shield volcano about 22 kilometres high. [1]"
    )
    assert bound.removed == []


def test_a_number_question_is_not_answered_by_a_sentence_without_its_number(
    answerer: ExtractiveAnswerer,
) -> None:
    evidence = [
        Evidence(1, "r1", "Olympus Mons is a shield volcano on Mars. Its height has long been debated.", 1.0),
    ]
    draft = answerer.answer("How high is Olympus Mons?", evidence)
    assert draft.declined and draft.reason == FOCUS_REASONS["number"]


def test_the_great_wall_sample_is_answered_with_the_length_not_with_its_neighbour(
    answerer: ExtractiveAnswerer,
) -> None:
    """samples/长城.md: "长城究竟有多长，很长时间里并没有精确的答案。" sits next to the figures; the
    answer must quote the 21,196.18 km sentence, and nothing that states no length."""
    evidence = chunked({"长城.md": (SAMPLES / "长城.md").read_text(encoding="utf-8")})
    draft = answerer.answer("长城有多长？", evidence)
    assert not draft.declined
    sentences = quoted(draft.answer)
    assert any("21,196.18 公里" in s for s in sentences)
    assert not any("没有精确的答案" in s for s in sentences)
    cited = {e.ref_id: e for e in evidence}[draft.used_refs[0]]
    assert cited.heading == "长度"


def test_chinese_questions_decline_when_the_text_does_not_say_it(answerer: ExtractiveAnswerer) -> None:
    evidence = chunked({"长城.md": (SAMPLES / "长城.md").read_text(encoding="utf-8")})
    for question in ("长城的维护者是谁？", "长城的门票多少钱？"):
        assert answerer.answer(question, evidence).declined, question
    answered = answerer.answer("长城是什么时候被列入世界遗产名录的？", evidence)
    assert not answered.declined and "一九八七年十二月" in answered.answer


# ----------------------------------------------------------------------------- follow-ups

MARS = Evidence(
    1,
    "mars",
    "Mars is the fourth planet. Its surface is red with iron oxide dust. "
    "Mars has two small, irregular moons, Phobos and Deimos.",
    0.8,
    title="The Solar System",
    heading="Mars",
)
GIANTS = Evidence(
    2,
    "giants",
    "Jupiter, Saturn, Uranus and Neptune are the giant planets. They are made mostly of hydrogen "
    "and helium. All four have ring systems and many moons.",
    0.7,
    title="The Solar System",
    heading="The giant planets",
)


def test_a_follow_up_quotes_only_sentences_about_what_it_points_back_at() -> None:
    """'Does it have moons?' after a question on Mars: the giant planets' moons are not its answer."""
    answerer = ExtractiveAnswerer()
    alone = answerer.answer("Does it have moons?", [MARS, GIANTS])
    assert "[2]" in alone.answer  # without the conversation, both sentences answer "moons"
    follow_up = answerer.answer("Does it have moons?", [MARS, GIANTS], context="What colour is Mars?")
    assert follow_up.answer == "Mars has two small, irregular moons, Phobos and Deimos. [1]"
    assert follow_up.diagnostics["follow_up_topic"]


def test_a_follow_up_whose_topic_no_passage_names_is_declined_saying_so() -> None:
    draft = ExtractiveAnswerer().answer("Does it have moons?", [GIANTS], context="What colour is Mars?")
    assert draft.declined and "What colour is Mars?" in (draft.reason or "")


def test_a_question_that_points_back_at_nothing_is_read_alone() -> None:
    assert follow_up_topic("Do the giant planets have moons?", "What colour is Mars?") == frozenset()
    assert follow_up_topic("Does it have moons?", None) == frozenset()
    assert follow_up_topic("它有卫星吗？", "火星是什么颜色？")
