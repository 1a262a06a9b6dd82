from __future__ import annotations

from citegate.knowledge.ingest.chunking import DEFAULT_CHUNKING, ChunkingConfig, chunk_document
from citegate.knowledge.ingest.documents import ParsedDocument
from citegate.knowledge.search.base import MAX_CONTEXT_CHARS, ChunkRecord, parent_contexts


def record(ref_id: str, text: str, parent_id: str = "d:p0", position: int = 0) -> ChunkRecord:
    return ChunkRecord(
        ref_id=ref_id,
        kb_id="A",
        tenant_id="t",
        document_id="d",
        parent_id=parent_id,
        source_name="d.md",
        text=text,
        position=position,
    )


def records_of(text: str, config: ChunkingConfig = DEFAULT_CHUNKING) -> tuple[list[ChunkRecord], list[str]]:
    chunked = chunk_document(ParsedDocument(text=text, title="", mime_type="text/markdown"), config)
    children = [
        record(f"d:{c.index}", c.text, parent_id=f"d:p{c.parent_index}", position=c.index)
        for c in chunked.children
    ]
    return children, [p.text for p in chunked.parents]


def test_the_chunkers_parents_are_rebuilt_exactly_from_their_children() -> None:
    sentences = [f"Sentence number {i} talks about topic {i % 7} in some detail." for i in range(300)]
    text = "# Title\n\n" + " ".join(sentences[:150]) + "\n\n## Second\n\n" + " ".join(sentences[150:])
    children, parents = records_of(text)
    assert len(parents) > 1 and len(children) > 2 * len(parents)
    contexts = parent_contexts(list(reversed(children)))  # order of arrival does not matter
    for child in children:
        parent = parents[int(child.parent_id.split(":p")[1])]
        assert contexts[child.ref_id] == parent


def test_chinese_children_are_rebuilt_exactly_too() -> None:
    text = "".join(f"第{i}句话讲的是长城和故宫的历史。" for i in range(200))
    children, parents = records_of(text)
    assert len(children) > 3
    assert {parent_contexts(children)[c.ref_id] for c in children} == set(parents)


def test_children_without_overlap_are_joined_whole() -> None:
    chunks = [record("b", "second part", position=1), record("a", "first part", position=0)]
    assert parent_contexts(chunks) == {"a": "first part\nsecond part", "b": "first part\nsecond part"}


def test_a_short_coincidental_overlap_is_not_merged() -> None:
    # "the" ends one child and starts the next by chance: both words stay whole
    chunks = [record("a", "we asked the", position=0), record("b", "the end", position=1)]
    assert parent_contexts(chunks)["a"] == "we asked the\nthe end"


def test_chunks_without_a_parent_are_their_own_context() -> None:
    chunks = [record("a", "alpha", parent_id=""), record("b", "beta", parent_id="")]
    assert parent_contexts(chunks) == {"a": "alpha", "b": "beta"}


def test_each_parent_is_separate() -> None:
    chunks = [record("a", "alpha", "d:p0"), record("b", "beta", "d:p1"), record("c", "gamma", "d:p0", 1)]
    assert parent_contexts(chunks) == {"a": "alpha\ngamma", "b": "beta", "c": "alpha\ngamma"}


def test_a_huge_parent_is_cut_to_a_window_around_each_child() -> None:
    pieces = [f"piece{i:05d} " * 10 for i in range(200)]  # 200 children of 120 characters, no overlap
    chunks = [record(f"r{i}", text.strip(), position=i) for i, text in enumerate(pieces)]
    contexts = parent_contexts(chunks)
    for chunk in (chunks[0], chunks[100], chunks[-1]):
        context = contexts[chunk.ref_id]
        assert len(context) == MAX_CONTEXT_CHARS
        assert chunk.text in context
    assert contexts["r0"].startswith("piece00000") and contexts["r199"].endswith("piece00199")
