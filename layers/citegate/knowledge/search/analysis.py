"""Text analysis shared by indexing and querying in the embedded engine.

Two stages, applied identically on both sides:

1. `analyze(text)` (Python): NFKC-normalise, lowercase, cut runs of Chinese characters with jieba's
   search mode and everything else on non-word characters (`\\w` runs, so `max_length` and `v2` stay
   whole, punctuation disappears, numbers are kept). The result is the tokens joined by single spaces.
2. The tantivy analyzer registered as `ANALYZER_NAME` (see `text_analyzer()`): whitespace split,
   lowercase, drop tokens of 100 bytes or more, English Snowball stemmer. Tantivy applies it to the
   output of `analyze` when indexing; `query_terms` applies the very same analyzer object to a query,
   so a query term is always spelled exactly like the indexed term it should match.

Stopwords are only removed from queries, and only when something else is left: the index keeps
every token, and a query made of stopwords alone ("the who") still searches for them.

Identifiers (technical documentation is full of them) match exactly as well as by their parts:
beside the word tokens, `analyze` and `query_terms` add each compound's whole form and its parts
(`identifier_terms`): `os.path.join` also gives `os.path.join`, `work_mem` also `work` and `mem`,
`--no-verify` also `no-verify`, `getElementById` also `get element by id`. Command-line options
keep their dashes as a token of their own (`flag_terms`): `-O` gives `-^o` (a capital marked, since
`-s` and `-S` are different options), `--summary` gives `--summary`, and the manuals' notation
`--[no-]verify` gives both `--verify` and `--no-verify`. A query naming the
identifier exactly then matches its rare whole form (a high IDF) besides the common parts, so the
entry of `os.path.join` outranks pages that mention `os`, `path` and `join` apart, and "work mem"
still finds `work_mem`.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
import warnings
from typing import Any

from tantivy import Filter, TextAnalyzer, TextAnalyzerBuilder, Tokenizer

# Bump the suffix whenever the analysis changes: indexes built with another analysis must be rebuilt.
ANALYZER_NAME = "citegate_v4"

# Tantivy refuses terms longer than ~65 KB and long tokens are noise (base64, hashes of hashes).
MAX_TOKEN_BYTES = 100

# CJK unified ideographs (+ extension A, compatibility block, extensions B and later).
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff"
_CJK_RUN = re.compile(f"([{_CJK}]+)")
_WORD = re.compile(f"[^\\W{_CJK}]+")
# Fast path for ASCII text (most chunks): bytes.translate + split is ~3x faster than the regex and
# yields the same tokens, since ASCII `\w` is exactly [A-Za-z0-9_].
_ASCII_NON_WORD = bytes(c for c in range(128) if not (chr(c).isalnum() or chr(c) == "_"))
_ASCII_TO_SPACE = bytes.maketrans(_ASCII_NON_WORD, b" " * len(_ASCII_NON_WORD))

# Deliberately small: only words that carry no meaning in any technical query.
ENGLISH_STOPWORDS = frozenset(
    {"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no"}
    | {"not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they"}
    | {"this", "to", "was", "will", "with"}
)
CHINESE_STOPWORDS = frozenset(["的", "了", "和", "是", "在", "与", "及", "或"])
STOPWORDS = ENGLISH_STOPWORDS | CHINESE_STOPWORDS

_jieba_lock = threading.Lock()
_jieba: Any = None
_analyzer: TextAnalyzer | None = None


def _segmenter() -> Any:
    """jieba, initialised once: loading its dictionary takes about a second, so only on first use."""
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                with warnings.catch_warnings():  # jieba 0.42 has invalid escapes in its regexes
                    warnings.simplefilter("ignore", DeprecationWarning)
                    warnings.simplefilter("ignore", SyntaxWarning)
                    import jieba

                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _jieba = jieba
    return _jieba


def text_analyzer() -> TextAnalyzer:
    """A fresh tantivy analyzer; register it on every index open (tantivy does not persist it)."""
    return (
        TextAnalyzerBuilder(Tokenizer.whitespace())
        .filter(Filter.lowercase())
        .filter(Filter.remove_long(MAX_TOKEN_BYTES))
        .filter(Filter.stemmer("english"))
        .build()
    )


def _shared_analyzer() -> TextAnalyzer:
    global _analyzer
    if _analyzer is None:
        _analyzer = text_analyzer()
    return _analyzer


def tokenize(text: str) -> list[str]:
    """Lowercased tokens before stemming: jieba words for Chinese runs, `\\w` runs for the rest."""
    if text.isascii():
        return text.lower().encode("ascii").translate(_ASCII_TO_SPACE).decode("ascii").split()
    text = unicodedata.normalize("NFKC", text).lower()
    parts = _CJK_RUN.split(text)
    if len(parts) == 1:  # no Chinese at all: the common case stays in C
        return _WORD.findall(text)
    tokens: list[str] = []
    # re.split with one group alternates: non-Chinese, Chinese, non-Chinese, ...
    for i, part in enumerate(parts):
        if not part:
            continue
        if i % 2:
            tokens.extend(word for word in _segmenter().lcut_for_search(part) if word.strip())
        else:
            tokens.extend(_WORD.findall(part))
    return tokens


# A compound: word runs joined by `.`, `-` or `::` inside it (`os.path.join`, `no-verify`,
# `std::vector`, `v2.0`); a trailing period ends a sentence, not an identifier. Possessive
# quantifiers: no backtracking inside a word (the naive pattern made indexing 8x slower).
_COMPOUND = re.compile(r"\b\w++(?:(?:\.|-|::)\w++)+")
_WORD_RUN = re.compile(r"\w++")
# camelCase / PascalCase: parts start where a lower-case letter or digit meets Upper+lower
# (`getElementById`, `JavaScript`); `PostgreSQL` and `HTTPServer` have no such boundary.
_CAMEL_HINT = re.compile(r"[a-z0-9][A-Z][a-z]")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z][a-z])")


# A command-line option: one or two dashes and a name, at the start of the text or after a space,
# an opening bracket or quote, a comma, `*`, `` ` `` or `|`; so not inside a word ("pre-commit"), a
# number ("-1", "2-3"), a path ("a/-x") or a chemical name ("Ca2+-dependent", "5′-end").
# `--[no-]name` is how manuals write an option and its negation.
_FLAG_START = r"""(?:^|(?<=[\s(\[{,;"'`*|“‘]))"""
_FLAG = re.compile(_FLAG_START + r"(--?)(\[no-\])?([A-Za-z][A-Za-z0-9]*+(?:-[A-Za-z0-9]++)*+)")


def _option_token(dashes: str, name: str) -> str:
    # A short option's case is its meaning (git log -s / -S): mark each capital before lowercasing.
    if dashes == "-":
        name = "".join(f"^{char.lower()}" if char.isupper() else char for char in name)
    return (dashes + name).lower()


def flag_terms(text: str) -> list[str]:
    """The command-line options `text` names, as tokens of their own with their dashes."""
    if "-" not in text:
        return []
    terms: list[str] = []
    for match in _FLAG.finditer(text):
        dashes, negatable, name = match.groups()
        terms.append(_option_token(dashes, name))
        if negatable:
            terms.append(_option_token(dashes, "no-" + name))
    return terms


def identifier_terms(text: str) -> list[str]:
    """The extra tokens identifiers in `text` contribute (lowercased, before stemming): the whole
    form of each compound that the word split breaks apart, the parts of each snake_case or
    camelCase word that it keeps whole, and command-line options with their dashes. Plain prose
    gives nothing."""
    extra = [match.group().lower() for match in _COMPOUND.finditer(text)]
    extra.extend(flag_terms(text))
    snake, camel = "_" in text, _CAMEL_HINT.search(text) is not None
    if snake or camel:
        for word in _WORD_RUN.findall(text):
            if snake and "_" in word.strip("_"):
                extra.extend(part for part in word.lower().split("_") if part)
            elif camel and _CAMEL_HINT.search(word):
                extra.extend(piece.lower() for piece in _CAMEL.split(word) if piece)
    return [token for token in extra if len(token.encode()) < MAX_TOKEN_BYTES]


def identifier_forms(text: str) -> list[str]:
    """The whole forms of the identifiers `text` names (lowercased, before stemming): compounds
    (`os.path.join`), options (`-^o`, `--no-verify`) and snake_case or camelCase words
    (`work_mem`, `getelementbyid`), without their parts or plain words."""
    forms = [match.group().lower() for match in _COMPOUND.finditer(text)]
    forms.extend(flag_terms(text))
    if "_" in text or _CAMEL_HINT.search(text):
        forms.extend(
            word.lower()
            for word in _WORD_RUN.findall(text)
            if "_" in word.strip("_") or _CAMEL_HINT.search(word)
        )
    return [form for form in dict.fromkeys(forms) if len(form.encode()) < MAX_TOKEN_BYTES]


def heading_identifier_forms(text: str) -> list[str]:
    """The identifiers of `identifier_forms` that name an entry, as a section heading would: options
    and dotted, snake_case or camelCase names, not hyphenated words ("up-regulation",
    "interleukin-2"), which a document's title holds as often as a reference entry does."""
    return [form for form in identifier_forms(text) if form.startswith("-") or "-" not in form]


def query_identifier_terms(text: str) -> list[str]:
    """The index terms of the identifiers a query names: what is looked for in section headings,
    where a plain word ("default", "mode") would favour any section so titled."""
    forms = heading_identifier_forms(text)
    return list(dict.fromkeys(_shared_analyzer().analyze(" ".join(forms)))) if forms else []


def analyze(text: str) -> str:
    """The text as tantivy should index it with `ANALYZER_NAME`: tokens joined by single spaces,
    identifiers' whole forms and parts after the words (`identifier_terms`)."""
    tokens = tokenize(text)
    extra = identifier_terms(text)
    return " ".join(tokens + extra if extra else tokens)


def word_terms(text: str) -> list[str]:
    """The stemmed word tokens of `text`, without identifiers' extra forms and parts."""
    return _shared_analyzer().analyze(" ".join(tokenize(text)))


def index_terms(text: str) -> list[str]:
    """The terms tantivy stores for `text` (stemmed, in order, repeats kept): for tests and debugging."""
    return _shared_analyzer().analyze(analyze(text))


def query_terms(text: str) -> list[str]:
    """Distinct index terms of a query, in order of first appearance.

    Stopwords are dropped unless nothing else is left. An empty list means there is nothing to
    search lexically (empty or punctuation-only query).
    """
    tokens = tokenize(text)
    content = [token for token in tokens if token not in STOPWORDS]
    extra = [token for token in identifier_terms(text) if token not in STOPWORDS]
    terms = _shared_analyzer().analyze(" ".join((content or tokens) + extra))
    return list(dict.fromkeys(terms))


def query_text(text: str) -> str:
    """`text` reduced by the rules of `query_terms`, for an engine that analyses queries itself.

    OpenSearch gets this instead of the raw query so that both engines weigh a query alike: words
    made only of stopwords are dropped unless nothing else is left, and so is a word whose terms
    all came earlier (BM25 would count a repeated term twice). Words that stay are sent verbatim,
    so the engine's own tokenizer still sees "v2.0" or a Chinese sentence exactly as written.
    """
    # A word with Chinese in it is its own token here: jieba (a second to load) is not needed.
    words = [(word, [word] if _CJK_RUN.search(word) else tokenize(word)) for word in text.split()]
    words = [(word, tokens) for word, tokens in words if tokens]
    content = [(word, tokens) for word, tokens in words if not STOPWORDS.issuperset(tokens)]
    seen: set[str] = set()
    kept: list[str] = []
    for word, tokens in content or words:
        terms = set(tokens) if _CJK_RUN.search(word) else set(_shared_analyzer().analyze(" ".join(tokens)))
        if not terms <= seen:
            seen |= terms
            kept.append(word)
    return " ".join(kept)
