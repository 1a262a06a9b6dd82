"""The pipelines a user would otherwise assemble, run on the same children, vectors and queries.

- "langchain-ensemble": LangChain's EnsembleRetriever (weighted reciprocal rank fusion, c=60,
  equal weights: its defaults) over a BM25Retriever and an InMemoryVectorStore retriever, each
  asked for 100 children. The vector store holds the very vectors citegate indexed (from the
  embedding cache) and embeds queries with the same embedder.
- "rank-bm25-children": rank_bm25's BM25Okapi (k1=1.5, b=0.75: its defaults) on the same children.
- "rank-bm25-documents": BM25Okapi on whole corpus documents (title and text), the plainest
  pipeline: no chunking, no vectors.
Both BM25 peers get one plain tokenizer (lowercase word characters; jieba for runs of Chinese),
kinder than LangChain's default whitespace split, which finds nothing in unsegmented Chinese.
Only this benchmark imports these packages (dependency group `bench`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from citegate.knowledge.embedding.base import Embedder

_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+|[^\W_]+")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
TOP_K = 100


def tokenize(text: str) -> list[str]:
    import jieba

    tokens: list[str] = []
    for run in _CJK_RUN.findall(text.lower()):
        if _CJK.match(run):
            tokens.extend(t for t in jieba.lcut(run) if t.strip())
        else:
            tokens.append(run)
    return tokens


@dataclass
class Peer:
    """A retriever: query -> (corpus id, score) best first, and the seconds its index took to build."""

    name: str
    search: Callable[[str], list[tuple[str, float]]]
    build_s: float


class _StoredEmbeddings(Embeddings):
    """LangChain Embeddings over vectors already computed: documents from the cache, queries live.

    Rows are handed over as float32 numpy arrays, the fastest form InMemoryVectorStore accepts
    (it stacks them on every search); a list of Python floats would make its search slower still.
    """

    def __init__(self, embedder: Embedder, vectors: dict[str, np.ndarray]) -> None:
        self._embedder = embedder
        self._vectors = vectors

    def embed_documents(self, texts: list[str]) -> list[Any]:
        return [self._vectors[t] for t in texts]

    def embed_query(self, text: str) -> Any:
        return np.asarray(self._embedder.embed_query(text), dtype=np.float32)


def langchain_ensemble(children: Sequence[tuple[str, str, np.ndarray]], embedder: Embedder) -> Peer:
    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_community.retrievers import BM25Retriever
    from langchain_core.vectorstores import InMemoryVectorStore

    started = time.perf_counter()
    texts = [text for _, text, _ in children]
    metadatas = [{"doc": cid, "child": str(i)} for i, (cid, _, _) in enumerate(children)]
    bm25 = BM25Retriever.from_texts(texts, metadatas=metadatas, preprocess_func=tokenize, k=TOP_K)
    embeddings = _StoredEmbeddings(embedder, {text: vector for _, text, vector in children})
    store = InMemoryVectorStore(embedding=embeddings)
    store.add_texts(texts, metadatas=metadatas, ids=[m["child"] for m in metadatas])
    dense = store.as_retriever(search_kwargs={"k": TOP_K})
    # id_key: children of different documents may share a text; fuse by child, not by text.
    ensemble = EnsembleRetriever(retrievers=[bm25, dense], weights=[0.5, 0.5], id_key="child")
    build_s = time.perf_counter() - started

    def search(query: str) -> list[tuple[str, float]]:
        docs = ensemble.invoke(query)
        # The fused scores are not returned, only the order: score by rank.
        return [(str(d.metadata["doc"]), -float(rank)) for rank, d in enumerate(docs)]

    return Peer("langchain-ensemble", search, build_s)


def rank_bm25(name: str, units: Sequence[tuple[str, str]]) -> Peer:
    """BM25Okapi over (corpus id, text) units: children or whole documents."""
    from rank_bm25 import BM25Okapi

    started = time.perf_counter()
    ids = [cid for cid, _ in units]
    bm25 = BM25Okapi([tokenize(text) for _, text in units])
    build_s = time.perf_counter() - started

    def search(query: str) -> list[tuple[str, float]]:
        scores = np.asarray(bm25.get_scores(tokenize(query)))
        k = min(TOP_K, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(ids[i], float(scores[i])) for i in top]

    return Peer(name, search, build_s)
