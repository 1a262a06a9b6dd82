"""retrieve(): the fusion weight follows the embedding model unless a setting overrides it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from citegate.container import Services
from citegate.knowledge.retrieval import DEFAULT_LEXICAL_WEIGHT, LEXICAL_WEIGHTS, Scope, fusion_for, retrieve
from citegate.knowledge.search.base import ChunkRecord, FusionConfig
from citegate.knowledge.search.embedded import EmbeddedSearchIndex
from citegate.platform.settings import Settings

DIM = 8


class FixedEmbedder:
    dimension = DIM

    def __init__(self, model_id: str, fail: bool = False) -> None:
        self.model_id = model_id
        self.fail = fail

    def embed_query(self, text: str) -> np.ndarray:
        if self.fail:
            raise RuntimeError("model down")
        vector = np.zeros(DIM, dtype=np.float32)
        vector[0] = 1.0
        return vector

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.embed_query(t) for t in texts])


def services(tmp_path: Path, model_id: str, fail: bool = False, **settings: Any) -> Services:
    index = EmbeddedSearchIndex(tmp_path / "index", DIM)
    vector = np.eye(DIM, dtype=np.float32)
    index.upsert_document(
        "kb",
        "d",
        [
            ChunkRecord(
                ref_id=f"d:{i}",
                kb_id="kb",
                tenant_id="t",
                document_id="d",
                parent_id=f"d:p{i}",
                source_name="d.md",
                text=text,
                position=i,
                vector=vector[i],
            )
            for i, text in enumerate(["solar panels", "wind turbines", "solar and wind"])
        ],
    )
    return Services(Settings(**settings), index=index, embedder=FixedEmbedder(model_id, fail))  # type: ignore[arg-type]


def test_fusion_for_a_model_and_an_override() -> None:
    assert fusion_for("use-multilingual-v3") == FusionConfig("min_max", 0.7)
    assert fusion_for("multilingual-e5-small") == FusionConfig("min_max", 0.6)
    assert fusion_for("some-endpoint-model") == FusionConfig("min_max", DEFAULT_LEXICAL_WEIGHT)
    assert fusion_for(None).lexical_weight == DEFAULT_LEXICAL_WEIGHT
    assert fusion_for("multilingual-e5-small", 0.55) == FusionConfig("min_max", 0.55)


@pytest.mark.parametrize("model_id", sorted(LEXICAL_WEIGHTS))
def test_retrieve_fuses_with_the_embedders_weight(tmp_path: Path, model_id: str) -> None:
    s = services(tmp_path, model_id)
    try:
        found = retrieve(s, Scope(frozenset({"kb"})), "solar", top_k=3)
        assert found.stats["mode"] == "hybrid"
        assert found.stats["fusion"] == {"method": "min_max", "lexical_weight": LEXICAL_WEIGHTS[model_id]}
        assert found.hits[0].chunk.ref_id == "d:0"  # best on both sides
    finally:
        s.index.close()


def test_a_configured_weight_and_an_explicit_fusion_win(tmp_path: Path) -> None:
    s = services(tmp_path, "multilingual-e5-small", CITEGATE_FUSION_LEXICAL_WEIGHT=0.9)
    try:
        scope = Scope(frozenset({"kb"}))
        assert retrieve(s, scope, "solar").stats["fusion"]["lexical_weight"] == 0.9
        explicit = retrieve(s, scope, "solar", fusion=FusionConfig("rrf"))
        assert explicit.stats["fusion"]["method"] == "rrf"
    finally:
        s.index.close()


def test_without_the_embedder_bm25_answers_alone(tmp_path: Path) -> None:
    s = services(tmp_path, "multilingual-e5-small", fail=True)
    try:
        found = retrieve(s, Scope(frozenset({"kb"})), "wind")
        assert found.stats["mode"] == "lexical" and found.stats["fusion"] is None
        assert found.stats["fallbacks"] == ["dense_unavailable: RuntimeError"]
        assert [h.chunk.ref_id for h in found.hits] == ["d:1", "d:2"]
    finally:
        s.index.close()
