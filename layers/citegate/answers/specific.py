"""The specific things a question names, and whether the documents mention them at all.

A question about `io_combine_limit`, `--reapply-cherry-picks` or Patroni cannot be answered from
documents that never name it, however well another passage matches its other words ("the default
value of ... limit" matches every setting's entry). Identifiers and names are what tell such a
question apart, so they are checked exactly, with the index's own analysis:

- identifiers: snake_case (`work_mem`), dotted or scoped names (`os.path.join`, `std::vector`),
  command-line options (`--no-verify`), camelCase words (`getElementById`), calls (`fsync()`)
  and anything in backticks;
- names: capitalised words that do not start the question ("Does Patroni ..."), and quoted
  strings;
- hyphenated lower-case names (`git-crypt`, `pip-compile`, `max-line-length`): checked against the
  whole knowledge base only, never to keep a passage from being quoted (see `hyphenated_names`).

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
    # For a hyphenated name: its words, which also mention it when they stand side by side
    # ("real-time computations" holds "time-computations").
    spelled_apart: tuple[str, ...] = ()


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
    if term.required <= frozenset(index_terms(text)):
        return True
    return bool(term.spelled_apart) and _side_by_side(word_terms(text), term.spelled_apart)


def _side_by_side(words: Sequence[str], parts: Sequence[str]) -> bool:
    n = len(parts)
    return n > 1 and any(tuple(words[i : i + n]) == tuple(parts) for i in range(len(words) - n + 1))


def unmentioned(terms: Sequence[SpecificTerm], passages: Iterable[str]) -> list[SpecificTerm]:
    """The terms that no passage holds (each passage: its title, heading and text together)."""
    passages = list(passages)
    held = frozenset().union(*(frozenset(index_terms(p)) for p in passages))
    return [
        term
        for term in terms
        if not term.required <= held
        and not (
            term.spelled_apart and any(_side_by_side(word_terms(p), term.spelled_apart) for p in passages)
        )
    ]


# Technical writing's kebab-case: tools (`git-crypt`, `pip-compile`), settings (`max-line-length`),
# commands (`cherry-pick`). Real manuals' dev halves: every such name in a question that no page
# holds belonged to a question the manual does not answer (3 of 3); SQuAD 2.0 dev and test: 3
# questions name a hyphenated word their corpus lacks, 2 of them unanswerable ("non-tropical"), and
# the answerable one ("real time-computations") is held by its words side by side.
_HYPHENATED = re.compile(r"(?<![\w-])[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?![\w-])")


def hyphenated_names(question: str) -> tuple[SpecificTerm, ...]:
    """The hyphenated lower-case names of `question` that its identifiers do not already cover."""
    covered = frozenset().union(*(t.required for t in specific_terms(question)))
    terms: list[SpecificTerm] = []
    for match in _HYPHENATED.finditer(question):
        text = match.group()
        required = _required(text)
        if required and not required <= covered and not any(t.text == text for t in terms):
            terms.append(SpecificTerm(text, required, True, tuple(word_terms(text))))
    return tuple(terms)


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


# A plain word of the question that no chunk in scope holds is as telling as an identifier when
# nothing matched the question well either ("store fresh basil" against a version-control manual).
# Checked only below this relevance (the absolute estimate of citegate.knowledge.search.relevance)
# of the best hit. Real manuals' dev halves: off-topic questions 0.001-0.026, answerable ones 0.15
# and up; at 0.1 the check also declined 2 answerable SQuAD 2.0 test questions with a word the
# corpus spells otherwise, and one manual question worded its own way ("before TOAST kicks in").
WEAK_MATCH_RELEVANCE = 0.05
_WORD = re.compile(r"[A-Za-z][\w'’-]*[A-Za-z0-9]")
# Words a question is framed with, which say nothing about its subject.
_FRAME_WORDS = _NOT_NAMES | frozenset(
    {"that", "this", "there", "their", "they", "them", "my", "your", "our", "me", "you", "it", "its"}
    | {"has", "have", "had", "was", "were", "been", "be", "get", "got", "use", "used", "using", "way"}
    | {"best", "into", "than", "then", "any", "all", "some", "much", "many", "more", "most", "also"}
    | {"does", "doesn't", "don't", "isn't", "aren't", "won't", "can't", "cannot", "about", "between"}
)


def plain_words(question: str) -> tuple[SpecificTerm, ...]:
    """The question's other Latin words (three letters or more, frame words aside) as terms."""
    seen: set[str] = set()
    terms = []
    for match in _WORD.finditer(question):
        word = match.group().removesuffix("'s").removesuffix("’s")
        if len(word) < 3 or word.lower() in _FRAME_WORDS or word.lower() in seen:
            continue
        seen.add(word.lower())
        required = _required(word)
        if required and not required <= STOPWORDS:
            terms.append(SpecificTerm(word, required, False))
    return tuple(terms)


def quoted(terms: Sequence[SpecificTerm]) -> str:
    return ", ".join(f"'{t.text}'" for t in terms)


def never_mentioned(
    index: SearchIndex,
    scope: SearchFilter,
    question: str,
    evidence: Sequence[Evidence],
    relevance: float | None = None,
) -> str | None:
    """Why the knowledge bases in scope cannot answer `question`: it names an identifier that no
    chunk in scope holds, or, when its best hit's `relevance` is below WEAK_MATCH_RELEVANCE, a
    word that none holds. None when every such term is there. Costs a lexical search only for a
    term the evidence itself lacks."""
    passages = [f"{e.title}\n{e.heading}\n{e.text}" for e in evidence]
    # Identifiers, whatever the match: a name the documents spell otherwise (an accent left out, a
    # misspelling) is often still answered (SQuAD 2.0 dev: 6 answerable questions name such a name).
    identifiers = [t for t in specific_terms(question) if t.identifier]
    unknown = _unknown(index, scope, [*identifiers, *hyphenated_names(question)], passages)
    if not unknown and relevance is not None and relevance < WEAK_MATCH_RELEVANCE:
        inside = set().union(*(index_terms(t.text) for t in identifiers)) if identifiers else set()
        words = [t for t in plain_words(question) if not t.required <= inside]
        unknown = _unknown(index, scope, words, passages)
    return NEVER_MENTIONED_REASON.format(terms=quoted(unknown)) if unknown else None


def _unknown(
    index: SearchIndex, scope: SearchFilter, terms: Sequence[SpecificTerm], passages: Sequence[str]
) -> list[SpecificTerm]:
    missing = unmentioned(terms, passages) if terms else []
    return unknown_to(index, scope, missing) if missing else []
