"""The server's binding of a draft to its evidence, the optional verification, and the one citation
rule: forged refs make no answer, sentences left uncited go, and a citation names the section its
passage sits in."""

from __future__ import annotations

from collections.abc import Sequence

from citegate.answers.base import Draft, Evidence
from citegate.answers.validate import bind, split_answer
from citegate.answers.verify import Claim, verify_bound
from citegate.knowledge.citations import citation_for, own_section
from citegate.knowledge.search.base import ChunkRecord

A, B = "r_aaaaaaaaaaaaaaaa", "r_bbbbbbbbbbbbbbbb"
FORGED = "r_00000000deadbeef"
EVIDENCE = [
    Evidence(1, A, "Olympus Mons is about 22 km high.", 1.0),
    Evidence(2, B, "Mars has two moons, Phobos and Deimos.", 0.9),
]


def test_an_answer_citing_only_forged_refs_is_no_answer_despite_its_markers() -> None:
    bound = bind(Draft("A made-up claim [1].", (FORGED,)), EVIDENCE)
    assert bound.forged and bound.empty and bound.used_refs == []
    assert bound.dropped_refs == [FORGED]


def test_a_sentence_whose_every_marker_was_dropped_is_removed() -> None:
    bound = bind(Draft("Olympus Mons is 22 km high. [1] Also invented. [99]", (A, FORGED)), EVIDENCE)
    assert not bound.forged and bound.answer == "Olympus Mons is 22 km high. [1]"
    assert bound.removed == ["Also invented."] and bound.dropped_markers == ["[99]"]


def test_an_uncited_sentence_beside_cited_ones_is_removed() -> None:
    bound = bind(Draft("Mars has two moons. [2] They are made of cheese.", (B,)), EVIDENCE)
    assert bound.answer == "Mars has two moons. [1]" and bound.used_refs == [B]
    assert bound.removed == ["They are made of cheese."]


def test_markers_renumber_in_order_and_chinese_sentences_join_without_spaces() -> None:
    bound = bind(Draft("火星有两颗卫星。[2]它很高。[1]", ()), EVIDENCE)
    assert bound.answer == "火星有两颗卫星。[1]它很高。[2]" and bound.used_refs == [B, A]
    assert split_answer(bound.answer) == ["火星有两颗卫星。[1]", "它很高。[2]"]


class Judge:
    """Supports a claim when the passage holds the sentence word for word."""

    verify_citations = True

    def __init__(self) -> None:
        self.seen: list[Claim] = []

    def verify(self, question: str, claims: Sequence[Claim]) -> list[bool]:
        self.seen.extend(claims)
        return [c.sentence in c.evidence.text for c in claims]


def test_verification_takes_off_unsupported_citations_and_their_sentences() -> None:
    bound = bind(
        Draft("Mars has two moons, Phobos and Deimos. [2] Olympus Mons is made of cheese. [1][2]", ()),
        EVIDENCE,
    )
    judge = Judge()
    checked = verify_bound("What about Mars?", bound, EVIDENCE, judge)
    assert checked.bound.answer == "Mars has two moons, Phobos and Deimos. [1]"
    assert checked.bound.used_refs == [B] and checked.bound.removed == ["Olympus Mons is made of cheese."]
    assert [(v["ref_id"], v["supported"]) for v in checked.verdicts] == [(B, True), (A, False), (B, False)]
    assert len(judge.seen) == 3


CHUNK = """Intro text that belongs to the section before.

## Agent memory

Agent memory is stored in SQLite. Set memory.path to move it and memory.max_items to cap it.
Older entries are compacted every night, and the database is vacuumed once a week."""


def test_a_citation_names_the_section_of_its_passage_and_shows_only_that_section() -> None:
    chunk = ChunkRecord("r_1", "kb", "t", "d", "p", "guide.md", CHUNK, heading="Agent memory")
    assert own_section(CHUNK).startswith("Agent memory is stored in SQLite.")
    citation = citation_for(chunk)
    assert citation.heading == "Agent memory" and "#" not in citation.snippet
    assert "Intro text" not in citation.snippet and citation.snippet.endswith("once a week.")


def test_a_chunk_of_headings_only_shows_their_titles_without_marks() -> None:
    chunk = ChunkRecord("r_2", "kb", "t", "d", "p", "s.md", "# Kunora Kgent\n\n## Agent memory\n\n## Tools")
    assert citation_for(chunk).snippet == "Kunora Kgent / Agent memory / Tools"
