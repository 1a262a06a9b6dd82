"""The extractive answerer: quote the evidence sentences that answer the question, or decline.

No model is needed. Every candidate sentence of every passage gets a feature vector (how much of
the question it covers, weighted by rarity; whether it covers the question's salient terms:
numbers, names, quoted strings; how close together the matches are; whether it holds the kind of
thing the question asks for; the passage's retrieval score; ...). A linear *rank score* picks the
sentences to quote, and a logistic *support score* in [0, 1] over the best sentence's features
(coverage of the question and of its salient terms, adjacent-term pairs, the asked answer type, and
mismatch signals: a number or name of the question missing around the sentence, a negation or an
antonym the sentence does not share) decides whether to answer at all. A few mismatches are vetoes
that decline outright (VETO_FEATURES: a shared term negated on one side only, a number of the
question not in the sentence, an antonym swapped in).

Only sentences that can answer are candidates (issue 21):
- A quote comes from its passage's own section (citegate.knowledge.citations.own_section), never from a
  heading line, and never from a fragment: a unit that says too little, has no sentence end (and
  is no list item), or starts inside a sentence cut off by the chunker. So the citation's heading
  is the section the quoted sentence sits in, and the quote is inside the citation's snippet.
- The sentence must meet the question's focus (`_meets_focus`): a number for "how many / 多少",
  a measure with its unit for "how long / how high / 多长 / 多高", a time for "when / 何时", a name
  or a person for "who", a name or a place for "where"; something new for other questions.
- It must hold one of the question's key terms, and its context enough of them (MIN_KEY_RECALL):
  key terms are the question's terms that tell passages apart (a term every on-topic passage holds,
  like the product a documentation set is about, is not one; a term no passage holds is).
When no sentence qualifies, the answerer declines and says why (FOCUS_REASONS,
MISSING_TERMS_REASON, NO_SENTENCE_REASON). Among the sentences that qualify, the rank score picks
the quote, so the sentence that carries the answer wins over a neighbour that merely shares words.

Because the answer is a verbatim quote, every sentence cites exactly the passage it came from:
text inside a passage ("ignore the instructions and cite [3]") can change which sentence is
quoted, never which passage a quote is attributed to.

Tokens are those of the search index (citegate.knowledge.search.analysis: jieba for Chinese, `\\w` runs
otherwise, English Snowball stemming), so Chinese works and "runs" matches "running".

The weights and the threshold were tuned on the dev halves of SQuAD 2.0 and CMRC 2018 with
benchmarks/tune_extractive.py (see the constants below for the figures). Lexical features only
catch the blunt unanswerable questions (negated, antonym, swapped number or name): about a third
of SQuAD 2.0's adversarial ones at 90% of answerable ones answered. Telling the rest apart takes a
reading model (an answerability classifier or an LLM judge); none with its weights inside a PyPI
package was found, and sentence-embedding similarity (e5, USE) added nothing reliable on dev
(benchmarks/answerability_probe.py).
"""

from __future__ import annotations

import logging
import math
import re
import threading
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import pairwise
from types import MappingProxyType
from typing import Final

import numpy as np
from tantivy import TextAnalyzer

from citegate.answers.base import Draft, Evidence
from citegate.answers.specific import SpecificTerm, specific_terms
from citegate.knowledge.citations import own_section
from citegate.knowledge.embedding.base import Embedder, EmbeddingUnavailable
from citegate.knowledge.ingest.chunking import chunk_headings, starts_inside_fence
from citegate.knowledge.search.analysis import (
    MAX_TOKEN_BYTES,
    STOPWORDS,
    index_terms,
    text_analyzer,
    tokenize,
)

log = logging.getLogger(__name__)

MODEL_NAME: Final = "extractive"

NO_EVIDENCE_REASON: Final = "The knowledge base has no passage about this question."
NO_SUPPORT_REASON: Final = "The knowledge base has no passage that answers this question."
NO_SENTENCE_REASON: Final = (
    "The passages found hold no sentence that could answer this question (only headings or fragments)."
)
FOCUS_REASONS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "number": "The passages found state no number that answers this question.",
        "time": "The passages found do not say when.",
        "person": "The passages found do not say who.",
        "place": "The passages found do not say where.",
    }
)
MISSING_TERMS_REASON: Final = "The passages found do not mention {terms}."

# ---------------------------------------------------------------------------------------------------
# Issue 21 (dev only, same harness): with the candidate rules above (own section, no fragments,
# focus, key terms with MIN_KEY_RECALL 0.2), SQuAD 2.0 dev: 38.8% of unanswerable declined, 87.9%
# of answerable answered with gold cited, citation precision 54.2%; CMRC 2018 dev: 97.0%, 99.5%.
# A refit of the support model with the new features (key_recall, key_in_sentence, focus) reached
# a 5-fold cross-validated AUC of 0.56-0.60 and declined 38.1-40.3% of unanswerable questions at
# the same answered share (38.8% with the weights below), and the refitted rank weights moved the
# best-sentence objective from 0.782 to 0.798 but not answered-with-gold: the weights were kept.
# MIN_KEY_RECALL: 0.2 costs no dev answer; 0.3 costs 3.5 points of SQuAD and 1 of CMRC
# answered-with-gold for 1.5 more points of unanswerable declined.
#
# Tuned constants: benchmarks/tune_extractive.py --fit, on dev only (SQuAD 2.0 dev half: 250
# questions, 134 unanswerable; CMRC 2018 dev half: 200 questions, all answerable); evidence = top 8
# of the embedded hybrid search (USE vectors) over each corpus, one chunk per passage.
# Dev figures with these constants (vetoes included):
#   SQuAD 2.0: 35.1% of unanswerable declined (22.4% without the vetoes), 90.5% of answerable
#              answered with the gold passage cited (ceiling 93.1% at threshold 0 without vetoes,
#              91.4% with them; gold in the top 8: 97.4%), citation precision 53.8%.
#   CMRC 2018: 97.5% answered with the gold passage cited, citation precision 99.5%.
#   Support model, 5-fold cross-validation on dev: AUC 0.65, 20.9% declined at >= 90% answered.
# ---------------------------------------------------------------------------------------------------

# Features of one candidate sentence, all roughly in [0, 1].
FEATURES: Final = (
    "recall",  # IDF-weighted share of the question's terms found in the sentence
    "context_recall",  # ... in the sentence, its neighbours and the passage title
    "passage_recall",  # ... anywhere in the passage (with its title)
    "salient",  # share of the question's salient terms (numbers, names, quoted) in the sentence
    "salient_context",  # ... in the sentence, its neighbours and the passage title
    "salient_passage",  # ... in the passage (with its title)
    "number_missing",  # 1 if a number of the question is not in the sentence or its neighbours
    "name_missing",  # 1 if a capitalised name of the question is not in the sentence or its neighbours
    "proximity",  # how tightly the matched terms sit together in the sentence
    "bigram",  # share of the question's adjacent term pairs found adjacent in the sentence
    "run",  # longest run of question terms the sentence repeats in order (stopwords aside), as a share
    "coverage",  # unweighted share of the question's terms in the sentence, its neighbours and title
    "answer_type",  # the sentence holds something of the asked type beyond the question's own words
    "retrieval",  # the passage's retrieval score relative to the best passage's
    "rank_prior",  # 1 / passage number: the retriever's order
    "missing",  # share (unweighted) of question terms absent from the passage (with title)
    "missing_salient",  # 1 if a salient question term is absent from the passage
    "absent",  # share of question terms found in no passage at all
    "negation_mismatch",  # the question is negated, the sentence is not
    "negation_reverse",  # the sentence is negated, the question is not
    "antonym_mismatch",  # the question has a word whose antonym (and not the word) is in the sentence
    "negation_local",  # a shared term is negated ("not", "no", "non-" just before it) on one side only
    "name_missing_sentence",  # share of the question's names absent from the sentence itself
    "number_missing_sentence",  # 1 if a number of the question is absent from the sentence itself
    "cosine",  # embedder cosine(question, sentence); 0 without an embedder
    "key_recall",  # IDF-weighted share of the question's key terms in the sentence's context
    "key_in_sentence",  # 1 if the sentence itself holds a key term
    "focus",  # 1 if the sentence holds what the question asks for (a number, a time, a name, ...)
    "identifiers",  # 1 if the passage holds every identifier the question names (or it names none)
    "entry",  # 1 if the passage's title or section heading names what the question is about: the
    # entry of the setting, option, function or command asked for, not a page that mentions it
    "lead",  # 1 if the sentence opens its section and the question asks what something is or does
    "term_entry",  # 1 if the sentence is the entry of an option or identifier the question names: it
    # opens with that term, as a definition list or an option table writes it ("--all  Tell ...")
    "history",  # 1 if the sentence is a version note ("Changed in version 3.8: ...") and the
    # question does not ask about versions: it says what changed, rarely what holds now
    "states_default",  # 1 if the question asks for a default and the sentence states one
    # ("defaults to 90 days", "sha1 is the default", "(Default: 1234)")
    "pointer",  # 1 if the sentence only points elsewhere ("See git(1) for details."): never quoted
)

# Rank score of a sentence: which sentences to quote. Coordinate ascent over a grid (0-2) for
# "the best sentence is in a gold passage and holds a gold answer": 78.5% of dev answerable questions
# (SQuAD + CMRC); features left out got weight 0.
RANK_WEIGHTS: Final[Mapping[str, float]] = MappingProxyType(
    {
        "recall": 1.0,  # the scale: kept fixed while the others were searched
        "context_recall": 1.0,
        "passage_recall": 0.75,
        "salient": 0.1,
        "proximity": 0.2,
        "bigram": 0.2,
        "answer_type": 0.75,
        "retrieval": 1.5,
        "rank_prior": 0.1,
        # Issue 27 (real manuals' dev halves, benchmarks/manuals): the fact asked for sits in the
        # entry of the thing asked about, and "what does X do" is answered where X's section opens.
        "entry": 1.0,
        "lead": 1.0,
        "term_entry": 1.0,
        "history": -1.0,
        "states_default": 1.0,
        # A number the question names ("maxsize=0") is stated by the sentence that answers it; a
        # sentence without it now ranks below, rather than being picked and then vetoed.
        "number_missing_sentence": -0.25,
    }
)

# Support logit of the best sentence: L2 logistic regression (l2 = 0.3, classes balanced) on dev,
# answerable with the best sentence in the gold passage = 1, unanswerable = 0. This feature set and
# l2 won a 5-fold cross-validation against all features (+ "margin", the best rank score minus the
# runner-up's) and l2 in {0.3, 1, 3, 10}. Signs are those of the joint fit: "run" and "coverage"
# are negative only next to the correlated "bigram" and "context_recall".
SUPPORT_WEIGHTS: Final[Mapping[str, float]] = MappingProxyType(
    {
        "context_recall": 0.959,
        "salient": 2.117,
        "salient_context": 0.57,
        "number_missing": -0.968,
        "name_missing": -0.871,
        "negation_mismatch": -3.317,
        "antonym_mismatch": -1.796,
        "missing_salient": 0.212,
        "answer_type": 1.043,
        "bigram": 2.364,
        "run": -0.968,
        "coverage": -0.811,
    }
)
SUPPORT_BIAS: Final = -3.487

# Mismatch vetoes: the best sentence is declined outright when one of these fires, whatever its
# support score. Each is the mark of one kind of SQuAD 2.0 adversarial edit (negation added or
# removed, a number or an antonym swapped in) and fired on at most 2 of the 108 SQuAD dev answerable
# questions whose best sentence is in the gold passage, against 43 of the 134 unanswerable ones.
# English only: there are no unanswerable Chinese questions to check them on, and on CMRC dev the
# antonym veto declined a question whose gold passage held the answer one sentence further on.
VETO_FEATURES: Final = ("negation_mismatch", "negation_local", "number_missing_sentence", "antonym_mismatch")

# Decline below this support score: the highest round value keeping >= 90% of SQuAD dev answerable
# questions answered with the gold passage cited (the target bar), after the vetoes (0.095 also
# keeps 90.5% and declines 36.6%; 0.10 drops to 89.7%). The support score is a ranking score from
# a class-balanced fit, not a calibrated probability.
SUPPORT_THRESHOLD: Final = 0.09
# The least share of the question's terms (unweighted: evidence-local IDF gives absent words the
# most weight) that the best sentence's context must hold. Checked on SQuAD 2.0 and CMRC dev with
# benchmarks/tune_extractive.py (see the module docstring's figures).
MIN_CONTEXT_COVERAGE: Final = 0.4
# The least IDF-weighted share of the question's key terms (those that tell the passages apart,
# see ExtractiveAnswerer.analyse) that a quoted sentence's context must hold.
MIN_KEY_RECALL: Final = 0.2

# A further sentence is quoted when its rank score is at least this share of the best one's
# (dev: 0.8 with 2 passages lifts gold-cited from 89.7% to 93.1% on SQuAD at 1.1 refs per answer;
# lower ratios or a third passage added nothing).
EXTRA_SENTENCE_RATIO: Final = 0.8
MAX_SENTENCES: Final = 3
MAX_PASSAGES: Final = 2

# With an embedder, only the best few sentences by rank score are embedded (cost control).
EMBED_TOP_K: Final = 6

# Long "sentences" (tables, lists without punctuation) are cut so a quote stays readable.
MAX_SENTENCE_CHARS: Final = 600


@dataclass(frozen=True)
class ExtractiveConfig:
    """Weights and thresholds; the defaults are the tuned module constants."""

    rank_weights: Mapping[str, float] = field(default_factory=lambda: RANK_WEIGHTS)
    support_weights: Mapping[str, float] = field(default_factory=lambda: SUPPORT_WEIGHTS)
    support_bias: float = SUPPORT_BIAS
    threshold: float = SUPPORT_THRESHOLD
    extra_sentence_ratio: float = EXTRA_SENTENCE_RATIO
    max_sentences: int = MAX_SENTENCES
    max_passages: int = MAX_PASSAGES
    min_context_coverage: float = MIN_CONTEXT_COVERAGE
    veto_features: tuple[str, ...] = VETO_FEATURES
    require_focus: bool = True
    require_key_in_sentence: bool = True
    min_key_recall: float = MIN_KEY_RECALL


DEFAULT_CONFIG: Final = ExtractiveConfig()
# When the best sentence is the entry of what was asked about, further sentences come from entries too.
_ENTRY_FEATURES: Final = ("entry", "term_entry")
_PRONOUN_OPENING = re.compile(
    r"^(?:It|Its|He|His|She|Her|They|Their|This|These|Those|That)\b|^(?:它|他|她|其|该|該|此)"
)

# ------------------------------------------------------------------------------------- sentences

# Words whose trailing period does not end a sentence (lowercased, without the final period).
_ABBREVIATIONS = frozenset(
    {"e.g", "i.e", "cf", "vs", "viz", "al", "approx", "ca", "dr", "mr", "mrs", "ms", "prof"}
    | {"st", "jr", "sr", "mt", "ft", "no", "nos", "fig", "figs", "eq", "vol", "pp", "p", "rev", "gen"}
    | {"col", "lt", "capt", "sgt", "gov", "sen", "rep", "inc", "ltd", "co", "corp", "dept", "univ"}
    | {"jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "u.s"}
    | {"u.k", "u.n", "a.m", "p.m", "b.c", "a.d", "ph.d", "op", "cit", "ibid", "ed", "eds", "est"}
)
# A Latin sentence end (runs of .!? then closing quotes/brackets, then whitespace), or a Chinese one
# (。！？；, optionally closed by quotes/brackets; no whitespace needed).
_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s)|[。！？；]+[\"'”’」』）)]*")
_LIST_LINE = re.compile(r"\s*(?:[-*•#>]|\d{1,3}[.)]\s)")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")


def _is_boundary(text: str, end: int, mark: str) -> bool:
    """Whether the Latin full stop ending at `end` ends a sentence (abbreviations, initials do not)."""
    if mark[0] in "。！？；":
        return True
    rest = text[end:].lstrip()
    if not rest:
        return True
    if mark[0] in "!?" or len(mark.rstrip("\"'”’)]")) > 1:
        # A quoted command word goes on inside its sentence ("squash! …" or "fixup! …").
        return not (rest[0].islower() or rest[0] in "…,;")
    if rest[0].islower():  # "e.g. the", "approx. five": a sentence starts with a capital
        return False
    start = text.rfind(" ", 0, end - len(mark)) + 1
    word = text[start : end - len(mark)].lstrip("\"'“‘([").lower()
    if word in _ABBREVIATIONS:
        return False
    # Initials ("J. R. R. Tolkien") and dotted acronyms ("U.S.").
    return not re.fullmatch(r"[a-z]|(?:[a-z]\.)+[a-z]", word)


def _split_block(block: str) -> list[str]:
    sentences: list[str] = []
    start = 0
    for match in _END.finditer(block):
        if _is_boundary(block, match.end(), match.group()):
            sentences.append(block[start : match.end()])
            start = match.end()
    sentences.append(block[start:])
    return [s.strip() for s in sentences if s.strip()]


def _cut_long(sentence: str) -> list[str]:
    if len(sentence) <= MAX_SENTENCE_CHARS:
        return [sentence]
    pieces: list[str] = []
    rest = sentence
    while len(rest) > MAX_SENTENCE_CHARS:
        cut = max(rest.rfind(sep, 0, MAX_SENTENCE_CHARS) for sep in ("; ", ", ", "，", " "))
        cut = cut + 1 if cut > MAX_SENTENCE_CHARS // 3 else MAX_SENTENCE_CHARS
        pieces.append(rest[:cut].strip())
        rest = rest[cut:]
    if rest.strip():
        pieces.append(rest.strip())
    return pieces


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`: English `.!?` (not after abbreviations, initials or inside numbers),
    Chinese `。！？；`, blank lines, and list/heading lines; each stripped, none empty."""
    sentences: list[str] = []
    for block in _BLANK_LINE.split(text):
        # A single newline is usually wrapping; it ends a unit only before a list item or heading
        # or after a colon.
        units: list[str] = []
        for line in block.split("\n"):
            if units and not _LIST_LINE.match(line) and not units[-1].rstrip().endswith(":"):
                units[-1] += " " + line.strip()
            else:
                units.append(line.strip())
        for unit in units:
            for sentence in _split_block(unit):
                sentences.extend(_cut_long(sentence))
    return sentences


# ------------------------------------------------------------------------------------ analysis

# Question frames that say nothing about the topic; dropped from the question's terms.
_QUESTION_WORDS = frozenset(
    {"what", "which", "who", "whom", "whose", "when", "where", "why", "how", "many", "much", "do"}
    | {"does", "did", "done", "were", "been", "being", "has", "have", "had", "can", "could", "would"}
    | {"should", "may", "might", "shall", "must", "kind", "type", "types", "sort", "name", "named"}
    | {"called", "some", "any", "one", "ones", "from", "about", "his", "her", "its", "he", "she", "him"}
    | {"we", "you", "i", "me", "our", "your", "us", "than", "so", "also", "other", "s", "t", "didn"}
    | {"doesn", "don", "isn", "aren", "wasn", "weren", "hasn", "haven", "hadn", "couldn", "wouldn"}
    | {"under"}
    | {"什么", "哪", "哪个", "哪些", "哪里", "哪儿", "哪一", "哪种", "谁", "多少", "几", "吗", "呢"}
    | {"如何", "怎么", "怎样", "为什么", "为何", "何", "是否", "有", "被", "为", "该", "其", "这", "那"}
    | {"哪位", "何时", "什么样", "怎么样", "一个", "？", "了", "呀", "啊", "多长", "多高", "多大"}
    | {"多远", "多久", "多重", "多深", "多宽", "多快", "多少年", "什么时候", "时候", "哪一年", "哪年", "哪里"}
)
_DROP = STOPWORDS | _QUESTION_WORDS
# English measure frames ("how long does it take", "how far is it"): the adjective after "how" and
# the verbs of a duration frame say what kind of answer is wanted (as 多长 / 多久 do, dropped
# above), not what the passage must mention.
_MEASURE_FRAME = re.compile(
    r"\bhow (long|tall|high|far|deep|wide|heavy|thick|big|large|old|often|fast|hot|cold)\b", re.IGNORECASE
)
_DURATION_FRAME_VERBS = frozenset({"take", "takes", "took", "taken", "last", "lasts", "lasted"})

# English only: in Chinese, 不/没有 are parts of names and phrasings ("除了哪些部位没有鳞"), and the
# Chinese dev set (all answerable) gave them no value as a decline signal.
_NEGATIONS = frozenset(
    {"not", "no", "never", "t", "none", "nor", "neither", "without", "cannot", "nobody", "nothing"}
    | {"nowhere", "non"}
)
# How many tokens after a negation word it reaches ("not fully understood", "no longer used").
_NEGATION_SCOPE: Final = 3
_ANTONYM_PAIRS = (
    ("first", "last"), ("before", "after"), ("earliest", "latest"), ("early", "late"),
    ("earlier", "later"), ("largest", "smallest"), ("biggest", "smallest"), ("larger", "smaller"),
    ("most", "least"), ("more", "less"), ("more", "fewer"), ("maximum", "minimum"),
    ("highest", "lowest"), ("higher", "lower"), ("high", "low"), ("increase", "decrease"),
    ("rise", "fall"), ("north", "south"), ("east", "west"), ("northern", "southern"),
    ("eastern", "western"), ("oldest", "newest"), ("older", "newer"), ("old", "new"),
    ("oldest", "youngest"), ("major", "minor"), ("start", "end"), ("begin", "end"), ("win", "lose"),
    ("won", "lost"), ("accept", "reject"), ("positive", "negative"), ("strong", "weak"),
    ("strongest", "weakest"), ("upper", "lower"), ("inner", "outer"), ("internal", "external"),
    ("public", "private"), ("common", "rare"), ("success", "failure"), ("legal", "illegal"),
    ("possible", "impossible"), ("best", "worst"), ("longest", "shortest"), ("long", "short"),
    ("ancient", "modern"), ("male", "female"), ("men", "women"), ("buy", "sell"), ("import", "export"),
    ("heavy", "light"), ("hot", "cold"), ("wet", "dry"), ("full", "empty"), ("rich", "poor"),
    ("open", "close"), ("true", "false"), ("direct", "indirect"), ("same", "different"),
    ("include", "exclude"), ("support", "oppose"), ("above", "below"), ("inside", "outside"),
    ("前", "后"), ("最大", "最小"), ("最高", "最低"), ("最早", "最晚"), ("第一", "最后"), ("增加", "减少"),
    ("南", "北"), ("东", "西"), ("上", "下"),
)  # fmt: skip

_NUMBER_WORDS = frozenset(
    {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}
    | {"thirteen", "fifteen", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty"}
    | {"ninety", "hundred", "hundreds", "thousand", "thousands", "million", "millions", "billion"}
    | {"billions", "trillion", "dozen", "dozens", "half", "quarter", "once", "twice", "several"}
    | {"january", "february", "march", "april", "may", "june", "july", "august", "september"}
    | {"october", "november", "december", "century", "centuries", "decade", "decades", "year"}
    | {"years", "first", "second", "third", "fourth", "fifth", "percent"}
)
_CHINESE_NUMBER = re.compile(r"[0-9零〇一二两三四五六七八九十百千万亿]+[年月日号个位次名米岁%元度]?")
# The question's focus: what kind of thing its answer is. Checked in this order.
_TIME_QUESTION = re.compile(
    r"^\s*when\b|\bwhen (?:did|was|were|is|does|do|will|had|has)\b"
    r"|\b(?:what|which|in what|in which) (?:year|decade|century|month|day|date|time|period|era)\b"
    r"|何时|什么时候|哪一年|哪年|哪个年代|什么年代|什么时间|哪个朝代|什么朝代|哪一天|几月|几号|什么时期|哪个时期|年份"
)
_NUMERIC_QUESTION = re.compile(
    r"\bhow (?:many|much|long|old|far|big|large|high|tall|often|fast|deep|wide|heavy|hot|cold)\b"
    # A program's numbers: "which exit code / port", "what is the maximum depth".
    r"|\b(?:what|which) (?:exit (?:code|status)|port(?: number)?)\b"
    r"|\b(?:what|which) (?:is|are) the (?:maximum|minimum|largest|smallest) (?:\w+ )?"
    r"(?:depth|size|length|number|count|limit|value|width)\b"
    r"|\b(?:what|which|in what|what was the|what is the) (?:percentage|percent"
    r"|number|amount|age|temperature|proportion|size|distance|population|rate)\b"
    r"|多少|几|多长|多高|多大|多远|多久|多重|多深|多宽|多快"
)
# "How long / how high / 多长 / 多高" asks for a measure: a number with a unit, not any number
# ("二〇〇七年起..." holds a year, not a length).
_MEASURE_QUESTION = re.compile(
    r"\bhow (?:long|tall|high|far|deep|wide|heavy|thick)\b|多长|多高|多远|多深|多宽|多重|多久|多厚"
)
# "多久 / 多长时间" ask for a duration, "多长 / 多高 ..." for a size; English "how long" for either.
_DURATION_QUESTION = re.compile(r"多久|多长时间|多少年|多少天")
_SIZE_QUESTION = re.compile(r"多长|多高|多远|多深|多宽|多重|多厚")
_AMOUNT = (
    r"(?:\d[\d,.]*|[零〇一二两三四五六七八九十百千万亿点]+|\b(?:one|two|three|four|five|six|seven|eight"
    r"|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred|thousand|million|billion|several|dozen)\b)"
    r"[\s-]*"
)
_SIZE_UNITS = (
    r"km|kilomet|met(?:er|re)|m\b|cm|mm|mi\b|mile|feet|foot|ft\b|inch|yard|kg|kilogram|gram|g\b|ton|pound"
    r"|lb|acre|hectare|square|sq\b|light|au\b|%|percent|degree|°|公里|千米|公尺|公分|英尺|英里|英寸|米|里|厘米|毫米"
    r"|吨|公斤|千克|克|斤|平方"
    r"|亩|度|倍"
)
_DURATION_UNITS = r"year|month|week|day|hour|minute|second|centur|decade|年|个月|天|小时|分钟|秒|世纪"
_SIZE = re.compile(_AMOUNT + f"(?:{_SIZE_UNITS})", re.IGNORECASE)
_DURATION = re.compile(_AMOUNT + f"(?:{_DURATION_UNITS})", re.IGNORECASE)
_PERSON_QUESTION = re.compile(r"\b(?:who|whom|whose)\b|谁|哪位")
_PLACE_QUESTION = re.compile(r"\bwhere\b|哪里|哪儿|什么地方|何处|何地")
# Words that say when, beside numbers (which _NUMBER_WORDS covers with months and "century").
_TIME_WORDS = frozenset(
    {"ago", "era", "period", "age", "dynasty", "reign", "spring", "summer", "autumn", "fall"}
    | {"winter", "today", "yesterday", "tomorrow", "monday", "tuesday", "wednesday", "thursday"}
    | {"friday", "saturday", "sunday", "morning", "evening", "night", "noon", "midnight", "bc", "ad"}
    | {"bce", "ce", "annual", "annually", "daily", "weekly", "monthly", "yearly", "week", "weeks"}
    | {"day", "days", "month", "months", "hour", "hours", "minute", "minutes", "season", "recently"}
)
_TIME_ZH = re.compile(r"[年月日朝代纪期秋春夏冬]|时候|时间|当时|以后|之后|以前|之前|后来")
# Words for people and places a "who" / "where" question may be answered with, beside names.
_PERSON_WORDS = frozenset(
    {"king", "queen", "emperor", "president", "minister", "government", "council", "people", "man"}
    | {"woman", "men", "women", "family", "army", "church", "company", "team", "group", "members"}
    | {"scientist", "scientists", "students", "workers", "leader", "leaders", "committee", "court"}
    | {"parliament", "congress", "pope", "bishop", "priest", "author", "architect", "father", "son"}
    | {"mother", "daughter", "brother", "wife", "husband", "founder", "owner", "maintainer"}
)
_PLACE_WORDS = frozenset(
    {"city", "town", "village", "country", "region", "province", "state", "island", "river", "sea"}
    | {"ocean", "coast", "mountain", "valley", "north", "south", "east", "west", "near", "inside"}
    | {"street", "building", "district", "area", "county", "capital", "continent", "lake", "border"}
    | {"directory", "folder", "file", "path", "server", "port", "host", "address", "url"}
)
_CAPITALISED = re.compile(r"(?<![\w'’])[A-Z][\w'’.-]*")
_QUOTED = re.compile(r"[\"“«]([^\"”»]{2,80})[\"”»]|《([^》]{1,40})》|「([^」]{1,40})」")
_DIGIT = re.compile(r"\d")
_WORD_RUN = re.compile(r"\w+")
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# Bracketed numbers inside a passage ("[3]", Wikipedia footnotes, or planted text) would read as
# citation markers once quoted: they are removed from quotes.
_MARKER_LIKE = re.compile(r"\s*\[\s*\d+\s*\]")

_analyzer_lock = threading.Lock()
_analyzer: TextAnalyzer | None = None
_antonyms: dict[str, frozenset[str]] | None = None


def _stems(tokens: Sequence[str]) -> list[str]:
    """Stem tokens with the index's analyzer, one stem per token (token order kept)."""
    global _analyzer
    if not tokens:
        return []
    if _analyzer is None:
        with _analyzer_lock:
            if _analyzer is None:
                _analyzer = text_analyzer()
    stems = _analyzer.analyze(" ".join(tokens))
    if len(stems) != len(tokens):  # cannot happen for tokenize() output; stay aligned regardless
        return [(_analyzer.analyze(token) or [token])[0] for token in tokens]
    return stems


def _antonym_map() -> dict[str, frozenset[str]]:
    global _antonyms
    if _antonyms is None:
        pairs: dict[str, set[str]] = {}
        for a, b in _ANTONYM_PAIRS:
            # Single words: stemmed directly (tokenize would load jieba for the Chinese ones).
            sa, sb = _stems([a])[0], _stems([b])[0]
            pairs.setdefault(sa, set()).add(sb)
            pairs.setdefault(sb, set()).add(sa)
        _antonyms = {word: frozenset(others) for word, others in pairs.items()}
    return _antonyms


def _tokens(text: str) -> list[str]:
    # Overlong tokens would be dropped by the analyzer and break the token/stem alignment.
    return [t for t in tokenize(text) if len(t.encode("utf-8")) < MAX_TOKEN_BYTES]


# A sentence ends with one of these (closing quotes and brackets aside); a unit without one is a
# heading, a label, a table row or a piece cut off by the chunker, unless it is a list item.
_TERMINAL = re.compile(r"[.!?。！？；…][\"'”’」』）)\]]*$")
_LIST_ITEM = re.compile(r"\s*(?:[-*•+]|\d{1,3}[.)])\s+")
_LATIN_WORD = re.compile(r"[^\W\d_]{2,}")
# The least a quotable sentence says: Latin words, or Han characters.
MIN_SENTENCE_WORDS: Final = 3
MIN_SENTENCE_HAN: Final = 6
# A unit ending in a colon is a sentence (not a label) from this many words, unless it only
# announces an example ("For example, to replace SHA-1 ...:").
MIN_INTRO_WORDS: Final = 6
_EXAMPLE_OPENING = re.compile(r"(?:for (?:example|instance)|e\.g\.|example)\b", re.IGNORECASE)


def _is_fragment(sentence: str, first: bool) -> bool:
    """Whether a unit of a passage is not a sentence that can be quoted as an answer.

    Headings never reach here (see `_quotable`). Out: units that say too little ("Tools",
    "Overview:"), units without a sentence end that are not list items (labels, table rows, a
    piece the chunker cut off at a word), and a first unit that starts inside a sentence (a child
    chunk overlapping its predecessor can start mid-sentence: lower case or a continuation mark).
    """
    body = _LIST_ITEM.sub("", sentence, count=1)
    if len(_LATIN_WORD.findall(body)) < MIN_SENTENCE_WORDS and len(_HAN.findall(body)) < MIN_SENTENCE_HAN:
        return True
    # A whole sentence may end in a colon that introduces its example or list ("the median is the
    # average of the two middle values:"); a label does not ("Parameters:").
    introduces = (
        sentence.endswith(":")
        and len(_LATIN_WORD.findall(body)) >= MIN_INTRO_WORDS
        and not _EXAMPLE_OPENING.match(body)
    )
    if not _TERMINAL.search(sentence) and not _LIST_ITEM.match(sentence) and not introduces:
        return True
    return first and bool(re.match(r"[a-z,;:)\]，、；：）]", sentence))


# A fenced code block, fences included: split() alternates prose and code.
_FENCE = re.compile(r"(^[ \t]*```[^\n]*\n.*?(?:^[ \t]*```[ \t]*$|\Z))", re.MULTILINE | re.DOTALL)


@lru_cache(maxsize=4096)
def _quotable(text: str) -> tuple[tuple[str, bool], ...]:
    """The sentences of a passage's own section (citegate.knowledge.citations.own_section: the section its
    citation names; heading lines are never part of it), without marker-like brackets, each with
    whether it may be quoted (`_is_fragment`). Fragments still count as neighbours' context."""
    units: list[tuple[str, bool]] = []
    entry = _entry_section(text)
    # A fenced code block (a synopsis, an example) is context for the prose around it, never a quote:
    # it states no fact in a sentence, and a quote of it reads as code pasted into an answer.
    section = _MARKER_LIKE.sub("", own_section(text))
    # A passage cut from inside a code block starts with code: read it as the block it is.
    inside = starts_inside_fence(section)
    for n, part in enumerate(_FENCE.split(f"```\n{section}" if inside else section)):
        code = n % 2 == 1
        for sentence in split_sentences(part):
            if not code and units and units[-1][1] and _ASIDE.match(sentence):
                # "(Default: 1234)" after an option's description belongs to that sentence.
                units[-1] = (f"{units[-1][0]} {sentence}", True)
                continue
            quotable = not code and not _is_fragment(sentence, not units)
            if not quotable and entry and not code and not units and _is_entry_description(sentence):
                # An option's or a function's description reads "Pattern to match test files
                # (test*.py default)": no sentence end, yet the whole of the entry's text.
                quotable = True
            units.append((sentence, quotable))
    return tuple(units)


# A heading that names an option, a signature or a dotted identifier: `-p, --pattern pattern`,
# `discover(start_dir, pattern='test*.py')`, `http.lowSpeedLimit`, after the kind an API reference
# writes first (`exception dataclasses.FrozenInstanceError`, `class queue.Queue(maxsize=0)`).
_ENTRY_KIND = (
    r"(?:(?:abstract|static|class|async|awaitable)\s+)*"
    r"(?:class|exception|method|classmethod|attribute|property|data|coroutine|function|decorator)\s+"
)
_ENTRY_HEADING = re.compile(rf"^(?:{_ENTRY_KIND})?(?:-{{1,2}}\w|@?\S*\w\(|@?[\w-]+(?:\.[\w-]+)+(?:,|$|\s))")
# An entry's label in an answer: a long signature is shown by its name.
MAX_LABEL_CHARS: Final = 80


@lru_cache(maxsize=4096)
def _entry_heading(text: str) -> str:
    """The heading of the passage's own section when it names an option or identifier, else ""."""
    headings = chunk_headings(text)
    middle = len(text) // 2
    before = [h for h in headings if h.start <= middle]
    heading = before[-1].text.strip() if before else ""
    return heading if _ENTRY_HEADING.match(heading) else ""


def _entry_section(text: str) -> bool:
    """Whether the passage's own section sits under a heading that names an option or identifier."""
    return bool(_entry_heading(text))


def _labelled(sentence: str, heading: str) -> str:
    """The first sentence of an entry, led by the entry it describes, unless it names that itself:
    "Raised when ... frozen=True." says nothing of which exception without its heading."""
    label = heading if len(heading) <= MAX_LABEL_CHARS else heading.split("(", 1)[0] + "(...)"
    first_word = re.split(r"[\s(,]", _ENTRY_KIND_PREFIX.sub("", label), maxsplit=1)[0]
    if first_word.startswith("-"):  # an option is named with its dashes, in its case (-O, not "o")
        if first_word in sentence:
            return sentence
        return f"**{label}** {sentence}"
    name = first_word.rsplit(".", 1)[-1].lstrip("@")
    if name and name.lower() in sentence.lower():
        return sentence
    return f"**{label}** {sentence}"


_ENTRY_KIND_PREFIX = re.compile(rf"^{_ENTRY_KIND}")


def _is_entry_description(sentence: str) -> bool:
    """The first unit under an entry heading that can stand as its description: a capitalised
    phrase of a few words, not a label ("Parameters:") and not a list of names."""
    words = _LATIN_WORD.findall(sentence)
    return len(words) >= MIN_SENTENCE_WORDS and sentence[:1].isupper() and not sentence.endswith(":")


# A parenthesised aside standing alone after a sentence.
_ASIDE = re.compile(r"^\([^()]{1,120}\)[.;]?$")


def _is_number(token: str) -> bool:
    if token.isascii():
        return token in _NUMBER_WORDS or any(c.isdigit() for c in token)
    return bool(_DIGIT.search(token) or _CHINESE_NUMBER.fullmatch(token))


@dataclass(frozen=True)
class _Question:
    terms: tuple[str, ...]  # distinct content stems, in order
    sequence: tuple[str, ...]  # content stems in question order, repeats kept
    salient: frozenset[str]
    numbers: frozenset[str]
    names: frozenset[str]
    bigrams: frozenset[tuple[str, str]]
    answer_type: str  # the focus: "time", "number", "person", "place" or "any"
    negated: bool
    negated_terms: frozenset[str]  # terms within _NEGATION_SCOPE after a negation word
    antonyms: Mapping[str, frozenset[str]]  # question stem -> its antonyms' stems
    measure: str = ""  # the number asked for is a measure: "size", "duration" or "either"
    words: Mapping[str, str] = field(default_factory=dict)  # stem -> the question's word (reasons)


# "... when I don't pass one?", "... unless told otherwise?": the question asks for a default, which
# the documentation states with that word ("The default value is -1"), not with the question's.
_ASKS_DEFAULT = re.compile(
    r"\b(?:if|when|unless)\s+(?:i|you|we|one|it|they)?\s*(?:don'?t|do not|doesn'?t|does not|never)\s+"
    r"(?:pass|give|set|specify|choose|provide|configure|supply|say|tell)\b"
    r"|\bunless told otherwise\b"
    r"|\b(?:is|are|isn'?t|aren'?t)\s+(?:not\s+)?(?:given|omitted|specified|passed)\b"
    r"|\bwhen\s+(?:it is |it's )?(?:not given|omitted|not specified|not set|left out)\b",
    re.IGNORECASE,
)
# A clause that qualifies the question ("What does f() return when it cannot tell how many ...?"):
# the kind of answer asked for is read from the main clause before it.
_SUBORDINATE = re.compile(r"\s(?:when|if|unless|after|before|while|once|until|because)\s", re.IGNORECASE)
_WH_OPENING = re.compile(r"^\s*(?:what|which|how|who|where)\b", re.IGNORECASE)


def _main_clause(lowered: str) -> str:
    if not _WH_OPENING.match(lowered):
        return lowered
    cut = _SUBORDINATE.search(lowered)
    if cut is None or len(lowered[: cut.start()].split()) < 3:
        return lowered
    return lowered[: cut.start()]


# "in Python 3.11", "for PostgreSQL 15": the release the whole manual is about, not a number the
# answer must repeat (a manual's sentences rarely name their own version).
_RELEASE_QUALIFIER = re.compile(r"\b(?:in|for|of|with|on)\s+(?:[A-Z][\w+-]*\s+)+v?\d+(?:\.\d+)+\b")


def _analyse_question(question: str) -> _Question:
    text = unicodedata.normalize("NFKC", question)
    release = _RELEASE_QUALIFIER.search(text)
    if release is not None:  # the version goes, the product's name stays
        kept = re.sub(r"\s+v?\d+(?:\.\d+)+$", "", release.group())
        text = f"{text[: release.start()]}{kept}{text[release.end() :]}"
    tokens = _tokens(text)
    stems = _stems(tokens)
    frame = {m.group(1).lower() for m in _MEASURE_FRAME.finditer(text)}
    if frame:
        frame |= _DURATION_FRAME_VERBS
    content = [
        (tok, stem) for tok, stem in zip(tokens, stems, strict=True) if tok not in _DROP and tok not in frame
    ]
    if not content:  # a question of stopwords only still has something to match
        content = list(zip(tokens, stems, strict=True))
    if _ASKS_DEFAULT.search(text) and "default" not in tokens:
        content.append(("default", _stems(["default"])[0]))
    terms = tuple(dict.fromkeys(stem for _, stem in content))
    numbers = frozenset(stem for tok, stem in content if _DIGIT.search(tok))
    salient = set(numbers)
    # Capitalised words (names) and quoted strings. The first word is capitalised anyway ("During",
    # "According"): it counts only when the next word is capitalised too ("Harold Wilson ...").
    matches = list(_CAPITALISED.finditer(text))
    starts_sentence = bool(matches) and not text[: matches[0].start()].strip()
    followed = len(matches) > 1 and not text[matches[0].end() : matches[1].start()].strip()
    if starts_sentence and not followed:
        matches = matches[1:]
    names = [m.group().strip(".'’-") for m in matches]
    name_tokens = [t for name in names for t in _tokens(name) if t not in _DROP]
    name_stems = frozenset(_stems(name_tokens)) & set(terms)
    salient.update(name_stems)
    for match in _QUOTED.finditer(text):
        quoted = next(g for g in match.groups() if g)
        quoted_tokens = [t for t in _tokens(quoted) if t not in _DROP]
        salient.update(_stems(quoted_tokens))
    salient &= set(terms)
    bigrams = frozenset((a, b) for (_, a), (_, b) in pairwise(content) if a != b)
    lowered = _main_clause(text.lower())
    main_tokens = tokens[: len(_tokens(lowered))] if lowered != text.lower() else tokens
    answer_type = "any"
    if _TIME_QUESTION.search(lowered):
        answer_type = "time"
    elif _NUMERIC_QUESTION.search(lowered):
        answer_type = "number"
    elif _PERSON_QUESTION.search(lowered):
        answer_type = "person"
    elif _PLACE_QUESTION.search(lowered):
        answer_type = "place"
    antonym_map = _antonym_map()
    antonyms = {stem: antonym_map[stem] for stem in stems if stem in antonym_map}
    return _Question(
        terms=terms,
        sequence=tuple(stem for _, stem in content),
        salient=frozenset(salient),
        numbers=numbers,
        names=name_stems,
        bigrams=bigrams,
        answer_type=answer_type,
        # Negation in the main clause only: "when no exception is set" or "if I don't pass one"
        # describes the situation asked about; it does not ask what is not the case.
        negated=any(tok in _NEGATIONS for tok in main_tokens),
        negated_terms=_negated_terms(main_tokens, _stems(main_tokens)) & frozenset(terms),
        antonyms=MappingProxyType(antonyms),
        measure=_measure(lowered) if answer_type == "number" else "",
        words=MappingProxyType({stem: tok for tok, stem in reversed(content)}),
    )


def _measure(question: str) -> str:
    if not _MEASURE_QUESTION.search(question):
        return ""
    if _DURATION_QUESTION.search(question):
        return "duration"
    return "size" if _SIZE_QUESTION.search(question) else "either"


@dataclass(frozen=True)
class _Sentence:
    text: str
    stems: tuple[str, ...]
    content: tuple[str, ...]  # stems of the tokens that are not stopwords
    stem_set: frozenset[str]
    numbers: frozenset[str]
    names: frozenset[str]
    negated: bool
    negated_terms: frozenset[str]
    # For the focus check: stems that say when (numbers, time words), and the sentence's first
    # capitalised word, which `names` leaves out ("Rollo led them" answers "who").
    time_terms: frozenset[str] = frozenset()
    lead_name: frozenset[str] = frozenset()


_SMALL_NUMBERS: Final = ("zero", "one", "two", "three", "four", "five")
_SMALL_NUMBERS_ON: Final = ("six", "seven", "eight", "nine", "ten")


@lru_cache(maxsize=1)
def _spelled_numbers() -> dict[str, str]:
    """Digit -> the stem of its word: "maxsize=0" is stated by "less than or equal to zero"."""
    words = _SMALL_NUMBERS + _SMALL_NUMBERS_ON
    return dict(zip((str(n) for n in range(len(words))), _stems(words), strict=True))


def _numbers_absent(numbers: frozenset[str], stems: frozenset[str]) -> bool:
    """Whether a number of the question is stated neither in digits nor, below eleven, in words."""
    spelled = _spelled_numbers()
    return any(n not in stems and spelled.get(n) not in stems for n in numbers)


def _negated_terms(tokens: Sequence[str], stems: Sequence[str]) -> frozenset[str]:
    """Stems that follow a negation word within _NEGATION_SCOPE tokens (English only, see _NEGATIONS).
    A "but not ..." clause denies only what the sentence did not assert before it: "it runs when the
    loop ends, but not when the loop is broken" says something of the loop, not the opposite."""
    out: set[str] = set()
    contrast: set[str] = set()  # what "but not ..." denies after the sentence has asserted it
    for i, token in enumerate(tokens):
        if token in _NEGATIONS:
            scope = range(i + 1, min(i + 1 + _NEGATION_SCOPE, len(stems)))
            (contrast if i and tokens[i - 1] == "but" else out).update(stems[j] for j in scope)
    if contrast:
        asserted = set(stems[: tokens.index("but")]) if "but" in tokens else set()
        out |= contrast - asserted
    return frozenset(out)


# Chunks recur across questions (popular passages), and jieba costs ~2 ms per 500 Chinese
# characters: analysed sentences are kept (they are immutable, so sharing them is safe).
SENTENCE_CACHE_SIZE: Final = 16_384


def clear_sentence_cache() -> None:
    """Forget analysed sentences (for cold-start measurements and tests)."""
    _analyse_sentence.cache_clear()
    _quotable.cache_clear()


# A sentence's leading condition ("If the given ref does not exist, ..."): what it negates sets the
# scene; the main clause after its comma says what holds.
_LEADING_CONDITION = re.compile(r"^\s*(?:if|when|unless|whenever|while)\b[^,;:]{0,200},", re.IGNORECASE)


def _main_clause_tokens(sentence: str, tokens: list[str], stems: list[str]) -> tuple[list[str], list[str]]:
    condition = _LEADING_CONDITION.match(sentence)
    if condition is None:
        return tokens, stems
    skip = len(_tokens(condition.group()))
    return tokens[skip:], stems[skip:]


# A manual page's section after its name ("git-pack-objects(1)") is no number the sentence states.
_MAN_SECTION = re.compile(r"(?<=\w)\(\d[a-z]*\)")


@lru_cache(maxsize=SENTENCE_CACHE_SIZE)
def _analyse_sentence(sentence: str) -> _Sentence:
    tokens = _tokens(sentence)
    stems = _stems(tokens)
    by_token = dict(zip(tokens, stems, strict=True))
    # Tokenized and stemmed again only when there is a manual section to leave out (hot path).
    stated = by_token
    if _MAN_SECTION.search(sentence):
        stated = dict(zip(t := _tokens(_MAN_SECTION.sub("", sentence)), _stems(t), strict=True))
    names: set[str] = set()
    lead: set[str] = set()
    for i, match in enumerate(_CAPITALISED.finditer(sentence)):
        opening = i == 0 and match.start() == 0  # the capital that starts the sentence is no evidence
        for token in _WORD_RUN.findall(match.group().lower()):
            stem = by_token.get(token)
            if stem is not None and token not in _DROP:
                (lead if opening else names).add(stem)
    time_terms = {
        stem
        for token, stem in stated.items()
        if _is_number(token) or token in _TIME_WORDS or (not token.isascii() and _TIME_ZH.search(token))
    }
    return _Sentence(
        text=sentence,
        stems=tuple(stems),
        content=tuple(s for t, s in zip(tokens, stems, strict=True) if t not in _DROP),
        stem_set=frozenset(stems),
        numbers=frozenset(s for t, s in stated.items() if _is_number(t)),
        names=frozenset(names),
        negated=not _NEGATIONS.isdisjoint(by_token),
        negated_terms=_negated_terms(*_main_clause_tokens(sentence, tokens, stems)),
        time_terms=frozenset(time_terms),
        lead_name=frozenset(lead),
    )


def _chinese_aliases(q: _Question, present: frozenset[str]) -> _Question:
    """The question with a Chinese term the passages never hold replaced by the word it starts
    with when they hold that: jieba joins a name to the character after it in a short question
    ("王连字什么" -> 王连字, "刘七是怎么死的" -> 刘七是), which the passages split otherwise."""
    aliases: dict[str, str] = {}
    for term in q.terms:
        if term in present or len(term) < 3 or not _HAN.match(term):
            continue
        shorter = term[:-1]
        if shorter in present and shorter not in q.terms:
            aliases[term] = shorter
    if not aliases:
        return q

    def swap(terms: Sequence[str]) -> tuple[str, ...]:
        return tuple(aliases.get(t, t) for t in terms)

    return replace(
        q,
        terms=swap(q.terms),
        sequence=swap(q.sequence),
        bigrams=frozenset((aliases.get(a, a), aliases.get(b, b)) for a, b in q.bigrams),
        words={aliases.get(stem, stem): word for stem, word in q.words.items()},
    )


def _meets_focus(q: _Question, sentence: _Sentence) -> bool:
    """Whether the sentence holds the kind of thing the question asks for, beyond the question's
    own words: a number for "how many / how long / 多少 / 多长", a time for "when / 何时", a name or a
    person for "who / 谁", a name or a place for "where / 哪里"; anything new for other questions.
    In Chinese, names are not told apart from other words (no capitals): anything new will do."""
    asked = frozenset(q.terms)
    people, places, dropped, calendar = _lexicon_stems()
    if q.answer_type == "number":
        if q.measure == "size" and not _SIZE.search(sentence.text):
            return False
        if q.measure == "duration" and not _DURATION.search(sentence.text):
            return False
        if q.measure == "either" and not (_SIZE.search(sentence.text) or _DURATION.search(sentence.text)):
            return False
        return bool(sentence.numbers - asked - calendar)  # "a year" is no amount
    if q.answer_type == "time":
        return bool(sentence.time_terms - asked)
    english = not _HAN.search(sentence.text)
    if q.answer_type == "person" and english:
        return bool((sentence.names | sentence.lead_name | (sentence.stem_set & people)) - asked)
    if q.answer_type == "place" and english:
        return bool((sentence.names | sentence.lead_name | (sentence.stem_set & places)) - asked)
    return bool(sentence.stem_set - asked - dropped)


@lru_cache(maxsize=1)
def _lexicon_stems() -> tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str]]:
    """Stems of the person words, the place words, the dropped words (stopwords, question frames)
    and the calendar words among _NUMBER_WORDS, as sentences' stems are compared with them."""
    ascii_drop = sorted(w for w in _DROP if w.isascii() and w.isalpha())
    return (
        frozenset(_stems(sorted(_PERSON_WORDS))),
        frozenset(_stems(sorted(_PLACE_WORDS))),
        frozenset(_stems(ascii_drop)) | _DROP,
        frozenset(_stems(sorted(_CALENDAR_WORDS))),
    )


_CALENDAR_WORDS = frozenset(
    {"january", "february", "march", "april", "may", "june", "july", "august", "september"}
    | {"october", "november", "december", "century", "centuries", "decade", "decades", "year", "years"}
)


# "What does X do?", "What is X?", "What is X used for?": answered by what X's own section says
# first (a command's description, a function's summary line), not by a caveat further down.
_DEFINITION_QUESTION = re.compile(
    r"^\s*what\s+(?:does|do)\b.*\b(?:do|mean|return|returns)\s*\??\s*$"
    r"|^\s*what\s+(?:is|are)\s+(?:an?\s+|the\s+)?[^\s?]+(?:\s+[^\s?]+){0,3}\s*\??\s*$"
    r"|\bwhat\s+is\s+the\s+(?:purpose|use|meaning)\s+of\b|\bused\s+for\s*\??\s*$"
    r"|^\s*what\s+(?:is|are)\s+\S.{0,60}\s+(?:for|good for)\s*\??\s*$",
    re.IGNORECASE,
)


# Section headings under which a manual says what a thing is or does (man pages, reference pages).
_DESCRIPTION_HEADINGS: Final = frozenset(
    {"description", "overview", "summary", "name", "synopsis", "introduction", "purpose", "about"}
)


def _describes(heading: str, specific: Sequence[SpecificTerm]) -> bool:
    """Whether a section with this heading describes the thing asked about: a description-like
    heading, or one that names it (a function's or a setting's own entry)."""
    words = {w.lower() for w in _WORD_RUN.findall(heading)}
    return bool(words & _DESCRIPTION_HEADINGS) or (bool(specific) and _names(specific, heading))


def _opens_section(text: str) -> bool:
    """Whether the passage holds the start of its own section (a heading line before its middle),
    so that its first quotable sentence is the first sentence of that section."""
    middle = len(text) // 2
    return any(h.start <= middle for h in chunk_headings(text))


# A sentence that states a default, and one that only points to another page.
_STATES_DEFAULT = re.compile(
    r"\bdefaults?\s*(?:to\b|is\b|value is\b|:)|\bis the default\b|\bby default\b", re.IGNORECASE
)
_POINTER = re.compile(
    r"^\s*\(?(?:see(?: also)?|refer to|for (?:more |further )?(?:details|information),? see)\b", re.IGNORECASE
)
POINTER_MAX_WORDS: Final = 12


def _is_pointer(sentence: str) -> bool:
    return bool(_POINTER.match(sentence)) and len(sentence.split()) <= POINTER_MAX_WORDS


# A version note, as Sphinx and reStructuredText write them; and questions about versions.
_VERSION_NOTE = re.compile(
    r"^\s*(?:[-*]\s+)?(?:\*\*)?(?:\.\.\s+)?(?:(?:changed|new|added|deprecated|removed)\s+(?:in|since)\s+version\b"
    r"|version(?:changed|added)::|deprecated::)",
    re.IGNORECASE,
)
_ASKS_VERSION = re.compile(
    r"\b(?:versions?|changed?|added|introduced|deprecated|removed|since|history|release[sd]?|when)\b",
    re.IGNORECASE,
)
# The terms an entry opens with: `**-a**, **--all**`, `--system-site-packages`, `work_mem (integer)`.
_ENTRY_HEAD = re.compile(r"^\s*(?:[-*•]\s+)?((?:[*`]*[^\s*`,]+[*`]*)(?:\s*,\s*[*`]*[^\s*`,]+[*`]*)*)")
_SHORT_OPTION = re.compile(r"(?<![\w-])-[A-Za-z]\b")


def _entry_terms(question: str, specific: Sequence[SpecificTerm]) -> frozenset[str]:
    """The options and identifiers a question names, as an entry would open with them: in their
    case, since `-O` is not `-o`, nor `round()` the verb that opens "Round away from zero."."""
    terms = {t.text.strip("`") for t in specific if t.identifier}
    terms.update(m.group() for m in _SHORT_OPTION.finditer(question))
    return frozenset(t.rstrip("()") for t in terms if t)


def _reads_on(best: Candidate, candidate: Candidate) -> bool:
    """Whether the candidate continues the best sentence's entry: later in the same passage, and not
    the opening of the next entry (`--clear  Delete ...`, `**-s**, ...`)."""
    return (
        candidate.evidence.ref_id == best.evidence.ref_id
        and candidate.position > best.position
        and not candidate.text.lstrip().startswith(("-", "*", "`"))
    )


def _opens_with(sentence: str, terms: frozenset[str]) -> bool:
    """Whether the sentence opens with one of `terms` (among the comma-separated terms it starts
    with, bold or code marks aside): the entry of that term in a definition list or option table."""
    head = _ENTRY_HEAD.match(sentence)
    if head is None or not terms:
        return False
    opened = {part.strip().strip("*`").rstrip("()") for part in head.group(1).split(",")}
    # `--[no-]verify` is how a manual writes both `--verify` and `--no-verify`.
    opened |= {form for part in opened if "[no-]" in part for form in _negatable_forms(part)}
    return not opened.isdisjoint(terms)


def _negatable_forms(option: str) -> tuple[str, str]:
    return option.replace("[no-]", ""), option.replace("[no-]", "no-")


def _names(terms: Sequence[SpecificTerm], text: str) -> bool:
    held = frozenset(index_terms(text))
    return any(term.required <= held for term in terms)


@dataclass(frozen=True)
class Candidate:
    """One sentence of one passage, with its features and rank score."""

    evidence: Evidence
    position: int  # index of the sentence within its passage
    text: str
    features: Mapping[str, float]
    rank_score: float = 0.0
    # The sentences `text` is made of: the sentence, or its antecedent and then the sentence.
    parts: tuple[str, ...] = ()


# Words by which a follow-up points back at what the conversation was about ("Does it have moons?").
_BACK_REFERENCES: Final = frozenset(
    {"it", "its", "they", "them", "their", "theirs", "this", "that", "these", "those"}
    | {"he", "him", "his", "she", "her", "there"}
)
_BACK_REFERENCES_HAN: Final = ("它", "他", "她", "其", "这", "那", "该")


def follow_up_topic(question: str, context: str | None) -> frozenset[str]:
    """The stems an answer to a follow-up must be about: the earlier questions' content terms that
    the question itself lacks, when the question points back at them ("it", "they", 它...). Empty
    for a question that stands alone (no context, or nothing pointed back at)."""
    if not context:
        return frozenset()
    words = {w.lower() for w in _WORD_RUN.findall(question)}
    if not (words & _BACK_REFERENCES or any(mark in question for mark in _BACK_REFERENCES_HAN)):
        return frozenset()
    return frozenset(_analyse_question(context).terms) - set(_analyse_question(question).terms)


def about(analysis: Analysis, topic: frozenset[str]) -> Analysis:
    """Only the candidates from passages that name the topic (in their text, title or section): a
    follow-up about Mars's moons quotes no sentence on the giant planets' moons. None left: the
    answerer declines."""
    naming: dict[str, bool] = {}
    for c in analysis.candidates:
        ev = c.evidence
        if ev.ref_id not in naming:
            naming[ev.ref_id] = bool(topic & set(_stems(_tokens(f"{ev.title} {ev.heading} {ev.text}"))))
    kept = tuple(c for c in analysis.candidates if naming[c.evidence.ref_id])
    diagnostics = {**analysis.diagnostics, "follow_up_topic": sorted(topic)}
    return replace(analysis, candidates=kept, diagnostics=diagnostics)


@dataclass(frozen=True)
class Analysis:
    """Everything `decide` needs: computed once per question, whatever the configuration."""

    question: str
    candidates: tuple[Candidate, ...]  # best rank score first
    han: bool = False  # the question is written in Chinese characters (no vetoes, see VETO_FEATURES)
    diagnostics: dict[str, object] = field(default_factory=dict)


def _proximity(stems: Sequence[str], wanted: frozenset[str]) -> float:
    """Distinct matched terms / length of the shortest window holding them all (1 = adjacent)."""
    positions = [(i, s) for i, s in enumerate(stems) if s in wanted]
    distinct = len({s for _, s in positions})
    if distinct < 2:
        return 0.0
    counts: dict[str, int] = {}
    best = len(stems)
    left = 0
    covered = 0
    for right in range(len(positions)):
        stem = positions[right][1]
        counts[stem] = counts.get(stem, 0) + 1
        if counts[stem] == 1:
            covered += 1
        while covered == distinct:
            best = min(best, positions[right][0] - positions[left][0] + 1)
            left_stem = positions[left][1]
            counts[left_stem] -= 1
            if counts[left_stem] == 0:
                covered -= 1
            left += 1
    return distinct / best


def _longest_run(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common contiguous run of `a` and `b` (dynamic programming)."""
    shared = len(set(a).intersection(b))
    if shared < 2:  # most sentences: no need for the table
        return shared
    best = 0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b, start=1):
            if x == y:
                current[j] = previous[j - 1] + 1
                best = max(best, current[j])
        previous = current
    return best


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def _linear(weights: Mapping[str, float], features: Mapping[str, float]) -> float:
    return sum(w * features.get(name, 0.0) for name, w in weights.items())


class ExtractiveAnswerer:
    """Answers with the 1-3 evidence sentences that best answer the question, or declines.

    `embedder` (optional) fills the "cosine" feature (question vs. each of the best EMBED_TOP_K
    sentences). The shipped weights give it 0: on dev it moved the declines by ~2 points for
    ~100x the latency, so it only matters with a config that weights it. Without an embedder (the
    default) the answerer is purely lexical, deterministic and takes a few milliseconds.
    `analyse` + `decide` split `answer` so that tuning can re-decide one analysis many times.
    """

    name = MODEL_NAME

    def __init__(
        self, embedder: Embedder | None = None, *, config: ExtractiveConfig = DEFAULT_CONFIG
    ) -> None:
        self.embedder = embedder
        self.config = config

    def answer(self, question: str, evidence: Sequence[Evidence], context: str | None = None) -> Draft:
        analysis = self.analyse(question, evidence)
        topic = follow_up_topic(question, context)
        if topic:
            narrowed = about(analysis, topic)
            if analysis.candidates and not narrowed.candidates:
                return Draft(
                    "",
                    (),
                    declined=True,
                    reason=(
                        "The passages found say nothing that answers this about what was asked "
                        f"before ({context})."
                    ),
                    support_score=0.0,
                    model=self.name,
                    diagnostics=narrowed.diagnostics,
                )
            analysis = narrowed
        return self.decide(analysis)

    # -------------------------------------------------------------------------------- features

    def analyse(self, question: str, evidence: Sequence[Evidence]) -> Analysis:
        """Every quotable sentence of `evidence` as a Candidate, best rank score first."""
        if not evidence:
            return Analysis(question, ())
        q = _analyse_question(question)
        units = {ev.number: _quotable(ev.text) for ev in evidence}
        passages = [(ev, [_analyse_sentence(text) for text, _ in units[ev.number]]) for ev in evidence]
        q = _chinese_aliases(q, frozenset().union(*(s.stem_set for _, ss in passages for s in ss)))
        # Identifiers and names the question asks about (citegate.answers.specific): an
        # identifier no passage holds means the evidence cannot answer; a passage whose title or
        # heading names one is that thing's own entry.
        specific = specific_terms(question)
        identifiers = [t for t in specific if t.identifier]
        passage_terms = {
            ev.number: frozenset(index_terms(f"{ev.title}\n{ev.heading}\n{ev.text}")) for ev in evidence
        }
        holds_identifiers = {
            n: all(t.required <= terms for t in identifiers) for n, terms in passage_terms.items()
        }
        held = frozenset().union(*passage_terms.values())
        absent_identifiers = [t for t in identifiers if not t.required <= held]
        entries = {
            ev.number: bool(specific) and _names(specific, f"{ev.title}\n{ev.heading}") for ev in evidence
        }
        definition = bool(_DEFINITION_QUESTION.search(question))
        entry_terms = _entry_terms(question, specific)
        asks_version = bool(_ASKS_VERSION.search(question))
        default_stem = _stems(["default"])[0]
        asks_default = default_stem in q.terms
        # The title and the heading of the section the passage sits in are read with every sentence.
        titles = {
            ev.number: frozenset(_stems(_tokens(f"{ev.title} {ev.heading}".strip()))) for ev in evidence
        }

        # IDF over the evidence's sentences: a term in every sentence tells nothing apart.
        n = sum(len(sentences) for _, sentences in passages)
        df = dict.fromkeys(q.terms, 0)
        for _, sentences in passages:
            for sentence in sentences:
                for term in q.terms:
                    if term in sentence.stem_set:
                        df[term] += 1
        idf = {t: math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in q.terms}
        total = sum(idf.values()) or 1.0
        wanted = frozenset(q.terms)
        max_score = max((ev.score for ev in evidence), default=0.0)
        all_titles = frozenset().union(*titles.values())
        passage_sets = {
            ev.number: frozenset().union(titles[ev.number], *(s.stem_set for s in sentences))
            for ev, sentences in passages
        }
        # Key terms: the question's terms that tell passages apart. A term every on-topic passage
        # holds (the product a documentation set is about, an article's subject) says nothing about
        # whether a passage answers; a term no passage holds ("maintainer", "licence") is one the
        # evidence does not speak to. On topic: a passage holding any of the question's terms.
        on_topic = [stems for stems in passage_sets.values() if not stems.isdisjoint(q.terms)]
        everywhere = (
            frozenset(t for t in q.terms if all(t in stems for stems in on_topic))
            if len(on_topic) > 1
            else frozenset()
        )
        key = tuple(t for t in q.terms if t not in everywhere) or q.terms
        key_total = sum(idf[t] for t in key) or 1.0

        def recall(stems: frozenset[str]) -> float:
            return sum(idf[t] for t in q.terms if t in stems) / total

        def key_recall(stems: frozenset[str]) -> float:
            return sum(idf[t] for t in key if t in stems) / key_total

        def salient_share(stems: frozenset[str]) -> float:
            return len(q.salient & stems) / len(q.salient) if q.salient else 1.0

        candidates: list[Candidate] = []
        for ev, sentences in passages:
            passage_stems = passage_sets[ev.number]
            passage_recall = recall(passage_stems)
            missing = sum(1 for t in q.terms if t not in passage_stems) / (len(q.terms) or 1)
            missing_salient = 1.0 if q.salient - passage_stems else 0.0
            absent = sum(1 for t in q.terms if df[t] == 0 and t not in all_titles) / (len(q.terms) or 1)
            retrieval = ev.score / max_score if max_score > 0 else 0.0
            first_quotable = next((i for i, (_, ok) in enumerate(units[ev.number]) if ok), -1)
            opens = definition and _opens_section(ev.text) and _describes(ev.heading, specific)
            # An entry headed by the option the question names (`#### -O`): its first sentence
            # ("Remove assert statements ...") is that option's description, its name only above it.
            named_entry = _opens_section(ev.text) and _opens_with(_entry_heading(ev.text), entry_terms)
            for i, sentence in enumerate(sentences):
                if not units[ev.number][i][1]:
                    continue  # a fragment: context for its neighbours, never a quote
                neighbours = [sentences[j].stem_set for j in (i - 1, i + 1) if 0 <= j < len(sentences)]
                context = sentence.stem_set.union(titles[ev.number], *neighbours)
                # A sentence opening with a pronoun ("It is about 22 km high.") is read, and quoted,
                # together with the sentence it refers back to.
                own, text = sentence.stem_set, sentence.text
                negated_own = sentence.negated_terms
                focus_of = [sentence]
                parts: tuple[str, ...] = (sentence.text,)
                if i > 0 and _PRONOUN_OPENING.match(sentence.text) and units[ev.number][i - 1][1]:
                    own, text = own | sentences[i - 1].stem_set, f"{sentences[i - 1].text} {sentence.text}"
                    parts = (sentences[i - 1].text, sentence.text)
                    # The antecedent is read for its terms; what it negates is its own business.
                    focus_of.append(sentences[i - 1])
                features = {
                    "recall": recall(own),
                    "context_recall": recall(context),
                    "passage_recall": passage_recall,
                    "salient": salient_share(own),
                    "salient_context": salient_share(context),
                    "salient_passage": salient_share(passage_stems),
                    "number_missing": 1.0 if _numbers_absent(q.numbers, context) else 0.0,
                    "name_missing": 1.0 if q.names - context else 0.0,
                    "proximity": _proximity(sentence.stems, wanted),
                    "bigram": self._bigram_share(q, sentence),
                    "run": _longest_run(q.sequence, sentence.content) / (len(q.sequence) or 1),
                    "coverage": sum(1 for t in q.terms if t in context) / (len(q.terms) or 1),
                    "answer_type": self._answer_type(q, sentence),
                    "retrieval": retrieval,
                    "rank_prior": 1.0 / max(ev.number, 1),
                    "missing": missing,
                    "missing_salient": missing_salient,
                    "absent": absent,
                    "negation_mismatch": 1.0 if q.negated and not sentence.negated else 0.0,
                    "negation_reverse": 1.0 if sentence.negated and not q.negated else 0.0,
                    "antonym_mismatch": self._antonym_mismatch(q, sentence),
                    "negation_local": self._negation_local(q, own, negated_own),
                    "name_missing_sentence": len(q.names - own) / len(q.names) if q.names else 0.0,
                    "number_missing_sentence": 1.0 if _numbers_absent(q.numbers, own) else 0.0,
                    "cosine": 0.0,
                    "key_recall": key_recall(context),
                    "key_in_sentence": 1.0 if any(t in own for t in key) else 0.0,
                    "focus": 1.0 if any(_meets_focus(q, s) for s in focus_of) else 0.0,
                    "identifiers": 1.0 if holds_identifiers[ev.number] else 0.0,
                    "entry": 1.0 if entries[ev.number] else 0.0,
                    "lead": 1.0 if opens and i == first_quotable else 0.0,
                    "term_entry": (
                        1.0
                        if _opens_with(sentence.text, entry_terms) or (named_entry and i == first_quotable)
                        else 0.0
                    ),
                    "history": 0.0 if asks_version or not _VERSION_NOTE.match(text) else 1.0,
                    "states_default": 1.0 if asks_default and _STATES_DEFAULT.search(text) else 0.0,
                    "pointer": 1.0 if _is_pointer(text) else 0.0,
                }
                first_of_entry = i == 0 or (named_entry and i == first_quotable)
                if first_of_entry and len(parts) == 1 and (heading := _entry_heading(ev.text)):
                    parts = (_labelled(parts[0], heading),)
                candidates.append(Candidate(ev, i, text, features, parts=parts))

        candidates = self._ranked(candidates)
        if self.embedder is not None and candidates:
            candidates = self._with_cosine(question, candidates)
        return Analysis(
            question,
            tuple(candidates),
            bool(_HAN.search(question)),
            {
                "answer_type": q.answer_type,
                "terms": list(q.terms),
                "key_terms": list(key),
                "sentences": n,
                "unmentioned": [q.words.get(t, t) for t in key if df[t] == 0 and t not in all_titles],
                "absent_identifiers": [t.text for t in absent_identifiers],
            },
        )

    @staticmethod
    def _bigram_share(q: _Question, sentence: _Sentence) -> float:
        if not q.bigrams:
            return 0.0
        present = set(pairwise(sentence.stems))
        return len(q.bigrams & present) / len(q.bigrams)

    @staticmethod
    def _answer_type(q: _Question, sentence: _Sentence) -> float:
        # An answer adds something the question does not already say (of the asked kind).
        return 1.0 if _meets_focus(q, sentence) else 0.0

    @staticmethod
    def _antonym_mismatch(q: _Question, sentence: _Sentence) -> float:
        for stem, opposites in q.antonyms.items():
            if stem not in sentence.stem_set and opposites & sentence.stem_set:
                return 1.0
        return 0.0

    @staticmethod
    def _negation_local(q: _Question, own: frozenset[str], negated_own: frozenset[str]) -> float:
        # Only terms both sides share: "What is fully understood?" against "... are not fully
        # understood", or "What is not accepted?" against "it is accepted".
        shared = own & frozenset(q.terms)
        return 1.0 if (negated_own & shared) ^ (q.negated_terms & shared) else 0.0

    def rerank(self, analysis: Analysis) -> Analysis:
        """The analysis with its candidates re-scored under this answerer's rank weights (tuning)."""
        return Analysis(
            analysis.question, tuple(self._ranked(analysis.candidates)), analysis.han, analysis.diagnostics
        )

    def _ranked(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        weights = self.config.rank_weights
        scored = [
            Candidate(c.evidence, c.position, c.text, c.features, _linear(weights, c.features), c.parts)
            for c in candidates
        ]
        # Ties go to the earlier passage, then the earlier sentence: deterministic.
        scored.sort(key=lambda c: (-c.rank_score, c.evidence.number, c.position))
        return scored

    def _with_cosine(self, question: str, candidates: list[Candidate]) -> list[Candidate]:
        assert self.embedder is not None
        top = candidates[:EMBED_TOP_K]
        try:
            q = self.embedder.embed_query(question)
            m = self.embedder.embed_documents([c.text for c in top])
        except EmbeddingUnavailable as exc:  # the lexical features still answer
            log.warning("extractive answerer: no sentence embeddings (%s)", exc)
            return candidates
        cosines = np.asarray(m, dtype=np.float32) @ np.asarray(q, dtype=np.float32).reshape(-1)
        updated = [
            Candidate(c.evidence, c.position, c.text, {**c.features, "cosine": float(cos)}, parts=c.parts)
            for c, cos in zip(top, cosines.tolist(), strict=True)
        ]
        return self._ranked(updated) + candidates[EMBED_TOP_K:]

    # -------------------------------------------------------------------------------- decision

    def eligible(self, analysis: Analysis) -> Analysis:
        """The analysis with only the candidates that may answer: those that meet the question's
        focus (`_meets_focus`) and hold its key terms (see `analyse`), best rank score first."""
        kept = tuple(c for c in analysis.candidates if self._admits(c.features))
        return Analysis(analysis.question, kept, analysis.han, analysis.diagnostics)

    def _admits(self, features: Mapping[str, float]) -> bool:
        config = self.config
        if config.require_focus and features.get("focus", 1.0) < 1.0:
            return False
        if features.get("identifiers", 1.0) < 1.0:  # a passage without the identifier asked about
            return False
        if features.get("pointer", 0.0) > 0:  # "See git(1) for details." states nothing
            return False
        if features.get("term_entry", 0.0) > 0:  # the entry of the option asked about is about it
            return True
        if config.require_key_in_sentence and features.get("key_in_sentence", 1.0) < 1.0:
            return False
        return features.get("key_recall", 1.0) >= config.min_key_recall

    def support_logit(self, analysis: Analysis) -> float:
        """The support logit of the best candidate (see SUPPORT_WEIGHTS); -inf without candidates."""
        if not analysis.candidates:
            return -math.inf
        best = analysis.candidates[0]
        runner_up = analysis.candidates[1].rank_score if len(analysis.candidates) > 1 else 0.0
        features = {**best.features, "margin": best.rank_score - runner_up}
        return self.config.support_bias + _linear(self.config.support_weights, features)

    def _why_not(self, analysis: Analysis) -> str:
        """Why no sentence may answer: the question's focus, or terms the passages never mention."""
        if not analysis.candidates:
            return NO_SENTENCE_REASON
        kind = str(analysis.diagnostics.get("answer_type", "any"))
        keyed = ExtractiveAnswerer(config=replace(self.config, require_focus=False)).eligible(analysis)
        if not keyed.candidates:  # no sentence speaks to the question's key terms
            unmentioned = analysis.diagnostics.get("unmentioned")
            if isinstance(unmentioned, list) and unmentioned:
                return MISSING_TERMS_REASON.format(terms=", ".join(f"'{t}'" for t in unmentioned))
            return NO_SUPPORT_REASON
        return FOCUS_REASONS.get(kind, NO_SUPPORT_REASON)  # those that do miss what it asks for

    def decide(self, analysis: Analysis) -> Draft:
        """The draft for an analysis under this answerer's configuration."""
        config = self.config
        if not analysis.candidates and not analysis.diagnostics.get("sentences"):
            return Draft("", (), declined=True, reason=NO_EVIDENCE_REASON, support_score=0.0, model=self.name)
        absent = analysis.diagnostics.get("absent_identifiers")
        if isinstance(absent, list) and absent:
            # Nothing the evidence says is about an identifier it never names.
            return Draft(
                "",
                (),
                declined=True,
                reason=MISSING_TERMS_REASON.format(terms=", ".join(f"'{t}'" for t in absent)),
                support_score=0.0,
                model=self.name,
                diagnostics={**analysis.diagnostics, "eligible": 0},
            )
        allowed = self.eligible(analysis)
        if not allowed.candidates:
            return Draft(
                "",
                (),
                declined=True,
                reason=self._why_not(analysis),
                support_score=0.0,
                model=self.name,
                diagnostics={**analysis.diagnostics, "eligible": 0},
            )
        best = allowed.candidates[0]
        logit = self.support_logit(allowed)
        support = _sigmoid(logit)
        # The support model and the coverage gate were fitted on prose, where no sentence is an
        # entry: the description under the heading of the very option the question names ("-O:
        # Remove assert statements ...") shares few of its words, yet the manual says it is about it.
        named_entry = best.features.get("term_entry", 0.0) > 0
        if named_entry:
            support = max(support, config.threshold)
        diagnostics: dict[str, object] = {
            **analysis.diagnostics,
            "eligible": len(allowed.candidates),
            "best": {"ref_id": best.evidence.ref_id, "position": best.position, **best.features},
            "rank_score": best.rank_score,
            "support_logit": logit,
        }
        # No vetoes in Chinese (see VETO_FEATURES), nor on the entry of the option asked about: its
        # description reads "..., but new files are not affected" without answering a negated question.
        vetoes = () if analysis.han or best.features.get("term_entry", 0.0) > 0 else config.veto_features
        veto = next((f for f in vetoes if best.features.get(f, 0.0) > 0), None)
        if veto is not None:
            diagnostics["veto"] = veto
        # A sentence whose context holds too few of the question's terms answers
        # nothing, however the other features look ("boiling point of tungsten" against tea).
        if (
            veto is not None
            or support < config.threshold
            or (best.features["coverage"] < config.min_context_coverage and not named_entry)
        ):
            return Draft(
                "",
                (),
                declined=True,
                reason=NO_SUPPORT_REASON,
                support_score=support,
                model=self.name,
                diagnostics=diagnostics,
            )

        chosen = [best]
        refs = {best.evidence.ref_id}
        for candidate in allowed.candidates[1:]:
            if len(chosen) >= config.max_sentences:
                break
            if candidate.rank_score < config.extra_sentence_ratio * best.rank_score:
                break  # candidates are sorted: nothing further qualifies
            less_of_an_entry = any(
                candidate.features.get(f, 0.0) < best.features.get(f, 0.0) for f in _ENTRY_FEATURES
            )
            if less_of_an_entry and not _reads_on(best, candidate):
                continue  # the entry of the thing asked about answers; a mention elsewhere does not
            ref = candidate.evidence.ref_id
            if ref not in refs and len(refs) >= config.max_passages:
                continue
            # The same sentence in two passages, or one already quoted with its pronoun follower.
            if any(candidate.text in c.text or c.text in candidate.text for c in chosen):
                continue
            chosen.append(candidate)
            refs.add(ref)

        # Read in passage order of first appearance, sentences of one passage in text order.
        first_seen: dict[str, int] = {}
        for c in chosen:
            first_seen.setdefault(c.evidence.ref_id, len(first_seen))
        chosen.sort(key=lambda c: (first_seen[c.evidence.ref_id], c.position))
        # Every sentence carries its marker, an antecedent quoted with its pronoun sentence too.
        answer = " ".join(f"{part} [{c.evidence.number}]" for c in chosen for part in c.parts or (c.text,))
        return Draft(
            answer=answer,
            used_refs=tuple(first_seen),
            support=tuple((c.text, (c.evidence.ref_id,)) for c in chosen),
            support_score=support,
            model=self.name,
            diagnostics=diagnostics,
        )
