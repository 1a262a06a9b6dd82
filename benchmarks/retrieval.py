"""Retrieve and ask latency at 10k and 100k chunks (a benchmark: it prints figures, asserts nothing).

For each size it starts the local stack in-process on a temporary data root, indexes synthetic
chunks (Zipf-distributed English-like text, random unit vectors, parents in DynamoDB), and
measures, with the real query embedder:
  - retrieve in-process (query embedding included),
  - ask in-process (retrieve + parents + the configured answerer),
  - retrieve and ask through the local HTTP gateway (uvicorn on loopback, httpx client), and
    retrieve from 16 concurrent clients (throughput and latency percentiles). The gateway adds what every
    governed call pays: the authorizer, the policy check, the rate limits (spent from leases; claims
    grow to 50 calls at the run's limits) and the audit record (DynamoDB on the embedded
    endpoint). The per-IP limit is raised for the run, since one address sends everything.

Every concurrent request must get its own answer back: one chunk per request carries a unique probe
word (planted in the index; the chunk count is unchanged), the request asks a few words of that
chunk (drawn like the other queries) plus that word, and its answer must hold that chunk (by
ref_id). An answer without it is misrouted, and counted apart when it holds another request's
probe; an error whose body names a requestId other than its `apigw-requestid` header is misrouted
too. Throughput is reported beside it.

    make bench                                   # both sizes, default embedder
    uv run python benchmarks/retrieval.py --sizes 10000 --embedder e5
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from provenance import stamp
from search_embedded import TextSource

CHUNKS_PER_DOC = 20
CHILDREN_PER_PARENT = 5


CONCURRENT_CLIENTS = 16
REQUESTS_PER_CLIENT = 25
PROBES = CONCURRENT_CLIENTS * REQUESTS_PER_CLIENT  # one planted chunk per concurrent request
_PROBE_LETTERS = "bdfgjklmnprstvz"  # with q and x below: no vocabulary word looks like a probe
PROBE = re.compile(r"qx[a-z]{4}xq")


def probe_word(n: int) -> str:
    """A word no synthetic text holds (the vocabulary has no q or x): the n-th request's marker."""
    letters = []
    for _ in range(4):
        n, i = divmod(n, len(_PROBE_LETTERS))
        letters.append(_PROBE_LETTERS[i])
    return "qx" + "".join(letters) + "xq"


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
        "p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))], 2),
        "mean_ms": round(statistics.fmean(ordered), 2),
    }


def timed(fn: Any, queries: list[str]) -> list[float]:
    out = []
    for q in queries:
        started = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - started) * 1000)
    return out


def build(
    s: Any, kb_id: str, size: int, rng: np.random.Generator
) -> tuple[list[str], list[tuple[str, str, str]], float]:
    """The index, the queries, and (query, probe word, ref_id) for each planted probe chunk."""
    from citegate.knowledge.schemas.kb import KnowledgeBase
    from citegate.knowledge.search.base import ChunkRecord

    now = "2026-01-01T00:00:00Z"
    s.kbs.create(KnowledgeBase(kb_id=kb_id, tenant_id="default", name=kb_id, created_at=now, updated_at=now))
    text = TextSource(rng)
    dim = s.embedder.dimension
    started = time.perf_counter()
    queries: list[str] = []
    probes: list[tuple[str, str, str]] = []
    docs = size // CHUNKS_PER_DOC
    # Probes go to the first chunk of evenly spread documents; the texts are otherwise the same.
    probe_docs = {d * docs // PROBES for d in range(PROBES)} if docs >= PROBES else set()
    batch: list[tuple[str, str, list[Any]]] = []
    table = s.parents._table
    with table.batch_writer() as parents:
        for d in range(docs):
            doc = f"d_{d:08x}"
            chunks = []
            parent_texts: dict[int, list[str]] = {}
            vectors = rng.standard_normal((CHUNKS_PER_DOC, dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            for c in range(CHUNKS_PER_DOC):
                words = text.sample(80)
                body = " ".join(words).capitalize() + "."
                if c == 0 and d in probe_docs:
                    # The probe's query is drawn like the others (a few words of one chunk, here of
                    # the probe's own), by its own generator so the rest of the run is unchanged.
                    word, pick = probe_word(len(probes)), random.Random(d)
                    start = pick.randrange(0, 70)
                    window = " ".join(words[start : start + pick.randrange(3, 8)])
                    body = f"{body} {word.capitalize()}."
                    probes.append((f"{window} {word}", word, f"r_{d:08x}{c:04x}"))
                p = c // CHILDREN_PER_PARENT
                parent_texts.setdefault(p, []).append(body)
                chunks.append(
                    ChunkRecord(
                        ref_id=f"r_{d:08x}{c:04x}",
                        kb_id=kb_id,
                        tenant_id="default",
                        document_id=doc,
                        parent_id=f"{doc}:p{p}",
                        source_name=f"doc-{d}.md",
                        text=body,
                        position=c,
                        title=f"Document {d}",
                        vector=vectors[c],
                    )
                )
                if len(queries) < 200 and rng.random() < 0.05:
                    start = int(rng.integers(0, 70))
                    queries.append(" ".join(words[start : start + int(rng.integers(3, 8))]))
            for p, texts in parent_texts.items():
                parents.put_item(
                    Item={
                        "doc_key": f"{kb_id}#{doc}",
                        "parent_id": f"{doc}:p{p}",
                        "text": " ".join(texts),
                        "kb_id": kb_id,
                        "document_id": doc,
                    }
                )
            batch.append((kb_id, doc, chunks))
            if len(batch) == 100:
                s.index.upsert_documents(batch)
                batch = []
    if batch:
        s.index.upsert_documents(batch)
    return queries, probes, time.perf_counter() - started


def serve_in_thread(port: int) -> Any:
    import uvicorn

    from citegate.runtime.gateway import create_app

    server = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    return server


def concurrent_clients(
    base_url: str, path: str, queries: list[str], probes: list[tuple[str, str, str]], clients: int
) -> dict[str, Any]:
    """`clients` threads, each with its own connection, send REQUESTS_PER_CLIENT retrieves back to
    back, all starting together: throughput over the whole burst and the latency each request saw.

    Each request asks for its own probe chunk (a few of its words plus its probe word); its answer
    must hold that chunk (ref_id), or it is counted misrouted (belonging to another request when it
    holds another probe). Without probes (an index too small for them) nothing is checked."""
    import httpx

    latencies: list[float] = []
    failures: list[int] = []
    misrouted: list[str] = []
    foreign: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(clients + 1)

    def check(response: Any, own: tuple[str, str, str] | None) -> tuple[str, bool] | None:
        """Why this answer is not its request's own, and whether it is another's; None when it is."""
        header = response.headers.get("apigw-requestid")
        try:
            body = response.json()
        except ValueError:
            return None
        named = body.get("requestId") if isinstance(body, dict) else None
        if named and named != header:
            return f"body requestId {named} != header {header}", True
        if own is None or response.status_code != 200:
            return None
        _, word, ref = own
        results = body.get("results") or []
        if any(hit.get("ref_id") == ref for hit in results):
            return None
        others = sorted(
            {m for hit in results for m in PROBE.findall(hit.get("chunk_text", "").lower())} - {word}
        )
        why = f"query with {word}: {ref} not among {len(results)} hits"
        return (f"{why}, which hold {others}", True) if others else (why, False)

    def client_loop(offset: int) -> None:
        # Each request's text is new (its probe word, or its offset), so none is served from the
        # query-embedding cache.
        mine = []
        for i in range(REQUESTS_PER_CLIENT):
            n = offset * REQUESTS_PER_CLIENT + i
            own = probes[n] if n < len(probes) else None
            query = own[0] if own else f"{queries[(offset + i * clients) % len(queries)]} {offset}-{i}"
            mine.append((query, own))
        with httpx.Client(base_url=base_url, headers={"Authorization": "Bearer bench"}, timeout=60) as client:
            start.wait()
            for q, own in mine:
                began = time.perf_counter()
                response = client.post(path, json={"query": q})
                elapsed = (time.perf_counter() - began) * 1000
                verdict = check(response, own)
                with lock:
                    latencies.append(elapsed)
                    if response.status_code != 200:
                        failures.append(response.status_code)
                    if verdict:
                        misrouted.append(verdict[0])
                        foreign.append(verdict[1])

    threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    return {
        "clients": clients,
        "requests": len(latencies),
        "failed": len(failures),
        "failed_statuses": sorted(set(failures)),
        "checked": min(len(latencies), len(probes)),
        "misrouted": len(misrouted),
        "misrouted_foreign": sum(foreign),
        "misrouted_examples": misrouted[:5],
        "throughput_rps": round(len(latencies) / wall, 1),
        **percentiles(latencies),
    }


def run(size: int, embedder: str, clients: int = CONCURRENT_CLIENTS) -> dict[str, Any]:
    import httpx

    from citegate.answers.ask import ask
    from citegate.knowledge.retrieval import Scope, retrieve
    from citegate.platform.settings import get_settings, reset_settings
    from citegate.runtime.aws_endpoint import free_port
    from citegate.runtime.stack import LocalStack

    with tempfile.TemporaryDirectory(prefix="citegate-bench-") as root:
        os.environ.update(
            {
                "RAG_DATA_ROOT": root,
                "CITEGATE_EMBEDDER": embedder,
                "RAG_API_TOKEN": "bench",
                "CITEGATE_IP_RATE_LIMIT": "1000000",
            }
        )
        reset_settings()
        stack = LocalStack(get_settings(), persist=False, poll=False).start()
        try:
            s = stack.services
            assert s is not None
            rng = np.random.default_rng(size)
            kb_id = f"bench-{size}"
            queries, probes, build_s = build(s, kb_id, size, rng)
            scope = Scope(frozenset({kb_id}))
            # Warm-up (model load, index caches) on other texts: the timed queries are embedded, not
            # served from the query-embedding cache.
            for q in queries[:10]:
                retrieve(s, scope, f"warm {q}")
                ask(s, scope, f"warm {q}")
            result: dict[str, Any] = {
                **stamp(),
                "chunks": size,
                "embedder": embedder,
                "build_s": round(build_s, 1),
                "queries": len(queries),
            }
            parts: dict[str, list[float]] = {}

            def retrieve_recording(q: str) -> None:
                started = time.process_time()
                timings = retrieve(s, scope, q).stats["timings_ms"]
                # CPU time of the whole process: what retrieve costs, whatever else runs on the machine
                parts.setdefault("cpu_ms", []).append((time.process_time() - started) * 1000)
                for name in ("embed_ms", "engine_lexical", "engine_dense", "engine_fusion", "engine_fetch"):
                    parts.setdefault(name, []).append(float(timings.get(name, 0.0)))

            result["retrieve_in_process"] = percentiles(timed(retrieve_recording, queries))
            # The engine's own times beside the whole: query embedding, BM25, vector search, ...
            result["retrieve_parts"] = {name: percentiles(samples) for name, samples in parts.items()}
            result["load_average"] = Path("/proc/loadavg").read_text().split()[:3]
            # Each phase asks the same queries with different trailing punctuation: the same words
            # for BM25, but new texts for the query-embedding cache, so every phase embeds afresh.
            result["ask_in_process"] = percentiles(
                timed(lambda q: ask(s, scope, q), [f"{q}?" for q in queries])
            )
            port = free_port()
            server = serve_in_thread(port)
            try:
                with httpx.Client(
                    base_url=f"http://127.0.0.1:{port}", headers={"Authorization": "Bearer bench"}
                ) as client:
                    for q in queries[:10]:
                        client.post(
                            f"/v1/kb/{kb_id}/retrieve", json={"query": f"warm {q}"}
                        ).raise_for_status()
                    for name, route, field, mark in (
                        ("retrieve_http", "retrieve", "query", "."),
                        ("ask_http", "ask", "question", "!"),
                    ):
                        result[name] = percentiles(
                            timed(
                                lambda q, route=route, field=field: client.post(
                                    f"/v1/kb/{kb_id}/{route}", json={field: q}
                                ).raise_for_status(),
                                [f"{q}{mark}" for q in queries],
                            )
                        )
                result["retrieve_http_overhead"] = {
                    key: round(result["retrieve_http"][key] - result["retrieve_in_process"][key], 2)
                    for key in ("p50_ms", "p95_ms", "p99_ms")
                }
                result["retrieve_http_concurrent"] = concurrent_clients(
                    f"http://127.0.0.1:{port}", f"/v1/kb/{kb_id}/retrieve", queries, probes, clients
                )
                result["load_average_end"] = Path("/proc/loadavg").read_text().split()[:3]
            finally:
                server.should_exit = True
            return result
        finally:
            stack.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--embedder", default=os.environ.get("CITEGATE_EMBEDDER", "use"))
    parser.add_argument("--out", type=Path, default=Path("bench-results/retrieval.json"))
    parser.add_argument("--clients", type=int, default=CONCURRENT_CLIENTS, help="concurrent clients")
    args = parser.parse_args()
    results = [run(size, args.embedder, args.clients) for size in args.sizes]
    columns = ("retrieve_in_process", "retrieve_http", "ask_in_process", "ask_http")
    print(f"\n{'chunks':>8} {'embedder':>9} | " + " | ".join(f"{c + ' p50/p95/p99':>27}" for c in columns))
    for r in results:
        cells = [f"{r[c]['p50_ms']:.1f}/{r[c]['p95_ms']:.1f}/{r[c]['p99_ms']:.1f} ms" for c in columns]
        print(f"{r['chunks']:>8} {r['embedder']:>9} | " + " | ".join(f"{cell:>27}" for cell in cells))
        parts = ", ".join(f"{k} {v['p50_ms']:.1f}/{v['p95_ms']:.1f}" for k, v in r["retrieve_parts"].items())
        print(f"{'':>20}retrieve parts p50/p95 ms: {parts} (load average {' '.join(r['load_average'])})")
        over, many = r["retrieve_http_overhead"], r["retrieve_http_concurrent"]
        print(
            f"{'':>20}gateway overhead p50/p95/p99: {over['p50_ms']:.1f} / {over['p95_ms']:.1f} / "
            f"{over['p99_ms']:.1f} ms; {many['clients']} concurrent clients: {many['throughput_rps']} req/s, "
            f"p50/p95/p99 {many['p50_ms']:.1f} / {many['p95_ms']:.1f} / {many['p99_ms']:.1f} ms, "
            f"{many['failed']} failed, {many['misrouted']} of {many['checked']} checked answers misrouted "
            f"({many['misrouted_foreign']} held another request's) "
            f"(load average at end {' '.join(r['load_average_end'])})"
        )
        for example in many["misrouted_examples"]:
            print(f"{'':>24}misrouted: {example}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"\nsaved {args.out}")


if __name__ == "__main__":
    main()
