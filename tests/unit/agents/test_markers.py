"""The marker gate: `[n]` survives only if reference n exists, however the stream is cut."""

from __future__ import annotations

import pytest

from citegate.agents.markers import MarkerGate, rewrite_markers


def gated(pieces: list[str], valid: set[int]) -> tuple[str, list[int]]:
    gate = MarkerGate(lambda n: n in valid)
    return "".join(gate.filter(pieces)), gate.cited


def test_valid_markers_pass_and_dangling_ones_are_dropped() -> None:
    assert rewrite_markers("A [1]. B [7]. C [2, 9].", lambda n: n in {1, 2}) == "A [1]. B . C [2]."


@pytest.mark.parametrize(
    "pieces",
    [
        ["Tall [", "1", "] and old [9", "9]."],
        ["Tall [1] and old [99]."],
        ["T", "a", "l", "l", " ", "[", "1", "]", " and old ", "[", "9", "9", "]", "."],
    ],
)
def test_a_marker_split_across_deltas_is_judged_whole(pieces: list[str]) -> None:
    text, cited = gated(pieces, {1, 2})
    assert text == "Tall [1] and old ."
    assert cited == [1]


def test_brackets_that_are_not_markers_are_released_at_once() -> None:
    gate = MarkerGate(lambda n: True)
    assert gate.feed("see [the docs](http://x) and [") == "see [the docs](http://x) and "
    assert gate.feed("note]") == "[note]"


def test_an_unfinished_marker_at_the_end_is_flushed_as_text() -> None:
    text, cited = gated(["ends with [3"], {3})
    assert text == "ends with [3" and cited == []


def test_cited_numbers_are_listed_once_in_order_of_first_use() -> None:
    _, cited = gated(["[2] a [1] b [2][1]"], {1, 2})
    assert cited == [2, 1]
