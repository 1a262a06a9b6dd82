from __future__ import annotations

import pytest

from citegate.knowledge.search.base import FusionConfig
from citegate.knowledge.search.fusion import Fused, canonical, fuse, min_max, min_max_normalise, rrf


def test_min_max_hand_computed() -> None:
    lexical = [("a", 10.0), ("b", 5.0), ("c", 0.0)]
    dense = [("b", 0.9), ("d", 0.5)]
    fused = min_max(lexical, dense, lexical_weight=0.7)
    # a: 0.7 * 1;  b: 0.7 * 0.5 + 0.3 * 1;  c: 0.7 * 0.001 (floor);  d: 0.3 * 0.001 (floor)
    assert [f.ref_id for f in fused] == ["a", "b", "c", "d"]
    assert [f.score for f in fused] == pytest.approx([0.7, 0.65, 0.0007, 0.0003])
    assert fused[1] == Fused("b", pytest.approx(0.65), 5.0, 0.9)
    assert fused[0].dense is None and fused[3].lexical is None


def test_min_max_weight_moves_the_balance() -> None:
    lexical = [("lex", 12.0), ("both", 6.0), ("low", 2.0)]
    dense = [("vec", 0.8), ("both", 0.6), ("low2", 0.2)]
    assert min_max(lexical, dense, 0.9)[0].ref_id == "lex"
    assert min_max(lexical, dense, 0.1)[0].ref_id == "vec"
    # both: 0.5 * 0.4 + 0.5 * (0.4 / 0.6) = 0.5333 beats lex and vec at 0.5
    assert min_max(lexical, dense, 0.5)[0].ref_id == "both"
    assert min_max(lexical, dense, 0.5)[0].score == pytest.approx(0.5 * 0.4 + 0.5 * (0.4 / 0.6))


def test_min_max_all_equal_scores_normalise_to_one() -> None:
    assert min_max_normalise([("a", 2.0), ("b", 2.0)]) == {"a": 1.0, "b": 1.0}
    assert min_max_normalise([("only", -3.5)]) == {"only": 1.0}
    fused = min_max([("b", 2.0), ("a", 2.0)], [], 0.7)
    assert [(f.ref_id, f.score) for f in fused] == [("a", pytest.approx(0.7)), ("b", pytest.approx(0.7))]


def test_min_max_negative_dense_scores() -> None:
    norm = min_max_normalise([("a", 0.5), ("b", -0.5), ("c", 0.0)])
    assert norm == {"a": 1.0, "b": 0.001, "c": pytest.approx(0.5)}


def test_rrf_hand_computed() -> None:
    fused = rrf([("a", 10.0), ("b", 5.0)], [("b", 0.9), ("d", 0.5)], rank_constant=60)
    assert [f.ref_id for f in fused] == ["b", "a", "d"]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert fused[1].score == pytest.approx(1 / 61)
    assert fused[2].score == pytest.approx(1 / 62)
    assert (fused[0].lexical, fused[0].dense) == (5.0, 0.9)


def test_rrf_rank_constant() -> None:
    fused = rrf([("a", 3.0), ("b", 2.0), ("c", 1.0)], [("c", 1.0)], rank_constant=1)
    # a: 1/2, c: 1/4 + 1/2, b: 1/3
    assert [(f.ref_id, f.score) for f in fused] == [
        ("c", pytest.approx(0.75)),
        ("a", pytest.approx(0.5)),
        ("b", pytest.approx(1 / 3)),
    ]


def test_ties_break_by_ref_id_whatever_the_input_order() -> None:
    one = rrf([("y", 1.0)], [("x", 1.0)])
    two = rrf([("x", 1.0)], [("y", 1.0)])
    assert [f.ref_id for f in one] == [f.ref_id for f in two] == ["x", "y"]
    assert [f.ref_id for f in min_max([("z", 1.0), ("m", 1.0)], [("a", 0.3)], 0.5)] == [
        "a",
        "m",
        "z",
    ]  # all 0.5
    assert [f.ref_id for f in min_max([("z", 1.0), ("m", 1.0)], [("a", 0.3)], 0.6)] == ["m", "z", "a"]


def test_canonical_sorts_and_keeps_the_best_duplicate() -> None:
    assert canonical([("b", 1.0), ("a", 3.0), ("b", 2.0), ("c", 2.0)]) == [("a", 3.0), ("b", 2.0), ("c", 2.0)]
    # rank follows score, not input order
    assert [f.ref_id for f in rrf([("low", 1.0), ("high", 9.0)], [])] == ["high", "low"]


def test_fuse_dispatches_on_the_config() -> None:
    lexical = [("a", 2.0), ("b", 1.0)]
    dense = [("b", 0.9)]
    assert fuse(lexical, dense, FusionConfig()) == min_max(lexical, dense, 0.7)
    assert fuse(lexical, dense, FusionConfig(method="rrf", rank_constant=10)) == rrf(lexical, dense, 10)


def test_empty_inputs() -> None:
    assert min_max([], []) == []
    assert rrf([], []) == []
    assert [f.score for f in min_max([], [("a", 0.1), ("b", 0.0)], 0.7)] == pytest.approx([0.3, 0.0003])


def test_invalid_parameters() -> None:
    with pytest.raises(ValueError):
        min_max([], [], lexical_weight=1.5)
    with pytest.raises(ValueError):
        rrf([], [], rank_constant=0)
