"""`score` means the same for every query, fusion method, engine and fallback (issue 21).

A knowledge base about planets, the real default embedder (USE), and two kinds of question: one
the documents answer ("How hot is the surface of Venus?") and ones they cannot ("tea brewing
temperature", which still shares a word with the Venus chunk, and a question about a tool the
knowledge base never mentions). Min-max fusion used to give the best hit of any query 1.0; now the
score is a relevance estimate, so one `score_threshold` keeps the Venus chunk for the first and
nothing for the others, whichever way the hits were found: hybrid with either fusion, BM25 alone
(the embedder failed), dense alone (the lexical side failed), or OpenSearch (client-side fusion and
the search pipeline, with a fake cluster that answers like the embedded engine).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from citegate.container import Services
from citegate.knowledge.embedding import UniversalSentenceEncoder
from citegate.knowledge.retrieval import Retrieval, Scope, retrieve
from citegate.knowledge.search import relevance
from citegate.knowledge.search.base import ChunkRecord, FusionConfig, Hit, SearchUnavailable
from citegate.knowledge.search.embedded import EmbeddedSearchIndex
from citegate.knowledge.search.opensearch import OpenSearchIndex
from citegate.platform.settings import Settings

PLANETS = {
    "venus": (
        "Venus",
        "Venus is the second planet from the Sun. Its thick carbon dioxide atmosphere traps heat, so "
        "the surface temperature is about 464 °C, hotter than Mercury even though Mercury is closer.",
    ),
    "mars": ("Mars", "Mars is the fourth planet. Its red colour comes from iron oxide dust on the surface."),
    "jupiter": ("Jupiter", "Jupiter is the largest planet; the Great Red Spot is a storm larger than Earth."),
    "saturn": ("Saturn", "Saturn's rings are made of ice and rock, a few hundred metres thick."),
    "neptune": ("Neptune", "Neptune has the strongest winds in the solar system, over 2,000 km/h."),
}
ANSWERED = "How hot is the surface of Venus?"
UNANSWERED = ("tea brewing temperature", "Who maintains kunora-kgent?")
THRESHOLD = relevance.DEFAULT_THRESHOLD
SCOPE = Scope(frozenset({"kb"}))


@pytest.fixture(scope="module")
def use() -> UniversalSentenceEncoder:
    embedder = UniversalSentenceEncoder(threads=2)
    embedder.load()
    return embedder


@pytest.fixture(scope="module")
def planets(
    use: UniversalSentenceEncoder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmbeddedSearchIndex]:
    index = EmbeddedSearchIndex(tmp_path_factory.mktemp("planets") / "index", use.dimension)
    vectors = use.embed_documents([f"{title}\n{text}" for title, text in PLANETS.values()])
    for (doc, (title, text)), vector in zip(PLANETS.items(), vectors, strict=True):
        chunk = ChunkRecord(
            ref_id=f"{doc}:0",
            kb_id="kb",
            tenant_id="t",
            document_id=doc,
            parent_id=f"{doc}:p0",
            source_name=f"{doc}.md",
            text=text,
            title=title,
            vector=vector,
        )
        index.upsert_document("kb", doc, [chunk])
    yield index
    index.close()


class FailingEmbedder:
    """The query embedder is down: retrieval falls back to BM25 alone."""

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id

    def embed_query(self, text: str) -> np.ndarray:
        raise RuntimeError("model down")


class NoLexicalSide:
    """An engine whose BM25 side is unavailable: hybrid and lexical fail, dense answers alone."""

    def __init__(self, index: EmbeddedSearchIndex) -> None:
        self.index, self.engine = index, index.engine

    def search(self, **kw: Any) -> Any:
        if kw["mode"] != "dense":
            raise SearchUnavailable("lexical side down")
        return self.index.search(**kw)


def _source(chunk: ChunkRecord, vector: np.ndarray | None = None) -> dict[str, Any]:
    source = {k: getattr(chunk, k) for k in ("ref_id", "kb_id", "tenant_id", "document_id", "parent_id")}
    source.update(source_name=chunk.source_name, text=chunk.text, title=chunk.title, position=chunk.position)
    if vector is not None:
        source["vector"] = [float(x) for x in vector]
    return source


def _knn_score(cosine: float) -> float:  # OpenSearch's innerproduct score
    return 1.0 + cosine if cosine > 0 else 1.0 / (1.0 - cosine)


class EmbeddedCluster:
    """Just enough of an OpenSearch client, answered by the embedded engine on the same chunks:
    `_msearch` (client-side fusion) and a `hybrid` search through a min-max pipeline."""

    def __init__(self, index: EmbeddedSearchIndex, vectors: dict[str, np.ndarray], query: str) -> None:
        self.index, self.vectors, self.query = index, vectors, query
        self.filter = SCOPE.to_filter()

    def _side(self, mode: str, size: int, vector: np.ndarray | None) -> dict[str, Any]:
        found = self.index.search(query=self.query, vector=vector, filter=self.filter, limit=size, mode=mode)  # type: ignore[arg-type]
        return {
            "took": 1,
            "hits": {
                "hits": [
                    {
                        "_source": _source(h.chunk),
                        "_score": h.score if mode == "lexical" else _knn_score(h.score),
                    }
                    for h in found.hits
                ]
            },
        }

    def msearch(self, index: str, body: list[dict[str, Any]]) -> dict[str, Any]:
        lexical, dense = body[1], body[3]
        vector = np.asarray(dense["query"]["knn"]["vector"]["vector"], dtype=np.float32)
        return {
            "responses": [
                self._side("lexical", lexical["size"], None),
                self._side("dense", dense["size"], vector),
            ]
        }

    def search(self, index: str, body: dict[str, Any], search_pipeline: str) -> dict[str, Any]:
        knn = body["query"]["hybrid"]["queries"][1]["knn"]["vector"]
        vector = np.asarray(knn["vector"], dtype=np.float32)
        found = self.index.search(query=self.query, vector=vector, filter=self.filter, limit=body["size"])
        keep_vector = "vector" not in body["_source"]["excludes"]
        return {
            "took": 1,
            "hits": {
                "hits": [
                    {
                        "_source": _source(h.chunk, self.vectors[h.chunk.ref_id] if keep_vector else None),
                        "_score": h.score,
                    }
                    for h in found.hits
                ]
            },
        }


Way = Callable[[EmbeddedSearchIndex, UniversalSentenceEncoder, str], Retrieval]


def _vectors(index: EmbeddedSearchIndex, use: UniversalSentenceEncoder) -> dict[str, np.ndarray]:
    texts = {f"{doc}:0": f"{title}\n{text}" for doc, (title, text) in PLANETS.items()}
    return dict(zip(texts, use.embed_documents(list(texts.values())), strict=True))


def _opensearch(pipelines: bool) -> Way:
    def way(index: EmbeddedSearchIndex, use: UniversalSentenceEncoder, query: str) -> Retrieval:
        cluster = EmbeddedCluster(index, _vectors(index, use), query)
        engine = OpenSearchIndex(
            cluster, prefix="cg", dimension=use.dimension, auto_setup=False, fusion_pipelines=pipelines
        )
        engine._pipelines.add("cg-minmax-0.70")  # put at deploy time
        return retrieve(Services(Settings(), index=engine, embedder=use), SCOPE, query, top_k=5)  # type: ignore[arg-type]

    return way


WAYS: dict[str, Way] = {
    "hybrid min_max": lambda index, use, q: retrieve(
        Services(Settings(), index=index, embedder=use), SCOPE, q, top_k=5
    ),
    "hybrid rrf": lambda index, use, q: retrieve(
        Services(Settings(), index=index, embedder=use), SCOPE, q, top_k=5, fusion=FusionConfig("rrf")
    ),
    "bm25 alone (embedder down)": lambda index, use, q: retrieve(
        Services(Settings(), index=index, embedder=FailingEmbedder(use.model_id)),
        SCOPE,
        q,
        top_k=5,  # type: ignore[arg-type]
    ),
    "dense alone (bm25 down)": lambda index, use, q: retrieve(
        Services(Settings(), index=NoLexicalSide(index), embedder=use),
        SCOPE,
        q,
        top_k=5,  # type: ignore[arg-type]
    ),
    "opensearch, client-side fusion": _opensearch(pipelines=False),
    "opensearch, search pipeline": _opensearch(pipelines=True),
}


@pytest.mark.parametrize("way", sorted(WAYS))
def test_one_threshold_keeps_the_answer_and_drops_the_rest_in_every_mode(
    way: str, planets: EmbeddedSearchIndex, use: UniversalSentenceEncoder
) -> None:
    found = WAYS[way](planets, use, ANSWERED)
    assert found.hits[0].chunk.document_id == "venus"
    assert found.hits[0].score >= THRESHOLD
    assert all(0.0 <= h.score <= 1.0 for h in found.hits)
    for question in UNANSWERED:
        scores = [round(h.score, 3) for h in WAYS[way](planets, use, question).hits]
        assert all(score < THRESHOLD for score in scores), (question, scores)  # BM25 may find nothing


def test_the_threshold_filters_the_same_way_in_every_mode(
    planets: EmbeddedSearchIndex, use: UniversalSentenceEncoder
) -> None:
    def kept(way: str, question: str) -> list[str]:
        services_way = WAYS[way]
        hits = services_way(planets, use, question).hits
        return [h.chunk.document_id for h in hits if h.score >= THRESHOLD]

    for way in WAYS:
        assert kept(way, ANSWERED)[:1] == ["venus"], way
        assert [kept(way, q) for q in UNANSWERED] == [[], []], way


def test_the_best_hit_is_no_longer_1_and_fusion_does_not_change_scores(
    planets: EmbeddedSearchIndex, use: UniversalSentenceEncoder
) -> None:
    by_fusion = [
        {h.chunk.ref_id: h.score for h in WAYS[way](planets, use, "tea brewing temperature").hits}
        for way in ("hybrid min_max", "hybrid rrf")
    ]
    assert by_fusion[0] == by_fusion[1]  # the estimate reads evidence, not the fusion's arithmetic
    assert max(by_fusion[0].values()) < THRESHOLD
    hits = WAYS["hybrid min_max"](planets, use, "tea brewing temperature").hits
    assert max(h.fused_score or 0.0 for h in hits) == pytest.approx(1.0)  # what min-max alone says
    venus = next(h for h in hits if h.chunk.document_id == "venus")
    assert venus.coverage == pytest.approx(1 / 3, abs=1e-4)  # "temperatur", one of its three content terms
    # the order stays the fusion's: the estimate scores hits, it does not rank them
    assert [h.fused_score for h in hits] == sorted((h.fused_score or 0.0 for h in hits), reverse=True)


def test_threshold_semantics_hold_through_retrieve_and_stats(
    planets: EmbeddedSearchIndex, use: UniversalSentenceEncoder
) -> None:
    s = Services(Settings(), index=planets, embedder=use)  # type: ignore[arg-type]
    found = retrieve(s, SCOPE, "tea brewing temperature", top_k=5, score_threshold=THRESHOLD)
    assert found.hits == [] and found.stats["filtered_by_threshold"] == 5
    assert found.stats["score"] == {
        "scale": "relevance",
        "calibrated_for": use.model_id,
        "evidence": ["cosine", "coverage"],
    }
    answered = retrieve(s, SCOPE, ANSWERED, top_k=5, score_threshold=THRESHOLD)
    assert [h.chunk.document_id for h in answered.hits][:1] == ["venus"]


def test_an_uncalibrated_embedding_model_is_scored_from_coverage_alone() -> None:
    chunk = ChunkRecord(
        "r", "kb", "t", "d", "p", "s", "Venus has a surface temperature of 464 °C.", title="Venus"
    )
    calibrated = relevance.rescore(ANSWERED, [Hit(chunk, 1.0, 3.0, 0.2)], "use-multilingual-v3")[0]
    unknown = relevance.rescore(ANSWERED, [Hit(chunk, 1.0, 3.0, 0.2)], "some-endpoint-model")[0]
    lexical = relevance.rescore(ANSWERED, [Hit(chunk, 1.0, 3.0, None)], "use-multilingual-v3")[0]
    assert unknown.score == lexical.score != calibrated.score  # the cosine of an unknown model is not read
    assert relevance.describe("some-endpoint-model", dense=True)["evidence"] == ["coverage"]
    assert relevance.describe("use-multilingual-v3", dense=False)["evidence"] == ["coverage"]


def test_query_terms_leave_out_question_words() -> None:
    assert relevance.query_terms("Who maintains kunora-kgent?") == ("maintain", "kunora", "kgent")
    assert relevance.query_terms("长城有多长？") == ("长城",)
    assert relevance.query_terms("who?") == ("who",)  # nothing else: the question word is all there is
