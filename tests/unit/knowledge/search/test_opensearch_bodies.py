"""The OpenSearch engine by contract: exact request bodies, and a recording fake client (no network)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from botocore.credentials import Credentials
from opensearchpy import AWSV4SignerAuth, RequestsHttpConnection
from opensearchpy.exceptions import ConnectionError, ConnectionTimeout, RequestError, TransportError
from opensearchpy.serializer import JSONSerializer

from citegate.knowledge.search import fusion, opensearch
from citegate.knowledge.search.base import (
    ChunkRecord,
    FusionConfig,
    SearchFilter,
    SearchIndex,
    SearchUnavailable,
)
from citegate.knowledge.search.opensearch import (
    OpenSearchIndex,
    bulk_actions,
    chunk_from_source,
    chunk_options,
    dense_query_body,
    document_query,
    filter_clauses,
    hybrid_query_body,
    index_body,
    index_template_body,
    knn_score_to_cosine,
    lexical_clause,
    lexical_query_body,
    pipeline_name,
    search_pipeline_body,
    setup_opensearch,
)

DIM = 4
INDEX = "cg-chunks"
Q = np.array([0.5, 0.5, 0.5, 0.5], dtype=np.float32)  # exactly representable: literal bodies stay exact
SOURCE = {"excludes": ["vector", "context", "options", "section"]}


def kb(*kb_ids: str, **kw: Any) -> SearchFilter:
    return SearchFilter(kb_ids=frozenset(kb_ids), **kw)


def chunk(ref_id: str, *, kb_id: str = "A", document_id: str = "d1", **fields: Any) -> ChunkRecord:
    return ChunkRecord(
        ref_id=ref_id,
        kb_id=kb_id,
        tenant_id="t1",
        document_id=document_id,
        parent_id=fields.pop("parent_id", f"{document_id}:p0"),
        source_name=fields.pop("source_name", f"{document_id}.md"),
        text=fields.pop("text", f"text of {ref_id}"),
        vector=fields.pop("vector", np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)),
        **fields,
    )


def source_of(c: ChunkRecord) -> dict[str, Any]:
    return {
        "ref_id": c.ref_id,
        "kb_id": c.kb_id,
        "tenant_id": c.tenant_id,
        "document_id": c.document_id,
        "parent_id": c.parent_id,
        "source_name": c.source_name,
        "text": c.text,
        "position": c.position,
        "title": c.title,
        "page": c.page,
        "project": c.project,
        "path": c.path,
        "version": c.version,
        "url": c.url,
        "anchor": c.anchor,
        "heading": c.heading,
    }


def hits(*pairs: tuple[ChunkRecord, float], took: int = 3) -> dict[str, Any]:
    return {
        "took": took,
        "hits": {
            "hits": [
                {"_index": INDEX, "_id": c.ref_id, "_score": s, "_source": source_of(c)} for c, s in pairs
            ]
        },
    }


# ------------------------------------------------------------------------------------ fake client

Responder = Callable[[dict[str, Any]], Any] | Any


class FakeClient:
    """Records every call as (name, kwargs); answers from `responses`, raises from `errors`."""

    def __init__(
        self, responses: dict[str, Responder] | None = None, errors: dict[str, Exception] | None = None
    ):
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.responses = {
            "indices.put_index_template": {"acknowledged": True},
            "indices.exists": True,
            "indices.create": {"acknowledged": True},
            "indices.get_mapping": {
                INDEX: {
                    "mappings": {
                        "properties": {
                            "vector": {"dimension": DIM},
                            "context": ANALYSED,
                            "options": OPTIONS,
                            "section": ANALYSED,
                        }
                    }
                }
            },
            "indices.put_mapping": {"acknowledged": True},
            "search_pipeline.put": {"acknowledged": True},
            "mget": {"docs": []},
            "bulk": self._bulk_ok,
            "delete_by_query": {"deleted": 0, "failures": []},
            "count": {"count": 0},
            "search": hits(),
            "msearch": {"responses": [hits(), hits()]},
            "close": None,
        }
        self.responses.update(responses or {})
        self.errors = errors or {}
        self.transport = SimpleNamespace(serializer=JSONSerializer())
        self.indices = SimpleNamespace(
            **{
                name: self._method(f"indices.{name}")
                for name in ("put_index_template", "exists", "create", "get_mapping", "put_mapping")
            }
        )
        self.search_pipeline = SimpleNamespace(put=self._method("search_pipeline.put"))
        for name in ("mget", "bulk", "delete_by_query", "count", "search", "msearch", "close"):
            setattr(self, name, self._method(name))

    @staticmethod
    def _bulk_ok(kw: dict[str, Any]) -> dict[str, Any]:
        lines = [json.loads(line) for line in kw["body"].splitlines() if line]
        return {
            "errors": False,
            "items": [{"index": {"_id": a["index"]["_id"], "status": 201}} for a in lines[::2]],
        }

    def _method(self, name: str) -> Callable[..., Any]:
        def call(**kw: Any) -> Any:
            self.calls.append((name, kw))
            if name in self.errors:
                raise self.errors[name]
            answer = self.responses[name]
            return answer(kw) if callable(answer) else answer

        return call

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def only(self, name: str) -> dict[str, Any]:
        found = [kw for n, kw in self.calls if n == name]
        assert len(found) == 1, f"{name} called {len(found)} times"
        return found[0]


def make(client: FakeClient, **kw: Any) -> OpenSearchIndex:
    kw.setdefault("auto_setup", False)
    return OpenSearchIndex(client, prefix="cg", dimension=DIM, **kw)


SETUP_CALLS = ["indices.put_index_template", "indices.exists", "indices.get_mapping"]


# ------------------------------------------------------------------------------------ index + template

OPTIONS = {"type": "text", "analyzer": "whitespace"}
ANALYSED = {
    "type": "text",
    "analyzer": "citegate_english",
    "fields": {"zh": {"type": "text", "analyzer": "smartcn"}},
}
KEYWORD = {"type": "keyword"}
EXPECTED_INDEX = {
    "settings": {
        "index.knn": True,
        "analysis": {
            "filter": {
                "citegate_english_stemmer": {"type": "stemmer", "language": "porter2"},
                "citegate_identifiers": {
                    "type": "word_delimiter",
                    "preserve_original": True,
                    "split_on_case_change": True,
                    "split_on_numerics": False,
                    "stem_english_possessive": False,
                },
            },
            "analyzer": {
                "citegate_english": {
                    "type": "custom",
                    "tokenizer": "standard",
                    "filter": ["citegate_identifiers", "lowercase", "citegate_english_stemmer"],
                }
            },
        },
    },
    "mappings": {
        "dynamic": "strict",
        "_source": {"excludes": ["context", "options", "section"]},
        "properties": {
            "ref_id": KEYWORD,
            "kb_id": KEYWORD,
            "tenant_id": KEYWORD,
            "document_id": KEYWORD,
            "parent_id": KEYWORD,
            "source_name": KEYWORD,
            "project": KEYWORD,
            "version": KEYWORD,
            "path": KEYWORD,
            "url": KEYWORD,
            "anchor": KEYWORD,
            "text": ANALYSED,
            "title": ANALYSED,
            "context": ANALYSED,
            "options": OPTIONS,
            "section": ANALYSED,
            "heading": {"type": "text", "index": False},
            "position": {"type": "integer"},
            "page": {"type": "integer"},
            "vector": {
                "type": "knn_vector",
                "dimension": 384,
                "method": {
                    "name": "hnsw",
                    "engine": "faiss",
                    "space_type": "innerproduct",
                    "parameters": {"m": 16, "ef_construction": 128},
                },
            },
        },
    },
}


def test_index_template_body_is_pinned() -> None:
    assert index_template_body(384, prefix="cg") == {
        "index_patterns": ["cg-chunks"],
        "priority": 100,
        "template": EXPECTED_INDEX,
        "_meta": {"managed_by": "citegate"},
    }
    assert index_body(384) == EXPECTED_INDEX
    assert index_template_body(384)["index_patterns"] == ["citegate-chunks"]


def test_chinese_analyzer_fallbacks() -> None:
    cjk = index_body(8, chinese_analyzer="cjk")
    assert cjk["mappings"]["properties"]["text"]["fields"] == {"zh": {"type": "text", "analyzer": "cjk"}}
    assert set(cjk["settings"]["analysis"]["analyzer"]) == {"citegate_english"}
    icu = index_body(8, chinese_analyzer="icu")
    assert icu["mappings"]["properties"]["title"]["fields"] == {
        "zh": {"type": "text", "analyzer": "citegate_icu"}
    }
    assert icu["settings"]["analysis"]["analyzer"]["citegate_icu"] == {
        "type": "custom",
        "tokenizer": "icu_tokenizer",
        "filter": ["lowercase"],
    }
    with pytest.raises(ValueError):
        index_body(0)


# ------------------------------------------------------------------------------------ pipelines


def test_min_max_pipeline_body() -> None:
    assert search_pipeline_body(FusionConfig("min_max", 0.7)) == {
        "description": "citegate hybrid fusion: min_max + arithmetic_mean, weights [0.7, 0.3]",
        "phase_results_processors": [
            {
                "normalization-processor": {
                    "normalization": {"technique": "min_max"},
                    "combination": {"technique": "arithmetic_mean", "parameters": {"weights": [0.7, 0.3]}},
                }
            }
        ],
    }
    weights = search_pipeline_body(FusionConfig("min_max", 0.1))["phase_results_processors"][0][
        "normalization-processor"
    ]["combination"]["parameters"]["weights"]
    assert weights == [0.1, 0.9] and sum(weights) == pytest.approx(1.0)


def test_rrf_pipeline_body() -> None:
    assert search_pipeline_body(FusionConfig("rrf", rank_constant=60)) == {
        "description": "citegate hybrid fusion: rrf, rank_constant 60",
        "phase_results_processors": [
            {"score-ranker-processor": {"combination": {"technique": "rrf", "rank_constant": 60}}}
        ],
    }


def test_pipeline_names_follow_the_fusion_config() -> None:
    assert pipeline_name("cg", FusionConfig()) == "cg-minmax-0.70"
    assert pipeline_name("cg", FusionConfig("min_max", 0.3)) == "cg-minmax-0.30"
    assert pipeline_name("cg", FusionConfig("min_max", 1.0)) == "cg-minmax-1.00"
    assert pipeline_name("cg", FusionConfig("min_max", 0.705)) == "cg-minmax-0.705"  # never merged with 0.70
    assert pipeline_name("cg", FusionConfig("rrf", rank_constant=20)) == "cg-rrf-20"
    for bad in (FusionConfig("min_max", 1.5), FusionConfig("rrf", rank_constant=0)):
        with pytest.raises(ValueError):
            pipeline_name("cg", bad)


# ------------------------------------------------------------------------------------ filters + queries

EVERY_FILTER = kb(
    "B",
    "A",
    source_names=frozenset({"z.md", "a.md"}),
    projects=frozenset({"p1"}),
    versions=frozenset({"v2", "v1"}),
    path_prefixes=("docs/gu", "api/", "docs/gu"),
)
EVERY_CLAUSE = [
    {"terms": {"kb_id": ["A", "B"]}},
    {"terms": {"source_name": ["a.md", "z.md"]}},
    {"terms": {"project": ["p1"]}},
    {"terms": {"version": ["v1", "v2"]}},
    {
        "bool": {
            "should": [{"prefix": {"path": {"value": "docs/gu"}}}, {"prefix": {"path": {"value": "api/"}}}],
            "minimum_should_match": 1,
        }
    },
]


def test_filter_clauses_every_kind() -> None:
    assert filter_clauses(kb("A")) == [{"terms": {"kb_id": ["A"]}}]
    assert filter_clauses(EVERY_FILTER) == EVERY_CLAUSE


def test_filter_clauses_edge_cases_match_admits() -> None:
    # empty sets admit nothing: `terms` with no values matches nothing
    assert filter_clauses(kb("A", projects=frozenset())) == [
        {"terms": {"kb_id": ["A"]}},
        {"terms": {"project": []}},
    ]
    # no prefix admits nothing; an empty bool would match everything
    assert filter_clauses(kb("A", path_prefixes=())) == [{"terms": {"kb_id": ["A"]}}, {"match_none": {}}]
    # "" admits every path
    assert filter_clauses(kb("A", path_prefixes=("docs/", ""))) == [{"terms": {"kb_id": ["A"]}}]
    c = chunk("r", path="x/y")
    assert not kb("A", path_prefixes=()).admits(c) and kb("A", path_prefixes=("docs/", "")).admits(c)


LEXICAL_CLAUSE = {
    "bool": {
        "must": [
            {
                "multi_match": {
                    "query": "how configure",  # the stopword dropped, as the embedded engine does
                    "type": "most_fields",
                    "fields": ["text", "text.zh", "title^0.5", "title.zh^0.5", "context", "context.zh"],
                }
            }
        ],
        "filter": EVERY_CLAUSE,
    }
}


def test_a_query_naming_an_option_also_matches_the_options_field() -> None:
    """`-s` is not the letter s: the option tokens, made in Python as the embedded engine makes them,
    go to a whitespace-analysed field of their own, on both the document and the query side."""
    clause = lexical_clause("What does git shortlog -s print? And --[no-]verify?", kb("A"))["bool"]
    assert clause["should"] == [{"match": {"options": {"query": "-s --verify --no-verify", "boost": 1.0}}}]
    assert "should" not in lexical_clause("how to configure", kb("A"))["bool"]
    entry = chunk(
        "A:d1:0",
        text="**-s**, **--summary**: print a count. See -S too.",
        title="git-shortlog -n",
        heading="-e",
    )
    assert chunk_options(entry) == "-n -e -s --summary -^s"


def test_section_headings_are_searched_for_the_identifiers_a_query_names() -> None:
    """The entry of `work_mem` is the section headed by it; a plain word of the question ("default")
    is not looked for in headings, where it would favour any section titled "Defaults"."""
    clause = lexical_clause("What is the default of work_mem and os.path.join?", kb("A"))["bool"]
    assert clause["should"] == [{"match": {"section": {"query": "os.path.join work_mem", "boost": 1.0}}}]
    assert "should" not in lexical_clause("What is the default value?", kb("A"))["bool"]


def knn(k: int) -> dict[str, Any]:
    return {
        "knn": {
            "vector": {"vector": [0.5, 0.5, 0.5, 0.5], "k": k, "filter": {"bool": {"filter": EVERY_CLAUSE}}}
        }
    }


def test_hybrid_query_body() -> None:
    assert hybrid_query_body("how to configure", Q, EVERY_FILTER, 10, 50) == {
        "size": 10,
        "query": {"hybrid": {"queries": [LEXICAL_CLAUSE, knn(50)]}},
        "_source": SOURCE,
    }
    paged = hybrid_query_body("how to configure", Q, EVERY_FILTER, 10, 50, pagination_depth=50)
    assert paged["query"]["hybrid"] == {"queries": [LEXICAL_CLAUSE, knn(50)], "pagination_depth": 50}


def test_lexical_and_dense_query_bodies() -> None:
    assert lexical_query_body("how to configure", EVERY_FILTER, 7) == {
        "size": 7,
        "query": LEXICAL_CLAUSE,
        "_source": SOURCE,
    }
    assert dense_query_body(Q, EVERY_FILTER, 7) == {"size": 7, "query": knn(7), "_source": SOURCE}
    assert dense_query_body(Q, EVERY_FILTER, 7, 40)["query"] == knn(40)
    assert dense_query_body(Q, kb("A"), 3, 50_000)["query"]["knn"]["vector"]["k"] == 10_000


# ------------------------------------------------------------------------------------ writes


def test_bulk_actions_and_document_query() -> None:
    c = chunk("A:d1:0", title="T", page=3, project="p", path="docs/a.md", version="v1", url="u", anchor="#a")
    assert bulk_actions(INDEX, [c], [np.array([0.25, 0.5, 0.0, 1.0], dtype=np.float32)]) == [
        {
            "_op_type": "index",
            "_index": "cg-chunks",
            "_id": "A:d1:0",
            "_source": {
                "ref_id": "A:d1:0",
                "kb_id": "A",
                "tenant_id": "t1",
                "document_id": "d1",
                "parent_id": "d1:p0",
                "source_name": "d1.md",
                "text": "text of A:d1:0",
                "position": 0,
                "title": "T",
                "page": 3,
                "project": "p",
                "path": "docs/a.md",
                "version": "v1",
                "url": "u",
                "anchor": "#a",
                "heading": "",
                "context": "text of A:d1:0",
                "options": "",
                "section": "",
                "vector": [0.25, 0.5, 0.0, 1.0],
            },
        }
    ]
    assert document_query("A", "d1") == {
        "query": {"bool": {"filter": [{"term": {"kb_id": "A"}}, {"term": {"document_id": "d1"}}]}}
    }
    assert document_query("A", "d1", keep=["r1", "r2"]) == {
        "query": {
            "bool": {
                "filter": [{"term": {"kb_id": "A"}}, {"term": {"document_id": "d1"}}],
                "must_not": [{"ids": {"values": ["r1", "r2"]}}],
            }
        }
    }


def test_constructor_is_lazy_and_implements_the_protocol() -> None:
    client = FakeClient()
    engine: SearchIndex = OpenSearchIndex(client, prefix="cg", dimension=DIM)
    assert engine.engine == "opensearch" and client.calls == []
    for bad_prefix in ("CG", "-cg", "c g", ""):
        with pytest.raises(ValueError):
            OpenSearchIndex(client, prefix=bad_prefix, dimension=DIM)


def test_upsert_indexes_then_deletes_stale_chunks() -> None:
    client = FakeClient({"delete_by_query": {"deleted": 2, "failures": []}})
    index = OpenSearchIndex(client, prefix="cg", dimension=DIM)  # auto_setup: template + index check first
    chunks = [chunk("A:d1:0"), chunk("A:d1:1", text="second", position=1)]
    index.upsert_document("A", "d1", chunks)

    assert client.names() == [*SETUP_CALLS, "mget", "bulk", "delete_by_query"]
    assert client.only("mget") == {
        "index": INDEX,
        "body": {"ids": ["A:d1:0", "A:d1:1"]},
        "_source_includes": "kb_id,document_id",
    }
    bulk = client.only("bulk")
    assert bulk["refresh"] == "wait_for"
    lines = [json.loads(line) for line in bulk["body"].splitlines()]
    vector = [1.0, 0.0, 0.0, 0.0]
    assert lines == [
        {"index": {"_id": "A:d1:0", "_index": INDEX}},
        # both children of parent d1:p0 carry its text, rebuilt from them
        {
            **source_of(chunks[0]),
            "context": "text of A:d1:0\nsecond",
            "options": "",
            "section": "",
            "vector": vector,
        },
        {"index": {"_id": "A:d1:1", "_index": INDEX}},
        {
            **source_of(chunks[1]),
            "context": "text of A:d1:0\nsecond",
            "options": "",
            "section": "",
            "vector": vector,
        },
    ]
    assert client.only("delete_by_query") == {
        "index": INDEX,
        "body": document_query("A", "d1", keep=["A:d1:0", "A:d1:1"]),
        "refresh": True,
    }
    # setup runs once per process, not once per call
    index.upsert_document("A", "d1", [])
    assert client.names()[-1:] == ["delete_by_query"] and client.names().count("indices.exists") == 1
    assert client.calls[-1][1]["body"] == document_query("A", "d1")


def test_upsert_refuses_a_ref_id_of_another_document() -> None:
    taken = {"docs": [{"_id": "A:d1:0", "found": True, "_source": {"kb_id": "B", "document_id": "d9"}}]}
    client = FakeClient({"mget": taken})
    with pytest.raises(ValueError, match="already in B/d9"):
        make(client).upsert_document("A", "d1", [chunk("A:d1:0")])
    assert "bulk" not in client.names() and "delete_by_query" not in client.names()


def test_upsert_validates_before_any_request() -> None:
    client = FakeClient()
    index = make(client)
    for bad in (
        [chunk("x", kb_id="B")],
        [chunk("x", vector=None)],
        [chunk("x", vector=np.ones(3, dtype=np.float32))],
        [chunk("x", vector=np.array([np.nan, 0, 0, 0], dtype=np.float32))],
        [chunk("x"), chunk("x")],
    ):
        with pytest.raises(ValueError):
            index.upsert_document("A", "d1", bad)
    assert client.calls == []


def test_bulk_errors_become_search_unavailable_with_the_first_reason() -> None:
    def bulk_fails(kw: dict[str, Any]) -> dict[str, Any]:
        error = {"type": "mapper_parsing_exception", "reason": "failed to parse field [vector]"}
        return {"errors": True, "items": [{"index": {"_id": "A:d1:0", "status": 400, "error": error}}]}

    client = FakeClient({"bulk": bulk_fails})
    with pytest.raises(
        SearchUnavailable, match=r"A:d1:0 status 400: mapper_parsing_exception: failed to parse"
    ):
        make(client).upsert_document("A", "d1", [chunk("A:d1:0")])
    assert "delete_by_query" not in client.names()  # the old chunks stay searchable


def test_delete_document_and_delete_kb() -> None:
    client = FakeClient({"delete_by_query": {"deleted": 3, "failures": []}})
    index = make(client)
    assert index.delete_document("A", "d1") == 3
    index.delete_kb("A")
    assert client.calls == [
        ("delete_by_query", {"index": INDEX, "body": document_query("A", "d1"), "refresh": True}),
        (
            "delete_by_query",
            {
                "index": INDEX,
                "body": {"query": {"bool": {"filter": [{"term": {"kb_id": "A"}}]}}},
                "refresh": True,
            },
        ),
    ]
    failing = FakeClient(
        {"delete_by_query": {"deleted": 1, "failures": [{"cause": {"reason": "shard lost"}}]}}
    )
    with pytest.raises(SearchUnavailable, match="shard lost"):
        make(failing).delete_kb("A")


def test_get_chunks_via_mget() -> None:
    known = chunk("A:d1:0", page=None, heading="H")
    client = FakeClient(
        {
            "mget": {
                "docs": [
                    {"_id": "A:d1:0", "found": True, "_source": source_of(known)},
                    {"_id": "nope", "found": False},
                ]
            }
        }
    )
    index = make(client)
    assert index.get_chunks(["A:d1:0", "nope", "A:d1:0"]) == {"A:d1:0": known}
    assert client.only("mget") == {
        "index": INDEX,
        "body": {"ids": ["A:d1:0", "nope"]},
        "_source_excludes": "vector",
    }
    assert index.get_chunks([]) == {} and len(client.calls) == 1


def test_count_bodies() -> None:
    client = FakeClient({"count": {"count": 5}})
    index = make(client)
    assert index.count() == 5
    assert index.count("A") == 5
    assert index.count("A", "d1") == 5
    assert [kw for _, kw in client.calls] == [
        {"index": INDEX, "body": {"query": {"match_all": {}}}},
        {"index": INDEX, "body": {"query": {"bool": {"filter": [{"term": {"kb_id": "A"}}]}}}},
        {
            "index": INDEX,
            "body": {
                "query": {"bool": {"filter": [{"term": {"kb_id": "A"}}, {"term": {"document_id": "d1"}}]}}
            },
        },
    ]


# ------------------------------------------------------------------------------------ search


def test_hybrid_search_uses_the_pipeline_and_maps_hits() -> None:
    a, b, c = chunk("A:d1:0"), chunk("A:d1:1"), chunk("A:d2:0", document_id="d2")
    client = FakeClient({"search": hits((b, 0.9), (c, 0.5), (a, 0.5), took=7)})
    index = OpenSearchIndex(client, prefix="cg", dimension=DIM)
    result = index.search(query="how to configure", vector=Q, filter=kb("A"), limit=3)

    assert client.names() == [*SETUP_CALLS, "search_pipeline.put", "search"]
    assert client.only("search_pipeline.put") == {
        "id": "cg-minmax-0.70",
        "body": search_pipeline_body(FusionConfig()),
    }
    # the hits' vectors come back: the pipeline's score is per-query, the cosine is not
    assert client.only("search") == {
        "index": INDEX,
        "body": hybrid_query_body("how to configure", Q, kb("A"), 3, 50, with_vector=True),
        "search_pipeline": "cg-minmax-0.70",
    }
    assert client.only("search")["body"]["_source"] == {"excludes": ["context", "options", "section"]}
    # ties re-sorted by ref_id, like fusion.py; chunks rebuilt from _source (these carry no vector)
    assert [(h.chunk, h.score, h.lexical_score, h.dense_score) for h in result.hits] == [
        (b, 0.9, None, None),
        (a, 0.5, None, None),
        (c, 0.5, None, None),
    ]
    with_vectors = hits((b, 0.9))
    with_vectors["hits"]["hits"][0]["_source"]["vector"] = [0.5, 0.5, 0.5, -0.5]
    client.responses["search"] = with_vectors
    [hit] = index.search(query="how to configure", vector=Q, filter=kb("A"), limit=3).hits
    assert hit.dense_score == pytest.approx(float(np.dot([0.5, 0.5, 0.5, -0.5], Q)))
    assert result.stats["engine"] == "opensearch" and result.stats["mode"] == "hybrid"
    assert result.stats["pipeline"] == "cg-minmax-0.70" and result.stats["took_ms"] == 7
    timings = result.stats["timings_ms"]
    assert isinstance(timings, dict) and set(timings) == {"search"}

    # the pipeline is put once per fusion config; rrf gets its own, candidates widen k
    index.search(query="q", vector=Q, filter=kb("A"), limit=3, fusion=FusionConfig("rrf"), candidates=20)
    assert client.names()[-2:] == ["search_pipeline.put", "search"]
    assert client.calls[-1][1]["search_pipeline"] == "cg-rrf-60"
    assert client.calls[-1][1]["body"]["query"]["hybrid"]["queries"][1]["knn"]["vector"]["k"] == 20
    index.search(query="q", vector=Q, filter=kb("A"), limit=3)
    assert client.names()[-2:] == ["search", "search"]


def test_pagination_depth_option() -> None:
    client = FakeClient()
    make(client, pagination_depth=True).search(query="q", vector=Q, filter=kb("A"), limit=5, candidates=40)
    assert client.only("search")["body"] == hybrid_query_body(
        "q", Q, kb("A"), 5, 40, pagination_depth=40, with_vector=True
    )


def test_hits_outside_the_filter_are_dropped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    mine, other = chunk("A:d1:0"), chunk("B:d1:0", kb_id="B")
    wrong_path = chunk("A:d1:1", path="secret/x.md")
    client = FakeClient({"search": hits((other, 2.0), (wrong_path, 1.5), (mine, 1.0))})
    with caplog.at_level(logging.ERROR, logger="citegate.knowledge.search.opensearch"):
        result = make(client).search(
            query="q", vector=Q, filter=kb("A", path_prefixes=("",)), limit=5, mode="lexical"
        )
        assert [h.chunk.ref_id for h in result.hits] == ["A:d1:1", "A:d1:0"]
        narrow = make(client).search(
            query="q", vector=Q, filter=kb("A", path_prefixes=("docs/",)), limit=5, mode="lexical"
        )
        assert narrow.hits == []
    assert "B:d1:0" in caplog.text and "A:d1:1" in caplog.text


def test_lexical_and_dense_modes() -> None:
    a, b = chunk("A:d1:0"), chunk("A:d1:1")
    client = FakeClient({"search": hits((a, 12.5), (b, 3.0))})
    lexical = make(client).search(query="install", vector=None, filter=kb("A"), limit=4, mode="lexical")
    assert client.only("search") == {"index": INDEX, "body": lexical_query_body("install", kb("A"), 4)}
    assert [(h.score, h.lexical_score, h.dense_score) for h in lexical.hits] == [
        (12.5, 12.5, None),
        (3.0, 3.0, None),
    ]

    client = FakeClient({"search": hits((a, 1.5), (b, 0.8))})
    dense = make(client).search(query="ignored", vector=Q, filter=kb("A"), limit=4, mode="dense")
    assert client.only("search") == {"index": INDEX, "body": dense_query_body(Q, kb("A"), 4)}
    # OpenSearch's innerproduct score turned back into the cosine: 1.5 -> 0.5, 0.8 -> 1 - 1 / 0.8
    assert [(h.score, h.dense_score) for h in dense.hits] == [
        (0.5, 0.5),
        (pytest.approx(-0.25), pytest.approx(-0.25)),
    ]
    assert dense.stats["mode"] == "dense" and dense.stats["pipeline"] is None


def test_hybrid_falls_back_like_the_embedded_engine() -> None:
    client = FakeClient()
    index = make(client)
    empty = index.search(query="  ?! ", vector=Q, filter=kb("A"), limit=4)
    assert empty.stats["mode"] == "dense" and client.only("search")["body"] == dense_query_body(Q, kb("A"), 4)
    client.calls.clear()
    no_vector = index.search(query="install", vector=None, filter=kb("A"), limit=4)
    assert no_vector.stats["mode"] == "lexical"
    assert client.only("search")["body"] == lexical_query_body("install", kb("A"), 4)
    client.calls.clear()
    assert index.search(query="", vector=None, filter=kb("A"), limit=4).hits == []
    assert index.search(query="x", vector=Q, filter=kb("A"), limit=0).hits == []
    assert client.calls == []
    with pytest.raises(ValueError):
        index.search(query="x", vector=None, filter=kb("A"), limit=3, mode="dense")
    with pytest.raises(ValueError):
        index.search(query="x", vector=np.ones(3, dtype=np.float32), filter=kb("A"), limit=3)
    with pytest.raises(ValueError):
        index.search(query="x", vector=Q, filter=kb("A"), limit=3, mode="fuzzy")  # type: ignore[arg-type]


def test_client_side_fusion_matches_fusion_py() -> None:
    a, b, c = chunk("A:d1:0"), chunk("A:d1:1"), chunk("A:d1:2")
    lexical = hits((a, 8.0), (b, 2.0), took=4)
    dense = hits((b, 1.9), (c, 1.6), (a, 1.2), took=6)  # cosines 0.9, 0.6, 0.2
    client = FakeClient({"msearch": {"responses": [lexical, dense]}})
    index = make(client, fusion_pipelines=False)
    result = index.search(query="zephyr", vector=Q, filter=kb("A"), limit=3)

    assert client.only("msearch") == {
        "index": INDEX,
        "body": [{}, lexical_query_body("zephyr", kb("A"), 50), {}, dense_query_body(Q, kb("A"), 50, 50)],
    }
    expected = fusion.min_max(
        [("A:d1:0", 8.0), ("A:d1:1", 2.0)], [("A:d1:1", 0.9), ("A:d1:2", 0.6), ("A:d1:0", 0.2)]
    )
    assert (
        [h.chunk.ref_id for h in result.hits]
        == [f.ref_id for f in expected]
        == ["A:d1:0", "A:d1:1", "A:d1:2"]
    )
    assert [h.score for h in result.hits] == pytest.approx([f.score for f in expected])
    assert [h.lexical_score for h in result.hits] == [f.lexical for f in expected]
    assert [h.dense_score for h in result.hits] == pytest.approx([f.dense for f in expected])
    assert result.stats["pipeline"] is None and result.stats["fusion"] == "client"
    assert result.stats["lexical_candidates"] == 2 and result.stats["dense_candidates"] == 3


def test_rrf_without_pipeline_support_fuses_client_side() -> None:
    client = FakeClient()
    index = make(client, rrf_pipeline=False)
    index.search(query="q", vector=Q, filter=kb("A"), limit=3, fusion=FusionConfig("rrf"))
    index.search(query="q", vector=Q, filter=kb("A"), limit=3)
    assert client.names() == ["msearch", "search"]


# ------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    "error",
    [
        ConnectionError("N/A", "connection refused", OSError("refused")),
        ConnectionTimeout("TIMEOUT", "timed out", TimeoutError()),
        TransportError(503, "unavailable", {}),
        TransportError(429, "too_many_requests", {}),
    ],
)
def test_unreachable_cluster_is_search_unavailable(error: Exception, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(opensearch, "BULK_BACKOFF_S", 0)
    calls: list[tuple[Callable[[OpenSearchIndex], object], str]] = [
        (lambda i: i.search(query="q", vector=Q, filter=kb("A"), limit=3), "search"),
        (lambda i: i.count("A"), "count"),
        (lambda i: i.get_chunks(["x"]), "mget"),
        (lambda i: i.delete_document("A", "d1"), "delete_by_query"),
        (lambda i: i.upsert_document("A", "d1", [chunk("x")]), "bulk"),
    ]
    for call, name in calls:
        with pytest.raises(SearchUnavailable):
            call(make(FakeClient(errors={name: error})))


def test_bulk_retries_429_then_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(opensearch, "BULK_BACKOFF_S", 0)
    client = FakeClient(errors={"bulk": TransportError(429, "too_many_requests", {})})
    with pytest.raises(SearchUnavailable, match="429"):
        make(client).upsert_document("A", "d1", [chunk("x")])
    assert client.names().count("bulk") == 1 + opensearch.BULK_RETRIES


def test_request_errors_are_not_masked() -> None:
    bad = RequestError(400, "parsing_exception", {"error": {"root_cause": [{"reason": "bad"}]}})
    with pytest.raises(RequestError):
        make(FakeClient(errors={"search": bad})).search(query="q", vector=Q, filter=kb("A"), limit=3)


def test_msearch_item_errors() -> None:
    failed = {"error": {"type": "x", "reason": "node down"}, "status": 503}
    client = FakeClient({"msearch": {"responses": [hits(), failed]}})
    with pytest.raises(SearchUnavailable, match="node down"):
        make(client, fusion_pipelines=False).search(query="q", vector=Q, filter=kb("A"), limit=3)
    client = FakeClient(
        {"msearch": {"responses": [{"error": {"reason": "bad query"}, "status": 400}, hits()]}}
    )
    with pytest.raises(RequestError):
        make(client, fusion_pipelines=False).search(query="q", vector=Q, filter=kb("A"), limit=3)


# ------------------------------------------------------------------------------------ setup


def test_ensure_setup_creates_a_missing_index_and_pipelines() -> None:
    client = FakeClient({"indices.exists": False})
    summary = setup_opensearch(client, "cg", DIM, [FusionConfig(), FusionConfig("rrf", rank_constant=10)])
    assert summary == {
        "index": INDEX,
        "created": True,
        "template": "cg-chunks-template",
        "pipelines": ["cg-minmax-0.70", "cg-rrf-10"],
    }
    assert client.calls == [
        (
            "indices.put_index_template",
            {"name": "cg-chunks-template", "body": index_template_body(DIM, prefix="cg")},
        ),
        ("indices.exists", {"index": INDEX}),
        ("indices.create", {"index": INDEX, "body": index_body(DIM)}),
        ("search_pipeline.put", {"id": "cg-minmax-0.70", "body": search_pipeline_body(FusionConfig())}),
        (
            "search_pipeline.put",
            {"id": "cg-rrf-10", "body": search_pipeline_body(FusionConfig("rrf", rank_constant=10))},
        ),
    ]


def test_ensure_setup_is_idempotent_and_checks_the_dimension() -> None:
    race = RequestError(400, "resource_already_exists_exception", {})
    client = FakeClient({"indices.exists": False}, errors={"indices.create": race})
    assert make(client).ensure_setup()["created"] is False
    assert client.names()[-2:] == ["indices.get_mapping", "search_pipeline.put"]

    wrong = FakeClient(
        {
            "indices.get_mapping": {
                "cg-chunks-000001": {"mappings": {"properties": {"vector": {"dimension": 8}}}}
            }
        }
    )
    with pytest.raises(ValueError, match="8-dimensional"):
        make(wrong).ensure_setup()
    # an index created before the parent-context, options and section fields gets them added, no more
    older = FakeClient(
        {"indices.get_mapping": {INDEX: {"mappings": {"properties": {"vector": {"dimension": DIM}}}}}}
    )
    make(older).ensure_setup()
    assert older.names() == [*SETUP_CALLS, "indices.put_mapping", "search_pipeline.put"]
    assert older.only("indices.put_mapping") == {
        "index": INDEX,
        "body": {"properties": {"context": ANALYSED, "options": OPTIONS, "section": ANALYSED}},
    }
    with pytest.raises(SearchUnavailable):
        make(
            FakeClient(errors={"indices.put_index_template": TransportError(502, "bad gateway", {})})
        ).ensure_setup()


def test_auto_setup_off_sends_no_setup_requests() -> None:
    client = FakeClient()
    index = make(client, auto_setup=False)
    index.search(query="q", vector=Q, filter=kb("A"), limit=3)
    index.count("A")
    assert client.names() == ["search", "count"]


# ------------------------------------------------------------------------------------ clients


def test_from_url_builds_a_client_without_network() -> None:
    index = OpenSearchIndex.from_url(
        "https://admin:p%40ss@search.example:9201/os", prefix="cg", dimension=DIM
    )
    transport = index.client.transport
    assert transport.hosts == [{"host": "search.example", "port": 9201, "url_prefix": "/os"}]
    connection = transport.get_connection()
    assert connection.host == "https://search.example:9201"
    assert connection.headers["authorization"] == "Basic YWRtaW46cEBzcw=="  # admin:p@ss
    assert index.prefix == "cg" and index.dimension == DIM and index.fusion_pipelines
    plain = OpenSearchIndex.from_url("http://localhost", prefix="cg", dimension=DIM, fusion_pipelines=False)
    assert plain.client.transport.hosts == [{"host": "localhost", "port": 9200}]
    assert "authorization" not in plain.client.transport.get_connection().headers
    assert not plain.fusion_pipelines
    index.close()
    with pytest.raises(ValueError):
        OpenSearchIndex.from_url("search.example:9200", prefix="cg", dimension=DIM)


def test_from_aws_signs_with_sigv4() -> None:
    credentials = Credentials("AKIDEXAMPLE", "secret")
    domain = OpenSearchIndex.from_aws(
        "https://search-x.eu-west-1.es.amazonaws.com",
        "eu-west-1",
        prefix="cg",
        dimension=DIM,
        credentials=credentials,
    )
    connection = domain.client.transport.get_connection()
    assert isinstance(connection, RequestsHttpConnection)
    assert isinstance(connection.session.auth, AWSV4SignerAuth)
    assert connection.host == "https://search-x.eu-west-1.es.amazonaws.com:443"
    assert domain.rrf_pipeline
    serverless = OpenSearchIndex.from_aws(
        "abc.eu-west-1.aoss.amazonaws.com",
        "eu-west-1",
        prefix="cg",
        dimension=DIM,
        service="aoss",
        credentials=credentials,
    )
    assert serverless.client.transport.get_connection().session.auth.service == "aoss"
    assert not serverless.rrf_pipeline  # Serverless has no score-ranker-processor


def test_score_and_source_helpers() -> None:
    for cosine in (-0.75, -0.1, 0.0, 0.3, 1.0):
        score = 1.0 + cosine if cosine > 0 else 1.0 / (1.0 - cosine)
        assert knn_score_to_cosine(score) == pytest.approx(cosine)
    c = chunk("A:d1:0", page=2, title="T", heading="H", url="u")
    assert chunk_from_source({**source_of(c), "vector": [1.0]}) == c
