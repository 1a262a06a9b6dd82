"""The server's check on every draft answer: evidence binding that no answerer can talk its way past.

- A ref the answerer names that is not in the candidate set is dropped. When it named refs and
  every one of them is outside the candidate set, the draft is not an answer at all, whatever
  markers its text carries: an answerer that invents its evidence is not trusted with `[1]`.
- A `[n]` marker that points at no candidate is removed from the text; a marker that points at a
  candidate binds that candidate (it was shown to the answerer, so citing it is legitimate).
- A sentence whose every marker was removed is removed too (it was meant to rest on evidence
  that does not exist), and reported in `removed`; so is a sentence without any marker when
  others carry one (an uncited claim beside cited ones).
- Markers are renumbered 1..k in order of first appearance, matching the returned citations.
- An answer left with no valid evidence is no answer at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from citegate.answers.base import Draft, Evidence
from citegate.knowledge.schemas.retrieval import AskCitation, Citation

# [3], [3, 5], [3][5], and a ref id written as a marker: [r_0123abcd...]
_MARKER = re.compile(r"\[\s*((?:\d{1,3}|r_[0-9a-f]{8,32})(?:\s*,\s*(?:\d{1,3}|r_[0-9a-f]{8,32}))*)\s*\]")
# A sentence ends at . ! ? (before whitespace) or 。！？, with the markers that follow it.
_BOUNDARY = re.compile(r"[.!?。！？](?:\s*\[[^\[\]]{1,40}\])*")
# An answer's citation markers: [1], [1, 3].
_MARKERS = re.compile(r"\s*\[\s*\d+(?:\s*,\s*\d+)*\s*\]")


def split_answer(answer: str) -> list[str]:
    """Answer sentences, each with the citation markers that follow its final punctuation."""
    text = answer.strip()
    sentences: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        end = match.end()
        # Latin sentences end before whitespace; Chinese ones need none.
        if end == len(text) or text[end].isspace() or match.group(0)[0] in "。！？":
            piece = text[start:end].strip()
            if piece:
                sentences.append(piece)
            start = end
    rest = text[start:].strip()
    if rest:
        sentences.append(rest)
    return sentences


@dataclass
class Bound:
    answer: str
    used_refs: list[str]
    dropped_refs: list[str] = field(default_factory=list)
    dropped_markers: list[str] = field(default_factory=list)
    # Per sentence, the (renumbered) ref ids that support it.
    support: list[tuple[str, list[str]]] = field(default_factory=list)
    # Sentences taken out of the answer because no valid citation was left on them.
    removed: list[str] = field(default_factory=list)
    # Every ref the answerer named was outside the candidate set.
    forged: bool = False

    @property
    def empty(self) -> bool:
        return not self.answer.strip() or not self.used_refs


def bind(draft: Draft, evidence: Sequence[Evidence]) -> Bound:
    by_number = {e.number: e.ref_id for e in evidence}
    allowed = {e.ref_id for e in evidence}
    dropped_refs = [r for r in draft.used_refs if r not in allowed]
    declared = [r for r in dict.fromkeys(draft.used_refs) if r in allowed]
    if draft.used_refs and not declared:
        return Bound("", [], dropped_refs, [], [], split_answer(draft.answer), forged=True)

    dropped_markers: list[str] = []

    def resolve(token: str) -> str | None:
        token = token.strip()
        return by_number.get(int(token)) if token.isdigit() else (token if token in allowed else None)

    # Per sentence: its text with markers replaced by placeholders for the refs that resolved.
    sentences: list[tuple[str, list[str], bool]] = []  # (text, refs, had markers)
    for sentence in split_answer(draft.answer):
        refs: list[str] = []

        def collect(match: re.Match[str], refs: list[str] = refs) -> str:
            found = []
            for token in match.group(1).split(","):
                ref = resolve(token)
                if ref is None:
                    dropped_markers.append(f"[{token.strip()}]")
                    continue
                found.append(ref)
            refs.extend(r for r in found if r not in refs)
            return "".join(f"\x00{ref}\x01" for ref in dict.fromkeys(found))

        text = _MARKER.sub(collect, sentence)
        sentences.append((text, refs, bool(_MARKER.search(sentence))))

    any_cited = any(refs for _, refs, _ in sentences)
    kept: list[tuple[str, list[str]]] = []
    removed: list[str] = []
    for text, refs, had_markers in sentences:
        if refs or (not had_markers and not any_cited):
            kept.append((text, refs))
        else:  # every marker pointed nowhere, or an uncited claim beside cited ones
            removed.append(_clean(re.sub(r"\x00(.+?)\x01", "", text)))

    order: list[str] = []  # refs in order of first citation in the kept text
    for _, refs in kept:
        order.extend(r for r in refs if r not in order)
    used = order + [r for r in declared if r not in order]
    number = {ref: i + 1 for i, ref in enumerate(used)}
    text = _clean(
        join_sentences(re.sub(r"\x00(.+?)\x01", lambda m: f"[{number[m.group(1)]}]", t) for t, _ in kept)
    )

    support = [(sentence, [r for r in cited if r in number]) for sentence, cited in draft.support]
    return Bound(text, used, dropped_refs, dropped_markers, support, removed)


_HAN = re.compile("[\u3400-\u9fff\uf900-\ufaff]")


def join_sentences(pieces: Iterable[str]) -> str:
    """Sentences joined back: with a space, except between Chinese ones (which use none)."""
    out = ""
    for piece in pieces:
        chinese = bool(out) and bool(_HAN.match(piece)) and bool(_HAN.search(out[-12:]))
        out = f"{out}{piece}" if not out or chinese else f"{out} {piece}"
    return out


def _clean(text: str) -> str:
    return re.sub(r"[ \t]+([.,;:!?。，；：！？])", r"\1", re.sub(r"[ \t]{2,}", " ", text)).strip()


def answer_sentences(answer: str, number: int) -> list[str]:
    """The sentences of `answer` that cite `[number]`, without their markers."""
    marker = re.compile(rf"\[\s*(?:\d+\s*,\s*)*{number}(?:\s*,\s*\d+)*\s*\]")
    found = []
    for sentence in split_answer(answer):
        if marker.search(sentence):
            found.append(" ".join(_MARKERS.sub("", sentence).split()))
    return found


def with_answer_sentences(citations: Sequence[Citation], answer: str) -> list[AskCitation]:
    """`ask`'s citations: each with the answer sentences bound to it (`[n]` is the n-th)."""
    return [
        AskCitation(**c.model_dump(), answer_sentences=answer_sentences(answer, n))
        for n, c in enumerate(citations, start=1)
    ]
