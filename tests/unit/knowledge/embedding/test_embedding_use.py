"""USE multilingual v3 through the adapter: shapes, normalisation, and that meaning is captured."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from citegate.knowledge.embedding import UniversalSentenceEncoder
from citegate.knowledge.embedding import use as use_module
from citegate.knowledge.embedding.base import Matrix


@pytest.fixture(scope="module")
def use() -> UniversalSentenceEncoder:
    embedder = UniversalSentenceEncoder(threads=2)
    embedder.load()  # ~1.5 s, once for the module
    return embedder


def _cos(a: Matrix, b: Matrix) -> float:
    return float(np.dot(a, b))


def test_documents_are_normalised_float32_rows(use: UniversalSentenceEncoder) -> None:
    texts = ["The cat sat on the mat.", "猫坐在垫子上。", "", "   "]
    rows = use.embed_documents(texts)
    assert rows.shape == (4, 512)
    assert rows.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    assert np.isfinite(rows).all()
    # Blank text is embedded as a single space: all blanks get the same vector.
    np.testing.assert_allclose(rows[2], rows[3], atol=1e-6)


def test_query_shape_and_agreement_with_documents(use: UniversalSentenceEncoder) -> None:
    q = use.embed_query("where is the cat?")
    assert q.shape == (512,)
    assert q.dtype == np.float32
    np.testing.assert_allclose(q, use.embed_documents(["where is the cat?"])[0], atol=1e-6)


def test_a_query_runs_on_one_blas_thread_and_batches_keep_theirs(
    use: UniversalSentenceEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = use._get().model._backend
    seen: list[int] = []
    encode = backend.encode
    monkeypatch.setattr(backend, "encode", lambda texts: (seen.append(backend.threads), encode(texts))[1])
    use.embed_query("one short question")
    use.embed_documents(["a batch", "of documents"])
    assert seen == [1, 2]
    assert backend.threads == 2


def _batches_when_a_call_arrives_during_another(
    use: UniversalSentenceEncoder,
    monkeypatch: pytest.MonkeyPatch,
    batch_size: int,
    a_texts: int,
    other: list[str],
) -> list[str]:
    """Call A embeds `a_texts` texts ("A0 text", ...); the `other` call arrives during A's first
    batch. Returns the first word of every batch's first text, in the order the model ran them.
    A pauses between its batches, so without a lock held for its whole call the other takes its
    turn."""
    backend = use._get().model._backend
    order: list[str] = []
    first_batch, other_waiting = threading.Event(), threading.Event()
    encode = backend.encode

    def recording(texts: list[str]) -> Matrix:
        order.append(texts[0].split()[0])
        if texts[0].startswith("A0"):
            first_batch.set()
            other_waiting.wait(5)
        return encode(texts)

    monkeypatch.setattr(backend, "encode", recording)
    clean = use_module._clean
    monkeypatch.setattr(use_module, "_clean", lambda t: (time.sleep(0.02 * t.startswith("A")), clean(t))[1])
    embedder = UniversalSentenceEncoder(threads=2, batch_size=batch_size)
    a = threading.Thread(target=embedder.embed_documents, args=([f"A{i} text" for i in range(a_texts)],))
    b = threading.Thread(target=embedder.embed_documents, args=(other,))
    a.start()
    first_batch.wait(5)
    b.start()
    time.sleep(0.05)  # the other call is now waiting
    other_waiting.set()
    for thread in (a, b):
        thread.join(10)
    return order


def test_concurrent_document_calls_run_one_after_the_other(
    use: UniversalSentenceEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two ingestion batches at once: the first is embedded whole before the second starts, so it
    can be indexed while the second embeds (round-robin would finish both at the end)."""
    other = [f"B{i} text" for i in range(3)]
    order = _batches_when_a_call_arrives_during_another(use, monkeypatch, 1, 3, other)
    assert order == ["A0", "A1", "A2", "B0", "B1", "B2"]


def test_a_one_batch_call_waits_only_for_the_batch_in_progress(
    use: UniversalSentenceEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ask path embeds a few sentences with embed_documents: during an ingestion it must not
    wait for the whole ingestion call, only for its current batch, as a query does."""
    order = _batches_when_a_call_arrives_during_another(
        use, monkeypatch, 2, 6, ["S0 sentence", "S1 sentence"]
    )
    assert order == ["A0", "S0", "A2", "A4"]


def test_empty_input(use: UniversalSentenceEncoder) -> None:
    assert use.embed_documents([]).shape == (0, 512)


def test_batching_does_not_change_results(use: UniversalSentenceEncoder) -> None:
    texts = [f"Sentence number {i} about topic {i % 3}." for i in range(7)]
    small = UniversalSentenceEncoder(threads=2, batch_size=3)  # shares the loaded weights
    np.testing.assert_allclose(small.embed_documents(texts), use.embed_documents(texts), atol=1e-5)


def test_english_similarity(use: UniversalSentenceEncoder) -> None:
    a, b, c = use.embed_documents(
        [
            "The cat is sleeping on the sofa.",
            "A kitten naps on the couch.",
            "The central bank raised interest rates last quarter.",
        ]
    )
    assert _cos(a, b) > _cos(a, c) + 0.2


def test_chinese_similarity(use: UniversalSentenceEncoder) -> None:
    a, b, c = use.embed_documents(["猫在沙发上睡觉。", "一只小猫在沙发上打盹。", "央行上季度大幅加息。"])
    assert _cos(a, b) > _cos(a, c) + 0.2


def test_cross_lingual_cat(use: UniversalSentenceEncoder) -> None:
    en = use.embed_query("The cat is sleeping on the sofa.")
    zh_same, zh_other = use.embed_documents(["猫在沙发上睡觉。", "股市今天大幅下跌。"])
    assert _cos(en, zh_same) > _cos(en, zh_other) + 0.2


def test_instances_share_the_loaded_model(use: UniversalSentenceEncoder) -> None:
    other = UniversalSentenceEncoder(threads=2)
    other.load()
    assert other._model is use._model
