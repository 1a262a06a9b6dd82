"""`score`: one absolute scale for every query, fusion method, engine and fallback.

An engine's own scores cannot be compared across queries: min-max fusion puts the best hit of any
query at 1.0 (a query about tea in a knowledge base without tea scored 1.0), RRF depends only on
ranks, BM25 grows with the query's length and with the rarity of its terms in this corpus (the same
match scores lower in a knowledge base of 5 documents than in one of 5,000: its IDF is smaller). So
the score a caller sees, and `score_threshold` filters on, is an estimate of the chance that the
chunk is relevant, from evidence that means the same in every query and knowledge base:

    cosine    the query embedding's cosine with the chunk's (the dense side's own score)
    coverage  the share of the query's content terms found in the chunk (its title, heading and
              text), with the index's analysis (stemming; Chinese terms as substrings); question
              words and stopwords are not content: "Who maintains kunora?" needs "maintain", "kunora"
    score     = 1 / (1 + exp(-(bias + w_cosine * cosine + w_coverage * coverage)))

a logistic model fitted on the dev splits of the three evaluation sets (benchmarks/data; label:
the chunk belongs to a gold passage; SQuAD 2.0's unanswerable questions contribute rows that are
all negative), per embedding model because each model spreads cosines its own way. Without a
cosine (the embedder failed and BM25 answered alone, or an embedding model nobody calibrated, whose
cosines are not read) the model fitted on the same rows with coverage alone applies: the same
scale from less evidence. In a hybrid search a hit the dense side did not return gets the lowest
cosine that side returned (its own is at most that).

The order of the hits stays the fusion's, which ranks better than this estimate (it has BM25, whose
scale is relative but whose order is informative): SciFact dev nDCG@10 .656 against .57 when ordered
by the estimate. So the order is the best ranking measured and the score the calibrated chance of
relevance; a later hit can score above an earlier one, and `score_threshold` drops every hit below
it wherever it is in the list.

Fit: `.venv/bin/python benchmarks/tune_relevance.py --embedder use` prints the coefficients below,
the nDCG@10 of the fusion's order beside the estimate's, and the threshold table on dev from which
`DEFAULT_THRESHOLD` was chosen. multilingual-e5-small is not calibrated yet (the fit needs its
vectors of the three corpora, hours of embedding on the 2-core machine it was measured on).
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from citegate.knowledge.search.analysis import _CJK, _CJK_RUN, STOPWORDS, index_terms, tokenize
from citegate.knowledge.search.analysis import query_terms as engine_query_terms

if TYPE_CHECKING:
    from citegate.knowledge.search.base import ChunkRecord, Hit

# Words that ask rather than say: never evidence that a passage is about the question.
QUESTION_WORDS = frozenset(
    {"what", "which", "who", "whom", "whose", "when", "where", "why", "how", "do", "does", "did"}
    | {"can", "could", "should", "would", "may", "might", "has", "have", "had", "were", "been"}
    | {"many", "much", "long", "i", "you", "we", "my", "your", "its", "from", "about", "any"}
    | {"什么", "哪", "哪里", "哪个", "哪些", "哪一", "谁", "多少", "几", "吗", "呢", "如何", "怎么"}
    | {"怎样", "为什么", "是否", "多长", "多久", "多大", "何时", "有", "被", "为", "由", "中", "上"}
)


_LATIN_WORD = re.compile(f"[^\\W{_CJK}]+")


def query_terms(query: str) -> tuple[str, ...]:
    """The query's content terms, spelled as the index spells them (stemmed, lowercased).

    Falls back to the engine's query terms when the query holds nothing else ("who is it?")."""
    content = [t for t in tokenize(query) if t not in STOPWORDS and t not in QUESTION_WORDS]
    terms = tuple(dict.fromkeys(index_terms(" ".join(content)))) if content else ()
    return terms or tuple(engine_query_terms(query))


def coverage(terms: Sequence[str], chunk: ChunkRecord) -> float:
    """Share of `terms` found in the chunk's title, heading and text (0 when there are no terms).

    Chinese terms are looked up as substrings (no segmentation of the chunk: jieba would cost about
    a millisecond a chunk, and a word is in a text exactly when its characters are); the others
    as stemmed words, like the index."""
    if not terms:
        return 0.0
    text = f"{chunk.title}\n{chunk.heading}\n{chunk.text}"
    text = text.lower() if text.isascii() else unicodedata.normalize("NFKC", text).lower()
    chinese = [t for t in terms if _CJK_RUN.search(t)]
    found = sum(term in text for term in chinese)
    if len(chinese) < len(terms):
        stems = {_stem(word) for word in set(_LATIN_WORD.findall(text))}
        found += sum(term in stems for term in terms if not _CJK_RUN.search(term))
    return found / len(terms)


@functools.lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    """A word as the index spells it (words repeat across chunks: each is stemmed once)."""
    analysed = index_terms(word)
    return analysed[0] if analysed else ""


@dataclass(frozen=True)
class Features:
    """The evidence for one hit; `cosine` is None where no dense side ran (or it is not calibrated)."""

    cosine: float | None
    coverage: float


@dataclass(frozen=True)
class Logistic:
    """`bias + sum(weight * feature)` through the logistic function, features named in `uses`."""

    uses: tuple[str, ...]
    bias: float
    weights: tuple[float, ...]

    def __call__(self, features: Features) -> float:
        logit = self.bias + sum(
            w * float(getattr(features, name)) for name, w in zip(self.uses, self.weights, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, logit))))


@dataclass(frozen=True)
class RelevanceModel:
    """One fit per embedding model: with the cosine, and without it (fitted on the same dev rows
    without that feature, so both estimate the same thing from less or more evidence)."""

    full: Logistic  # cosine, coverage
    without_cosine: Logistic  # coverage: BM25 answered alone, or the embedding model is uncalibrated

    def estimate(self, features: Features) -> float:
        return self.full(features) if features.cosine is not None else self.without_cosine(features)


# Fitted by `benchmarks/tune_relevance.py --embedder use` on the dev splits (module docstring).
MODELS: dict[str, RelevanceModel] = {
    "use-multilingual-v3": RelevanceModel(
        full=Logistic(("cosine", "coverage"), -7.3816, (5.3859, 5.6264)),
        without_cosine=Logistic(("coverage",), -5.8937, (6.3117,)),
    ),
}
# The `score_threshold` to start from (spec 004 leaves it to the caller), chosen on dev.
DEFAULT_THRESHOLD = 0.1


def model_for(model_id: str | None) -> tuple[RelevanceModel | None, bool]:
    """The model for an embedding model, and whether its cosines are calibrated. An uncalibrated
    model's cosines are not read: the coverage part of the USE fit still applies."""
    model = MODELS.get(model_id or "")
    if model is not None:
        return model, True
    return MODELS.get("use-multilingual-v3"), False


def describe(model_id: str | None, *, dense: bool) -> dict[str, object]:
    """What `score` was computed from, for `stats.score` in retrieval responses (`dense`: the
    dense side ran, so hits have cosines)."""
    _, calibrated = model_for(model_id)
    return {
        "scale": "relevance",
        "calibrated_for": model_id if calibrated else None,
        "evidence": ["cosine", "coverage"] if calibrated and dense else ["coverage"],
    }


def rescore(
    query: str, hits: Iterable[Hit], model_id: str | None, *, dense_floor: float | None = None
) -> list[Hit]:
    """`hits`, in the engine's order, with `score` = the relevance estimate; the engine's own
    score moves to `fused_score`.

    `dense_floor` is the lowest cosine the dense side returned in a hybrid search (None when no
    dense side ran): a hit that side did not return has a cosine of at most that."""
    model, calibrated = model_for(model_id)
    terms = query_terms(query)
    out = []
    for hit in hits:
        cosine = hit.dense_score if hit.dense_score is not None else dense_floor
        features = Features(cosine=cosine if calibrated else None, coverage=coverage(terms, hit.chunk))
        score = model.estimate(features) if model is not None else features.coverage
        out.append(
            replace(
                hit,
                score=round(score, 6),
                fused_score=hit.score if hit.fused_score is None else hit.fused_score,
                coverage=round(features.coverage, 4),
            )
        )
    return out
