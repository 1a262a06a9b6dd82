"""Optional verification of a bound answer: the configured model judges each (sentence, cited
passage) pair, and citations it does not find supported are taken off.

Off by default (`CITEGATE_LLM_VERIFY_CITATIONS`): it costs one more model call per answer. A
sentence left without any supported citation is removed from the answer and reported; an answer
left without any sentence is a no-answer. The judge sees the passage text only, never the other
sentences, so one sentence's support cannot lend itself to another.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from citegate.answers.base import Evidence
from citegate.answers.validate import Bound, join_sentences, split_answer

_NUMBER = re.compile(r"\[(\d+)\]")


@dataclass(frozen=True)
class Claim:
    """One sentence of an answer (markers removed) and one passage it cites."""

    sentence: str
    evidence: Evidence


@runtime_checkable
class Verifier(Protocol):
    verify_citations: bool

    def verify(self, question: str, claims: Sequence[Claim]) -> list[bool]:
        """Per claim, whether the passage supports the sentence. AnswererUnavailable on failure."""


@dataclass
class Verified:
    bound: Bound
    # Per claim checked: {"sentence", "ref_id", "supported"}.
    verdicts: list[dict[str, object]] = field(default_factory=list)


def verify_bound(question: str, bound: Bound, evidence: Sequence[Evidence], verifier: Verifier) -> Verified:
    """The bound answer with every citation the verifier rejects taken off (see module doc)."""
    by_ref = {e.ref_id: e for e in evidence}
    sentences = [
        (sentence, [bound.used_refs[int(n) - 1] for n in dict.fromkeys(_NUMBER.findall(sentence))])
        for sentence in split_answer(bound.answer)
    ]
    claims = [
        Claim(_NUMBER.sub("", sentence).strip(), by_ref[ref])
        for sentence, refs in sentences
        for ref in refs
        if ref in by_ref
    ]
    if not claims:
        return Verified(bound)
    verdicts = verifier.verify(question, claims)
    if len(verdicts) != len(claims):
        raise ValueError("the verifier returned a verdict count that does not match the claims")
    rejected = {(c.sentence, c.evidence.ref_id) for c, ok in zip(claims, verdicts, strict=True) if not ok}

    kept: list[tuple[str, list[str]]] = []
    removed = list(bound.removed)
    for sentence, refs in sentences:
        text = _NUMBER.sub("", sentence).strip()
        good = [r for r in refs if (text, r) not in rejected]
        if good:
            kept.append((text, good))
        else:
            removed.append(text)
    order: list[str] = []
    for _, refs in kept:
        order.extend(r for r in refs if r not in order)
    number = {ref: i + 1 for i, ref in enumerate(order)}
    answer = join_sentences(f"{text} " + "".join(f"[{number[r]}]" for r in refs) for text, refs in kept)
    checked = Bound(
        answer,
        order,
        bound.dropped_refs,
        bound.dropped_markers,
        [(s, [r for r in refs if r in number]) for s, refs in bound.support],
        removed,
        bound.forged,
    )
    return Verified(
        checked,
        [
            {"sentence": c.sentence, "ref_id": c.evidence.ref_id, "supported": ok}
            for c, ok in zip(claims, verdicts, strict=True)
        ],
    )
