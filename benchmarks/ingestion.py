"""Ingestion throughput end to end, against the embedder alone (a benchmark: prints, asserts nothing).

Ingests the first N SciFact abstracts through the real path (HTTP gateway -> S3 -> SQS -> Step
Functions -> parse, chunk, embed, index, finalize) on the in-process local stack, then embeds the
same children with a fresh embedder alone, and prints chunks per second for both and their ratio.
A second pass re-ingests the same documents to show what the embedding cache saves.

    uv run python benchmarks/ingestion.py --docs 1000
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact" / "corpus.jsonl"


def ingest_all(client: Any, kb: str, docs: list[dict[str, str]]) -> tuple[float, int, int]:
    started = time.perf_counter()
    task_ids = []
    for doc in docs:
        body = {
            "text": f"# {doc['title']}\n\n{doc['text']}",
            "source_name": f"{doc['id']}.md",
            "title": doc["title"],
        }
        response = client.post(f"/v1/kb/{kb}/documents", json=body)
        response.raise_for_status()
        task_ids.append(response.json()["task_id"])
    children = failed = 0
    for task_id in task_ids:
        while True:
            task = client.get(f"/v1/tasks/{task_id}").json()
            if task["status"] in ("succeeded", "failed"):
                break
            time.sleep(0.05)
        children += task["counts"]["children"]
        failed += task["status"] == "failed"
    return time.perf_counter() - started, children, failed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--embedder", default=os.environ.get("CITEGATE_EMBEDDER", "use"))
    parser.add_argument("--out", type=Path, default=Path("bench-results/ingestion.json"))
    args = parser.parse_args()

    from starlette.testclient import TestClient

    from citegate.embedding import build_embedder
    from citegate.local.gateway import create_app
    from citegate.local.stack import LocalStack
    from citegate.settings import get_settings, reset_settings

    docs = [json.loads(line) for line in DATA.read_text().splitlines()[: args.docs]]
    with tempfile.TemporaryDirectory(prefix="citegate-ingest-bench-") as root:
        os.environ.update(
            {"RAG_DATA_ROOT": root, "CITEGATE_EMBEDDER": args.embedder, "RAG_API_TOKEN": "bench"}
        )
        reset_settings()
        stack = LocalStack(get_settings(), persist=True).start()
        try:
            assert stack.services is not None
            stack.services.embedder.embed_documents(["warm up the model"])
            with TestClient(create_app(), headers={"Authorization": "Bearer bench"}) as client:
                client.post("/v1/kb", json={"kb_id": "bench", "name": "bench"}).raise_for_status()
                seconds, children, failed = ingest_all(client, "bench", docs)
                again_seconds, _, _ = ingest_all(client, "bench", docs)
            texts = [
                c.text for c in stack.services.index.get_chunks(_ref_ids(stack.services, "bench")).values()
            ]
        finally:
            stack.stop()

    embedder = build_embedder(args.embedder)
    embedder.embed_documents(["warm up the model"])
    started = time.perf_counter()
    embedder.embed_documents(texts)
    embed_seconds = time.perf_counter() - started

    result = {
        "documents": len(docs),
        "children": children,
        "failed": failed,
        "embedder": args.embedder,
        "end_to_end_s": round(seconds, 1),
        "end_to_end_chunks_per_s": round(children / seconds, 1),
        "embedder_alone_chunks_per_s": round(len(texts) / embed_seconds, 1),
        "ratio": round((children / seconds) / (len(texts) / embed_seconds), 3),
        "reingest_unchanged_s": round(again_seconds, 1),
    }
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


def _ref_ids(s: Any, kb: str) -> list[str]:
    from citegate.search.base import SearchFilter

    hits = s.index.search(
        query="the", vector=None, filter=SearchFilter(frozenset({kb})), limit=100000, mode="lexical"
    )
    return [h.chunk.ref_id for h in hits.hits]


if __name__ == "__main__":
    main()
