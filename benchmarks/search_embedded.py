"""Benchmark of the embedded search index (not a test).

Builds an index of N synthetic chunks (English-like text drawn from a Zipf-distributed vocabulary,
random L2-normalised vectors, spread over 10 knowledge bases), then reports build time, close and
reopen times (with the dense cache and with a full rebuild from tantivy), per-document upsert
latency, and p50/p95 latency of lexical, dense and hybrid searches with a single-kb filter.

    PYTHONPATH=layers .venv/bin/python benchmarks/search_embedded.py --n 100000
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np

from citegate.knowledge.search.base import ChunkRecord, SearchFilter, SearchMode
from citegate.knowledge.search.embedded import EmbeddedSearchIndex

_COMMON_WORDS = """
the of and to in is for on that with as are by this be from or it an at which can not you your if all
will when use using used data file files system set value values default new each one more must should
may also only other than then into how what time first most see run runs running configure configuration
server client request response error errors support version install installation update memory table
index query search results user users access policy network service services model models document
documents page pages build test tests key keys
"""
COMMON = _COMMON_WORDS.split()


def vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    """Common words first (most frequent), then pronounceable made-up technical terms."""
    syllables = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
    words = list(COMMON)
    seen = set(words)
    while len(words) < size:
        word = "".join(rng.choice(syllables, size=int(rng.integers(2, 5))))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


class TextSource:
    def __init__(self, rng: np.random.Generator, size: int = 20_000) -> None:
        self.rng = rng
        self.words = np.array(vocabulary(rng, size))
        weights = 1.0 / np.arange(1, size + 1) ** 1.05  # Zipf-like
        self.cdf = np.cumsum(weights / weights.sum())

    def sample(self, count: int) -> list[str]:
        ranks = np.minimum(np.searchsorted(self.cdf, self.rng.random(count)), len(self.words) - 1)
        return [str(w) for w in self.words[ranks]]

    def sentence_text(self, words: int) -> str:
        tokens = self.sample(words)
        out, i = [], 0
        while i < len(tokens):
            n = int(self.rng.integers(6, 18))
            sentence = " ".join(tokens[i : i + n])
            out.append(sentence[:1].upper() + sentence[1:] + ".")
            i += n
        return " ".join(out)


def unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    m = rng.standard_normal((n, dim), dtype=np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    return m


def make_documents(
    rng: np.random.Generator, text: TextSource, n: int, dim: int, kbs: int, per_doc: int
) -> Iterator[tuple[str, str, list[ChunkRecord]]]:
    made = 0
    doc_no = 0
    while made < n:
        count = min(per_doc, n - made)
        kb_id = f"kb{doc_no % kbs}"
        document_id = f"d{doc_no}"
        project = f"proj{doc_no % 7}"
        path = f"docs/{project}/section{doc_no % 13}/page{doc_no}.md"
        title = text.sentence_text(5).rstrip(".")
        vectors = unit_vectors(rng, count, dim)
        chunks = [
            ChunkRecord(
                ref_id=f"{document_id}:{i}",
                kb_id=kb_id,
                tenant_id="tenant",
                document_id=document_id,
                parent_id=f"{document_id}:p{i // 4}",
                source_name=f"{project}/page{doc_no}.md",
                text=text.sentence_text(int(rng.integers(80, 160))),
                position=i,
                title=title,
                project=project,
                path=path,
                version="v1",
                vector=vectors[i],
            )
            for i in range(count)
        ]
        yield kb_id, document_id, chunks
        made += count
        doc_no += 1


def percentiles(samples_ms: Sequence[float]) -> str:
    ordered = sorted(samples_ms)
    p50 = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {p50:7.2f} ms   p95 {p95:7.2f} ms"


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def timed_cpu(fn: Callable[[], object], cpu: list[float]) -> float:
    """Wall milliseconds; the process's CPU milliseconds are appended to `cpu`. On a shared machine
    the CPU time is what the code costs, the wall time what the other tenants leave of it."""
    started = time.process_time()
    wall = timed(fn)
    cpu.append((time.process_time() - started) * 1000)
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=100_000, help="number of chunks")
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--kbs", type=int, default=10)
    parser.add_argument("--per-doc", type=int, default=20, help="chunks per document")
    parser.add_argument("--batch", type=int, default=100, help="documents per commit while building")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--dir", type=Path, default=None, help="index directory (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the index directory")
    args = parser.parse_args()

    rng = np.random.default_rng(42)
    text = TextSource(rng)
    directory = args.dir or Path(tempfile.mkdtemp(prefix="citegate-bench-"))
    print(f"index in {directory}; n={args.n} dim={args.dim} kbs={args.kbs} per_doc={args.per_doc}")

    index = EmbeddedSearchIndex(directory, args.dim)
    started = time.perf_counter()
    batch: list[tuple[str, str, list[ChunkRecord]]] = []
    samples: list[ChunkRecord] = []
    for document in make_documents(rng, text, args.n, args.dim, args.kbs, args.per_doc):
        batch.append(document)
        if rng.random() < 0.05:
            samples.append(document[2][0])
        if len(batch) >= args.batch:
            index.upsert_documents(batch)
            batch = []
    if batch:
        index.upsert_documents(batch)
    build_s = time.perf_counter() - started
    print(f"build ({args.batch} documents per commit): {build_s:.1f} s, {args.n / build_s:,.0f} chunks/s")

    # Incremental ingestion: one commit per document, like the ingestion pipeline does.
    upserts = []
    extra = make_documents(rng, text, 50 * args.per_doc, args.dim, args.kbs, args.per_doc)
    for kb_id, document_id, chunks in extra:
        renamed = [replace(c, document_id="x" + document_id, ref_id="x" + c.ref_id) for c in chunks]
        upserts.append(timed(partial(index.upsert_document, kb_id, "x" + document_id, renamed)))
    print(f"upsert_document ({args.per_doc} chunks, one commit each): {percentiles(upserts)}")

    close_ms = timed(index.close)
    print(f"close (merges + dense cache): {close_ms / 1000:.2f} s")
    size = sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())
    print(f"on disk: {size / 1e6:,.0f} MB")

    started = time.perf_counter()
    index = EmbeddedSearchIndex(directory, args.dim)
    print(f"reopen with dense cache: {time.perf_counter() - started:.2f} s {index.open_stats}")
    index.close()
    started = time.perf_counter()
    index = EmbeddedSearchIndex(directory, args.dim, use_dense_cache=False)
    print(f"reopen rebuilding dense from tantivy: {time.perf_counter() - started:.2f} s {index.open_stats}")

    # Queries: a few words of a real chunk, and a vector near that chunk's.
    queries = []
    for i in range(args.queries):
        chunk = samples[i % len(samples)]
        words = chunk.text.replace(".", "").split()
        start = int(rng.integers(0, max(1, len(words) - 6)))
        query = " ".join(words[start : start + int(rng.integers(2, 7))])
        assert chunk.vector is not None
        vector = chunk.vector + 0.05 * unit_vectors(rng, 1, args.dim)[0]
        vector /= np.linalg.norm(vector)
        queries.append((query, vector.astype(np.float32), SearchFilter(kb_ids=frozenset({chunk.kb_id}))))

    modes: tuple[SearchMode, ...] = ("lexical", "dense", "hybrid")
    for mode in modes:  # warm-up
        for query, vector, flt in queries[:10]:
            index.search(query=query, vector=vector, filter=flt, limit=args.limit, mode=mode)
    for mode in modes:
        cpu: list[float] = []
        latencies = [
            timed_cpu(partial(index.search, query=q, vector=v, filter=f, limit=args.limit, mode=mode), cpu)
            for q, v, f in queries
        ]
        print(
            f"search {mode:8s} (1 kb of {args.kbs}, limit {args.limit}): {percentiles(latencies)}"
            f"   cpu {percentiles(cpu)}"
        )
    scoped = [(q, v, SearchFilter(kb_ids=f.kb_ids, path_prefixes=("docs/proj3/",))) for q, v, f in queries]
    cpu = []
    latencies = [
        timed_cpu(partial(index.search, query=q, vector=v, filter=f, limit=args.limit), cpu)
        for q, v, f in scoped
    ]
    print(f"search hybrid   + path prefix filter:          {percentiles(latencies)}   cpu {percentiles(cpu)}")
    print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}")
    index.close()
    if not args.keep and args.dir is None:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
