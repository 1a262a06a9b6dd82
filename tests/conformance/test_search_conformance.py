"""One behaviour suite for every SearchIndex engine (see conftest.py for which engines run).

Only engine-independent facts are asserted: which chunks come back, in which order when the order is
determined by the data, and fused scores where fusion.py fixes them. Raw BM25 values differ between
engines and are never compared.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from citegate.knowledge.search import fusion
from citegate.knowledge.search.base import (
    ChunkRecord,
    FusionConfig,
    SearchFilter,
    SearchIndex,
    SearchMode,
    Vector,
)

DIM = 16  # the dimension conftest.py opens every engine with
MODES: tuple[SearchMode, ...] = ("hybrid", "lexical", "dense")


def basis(i: int) -> Vector:
    v = np.zeros(DIM, dtype=np.float32)
    v[i] = 1.0
    return v


def mixed(cosine: float, axis: int) -> Vector:
    """A unit vector whose cosine with basis(0) is exactly `cosine`."""
    v = np.zeros(DIM, dtype=np.float32)
    v[0] = cosine
    v[axis] = math.sqrt(1.0 - cosine * cosine)
    return v


# Close to every corpus vector (all have a positive basis(0..4) component): dense sees everything.
EVERYWHERE = np.full(DIM, 1.0 / math.sqrt(DIM), dtype=np.float32)


def chunk(ref_id: str, text: str, vector: Vector, **fields: Any) -> ChunkRecord:
    kb_id, document_id, _ = ref_id.split(":")
    return ChunkRecord(
        ref_id=ref_id,
        kb_id=kb_id,
        tenant_id=f"t-{kb_id}",
        document_id=document_id,
        # one parent per chunk unless a test shares one: a parent's text is searched with each child
        parent_id=fields.pop("parent_id", f"{document_id}:p-{ref_id}"),
        source_name=fields.pop("source_name", f"{document_id}.md"),
        text=text,
        vector=vector,
        **fields,
    )


def kb(*kb_ids: str, **kw: Any) -> SearchFilter:
    return SearchFilter(kb_ids=frozenset(kb_ids), **kw)


INSTALL_0 = chunk(
    "A:install:0",
    "Citegate: install the command line tool with pip, then configure the credentials.",
    mixed(0.95, 8),
    project="cli",
    version="v1",
    path="docs/guide/install.md",
    title="Installation",
    position=0,
    page=1,
    url="https://docs.example/install",
    anchor="#setup",
    heading="Setup",
)
INSTALL_1 = chunk(
    "A:install:1",
    "Citegate upgrades require running the migration script first.",
    basis(1),
    project="cli",
    version="v1",
    path="docs/guide/install.md",
    title="Installation",
    position=1,
)
API_0 = chunk(
    "A:api:0",
    "The citegate REST endpoint returns paginated results.",
    basis(2),
    project="server",
    version="v2",
    path="api/reference.md",
)
FAQ_0 = chunk(
    "A:faq:0",
    "Citegate frequently asked questions about quotas.",
    basis(3),
    project="cli",
    version="v2",
    path="docs/faq.md",
)
# Another knowledge base whose chunk matches the "install pip" query best on both sides
# (dense: cosine 1.0 against A:install:0's 0.95).
SECRET_0 = chunk(
    "B:secret:0",
    "Install install install with pip pip: the secret notes of tenant B. Citegate.",
    basis(0),
    project="cli",
    version="v1",
    path="docs/guide/install.md",
)
CORPUS_A = (INSTALL_0, INSTALL_1, API_0, FAQ_0)
ALL = (*CORPUS_A, SECRET_0)


def seed(engine: SearchIndex) -> None:
    documents: dict[tuple[str, str], list[ChunkRecord]] = {}
    for c in ALL:
        documents.setdefault((c.kb_id, c.document_id), []).append(c)
    for (kb_id, document_id), chunks in documents.items():
        engine.upsert_document(kb_id, document_id, chunks)


def refs(engine: SearchIndex, **kw: Any) -> list[str]:
    kw.setdefault("limit", 10)
    kw.setdefault("vector", None)
    return [h.chunk.ref_id for h in engine.search(**kw).hits]


# ------------------------------------------------------------------------------------ finding


def test_upsert_then_find_lexically(engine: SearchIndex) -> None:
    seed(engine)
    assert refs(engine, query="credentials", filter=kb("A"), mode="lexical") == ["A:install:0"]
    # stemming on both engines: "configuring" finds "configure", "migrations" finds "migration"
    assert refs(engine, query="configuring", filter=kb("A"), mode="lexical") == ["A:install:0"]
    assert refs(engine, query="migrations", filter=kb("A"), mode="lexical") == ["A:install:1"]
    assert refs(engine, query="nonexistentword", filter=kb("A"), mode="lexical") == []


def test_upsert_then_find_densely(engine: SearchIndex) -> None:
    seed(engine)
    result = engine.search(query="", vector=basis(2), filter=kb("A"), limit=2, mode="dense")
    assert result.hits[0].chunk == API_0
    assert result.hits[0].score == pytest.approx(1.0, abs=1e-4)  # cosine, whatever the engine
    assert result.hits[1].score == pytest.approx(0.0, abs=1e-4)


def test_upsert_then_find_hybrid(engine: SearchIndex) -> None:
    seed(engine)
    result = engine.search(query="paginated results", vector=basis(2), filter=kb("A"), limit=3)
    assert result.stats["mode"] == "hybrid"
    assert result.hits[0].chunk == API_0


def test_empty_query_in_hybrid_mode_returns_dense_results(engine: SearchIndex) -> None:
    seed(engine)
    for query in ("", "   ", "?!"):
        result = engine.search(query=query, vector=basis(3), filter=kb("A"), limit=2, mode="hybrid")
        assert result.stats["mode"] == "dense"
        assert result.hits[0].chunk.ref_id == "A:faq:0"


def test_a_child_is_found_through_its_parents_text(engine: SearchIndex) -> None:
    # Two children of one parent and one of another: the query's words are spread over the first
    # parent, so both its children match lexically, the one holding more of them first.
    vector = basis(0)
    parent = [
        chunk("P:doc:0", "Kubernetes operators reconcile the declared state.", vector, parent_id="doc:p0"),
        chunk(
            "P:doc:1", "They run a control loop against the cluster.", vector, parent_id="doc:p0", position=1
        ),
        chunk("P:doc:2", "A garden needs water and light.", vector, parent_id="doc:p1", position=2),
    ]
    engine.upsert_document("P", "doc", parent)
    found = refs(engine, query="kubernetes operators", filter=kb("P"), mode="lexical")
    assert found == ["P:doc:0", "P:doc:1"]
    # the parent's text is searched, never returned
    assert engine.get_chunks(["P:doc:1"])["P:doc:1"] == parent[1]


# ------------------------------------------------------------------------------------ isolation


@pytest.mark.parametrize("mode", MODES)
def test_kb_isolation(engine: SearchIndex, mode: SearchMode) -> None:
    seed(engine)
    query = dict(query="install install pip pip", vector=basis(0), mode=mode)
    # B's chunk is the best match on both sides, and yet kb A never sees it
    found_a = refs(engine, filter=kb("A"), **query)
    assert "A:install:0" in found_a and not any(r.startswith("B:") for r in found_a)
    assert refs(engine, filter=kb("B"), **query) == ["B:secret:0"]
    both = refs(engine, filter=kb("A", "B"), **query)
    assert both[0] == "B:secret:0" and "A:install:0" in both
    assert refs(engine, filter=kb("nobody"), **query) == []


# ------------------------------------------------------------------------------------ filters

FILTERS: list[tuple[str, dict[str, Any]]] = [
    ("source_names", {"source_names": frozenset({"api.md", "faq.md"})}),
    ("source_names_empty", {"source_names": frozenset()}),
    ("projects", {"projects": frozenset({"cli"})}),
    ("versions", {"versions": frozenset({"v2"})}),
    ("path_prefix_mid_segment", {"path_prefixes": ("docs/gu",)}),
    ("path_prefixes_any", {"path_prefixes": ("api/", "docs/f")}),
    ("path_prefix_empty_string", {"path_prefixes": ("",)}),
    ("path_prefixes_none", {"path_prefixes": ()}),
    ("path_prefix_is_case_sensitive", {"path_prefixes": ("Docs/",)}),
    (
        "combined",
        {"projects": frozenset({"cli"}), "versions": frozenset({"v2"}), "path_prefixes": ("docs/",)},
    ),
]


@pytest.mark.parametrize("mode", MODES)
def test_filters_return_exactly_the_admitted_chunks(engine: SearchIndex, mode: SearchMode) -> None:
    seed(engine)
    for name, kw in FILTERS:
        flt = kb("A", **kw)
        # "citegate" is in every chunk and EVERYWHERE is close to every vector: each side sees all of A
        found = refs(engine, query="citegate", vector=EVERYWHERE, filter=flt, mode=mode)
        expected = {c.ref_id for c in CORPUS_A if flt.admits(c)}
        assert sorted(found) == sorted(expected), name


# ------------------------------------------------------------------------------------ writes


def test_upsert_replaces_the_document(engine: SearchIndex) -> None:
    seed(engine)
    new_0 = chunk("A:install:0", "Reinstall everything from scratch.", basis(4), path="docs/guide/install.md")
    new_2 = chunk("A:install:2", "A third chunk about rollback.", basis(5), path="docs/guide/install.md")
    engine.upsert_document("A", "install", [new_0, new_2])
    assert engine.count("A", "install") == 2
    assert engine.get_chunks(["A:install:0", "A:install:1", "A:install:2"]) == {
        "A:install:0": new_0,
        "A:install:2": new_2,
    }
    assert refs(engine, query="migration", filter=kb("A"), mode="lexical") == []
    assert refs(engine, query="credentials", filter=kb("A"), mode="lexical") == []
    assert refs(engine, query="reinstall scratch", filter=kb("A"), mode="lexical") == ["A:install:0"]
    assert (
        refs(engine, query="", vector=basis(1), filter=kb("A"), limit=10, mode="dense").count("A:install:1")
        == 0
    )
    # the other knowledge base is untouched
    assert engine.count("B") == 1


def test_delete_document_leaves_nothing(engine: SearchIndex) -> None:
    seed(engine)
    assert engine.delete_document("A", "install") == 2
    assert engine.count("A", "install") == 0
    assert engine.get_chunks(["A:install:0", "A:install:1"]) == {}
    for mode in MODES:
        found = refs(engine, query="install pip credentials", vector=basis(0), filter=kb("A"), mode=mode)
        assert not any(r.startswith("A:install:") for r in found)
    assert engine.delete_document("A", "install") == 0
    assert engine.count("A") == 2 and engine.count("B") == 1


def test_delete_kb_leaves_nothing(engine: SearchIndex) -> None:
    seed(engine)
    engine.delete_kb("A")
    assert engine.count("A") == 0
    assert engine.get_chunks([c.ref_id for c in CORPUS_A]) == {}
    for mode in MODES:
        assert refs(engine, query="citegate", vector=EVERYWHERE, filter=kb("A"), mode=mode) == []
    assert engine.count("B") == 1
    assert refs(engine, query="citegate", vector=EVERYWHERE, filter=kb("B"), mode="hybrid") == ["B:secret:0"]


# ------------------------------------------------------------------------------------ reads


def test_get_chunks_returns_known_and_omits_unknown(engine: SearchIndex) -> None:
    seed(engine)
    got = engine.get_chunks(["A:install:0", "nope", "B:secret:0", "A:install:0"])
    assert got == {"A:install:0": INSTALL_0, "B:secret:0": SECRET_0}  # every field round-trips
    assert got["A:install:0"].page == 1 and got["A:install:0"].heading == "Setup"
    assert engine.get_chunks([]) == {}
    assert engine.get_chunks(["nope"]) == {}


def test_count_per_kb_and_document(engine: SearchIndex) -> None:
    assert engine.count("A") == 0
    seed(engine)
    assert engine.count("A") == 4
    assert engine.count("B") == 1
    assert engine.count("A", "install") == 2
    assert engine.count("A", "api") == 1
    assert engine.count("B", "install") == 0
    assert engine.count() == 5


# ------------------------------------------------------------------------------------ fusion

# Query "zephyr" with vector basis(0):
#   lexical: alpha (tf 3, short) ranks above beta (tf 1, long); gamma has no match
#   dense:   beta 0.9, gamma 0.6, alpha 0.2
# Two lexical candidates normalise to 1 and 0.001 whatever BM25 says, so the fused scores are fixed:
#   min_max 0.7: alpha 0.7 + 0.3 * 0.001 = 0.7003; beta 0.7 * 0.001 + 0.3 = 0.3007; gamma 0.3 * 4/7
#   min_max 0.3: beta 0.7003; gamma 0.7 * 4/7 = 0.4; alpha 0.3007
#   rrf 60:      beta 1/61 + 1/62; alpha 1/61 + 1/63; gamma 1/62
ALPHA = chunk("F:doc:alpha", "zephyr zephyr zephyr", mixed(0.2, 5))
BETA = chunk(
    "F:doc:beta", "zephyr appears once in this much longer chunk about other things entirely", mixed(0.9, 6)
)
GAMMA = chunk("F:doc:gamma", "nothing lexical to see here", mixed(0.6, 7))
HAND_COMPUTED: list[tuple[FusionConfig, list[tuple[str, float]]]] = [
    (
        FusionConfig("min_max", 0.7),
        [("F:doc:alpha", 0.7003), ("F:doc:beta", 0.3007), ("F:doc:gamma", 0.3 * 4 / 7)],
    ),
    (
        FusionConfig("min_max", 0.3),
        [("F:doc:beta", 0.7003), ("F:doc:gamma", 0.4), ("F:doc:alpha", 0.3007)],
    ),
    (
        FusionConfig("rrf", rank_constant=60),
        [("F:doc:beta", 1 / 61 + 1 / 62), ("F:doc:alpha", 1 / 61 + 1 / 63), ("F:doc:gamma", 1 / 62)],
    ),
]


@pytest.mark.parametrize(("config", "expected"), HAND_COMPUTED, ids=["minmax-0.7", "minmax-0.3", "rrf-60"])
def test_hybrid_ordering_agrees_with_fusion_py(
    engine: SearchIndex, config: FusionConfig, expected: list[tuple[str, float]]
) -> None:
    engine.upsert_document("F", "doc", [ALPHA, BETA, GAMMA])
    seed(engine)  # other knowledge bases in the same index change nothing
    flt = kb("F")
    q = basis(0)
    hybrid = engine.search(query="zephyr", vector=q, filter=flt, limit=3, fusion=config)
    got = [(h.chunk.ref_id, h.score) for h in hybrid.hits]
    assert [r for r, _ in got] == [r for r, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-3)

    # ... and equals fusion.py applied to the engine's own lexical and dense sides
    lexical = engine.search(query="zephyr", vector=None, filter=flt, limit=50, mode="lexical")
    dense = engine.search(query="", vector=q, filter=flt, limit=50, mode="dense")
    assert [h.chunk.ref_id for h in lexical.hits] == ["F:doc:alpha", "F:doc:beta"]
    assert [h.score for h in dense.hits] == pytest.approx([0.9, 0.6, 0.2], abs=1e-4)
    fused = fusion.fuse(
        [(h.chunk.ref_id, h.score) for h in lexical.hits],
        [(h.chunk.ref_id, h.score) for h in dense.hits],
        config,
    )
    assert [f.ref_id for f in fused] == [r for r, _ in got]
    assert [f.score for f in fused] == pytest.approx([s for _, s in got], rel=1e-3)
