"""The specific things a question names, and whether the documents mention them at all.

A question about `io_combine_limit`, `--reapply-cherry-picks` or Patroni cannot be answered from
documents that never name it, however well another passage matches its other words ("the default
value of ... limit" matches every setting's entry). Identifiers and names are what tell such a
question apart, so they are checked exactly, with the index's own analysis:

- identifiers: snake_case (`work_mem`), dotted or scoped names (`os.path.join`, `std::vector`),
  command-line options (`--no-verify`), camelCase words (`getElementById`), calls (`fsync()`)
  and anything in backticks;
- names: capitalised words that do not start the question ("Does Patroni ..."), and quoted
  strings.

`unmentioned` says which of them no passage holds; `unknown_to` asks the search index whether the
knowledge bases in scope hold them anywhere (a lexical search for the term, each hit checked for
the term's exact index terms), so `ask` can say "the knowledge base never mentions X" instead of
quoting an unrelated sentence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from citegate.answers.base import Evidence
from citegate.knowledge.search.analysis import STOPWORDS, index_terms, word_terms
from citegate.knowledge.search.base import SearchFilter, SearchIndex, SearchUnavailable

# How many lexical hits are read for each term: the exact whole form has the highest IDF, so a
# chunk that holds it ranks above those holding only its parts.
KB_CHECK_HITS = 10

NEVER_MENTIONED_REASON = "The knowledge base does not mention {terms}."

_BACKTICKED = re.compile(r"`([^`\n]{2,80})`")
_OPTION = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")
_CALL = re.compile(r"\b[A-Za-z_][\w.]*\(\)")
_COMPOUND = re.compile(r"\b[A-Za-z_][\w-]*(?:(?:\.|::)[A-Za-z_][\w-]*)+\b")
_SNAKE = re.compile(r"\b\w*[A-Za-z0-9]_+[A-Za-z0-9]\w*\b")
_CAMEL = re.compile(r"\b[a-z]+(?:[A-Z][a-z0-9]+)+\b")
_CAPITALISED = re.compile(r"(?<![\w'’.-])[A-Z][\w'’-]*[\w]")
_QUOTED = re.compile(r"[\"“]([^\"”\n]{2,60})[\"”]")
# Capitalised words that are no names: sentence openers, question words, the pronoun "I".
_NOT_NAMES = frozenset(
    {"i", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "is", "are", "does"}
    | {"do", "did", "can", "could", "should", "would", "will", "may", "in", "on", "for", "the", "a"}
    | {"an", "if", "with", "from", "to", "by", "of", "and", "or", "not", "no", "yes", "please", "tell"}
)


@dataclass(frozen=True)
class SpecificTerm:
    """A term as the question wrote it, and the index terms a passage must hold to mention it."""

    text: str
    required: frozenset[str]
    identifier: bool


def _required(term: str) -> frozenset[str]:
    """The index terms that mean `term` is there: a compound's whole form (`os.path.join`,
    `no-verify`), else its words as the word split keeps them (`work_mem`, `getElementById`)."""
    compounds = [t for t in index_terms(term) if any(joiner in t for joiner in ".-:")]
    return frozenset(compounds or word_terms(term))


def specific_terms(question: str) -> tuple[SpecificTerm, ...]:
    """The identifiers and names `question` names, in order, without repeats."""
    found: list[tuple[str, bool]] = []
    for pattern in (_BACKTICKED, _CALL, _OPTION, _COMPOUND, _SNAKE, _CAMEL):
        for match in pattern.finditer(question):
            text = (match.group(1) if pattern is _BACKTICKED else match.group()).strip()
            found.append((text.removesuffix("()"), True))
    for match in _QUOTED.finditer(question):
        found.append((match.group(1).strip(), False))
    opening = re.match(r"\s*[\w'’-]+", question)
    for match in _CAPITALISED.finditer(question):
        word = match.group()
        if (opening and match.start() <= opening.end()) or word.lower() in _NOT_NAMES:
            continue  # the first word is capitalised anyway
        found.append((word.removesuffix("'s").removesuffix("’s"), False))
    terms: list[SpecificTerm] = []
    covered: set[str] = set()
    for text, identifier in found:
        required = _required(text)
        if not required or required <= covered or required <= STOPWORDS:
            continue  # a part of an identifier already found (`path` inside `os.path.join`)
        covered |= required | frozenset(index_terms(text))
        terms.append(SpecificTerm(text, required, identifier))
    return tuple(terms)


def mentions(text: str, term: SpecificTerm) -> bool:
    return term.required <= frozenset(index_terms(text))


def unmentioned(terms: Sequence[SpecificTerm], passages: Iterable[str]) -> list[SpecificTerm]:
    """The terms that no passage holds (each passage: its title, heading and text together)."""
    held = frozenset().union(*(frozenset(index_terms(p)) for p in passages))
    return [term for term in terms if not term.required <= held]


def unknown_to(index: SearchIndex, scope: SearchFilter, terms: Sequence[SpecificTerm]) -> list[SpecificTerm]:
    """The terms that no chunk in `scope` holds. An unreachable index knows nothing: [] (the
    caller's answer stands as it was)."""
    unknown = []
    for term in terms:
        try:
            hits = index.search(
                query=term.text, vector=None, filter=scope, limit=KB_CHECK_HITS, mode="lexical"
            )
        except SearchUnavailable:
            return []
        texts = (f"{h.chunk.title}\n{h.chunk.heading}\n{h.chunk.text}" for h in hits.hits)
        if not any(mentions(text, term) for text in texts):
            unknown.append(term)
    return unknown


def quoted(terms: Sequence[SpecificTerm]) -> str:
    return ", ".join(f"'{t.text}'" for t in terms)


def never_mentioned(
    index: SearchIndex, scope: SearchFilter, question: str, evidence: Sequence[Evidence]
) -> str | None:
    """Why the knowledge bases in scope cannot answer `question`: it names an identifier that no
    chunk in scope holds. None when every identifier is there (or the question names none).
    Costs a lexical search only for a term the evidence itself lacks."""
    # Identifiers only: a name the documents spell otherwise (an accent left out, a misspelling)
    # is often still answered (SQuAD 2.0 dev: 6 answerable questions name such a name).
    terms = [t for t in specific_terms(question) if t.identifier]
    if not terms:
        return None
    missing = unmentioned(terms, (f"{e.title}\n{e.heading}\n{e.text}" for e in evidence))
    unknown = unknown_to(index, scope, missing) if missing else []
    return NEVER_MENTIONED_REASON.format(terms=quoted(unknown)) if unknown else None
