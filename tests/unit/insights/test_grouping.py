"""Gap questions grouped by meaning with the default embedder (USE multilingual): rephrasings and
near-duplicates, English and Chinese, in one group each; different gaps apart. The threshold is
the settings' default (tuned on the planted set's dev split, docs/results/insights.md)."""

from __future__ import annotations

import numpy as np
import pytest

from citegate.insights.grouping import Grouper, cluster, decode, encode
from citegate.knowledge.embedding import UniversalSentenceEncoder
from citegate.platform.settings import Settings

THRESHOLD = Settings.model_fields["insights_threshold"].default

GAPS = {
    "memory": [
        "How do I configure agent memory in kunora-kgent?",
        "how to set up the memory of a kunora-kgent agent",
        "kunora-kgent 如何配置 agent memory?",
        "kunora-kgent 的智能体内存怎么设置？",
    ],
    "port": [
        "What is the default port of the web console?",
        "Which port does the web console listen on by default?",
        "网页控制台默认使用哪个端口？",
        "控制台默认监听的端口是多少",
    ],
    "sso": [
        "Can I sign in to the console with single sign-on?",
        "Is single sign-on supported when logging in to the console?",
        "控制台可以用单点登录吗？",
    ],
    "weather": [
        "What's the weather in Paris today?",
        "今天巴黎天气怎么样？",
    ],
}


@pytest.fixture(scope="module")
def use() -> UniversalSentenceEncoder:
    embedder = UniversalSentenceEncoder(threads=2)
    embedder.load()
    return embedder


def _vectors(use: UniversalSentenceEncoder, texts: list[str]) -> list[np.ndarray]:
    return [use.embed_query(t) for t in texts]


def test_rephrasings_in_english_and_chinese_make_one_group_per_gap(use: UniversalSentenceEncoder) -> None:
    # Interleaved, as questions arrive: each gap's forms mixed with the others'.
    order = [
        (gap, text) for i in range(4) for gap, texts in GAPS.items() if i < len(texts) for text in [texts[i]]
    ]
    labels = cluster(_vectors(use, [text for _, text in order]), THRESHOLD)
    groups: dict[str, set[int]] = {}
    for (gap, _), label in zip(order, labels, strict=True):
        groups.setdefault(gap, set()).add(label)
    assert len(groups) == len(GAPS)
    assert all(len(found) == 1 for found in groups.values()), groups
    assert len({next(iter(found)) for found in groups.values()}) == len(GAPS)  # and apart


def test_a_new_question_joins_and_moves_the_centroid(use: UniversalSentenceEncoder) -> None:
    grouper = Grouper(THRESHOLD)
    first, second, other = _vectors(use, [GAPS["port"][0], GAPS["port"][2], GAPS["weather"][0]])
    group, new = grouper.add("a", first)
    assert new and group.members == 1
    joined, new = grouper.add("b", second)
    assert joined is group and not new and group.members == 2
    np.testing.assert_allclose(np.linalg.norm(group.vector), 1.0, atol=1e-5)
    expected = (first + second) / np.linalg.norm(first + second)
    np.testing.assert_allclose(group.vector, expected, atol=1e-5)
    apart, new = grouper.add("c", other)
    assert new and apart is not group and len(grouper.centroids) == 2
    # Placing an answered question does not move anything.
    before = group.vector.copy()
    assert grouper.place(first)[0] is group
    np.testing.assert_array_equal(group.vector, before)


def test_centroids_round_trip_as_bytes() -> None:
    vector = np.random.default_rng(1).standard_normal(512).astype(np.float32)
    np.testing.assert_array_equal(decode(encode(vector)), vector)
    assert len(encode(vector)) == 2048
