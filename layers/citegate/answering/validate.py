"""The server's check on every draft answer: evidence binding that no answerer can talk its way past.

- A ref the answerer names that is not in the candidate set is dropped.
- A `[n]` marker that points at no candidate is removed from the text; a marker that points at a
  candidate binds that candidate (it was shown to the answerer, so citing it is legitimate).
- Markers are renumbered 1..k in order of first appearance, matching the returned citations.
- An answer left with no valid evidence is no answer at all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from citegate.answering.base import Draft, Evidence

# [3], [3, 5], [3][5], and a ref id written as a marker: [r_0123abcd...]
_MARKER = re.compile(r"\[\s*((?:\d{1,3}|r_[0-9a-f]{8,32})(?:\s*,\s*(?:\d{1,3}|r_[0-9a-f]{8,32}))*)\s*\]")


@dataclass
class Bound:
    answer: str
    used_refs: list[str]
    dropped_refs: list[str] = field(default_factory=list)
    dropped_markers: list[str] = field(default_factory=list)
    # Per sentence, the (renumbered) ref ids that support it.
    support: list[tuple[str, list[str]]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.answer.strip() or not self.used_refs


def bind(draft: Draft, evidence: Sequence[Evidence]) -> Bound:
    by_number = {e.number: e.ref_id for e in evidence}
    allowed = {e.ref_id for e in evidence}
    dropped_refs = [r for r in draft.used_refs if r not in allowed]
    declared = [r for r in dict.fromkeys(draft.used_refs) if r in allowed]

    order: list[str] = []  # refs in order of first citation in the text
    dropped_markers: list[str] = []

    def resolve(token: str) -> str | None:
        token = token.strip()
        ref = by_number.get(int(token)) if token.isdigit() else (token if token in allowed else None)
        return ref

    def collect(match: re.Match[str]) -> str:
        refs = []
        for token in match.group(1).split(","):
            ref = resolve(token)
            if ref is None:
                dropped_markers.append(f"[{token.strip()}]")
                continue
            if ref not in order:
                order.append(ref)
            refs.append(ref)
        return "".join(f"\x00{ref}\x01" for ref in dict.fromkeys(refs))

    text = _MARKER.sub(collect, draft.answer)
    used = order + [r for r in declared if r not in order]
    number = {ref: i + 1 for i, ref in enumerate(used)}
    text = re.sub(r"\x00(.+?)\x01", lambda m: f"[{number[m.group(1)]}]", text)
    text = re.sub(r"[ \t]+([.,;:!?。，；：！？])", r"\1", re.sub(r"[ \t]{2,}", " ", text)).strip()

    support = []
    for sentence, refs in draft.support:
        kept = [r for r in refs if r in number]
        support.append((sentence, kept))
    return Bound(text, used, dropped_refs, dropped_markers, support)
