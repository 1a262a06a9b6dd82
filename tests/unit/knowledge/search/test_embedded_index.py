from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from citegate.knowledge.search import embedded, fusion
from citegate.knowledge.search.base import (
    ChunkRecord,
    FusionConfig,
    SearchFilter,
    SearchIndex,
    SearchMode,
    SearchUnavailable,
)
from citegate.knowledge.search.embedded import EmbeddedSearchIndex, prefix_regex

DIM = 16
MODES: tuple[SearchMode, ...] = ("hybrid", "lexical", "dense")


def basis(i: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[i % DIM] = 1.0
    return v


def unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def chunk(
    ref_id: str,
    text: str,
    *,
    kb_id: str = "A",
    document_id: str = "d1",
    vector: np.ndarray | None = None,
    **fields: Any,
) -> ChunkRecord:
    return ChunkRecord(
        ref_id=ref_id,
        kb_id=kb_id,
        tenant_id="t1",
        document_id=document_id,
        # one parent per chunk unless a test shares one: a parent's text is searched with each child
        parent_id=fields.pop("parent_id", f"{document_id}:p-{ref_id}"),
        source_name=fields.pop("source_name", f"{document_id}.md"),
        text=text,
        vector=basis(0) if vector is None else vector,
        **fields,
    )


def kb(*kb_ids: str, **kw: Any) -> SearchFilter:
    return SearchFilter(kb_ids=frozenset(kb_ids), **kw)


def refs(index: EmbeddedSearchIndex, **kw: Any) -> list[str]:
    return [h.chunk.ref_id for h in index.search(**kw).hits]


@pytest.fixture
def index(tmp_path: Path) -> Iterator[EmbeddedSearchIndex]:
    idx = EmbeddedSearchIndex(tmp_path / "index", DIM)
    yield idx
    idx.close()


def test_implements_the_protocol(index: EmbeddedSearchIndex) -> None:
    engine: SearchIndex = index
    assert engine.engine == "embedded"


def test_english_lexical_hit_with_stemming(index: EmbeddedSearchIndex) -> None:
    index.upsert_document(
        "A",
        "d1",
        [
            chunk("r1", "The runner runs every morning along the river."),
            chunk("r2", "Configuration files are read at startup."),
        ],
    )
    assert refs(index, query="running", vector=None, filter=kb("A"), limit=5, mode="lexical") == ["r1"]
    assert refs(index, query="CONFIGURATION file", vector=None, filter=kb("A"), limit=5, mode="lexical") == [
        "r2"
    ]
    hit = index.search(query="runs", vector=None, filter=kb("A"), limit=5, mode="lexical").hits[0]
    assert hit.score == hit.lexical_score and hit.score > 0 and hit.dense_score is None


def test_chinese_lexical_hit(index: EmbeddedSearchIndex) -> None:
    index.upsert_document(
        "A",
        "d1",
        [
            chunk("zh", "长城是中国古代的军事防御工程"),
            chunk("zh2", "故宫位于北京的中心"),
            chunk("en", "The Great Wall of China"),
        ],
    )
    assert refs(index, query="长城", vector=None, filter=kb("A"), limit=5, mode="lexical") == ["zh"]
    assert refs(index, query="军事防御", vector=None, filter=kb("A"), limit=5, mode="lexical") == ["zh"]
    assert refs(index, query="北京故宫", vector=None, filter=kb("A"), limit=5, mode="lexical") == ["zh2"]


def test_an_identifier_matches_exactly_before_its_parts_and_by_its_parts(index: EmbeddedSearchIndex) -> None:
    """`os.path.join` asked for: its own entry outranks passages that hold `os`, `path` and `join`
    apart (more often, even); `work mem` in prose still finds `work_mem`."""
    index.upsert_document(
        "A",
        "d1",
        [
            chunk("entry", "os.path.join(path, *paths): join one or more path components."),
            chunk("mention", "The os module: join a path to a path, or a path to os paths; join path lists."),
            chunk("setting", "work_mem (integer): the base maximum memory used by a query operation."),
            chunk("other", "Memory for maintenance operations such as VACUUM."),
        ],
    )
    exact = refs(index, query="os.path.join", vector=None, filter=kb("A"), limit=5, mode="lexical")
    assert exact[:2] == ["entry", "mention"]
    assert refs(index, query="work mem", vector=None, filter=kb("A"), limit=5, mode="lexical")[0] == "setting"


def test_a_short_option_finds_its_own_entry(index: EmbeddedSearchIndex) -> None:
    """`-O` is found by its entry, not by the word "o", and not as `-o`; `--no-verify` finds the
    entry written `--[no-]verify`."""
    index.upsert_document(
        "A",
        "d1",
        [
            chunk("big-o", "-O: remove assert statements and any code conditional on __debug__."),
            chunk("small-o", "-o <file>: write the output to file o instead of standard output."),
            chunk("verify", "-n, --[no-]verify: bypass the pre-commit and commit-msg hooks."),
            chunk("prose", "Run it once more, or run it o times; verify the result."),
        ],
    )
    assert refs(index, query="python -O", vector=None, filter=kb("A"), limit=5, mode="lexical")[0] == "big-o"
    assert (
        refs(index, query="git commit --no-verify", vector=None, filter=kb("A"), limit=5, mode="lexical")[0]
        == "verify"
    )


def test_the_section_heading_outranks_a_passing_mention(index: EmbeddedSearchIndex) -> None:
    """In a reference manual the entry of a setting is the section headed by it; other sections
    only mention it. The same words in the heading weigh more than in the text alone."""
    index.upsert_document(
        "A",
        "d1",
        [
            chunk(
                "mention",
                "Raising shared_buffers needs a larger max_wal_size; shared_buffers is read at start.",
                heading="Checkpoints",
            ),
            chunk(
                "entry",
                "shared_buffers (integer): the memory the server uses for buffers; 128MB by default.",
                heading="shared_buffers",
            ),
        ],
    )
    hits = index.search(query="shared_buffers", vector=None, filter=kb("A"), limit=5, mode="lexical").hits
    assert [h.chunk.ref_id for h in hits] == ["entry", "mention"]


def test_title_is_searched_with_a_lower_weight(index: EmbeddedSearchIndex) -> None:
    index.upsert_document(
        "A",
        "d1",
        [
            chunk("in-title", "nothing relevant here", title="Kubernetes operators"),
            chunk("in-text", "kubernetes operators reconcile state", title="Notes"),
        ],
    )
    hits = index.search(query="kubernetes", vector=None, filter=kb("A"), limit=5, mode="lexical").hits
    assert [h.chunk.ref_id for h in hits] == ["in-text", "in-title"]


def test_dense_mode_returns_cosine_scores(index: EmbeddedSearchIndex) -> None:
    rng = np.random.default_rng(1)
    vectors = [unit(rng) for _ in range(6)]
    index.upsert_document("A", "d1", [chunk(f"r{i}", "text", vector=v) for i, v in enumerate(vectors)])
    query = unit(rng)
    result = index.search(query="", vector=query, filter=kb("A"), limit=3, mode="dense")
    expected = sorted(((float(v @ query), f"r{i}") for i, v in enumerate(vectors)), reverse=True)[:3]
    assert [h.chunk.ref_id for h in result.hits] == [r for _, r in expected]
    assert [h.score for h in result.hits] == pytest.approx([s for s, _ in expected], abs=1e-6)
    assert all(h.dense_score == h.score and h.lexical_score is None for h in result.hits)
    assert result.stats["dense_candidates"] == 3 and result.stats["lexical_candidates"] == 0


def test_hybrid_ordering_follows_fusion(index: EmbeddedSearchIndex) -> None:
    index.upsert_document(
        "A",
        "d1",
        [
            chunk("lex", "solar panel efficiency solar panel", vector=basis(1)),
            chunk("vec", "unrelated words entirely", vector=basis(0)),
            chunk("both", "solar power", vector=(basis(0) + basis(1)) / np.sqrt(2)),
            chunk("none", "nothing at all", vector=basis(5)),
        ],
    )
    query, vector, flt = "solar panel", basis(0), kb("A")
    lexical_first = refs(
        index, query=query, vector=vector, filter=flt, limit=4, fusion=FusionConfig(lexical_weight=0.9)
    )
    assert lexical_first[0] == "lex"
    dense_first = refs(
        index, query=query, vector=vector, filter=flt, limit=4, fusion=FusionConfig(lexical_weight=0.1)
    )
    assert dense_first[0] == "vec"

    for config in (
        FusionConfig(),
        FusionConfig(lexical_weight=0.3),
        FusionConfig(method="rrf", rank_constant=5),
    ):
        result = index.search(query=query, vector=vector, filter=flt, limit=3, fusion=config, candidates=10)
        lexical = index.search(query=query, vector=None, filter=flt, limit=10, mode="lexical").hits
        dense = index.search(query=query, vector=vector, filter=flt, limit=10, mode="dense").hits
        expected = fusion.fuse(
            [(h.chunk.ref_id, h.score) for h in lexical], [(h.chunk.ref_id, h.score) for h in dense], config
        )[:3]
        assert [(h.chunk.ref_id, h.score, h.lexical_score, h.dense_score) for h in result.hits] == [
            (f.ref_id, pytest.approx(f.score), f.lexical, f.dense) for f in expected
        ]
        assert result.stats["mode"] == "hybrid"
        timings = result.stats["timings_ms"]
        assert isinstance(timings, dict) and set(timings) >= {"lexical", "dense", "fusion"}


def test_hybrid_falls_back_to_dense_without_query_terms(index: EmbeddedSearchIndex) -> None:
    index.upsert_document(
        "A", "d1", [chunk("r1", "hello world", vector=basis(0)), chunk("r2", "x", vector=basis(1))]
    )
    for query in ("", "  ?!… ", "，。"):
        result = index.search(query=query, vector=basis(1), filter=kb("A"), limit=2)
        assert [h.chunk.ref_id for h in result.hits] == ["r2", "r1"]
        assert result.stats["mode"] == "dense"
        assert result.hits[0].score == pytest.approx(1.0)
    assert index.search(query="...", vector=None, filter=kb("A"), limit=2, mode="lexical").hits == []
    # No vector: hybrid runs the lexical side alone.
    assert refs(index, query="hello", vector=None, filter=kb("A"), limit=2) == ["r1"]


def test_kb_isolation_property(index: EmbeddedSearchIndex) -> None:
    rng = np.random.default_rng(3)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
    words += ["长城", "工程", "数据"]
    documents = []
    texts: dict[str, tuple[str, np.ndarray]] = {}
    for kb_id in ("A", "B", "C"):
        for d in range(4):
            chunks = []
            for c in range(5):
                text = " ".join(rng.choice(words, size=6))
                vector = unit(rng)
                ref_id = f"{kb_id}-{d}-{c}"
                texts[ref_id] = (text, vector)
                chunks.append(chunk(ref_id, text, kb_id=kb_id, document_id=f"{kb_id}{d}", vector=vector))
            documents.append((kb_id, f"{kb_id}{d}", chunks))
    index.upsert_documents(documents)
    b_refs = [r for r in texts if r.startswith("B")]
    pyrng = random.Random(3)
    for _ in range(150):
        # The query is a B chunk itself (text and vector): the best match is always in B.
        text, vector = texts[pyrng.choice(b_refs)]
        allowed = pyrng.choice([("A",), ("C",), ("A", "C")])
        flt = kb(*allowed)
        for mode in MODES:
            hits = index.search(query=text, vector=vector, filter=flt, limit=10, mode=mode).hits
            assert hits, (text, mode)
            assert all(h.chunk.kb_id in allowed and flt.admits(h.chunk) for h in hits)
        assert refs(index, query=text, vector=vector, filter=kb("B"), limit=1, mode="dense")[0] in b_refs


def _metadata_corpus(index: EmbeddedSearchIndex) -> list[ChunkRecord]:
    rng = np.random.default_rng(5)
    chunks = []
    paths = ["docs/guide/intro.md", "docs/guide/setup.md", "docs/api.md", "docs-old/x.md", "blog/post.md", ""]
    for i in range(24):
        chunks.append(
            chunk(
                f"r{i}",
                f"common words number {i}",
                document_id=f"d{i % 3}",
                source_name=f"source{i % 3}",
                project=["web", "cli", ""][i % 3],
                version=["v1", "v2"][i % 2],
                path=paths[i % len(paths)],
                vector=unit(rng),
            )
        )
    by_doc: dict[str, list[ChunkRecord]] = {}
    for c in chunks:
        by_doc.setdefault(c.document_id, []).append(c)
    index.upsert_documents([("A", d, cs) for d, cs in by_doc.items()])
    return chunks


@pytest.mark.parametrize(
    "options",
    [
        {"source_names": frozenset({"source1"})},
        {"source_names": frozenset({"source0", "source2", "missing"})},
        {"projects": frozenset({"web"})},
        {"projects": frozenset({""})},
        {"versions": frozenset({"v2"})},
        {"path_prefixes": ("docs/",)},
        {"path_prefixes": ("docs/guide",)},
        {"path_prefixes": ("docs/gu", "blog/")},
        {"path_prefixes": ("docs",)},
        {"path_prefixes": ("",)},
        {"path_prefixes": ()},
        {"source_names": frozenset()},
        {"projects": frozenset({"cli"}), "versions": frozenset({"v1"}), "path_prefixes": ("docs/",)},
    ],
)
def test_filters_admit_exactly_what_the_filter_admits(
    index: EmbeddedSearchIndex, options: dict[str, Any]
) -> None:
    chunks = _metadata_corpus(index)
    flt = kb("A", **options)
    expected = sorted(c.ref_id for c in chunks if flt.admits(c))
    for mode in MODES:
        result = index.search(query="common words", vector=basis(2), filter=flt, limit=100, mode=mode)
        assert sorted(h.chunk.ref_id for h in result.hits) == expected, mode


def test_prefix_regex_escapes_everything() -> None:
    assert prefix_regex("a.b+(c)") == "a\\.b\\+\\(c\\)(?s:.*)"


def test_odd_path_prefixes_are_literal(index: EmbeddedSearchIndex) -> None:
    paths = ["a+b (1)/[x].md", "a.b/c", "ab/c", "x|y*z?/{1}^$#&-~", "Ünï/ç.md"]
    index.upsert_document("A", "d1", [chunk(f"r{i}", "word", path=p) for i, p in enumerate(paths)])
    for prefix in ["a+b (1)/", "a.", "a", "x|y*z?/{1}", "Ünï/", ".*"]:
        flt = kb("A", path_prefixes=(prefix,))
        got = refs(index, query="word", vector=None, filter=flt, limit=10, mode="lexical")
        assert sorted(got) == sorted(f"r{i}" for i, p in enumerate(paths) if p.startswith(prefix)), prefix


def test_upsert_replaces_the_document(index: EmbeddedSearchIndex) -> None:
    index.upsert_document(
        "A",
        "d1",
        [
            chunk("old1", "apple", vector=basis(1)),
            chunk("keep", "apple", vector=basis(2)),
            chunk("old2", "apple"),
        ],
    )
    index.upsert_document("A", "d2", [chunk("other", "apple", document_id="d2", vector=basis(3))])
    index.upsert_document("A", "d1", [chunk("keep", "banana", vector=basis(4)), chunk("new", "banana apple")])
    assert index.count("A", "d1") == 2
    assert index.count("A") == 3
    assert set(index.get_chunks(["old1", "old2", "keep", "new", "other"])) == {"keep", "new", "other"}
    assert index.get_chunks(["keep"])["keep"].text == "banana"
    flt = kb("A")
    assert sorted(refs(index, query="apple", vector=None, filter=flt, limit=10, mode="lexical")) == [
        "new",
        "other",
    ]
    assert sorted(refs(index, query="", vector=basis(1), filter=flt, limit=10, mode="dense")) == [
        "keep",
        "new",
        "other",
    ]
    assert refs(index, query="", vector=basis(4), filter=flt, limit=1, mode="dense") == ["keep"]


def test_upsert_validates_chunks(index: EmbeddedSearchIndex) -> None:
    with pytest.raises(ValueError, match="no vector"):
        index.upsert_document("A", "d1", [ChunkRecord("r", "A", "t", "d1", "p", "s", "text")])
    with pytest.raises(ValueError, match="dimensions"):
        index.upsert_document("A", "d1", [chunk("r", "x", vector=np.ones(DIM + 1, dtype=np.float32))])
    with pytest.raises(ValueError, match="does not belong"):
        index.upsert_document("A", "d1", [chunk("r", "x", kb_id="B")])
    with pytest.raises(ValueError, match="repeats"):
        index.upsert_document("A", "d1", [chunk("r", "x"), chunk("r", "y")])
    index.upsert_document("A", "d1", [chunk("r", "x")])
    with pytest.raises(ValueError, match="already in"):
        index.upsert_document("B", "d9", [chunk("r", "x", kb_id="B", document_id="d9")])
    assert index.count() == 1
    assert index.get_chunks(["r"])["r"].kb_id == "A"


def test_delete_document_and_kb_leave_nothing(index: EmbeddedSearchIndex) -> None:
    index.upsert_documents(
        [
            ("A", "d1", [chunk("a1", "pear", vector=basis(1)), chunk("a2", "pear", vector=basis(2))]),
            ("A", "d2", [chunk("a3", "pear", document_id="d2", vector=basis(3))]),
            ("B", "d1", [chunk("b1", "pear", kb_id="B", vector=basis(4))]),
        ]
    )
    assert index.delete_document("A", "d1") == 2
    assert index.delete_document("A", "d1") == 0
    assert index.count("A", "d1") == 0 and index.count("A") == 1 and index.count() == 2
    assert set(index.get_chunks(["a1", "a2", "a3"])) == {"a3"}
    for mode in MODES:
        assert refs(index, query="pear", vector=basis(1), filter=kb("A"), limit=10, mode=mode) == ["a3"]

    index.delete_kb("A")
    assert index.count("A") == 0 and index.count() == 1
    assert index.get_chunks(["a3"]) == {}
    for mode in MODES:
        assert refs(index, query="pear", vector=basis(3), filter=kb("A"), limit=10, mode=mode) == []
    assert refs(index, query="pear", vector=basis(3), filter=kb("A", "B"), limit=10) == ["b1"]
    # A deleted knowledge base can be filled again.
    index.upsert_document("A", "d1", [chunk("a1", "pear")])
    assert refs(index, query="pear", vector=basis(0), filter=kb("A"), limit=10) == ["a1"]


def _fill(index: EmbeddedSearchIndex) -> list[ChunkRecord]:
    chunks = [
        chunk(
            "en", "persistent storage survives restarts", vector=basis(1), page=3, heading="Storage", url="u"
        ),
        chunk("zh", "长城是中国古代的军事防御工程", vector=basis(2), title="长城", anchor="#a", position=1),
        chunk("b", "persistent", kb_id="B", vector=basis(1), path="x/y", project="p", version="v"),
    ]
    index.upsert_documents([("A", "d1", chunks[:2]), ("B", "d1", chunks[2:])])
    return chunks


def _assert_filled(index: EmbeddedSearchIndex, chunks: list[ChunkRecord]) -> None:
    assert index.count() == 3
    assert index.get_chunks([c.ref_id for c in chunks]) == {c.ref_id: c for c in chunks}
    assert refs(index, query="persistent", vector=None, filter=kb("A"), limit=5, mode="lexical") == ["en"]
    assert refs(index, query="长城", vector=None, filter=kb("A"), limit=5, mode="lexical") == ["zh"]
    assert refs(index, query="", vector=basis(2), filter=kb("A"), limit=1, mode="dense") == ["zh"]
    assert refs(index, query="", vector=basis(1), filter=kb("B"), limit=5, mode="dense") == ["b"]


@pytest.mark.parametrize("dense_cache", [True, False])
def test_persistence_across_restart(tmp_path: Path, dense_cache: bool) -> None:
    index = EmbeddedSearchIndex(tmp_path, DIM, use_dense_cache=dense_cache)
    chunks = _fill(index)
    index.close()
    with EmbeddedSearchIndex(tmp_path, DIM, use_dense_cache=dense_cache) as reopened:
        assert reopened.open_stats["dense_source"] == ("cache" if dense_cache else "tantivy")
        _assert_filled(reopened, chunks)


def test_stale_dense_cache_is_ignored(tmp_path: Path) -> None:
    index = EmbeddedSearchIndex(tmp_path, DIM)
    chunks = _fill(index)
    index.close()  # writes the dense cache
    # A session that changes the index but does not write a new cache (as after a crash).
    index = EmbeddedSearchIndex(tmp_path, DIM, use_dense_cache=False)
    index.delete_document("A", "d1")
    index.upsert_document("A", "d2", [chunk("new", "fresh", document_id="d2", vector=basis(7))])
    index.close()
    with EmbeddedSearchIndex(tmp_path, DIM) as reopened:
        assert reopened.open_stats["dense_source"] == "tantivy"
        assert refs(reopened, query="", vector=basis(2), filter=kb("A"), limit=5, mode="dense") == ["new"]
        assert reopened.count() == 2
    del chunks


def test_reopen_with_another_dimension_is_refused(tmp_path: Path) -> None:
    EmbeddedSearchIndex(tmp_path, DIM).close()
    with pytest.raises(ValueError, match="dimension"):
        EmbeddedSearchIndex(tmp_path, DIM * 2)


def test_one_writer_per_directory_and_closed_index(tmp_path: Path) -> None:
    index = EmbeddedSearchIndex(tmp_path, DIM)
    with pytest.raises(SearchUnavailable):
        EmbeddedSearchIndex(tmp_path, DIM)
    index.close()
    index.close()  # idempotent
    with pytest.raises(SearchUnavailable):
        index.search(query="x", vector=None, filter=kb("A"), limit=1)
    with pytest.raises(SearchUnavailable):
        index.upsert_document("A", "d1", [chunk("r", "x")])


@pytest.mark.parametrize(
    "query",
    [
        "title:foo AND (",
        "kb_id:B",
        'kb_id:"B" OR kb_id:A',
        "* OR secret",
        "text:secret)",
        "secret^100 ~2 [a TO z]",
    ],
)
def test_query_syntax_cannot_escape_the_kb_filter(index: EmbeddedSearchIndex, query: str) -> None:
    index.upsert_documents(
        [
            ("A", "d1", [chunk("a", "foo title kb_id other", title="foo")]),
            ("B", "d1", [chunk("b", "secret foo title kb_id B text", kb_id="B", title="foo secret")]),
        ]
    )
    for mode in MODES:
        hits = index.search(query=query, vector=basis(0), filter=kb("A"), limit=10, mode=mode).hits
        assert all(h.chunk.kb_id == "A" for h in hits)


def test_concurrent_searches_during_upserts(index: EmbeddedSearchIndex) -> None:
    rng = np.random.default_rng(9)
    index.upsert_document("A", "seed", [chunk("seed", "shared words", document_id="seed", vector=unit(rng))])
    errors: list[BaseException] = []
    stop = threading.Event()

    def searcher(seed: int) -> None:
        local = np.random.default_rng(seed)
        try:
            while not stop.is_set():
                for mode in MODES:
                    hits = index.search(
                        query="shared words", vector=unit(local), filter=kb("A"), limit=5, mode=mode
                    ).hits
                    assert hits and all(h.chunk.kb_id == "A" for h in hits)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=searcher, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    latest: dict[tuple[str, str], int] = {}
    try:
        for d in range(12):
            kb_id, document_id = ("A" if d % 2 else "B"), f"d{d % 3}"
            chunks = [
                chunk(f"{d}-{c}", "shared words", kb_id=kb_id, document_id=document_id, vector=unit(rng))
                for c in range(d % 4 + 1)
            ]
            index.upsert_document(kb_id, document_id, chunks)
            latest[kb_id, document_id] = len(chunks)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[0]
    assert index.count("A") == 1 + sum(n for (k, _), n in latest.items() if k == "A")
    assert index.count("B") == sum(n for (k, _), n in latest.items() if k == "B")


def test_dense_rows_are_compacted_after_many_replacements(tmp_path: Path) -> None:
    with EmbeddedSearchIndex(tmp_path, DIM) as index:
        rng = np.random.default_rng(2)
        for round_ in range(4):
            chunks = [chunk(f"r{round_}-{i}", "word", vector=unit(rng)) for i in range(700)]
            index.upsert_document("A", "d1", chunks)
        result = index.search(query="", vector=unit(rng), filter=kb("A"), limit=1000, mode="dense")
        assert len(result.hits) == 700
        assert {h.chunk.ref_id.split("-")[0] for h in result.hits} == {"r3"}
        rows = index._rows["A"]
        assert rows.n - rows.dead == 700 and rows.n < 2800


def test_limit_and_candidates(index: EmbeddedSearchIndex) -> None:
    rng = np.random.default_rng(4)
    index.upsert_document("A", "d1", [chunk(f"r{i}", f"word w{i}", vector=unit(rng)) for i in range(30)])
    result = index.search(query="word", vector=unit(rng), filter=kb("A"), limit=7, candidates=3)
    assert len(result.hits) == 7  # the pool is never smaller than the limit
    assert result.stats["lexical_candidates"] == 7 and result.stats["dense_candidates"] == 7
    result = index.search(query="word", vector=unit(rng), filter=kb("A"), limit=5)
    assert result.stats["lexical_candidates"] == 30 and result.stats["dense_candidates"] == 30
    assert index.search(query="word", vector=None, filter=kb("A"), limit=0).hits == []
    with pytest.raises(ValueError):
        index.search(query="word", vector=None, filter=kb("A"), limit=5, mode="dense")
    with pytest.raises(ValueError):
        index.search(query="word", vector=np.ones(3, dtype=np.float32), filter=kb("A"), limit=5)


def test_sign_bits_and_hamming_distance() -> None:
    rng = np.random.default_rng(6)
    vectors = rng.standard_normal((50, 70)).astype(np.float32)  # not a multiple of 64: padded
    bits = embedded.sign_bits(vectors)
    assert bits.shape == (2, 50) and bits.dtype == np.uint64
    query = rng.standard_normal(70).astype(np.float32)
    expected = ((vectors > 0) != (query > 0)).sum(axis=1)
    assert embedded._hamming(bits, embedded.sign_bits(query[np.newaxis, :])).tolist() == expected.tolist()


def test_two_stage_dense_search_keeps_filters_exact_and_finds_the_neighbours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Clustered 128-d vectors (real embeddings are clustered too); 3,000 rows, 5% rescored per search.
    monkeypatch.setattr(embedded, "RESCORE_MIN_ROWS", 150)
    rng = np.random.default_rng(8)
    dim = 128
    centres = rng.standard_normal((30, dim)).astype(np.float32)
    vectors = centres[rng.integers(0, 30, 3000)] + 0.5 * rng.standard_normal((3000, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    chunks = [
        ChunkRecord(
            ref_id=f"r{i}",
            kb_id="A",
            tenant_id="t1",
            document_id=f"d{i // 100}",
            parent_id=f"d{i // 100}:p{i}",
            source_name=f"d{i // 100}.md",
            text="word",
            project="odd" if i % 2 else "even",
            vector=vectors[i],
        )
        for i in range(3000)
    ]
    with (
        EmbeddedSearchIndex(tmp_path / "two", dim, exact_max_rows=0) as two,
        EmbeddedSearchIndex(tmp_path / "exact", dim) as exact,
    ):
        for engine in (two, exact):
            engine.upsert_documents([("A", f"d{d}", chunks[d * 100 : (d + 1) * 100]) for d in range(30)])
        found = 0
        for q in range(20):
            query = vectors[q * 97] + 0.1 * rng.standard_normal(dim).astype(np.float32)
            query /= np.linalg.norm(query)
            for flt in (kb("A"), kb("A", projects=frozenset({"odd"}))):
                fast = two.search(query="", vector=query, filter=flt, limit=3, mode="dense").hits
                slow = exact.search(query="", vector=query, filter=flt, limit=3, mode="dense").hits
                assert all(flt.admits(h.chunk) for h in fast)
                for h in fast:  # scores are exact cosines, whatever the first stage kept
                    assert h.score == pytest.approx(float(vectors[int(h.chunk.ref_id[1:])] @ query), abs=1e-5)
                assert fast[0].chunk.ref_id == slow[0].chunk.ref_id  # the near-copy is always found
                found += len({h.chunk.ref_id for h in fast} & {h.chunk.ref_id for h in slow})
        assert found >= 0.8 * 20 * 2 * 3  # the rest of a tight cluster: most of it
        # At most `rescore_rows` admitted rows: the search is exact.
        few = kb("A", source_names=frozenset({"d0.md"}))
        assert [
            h.chunk.ref_id
            for h in two.search(query="", vector=vectors[0], filter=few, limit=5, mode="dense").hits
        ] == [
            h.chunk.ref_id
            for h in exact.search(query="", vector=vectors[0], filter=few, limit=5, mode="dense").hits
        ]


def test_an_index_of_an_older_format_is_rebuilt_from_its_stored_fields(tmp_path: Path) -> None:
    shared = [
        chunk("a", "kubernetes operators reconcile state", parent_id="d1:p0", title="T", page=2),
        chunk("b", "a control loop runs", parent_id="d1:p0", position=1, vector=basis(1)),
        chunk("x", "gardening", kb_id="B", document_id="d2", vector=basis(2)),
    ]
    with EmbeddedSearchIndex(tmp_path, DIM) as index:
        index.upsert_document("A", "d1", shared[:2])
        index.upsert_document("B", "d2", shared[2:])
    meta = tmp_path / embedded.META_FILE
    meta.write_text(meta.read_text().replace(f'"format": {embedded.FORMAT}', '"format": 1'))
    with EmbeddedSearchIndex(tmp_path, DIM) as index:
        assert index.open_stats["migrated_chunks"] == 3
        assert index.get_chunks(["a", "b", "x"]) == {c.ref_id: c for c in shared}
        assert refs(index, query="kubernetes", vector=None, filter=kb("A"), limit=5, mode="lexical") == [
            "a",
            "b",
        ]
        assert refs(index, query="", vector=basis(1), filter=kb("A"), limit=1, mode="dense") == ["b"]
    assert not (tmp_path / embedded.MIGRATING_DIR).exists()
    assert f'"format": {embedded.FORMAT}' in meta.read_text()
    with EmbeddedSearchIndex(tmp_path, DIM) as index:  # once only
        assert "migrated_chunks" not in index.open_stats and index.count() == 3


def test_an_interrupted_rebuild_starts_again_from_the_old_index(tmp_path: Path) -> None:
    with EmbeddedSearchIndex(tmp_path, DIM) as index:
        index.upsert_document("A", "d1", [chunk("a", "alpha"), chunk("b", "beta", position=1)])
    meta = tmp_path / embedded.META_FILE
    meta.write_text(meta.read_text().replace(f'"format": {embedded.FORMAT}', '"format": 1'))
    # a crash after the old index was moved aside, with half a new one written
    (tmp_path / "tantivy").rename(tmp_path / embedded.MIGRATING_DIR)
    with EmbeddedSearchIndex(tmp_path / "partial", DIM) as partial:
        partial.upsert_document("A", "d1", [chunk("a", "alpha")])
    (tmp_path / "partial" / "tantivy").rename(tmp_path / "tantivy")
    with EmbeddedSearchIndex(tmp_path, DIM) as index:
        assert index.count() == 2 and set(index.get_chunks(["a", "b"])) == {"a", "b"}
