"""Citation markers in streamed text: a marker that points at no reference never reaches the client.

A model streams its answer in arbitrary pieces, so a marker can arrive split (`[1`, `2]`). The
gate holds back only what could still become a marker and releases everything else at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

# [3], [3, 5], [3,5,7]
_MARKER = re.compile(r"\[\s*(\d{1,3}(?:\s*,\s*\d{1,3})*)\s*\]")
# What a marker looks like before its closing bracket arrives.
_OPEN = re.compile(r"\[\s*(?:\d{1,3}(?:\s*,\s*(?:\d{1,3})?)*\s*)?$")
_MAX_MARKER = 24


def rewrite_markers(text: str, valid: Callable[[int], bool], seen: list[int] | None = None) -> str:
    """Keep the numbers that point at a reference, drop the rest (and the marker if none is left)."""

    def keep(match: re.Match[str]) -> str:
        numbers = [int(n) for n in re.findall(r"\d+", match.group(1))]
        kept = [n for n in dict.fromkeys(numbers) if valid(n)]
        if seen is not None:
            seen.extend(n for n in kept if n not in seen)
        return "".join(f"[{n}]" for n in kept)

    return _MARKER.sub(keep, text)


class MarkerGate:
    """Feed deltas in, get deltas out with dangling markers removed; `cited` lists the numbers used."""

    def __init__(self, valid: Callable[[int], bool]) -> None:
        self._valid = valid
        self._held = ""
        self.cited: list[int] = []

    def feed(self, delta: str) -> str:
        text = self._held + delta
        self._held = ""
        start = text.rfind("[")
        if start != -1 and len(text) - start <= _MAX_MARKER and _OPEN.match(text[start:]):
            text, self._held = text[:start], text[start:]
        return rewrite_markers(text, self._valid, self.cited)

    def flush(self) -> str:
        text, self._held = self._held, ""
        return rewrite_markers(text, self._valid, self.cited)

    def filter(self, deltas: Iterable[str]) -> Iterator[str]:
        for delta in deltas:
            out = self.feed(delta)
            if out:
                yield out
        rest = self.flush()
        if rest:
            yield rest
