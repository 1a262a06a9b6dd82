"""Chunking: section-sized parents for context, overlapping ~500-character children for retrieval."""

from __future__ import annotations

from pathlib import Path

import pytest

from citegate.knowledge.ingest.chunking import ChunkingConfig, chunk_document, iter_headings, slugify
from citegate.knowledge.ingest.documents import ChunkedDocument, PageSpan, ParsedDocument
from citegate.knowledge.ingest.parsing import parse_document

SAMPLES = Path(__file__).resolve().parents[4] / "samples"
CONFIG = ChunkingConfig()

SENTENCES = [
    "The keeper climbed the tower at dusk to light the lamp.",
    "Fog rolled in from the west and the horn sounded every thirty seconds.",
    "Ships passing the reef kept well clear of the breaking water.",
    "In the morning the log recorded the wind, the sea state and the vessels seen.",
    "Supplies arrived by boat once a fortnight when the weather allowed it.",
]


def _prose(chars: int, seed: int = 0) -> str:
    """Deterministic English paragraphs of four sentences, at most `chars` characters in all."""
    parts: list[str] = []
    size = 0
    for n in range(chars):
        separator = "" if n == 0 else "\n\n" if n % 4 == 0 else " "
        sentence = SENTENCES[(seed + n) % len(SENTENCES)]
        if size + len(separator) + len(sentence) > chars:
            break
        parts.append(separator + sentence)
        size += len(separator) + len(sentence)
    return "".join(parts)


def _sample(name: str) -> tuple[ParsedDocument, ChunkedDocument]:
    doc = parse_document((SAMPLES / name).read_bytes(), mime_type=None, source_name=name)
    return doc, chunk_document(doc)


def _check_invariants(doc: ParsedDocument, chunked: ChunkedDocument, config: ChunkingConfig = CONFIG) -> None:
    """What every chunking must satisfy, whatever the document."""
    text = doc.text
    assert chunked.parents, "a non-empty document has at least one parent"
    for index, parent in enumerate(chunked.parents):
        assert parent.index == index
        assert text[parent.start : parent.end] == parent.text == parent.text.strip()
        assert parent.page == doc.page_at(parent.start)
    for before, after in zip(chunked.parents, chunked.parents[1:], strict=False):
        assert before.end <= after.start and not text[before.end : after.start].strip()  # no text lost
    for index, child in enumerate(chunked.children):
        parent = chunked.parents[child.parent_index]
        assert child.index == index
        assert text[child.start : child.end] == child.text == child.text.strip() != ""
        assert parent.start <= child.start < child.end <= parent.end  # children never cross parents
        assert len(child.text) <= config.child_size
        assert child.page == doc.page_at(child.start)
    covered = {c.parent_index for c in chunked.children}
    assert covered == set(range(len(chunked.parents)))


# -- the shape of the output ------------------------------------------------------------------------


def test_a_document_shorter_than_a_child_is_one_parent_and_one_child() -> None:
    doc = ParsedDocument(text="\n# Note\n\nRemember to wind the clock.\n\n")
    chunked = chunk_document(doc)
    assert [p.text for p in chunked.parents] == ["# Note\n\nRemember to wind the clock."]
    assert [c.text for c in chunked.children] == ["# Note\n\nRemember to wind the clock."]
    assert chunked.parents[0].start == 1  # offsets point at the stripped text
    _check_invariants(doc, chunked)


def test_an_empty_document_has_no_chunks() -> None:
    assert chunk_document(ParsedDocument(text=" \n ")) == ChunkedDocument(parents=(), children=())


@pytest.mark.parametrize("name", ["solar-system.md", "tea-guide.txt", "长城.md", "lighthouses.pdf"])
def test_every_sample_chunks_within_the_limits(name: str) -> None:
    doc, chunked = _sample(name)
    _check_invariants(doc, chunked)
    parents = chunked.parents
    assert all(len(p.text) <= CONFIG.max_parent_size for p in parents)
    # Only the last parent may fall short of the minimum (these samples have no other edge case).
    assert all(len(p.text) >= CONFIG.min_parent_size for p in parents[:-1])


def test_children_of_a_parent_overlap_by_about_the_configured_amount() -> None:
    doc = ParsedDocument(text=_prose(3500))
    chunked = chunk_document(doc)
    assert len(chunked.parents) == 1 and len(chunked.children) >= 7
    for before, after in zip(chunked.children, chunked.children[1:], strict=False):
        shared = before.end - after.start
        assert CONFIG.child_overlap // 2 <= shared <= CONFIG.child_overlap
        assert doc.text[after.start - 1] in " \n"  # the overlap starts at a word
    # Greedy packing: all but the last child are close to the maximum size.
    assert all(len(c.text) >= CONFIG.child_size // 2 for c in chunked.children[:-1])


def test_english_children_end_at_sentence_ends() -> None:
    chunked = chunk_document(ParsedDocument(text=" ".join(SENTENCES * 20)))  # one paragraph, no breaks
    assert all(c.text.endswith(".") for c in chunked.children)


def test_chinese_children_end_at_chinese_sentence_ends() -> None:
    sentences = [
        "长城是中国古代的军事防御工程。",
        "明长城东起虎山，西至嘉峪关！",
        "烽火台用来传递军情；",
        "长城有多长？",
    ]
    text = "".join(sentences * 60)  # no spaces and no paragraph breaks: only punctuation to split on
    chunked = chunk_document(ParsedDocument(text=text))
    _check_invariants(ParsedDocument(text=text), chunked)
    assert len(chunked.children) > 3
    assert all(c.text[-1] in "。！？；" for c in chunked.children)


def test_a_long_section_splits_into_even_parents_at_paragraph_breaks() -> None:
    doc = ParsedDocument(text="# Logbook\n\n" + _prose(9000))
    chunked = chunk_document(doc)
    sizes = [len(p.text) for p in chunked.parents]
    assert len(sizes) == 3 and max(sizes) - min(sizes) < 500  # about 3,000 each, not 4,000 + 4,000 + 1,000
    assert all(p.heading == "Logbook" and p.anchor == "logbook" for p in chunked.parents)  # continuations too
    assert all(doc.text[p.end : p.end + 2] == "\n\n" for p in chunked.parents[:-1])
    _check_invariants(doc, chunked)


def test_text_without_any_break_is_hard_cut() -> None:
    doc = ParsedDocument(text="x" * 9000)
    chunked = chunk_document(doc)
    assert [len(p.text) for p in chunked.parents] == [3000, 3000, 3000]
    _check_invariants(doc, chunked)


def test_small_sections_merge_into_one_parent_that_keeps_the_first_heading() -> None:
    text = "\n\n".join(f"## Step {n}\n\n{_prose(450, n)}" for n in range(1, 9))
    chunked = chunk_document(ParsedDocument(text=text))
    first = chunked.parents[0]
    assert first.heading == "Step 1" and first.anchor == "step-1"
    assert CONFIG.min_parent_size <= len(first.text) <= CONFIG.max_parent_size
    assert "## Step 2" in first.text
    # Children know the exact subsection they come from, for precise citation links.
    assert {c.anchor for c in chunked.children} == {f"step-{n}" for n in range(1, 9)}


def test_a_tiny_final_section_rides_along_with_the_previous_parent() -> None:
    main = "# Main\n\n" + _prose(3960)
    credits = "# Credits\n\nWritten by the keepers of the Eddystone light, 1882 to 1982."
    assert len(main) <= CONFIG.max_parent_size < len(main) + 2 + len(credits)
    chunked = chunk_document(ParsedDocument(text=f"{main}\n\n{credits}"))
    # Over the maximum, but a 70-character last parent would be useless on its own.
    assert len(chunked.parents) == 1
    assert len(chunked.parents[0].text) <= CONFIG.max_parent_size * 1.25
    assert chunked.children[-1].heading == "Credits"


def test_a_short_section_between_two_full_ones_stays_short() -> None:
    # Documented edge case: neither neighbour has room, so a parent below the minimum remains.
    a, c = f"# A\n\n{_prose(3990)}", f"# C\n\n{_prose(3990, 1)}"
    b = "# B\n\nA short interlude between two long chapters, too small to be a parent of its own."
    assert len(a) + len(b) > CONFIG.max_parent_size and len(b) + len(c) > CONFIG.max_parent_size
    text = f"{a}\n\n{b}\n\n{c}"
    chunked = chunk_document(ParsedDocument(text=text))
    assert [p.heading for p in chunked.parents] == ["A", "B", "C"]
    assert chunked.parents[1].text == b


# -- headings ---------------------------------------------------------------------------------------

GUIDE = """Preface text before any heading.

# Guide

## Install

Run the installer.

```bash
# not a heading: a shell comment
pip install thing
```

### On Linux ###

Use the package manager.

## Install

A second section with the same title.

#hashtag is not a heading either

# Appendix: Q&A (2024)

Answers.
"""


def test_headings_outside_code_fences_are_found() -> None:
    found = [(h.level, h.text) for h in iter_headings(GUIDE)]
    assert found == [
        (1, "Guide"),
        (2, "Install"),
        (3, "On Linux"),
        (2, "Install"),
        (1, "Appendix: Q&A (2024)"),
    ]


def test_parents_carry_heading_path_and_unique_github_anchors() -> None:
    tiny = ChunkingConfig(child_size=100, child_overlap=20, min_parent_size=1, max_parent_size=200)
    chunked = chunk_document(ParsedDocument(text=GUIDE), tiny)
    got = [(p.heading, p.heading_path, p.anchor) for p in chunked.parents]
    assert got == [
        ("", (), ""),
        ("Guide", ("Guide",), "guide"),
        ("Install", ("Guide", "Install"), "install"),
        ("On Linux", ("Guide", "Install", "On Linux"), "on-linux"),
        ("Install", ("Guide", "Install"), "install-1"),
        ("Appendix: Q&A (2024)", ("Appendix: Q&A (2024)",), "appendix-qa-2024"),
    ]
    assert "# not a heading" in chunked.parents[2].text


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Getting Started", "getting-started"),
        ("What's new in v2.0?", "whats-new-in-v20"),
        ("snake_case and kebab-case", "snake_case-and-kebab-case"),
        ("长城的历史（明朝）", "长城的历史明朝"),
        ("Mars 火星", "mars-火星"),
    ],
)
def test_anchors_are_github_style_slugs(heading: str, anchor: str) -> None:
    assert slugify(heading) == anchor


def test_a_child_never_ends_with_a_dangling_heading() -> None:
    text = "\n\n".join(f"## Part {n}\n\n{_prose(180, n)}" for n in range(12))
    chunked = chunk_document(ParsedDocument(text=text))
    assert not any(c.text.rsplit("\n", 1)[-1].startswith("#") for c in chunked.children)


# -- pages, determinism, scale ----------------------------------------------------------------------


def test_pdf_chunks_point_at_the_page_they_start_on() -> None:
    doc, chunked = _sample("lighthouses.pdf")
    _check_invariants(doc, chunked)  # includes child.page == doc.page_at(child.start)
    phrases = {"Ptolemy II Philadelphus": 1, "Smeaton's Tower": 2, "Boston Light": 3}
    for phrase, page in phrases.items():
        assert [c.page for c in chunked.children if phrase in c.text] == [page]
    # Pages 1 and 2 are short sections merged into one parent, which cites its first page.
    assert [(p.heading, p.page) for p in chunked.parents] == [
        ("The Pharos of Alexandria", 1),
        ("Modern Lights and Automation", 3),
    ]


def test_pages_are_none_without_page_spans_and_looked_up_with_them() -> None:
    text = _prose(6000)
    doc = ParsedDocument(text=text, pages=(PageSpan(0, 2000, 1), PageSpan(2000, len(text), 2)))
    chunked = chunk_document(doc)
    assert [p.page for p in chunked.parents] == [1, 2]
    assert {c.page for c in chunked.children} == {1, 2}
    assert all(c.page is None for c in chunk_document(ParsedDocument(text=text)).children)


def test_chunking_is_deterministic() -> None:
    doc, first = _sample("solar-system.md")
    assert chunk_document(doc) == first
    assert chunk_document(ParsedDocument(text=doc.text)) == first  # depends on the text only


def test_a_megabyte_document_chunks_in_one_pass() -> None:
    section = "\n\n".join(f"## Section {n}\n\n{_prose(2500 + 97 * (n % 13), n)}" for n in range(8))
    text = ("# Big manual\n\n" + section + "\n\n") * 50
    assert len(text) > 1_000_000
    doc = ParsedDocument(text=text)
    chunked = chunk_document(doc)
    assert len(chunked.parents) > 250 and len(chunked.children) > 2000
    assert max(len(p.text) for p in chunked.parents) <= CONFIG.max_parent_size
    assert max(len(c.text) for c in chunked.children) <= CONFIG.child_size


def test_invalid_configurations_are_rejected() -> None:
    with pytest.raises(ValueError, match="overlap"):
        ChunkingConfig(child_size=100, child_overlap=100)
    with pytest.raises(ValueError, match="min_parent_size"):
        ChunkingConfig(min_parent_size=5000, max_parent_size=4000)


# -- explicit heading ids ---------------------------------------------------------------------------

EXPLICIT = """# Server configuration {#runtime-config}

Intro to the settings.

## Memory {: #runtime-config-memory }

### work_mem (integer) {#GUC-WORK-MEM}

Sets the base maximum amount of memory to be used by a query operation.

## Memory

A second section titled like the first, without an id.

## memory again { #memory .wide }

Text.
"""


def test_a_heading_id_is_read_as_the_anchor_and_left_out_of_the_heading_text() -> None:
    found = [(h.level, h.text, h.anchor) for h in iter_headings(EXPLICIT)]
    assert found == [
        (1, "Server configuration", "runtime-config"),
        (2, "Memory", "runtime-config-memory"),
        (3, "work_mem (integer)", "GUC-WORK-MEM"),
        (2, "Memory", ""),
        (2, "memory again", "memory"),
    ]


def test_chunks_cite_the_explicit_id_as_written_and_slugs_never_take_a_real_id() -> None:
    tiny = ChunkingConfig(child_size=100, child_overlap=20, min_parent_size=1, max_parent_size=200)
    chunked = chunk_document(ParsedDocument(text=EXPLICIT), tiny)
    got = [(p.heading, p.heading_path, p.anchor) for p in chunked.parents]
    assert got == [
        ("Server configuration", ("Server configuration",), "runtime-config"),
        ("Memory", ("Server configuration", "Memory"), "runtime-config-memory"),
        (
            "work_mem (integer)",
            ("Server configuration", "Memory", "work_mem (integer)"),
            "GUC-WORK-MEM",  # case kept: a page's fragment must match its id exactly
        ),
        ("Memory", ("Server configuration", "Memory"), "memory-1"),  # "memory" is a real id below
        ("memory again", ("Server configuration", "memory again"), "memory"),
    ]
    work_mem = [c for c in chunked.children if "base maximum amount" in c.text]
    assert work_mem and {c.anchor for c in work_mem} == {"GUC-WORK-MEM"}
