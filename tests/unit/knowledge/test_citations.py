"""A citation's snippet (issue 28): the passage's own text in whole words and whole sentences, the
same for the same ref, and holding every sentence the extractive answerer may quote from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from citegate.answers.extractive import _quotable
from citegate.answers.validate import answer_sentences
from citegate.knowledge.citations import citation_for, excerpt, passage_snippet
from citegate.knowledge.ingest.chunking import chunk_document
from citegate.knowledge.ingest.parsing import parse_document
from citegate.knowledge.search.base import ChunkRecord

SAMPLES = Path(__file__).resolve().parents[3] / "samples"
# A child of solar-system.md as the chunker cut it: it starts inside a sentence (the overlap with
# the child before) and stops at a word.
MARS = (
    "is thin and mostly carbon dioxide, with a surface pressure of less than one percent of Earth's. "
    "Mars has the largest volcano known in the Solar System, Olympus Mons. It is a shield volcano about "
    "22 kilometres (72,000 feet) high, about two and a half times the height of Mount Everest, and about "
    "600 kilometres across. Mars also has Valles Marineris, a system of canyons more than 4,000 kilometres "
    "long and up to 7 kilometres deep. Mars has two small, irregular moons, Phobos and"
)
TWENTY_TWO_KM = (
    "It is a shield volcano about 22 kilometres (72,000 feet) high, about two and a half times the height "
    "of Mount Everest, and about 600 kilometres across."
)


def _chunk(text: str) -> ChunkRecord:
    return ChunkRecord(
        ref_id="r_0123456789abcdef",
        kb_id="kb",
        tenant_id="t",
        document_id="d",
        parent_id="p",
        source_name="solar-system.md",
        text=text,
    )


def _sample_children() -> list[tuple[str, str]]:
    """(sample name, child text) for every child of `make demo`'s sample documents."""
    children = []
    for path in sorted(SAMPLES.iterdir()):
        if path.suffix not in (".md", ".txt", ".pdf") or path.name == "README.md":
            continue
        parsed = parse_document(path.read_bytes(), mime_type=None, source_name=path.name)
        children += [(path.name, child.text) for child in chunk_document(parsed).children]
    return children


def test_the_snippet_leaves_out_the_pieces_of_sentences_a_passage_starts_and_ends_with() -> None:
    shown = citation_for(_chunk(MARS)).snippet
    assert shown.startswith("Mars has the largest volcano known in the Solar System, Olympus Mons.")
    assert TWENTY_TWO_KM in shown
    assert shown.endswith("up to 7 kilometres deep."), "the cut 'Phobos and' is left out"
    assert "is thin and mostly" not in shown


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # A list item needs no sentence end: kept whole.
        (
            "Tools:\n- a hammer for nails\n- a saw for boards",
            "Tools: - a hammer for nails - a saw for boards",
        ),
        # A lower-case line after a colon line starts a unit of its own: kept.
        ("and then the steps:\nthe valve is opened first.", "the valve is opened first."),
        # A wrapped first sentence is left out up to its end.
        ("the start of a sentence\nwrapped over two lines. The next one is whole.", "The next one is whole."),
        # Nothing but a piece: shown as it is rather than nothing.
        ("and then the", "and then the"),
        ("长城是中国古代的军事防御工程。它东起山海关", "长城是中国古代的军事防御工程。"),
    ],
)
def test_whole_sentences_in_lists_wrapped_lines_and_chinese(text: str, shown: str) -> None:
    assert passage_snippet(text) == shown


def test_every_sentence_the_extractive_answerer_may_quote_is_in_its_snippet() -> None:
    """The invariant the extractive answerer relies on (it quotes whole sentences of `own_section`),
    over every child of the demo's sample documents."""
    checked = 0
    trimmed = 0
    for name, text in _sample_children():
        shown = citation_for(_chunk(text)).snippet
        for sentence, quotable in _quotable(text):
            if quotable:
                quote = " ".join(sentence.split())
                assert quote in re.sub(r"\s*\[\s*\d+\s*\]", "", shown), (name, quote, shown)
                checked += 1
        trimmed += shown != " ".join(text.split())
    assert checked > 100, checked
    assert trimmed > 0, "some children start or end inside a sentence"


def test_every_sample_snippet_is_whole_words_and_ends_a_sentence() -> None:
    ends = 0
    children = _sample_children()
    for name, text in children:
        shown = citation_for(_chunk(text)).snippet
        words = set(re.findall(r"\w+", " ".join(text.split())))
        assert set(re.findall(r"\w+", shown)) <= words, (name, shown)  # no word cut in two
        ends += bool(re.search(r"[.!?。！？；…:)\]”’]$", shown))
    assert ends >= 0.9 * len(children), (ends, len(children))


def test_the_answer_sentences_bound_to_a_citation_and_an_excerpt_around_them() -> None:
    answer = (
        "Mars has the largest volcano known in the Solar System, Olympus Mons. [1] "
        f"{TWENTY_TWO_KM} [1] Venus is the hottest planet. [2]"
    )
    bound = answer_sentences(answer, 1)
    assert bound == ["Mars has the largest volcano known in the Solar System, Olympus Mons.", TWENTY_TWO_KM]
    assert answer_sentences(answer, 2) == ["Venus is the hottest planet."]
    shown = excerpt(passage_snippet(MARS), 160, bound)
    assert TWENTY_TWO_KM in shown, "what the answer rests on is never cut out"
    assert shown.endswith(" …")
    assert excerpt(passage_snippet(MARS), 100).startswith("Mars has the largest volcano")
    later = excerpt(passage_snippet(MARS), 100, ["Mars also has Valles Marineris"])
    assert later.startswith("… Mars also has Valles Marineris")
