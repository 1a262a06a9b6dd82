"""HashingEmbedder, the deterministic test double."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from citegate.knowledge.embedding import HashingEmbedder


def test_shape_dtype_and_normalisation() -> None:
    emb = HashingEmbedder()
    rows = emb.embed_documents(["Hello world", "猫在沙发上睡觉", "", "!!!"])
    assert (emb.model_id, emb.dimension) == ("hashing-64", 64)
    assert rows.shape == (4, 64) and rows.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-6)
    assert emb.embed_query("Hello world").shape == (64,)
    assert emb.embed_documents([]).shape == (0, 64)


def test_deterministic_and_case_insensitive() -> None:
    a = HashingEmbedder(32).embed_query("The Quick brown fox")
    b = HashingEmbedder(32).embed_query("the quick BROWN fox")
    np.testing.assert_array_equal(a, b)


def test_stable_across_processes() -> None:
    # Python's own str hash is salted per process; the embedder must not depend on it.
    code = (
        "import json; from citegate.knowledge.embedding import HashingEmbedder as H; "
        "print(json.dumps(H(16).embed_query('stable text').tolist()))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    np.testing.assert_allclose(json.loads(out), HashingEmbedder(16).embed_query("stable text"), atol=1e-7)


def test_similar_texts_score_higher() -> None:
    emb = HashingEmbedder(256)
    q = emb.embed_query("refund policy for annual plans")
    near, far = emb.embed_documents(
        ["Our refund policy covers annual plans within 30 days.", "The cafeteria opens at nine."]
    )
    assert float(q @ near) > float(q @ far)


def test_cjk_bigrams() -> None:
    emb = HashingEmbedder(256)
    q = emb.embed_query("退款政策")
    near, far = emb.embed_documents(["年度计划的退款政策", "食堂九点开门"])
    assert float(q @ near) > float(q @ far)
    assert float(q @ near) > 0.3
