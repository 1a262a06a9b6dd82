"""Ingest a corpus into its own knowledge base through citegate's real ingestion code, in-process.

The local stack (embedded AWS: S3, DynamoDB, SQS) runs in this process without its queue poller.
Each corpus passage is submitted as a Markdown document with `IngestionService.submit` (validation,
raw object in S3, task and document records, message on the ingestion queue). The submitted tasks
are then grouped into batches, as the queue consumer groups them into one workflow execution
(citegate.knowledge.ingest.batch.BatchState), and the workflow's own step functions run on each batch in
the state machine's order: parse, (any document left?) chunk, embed, index, finalize
(citegate.knowledge.ingest.steps, the Lambda bodies). Only the transport is skipped (SQS -> consumer ->
Step Functions -> Lambda invoke); `make bench` measures that.

The steps run stage by stage (every batch parsed, then every batch chunked, ...) so that the
children of the whole corpus can be embedded at once through the on-disk cache of
benchmarks/eval_retrieval.py (same files, same ids `{corpus id}:{child index}`, so the two
scripts share vectors); the `embed` step then gets an embedder that serves those vectors. With
several embedders, `embed` and `index` run once per embedder, each into its own search index (the
service keeps one index per embedding model); the other steps run once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from benchmarks import eval_retrieval

if TYPE_CHECKING:
    from citegate.container import Services
    from citegate.knowledge.embedding.base import Embedder
    from citegate.runtime.stack import LocalStack

Vector = np.ndarray
StepEvent = dict[str, Any]
# Tasks per workflow batch. The queue consumer packs at most 50 documents into an execution
# (citegate.knowledge.ingest.consumer.pack); larger batches run the same step code with fewer calls
# to the embedded AWS endpoint and fewer index commits, and index the same chunks.
BATCH_SIZE = 100


class PrecomputedEmbedder:
    """Serves document vectors computed ahead (from the disk cache); queries go to the real model.

    A text it was not given is embedded by the real model and counted, so a run that should be
    fully cached can show it was.
    """

    def __init__(self, inner: Embedder, vectors: dict[str, Vector]) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self._vectors = vectors  # shared: filled by the caller once the cache is read
        self.hits = 0
        self.misses = 0

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in texts if t not in self._vectors]
        if missing:
            for text, vector in zip(missing, self.inner.embed_documents(missing), strict=True):
                self._vectors[text] = np.asarray(vector, dtype=np.float32)
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        rows = [self._vectors[t] for t in texts]
        return np.stack(rows) if rows else np.zeros((0, self.dimension), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)


@dataclass
class Indexed:
    """One embedder's view of an ingested set: its search index and what it cost on top."""

    services: Services
    children: list[tuple[str, str, Vector]]  # (corpus id, child text, vector), for the peers
    timings_s: dict[str, float]
    cache_before: str  # "present" or "absent": the embedding cache files before this run


@dataclass
class IngestedSet:
    """A corpus in its knowledge base, indexed once per embedder (one index per model, like the
    service); `doc_of` maps chunks back to corpus documents."""

    kb_id: str
    doc_of: dict[str, str]  # citegate document_id -> corpus id
    by_embedder: dict[str, Indexed]
    shared_timings_s: dict[str, float] = field(default_factory=dict)  # stages run once for all
    counts: dict[str, int] = field(default_factory=dict)

    def timings_for(self, kind: str) -> dict[str, float]:
        """What ingesting with this embedder alone costs: the shared stages plus its own."""
        return {**self.shared_timings_s, **self.by_embedder[kind].timings_s}

    def close(self) -> None:
        for indexed in self.by_embedder.values():
            indexed.services.close()


def start_stack(root: Path) -> LocalStack:
    """The local stack on a fresh data root, without the queue poller (the steps are called here)."""
    from citegate.platform.settings import get_settings, reset_settings
    from citegate.runtime.stack import LocalStack

    os.environ["RAG_DATA_ROOT"] = str(root)
    os.environ.setdefault("CITEGATE_STAGE", "eval")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
    reset_settings()
    return LocalStack(get_settings(), persist=False, poll=False).start()


@contextmanager
def _timer(timings: dict[str, float], name: str) -> Iterator[None]:
    started = time.perf_counter()
    yield
    timings[name] = round(time.perf_counter() - started, 2)


# Submitted tasks also go on the ingestion queue, which this harness does not consume (it batches
# the tasks itself); moto's SendMessage slows with the queue's length (3 ms more per 100 waiting
# messages), so the messages are taken off as a consumer would take them.
DRAIN_EVERY = 100


def _drain_queue(s: Services) -> None:
    sqs, url = s.aws.sqs, s.ingest_queue_url
    while True:
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
        messages = received.get("Messages")
        if not messages:
            return
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
        )


def ingest_corpus(
    stack: LocalStack,
    work: Path,
    set_name: str,
    embedders: Mapping[str, Embedder],
    corpus: Sequence[Mapping[str, Any]],
    batch_size: int = BATCH_SIZE,
) -> IngestedSet:
    """Submit every passage, then run the workflow's steps on batches of `batch_size` tasks: parse
    and chunk once, embed and index once per embedder (each into its own index), finalize once."""
    from citegate.container import Services
    from citegate.knowledge.bases import create_kb
    from citegate.knowledge.ingest import steps
    from citegate.knowledge.ingest.batch import BatchState, DocumentRef, batch_id, unstash_json
    from citegate.knowledge.schemas.documents import IngestRequest
    from citegate.knowledge.schemas.kb import CreateKbRequest
    from citegate.knowledge.search.embedded import EmbeddedSearchIndex
    from citegate.platform.principal import Principal

    assert stack.services is not None
    settings = stack.services.settings
    kb_id = f"eval-{set_name.replace('_', '-')}"
    services: dict[str, Services] = {}
    served: dict[str, dict[str, Vector]] = {}
    servings: dict[str, PrecomputedEmbedder] = {}
    for kind, embedder in embedders.items():
        index = EmbeddedSearchIndex(
            work / f"index-{set_name}-{kind}", embedder.dimension, use_dense_cache=False
        )
        served[kind] = {}
        servings[kind] = PrecomputedEmbedder(embedder, served[kind])
        services[kind] = Services(settings, aws=stack.services.aws, index=index, embedder=servings[kind])
    first = next(iter(services.values()))  # the steps before `embed` do not touch the embedder
    caller = Principal(type="service", id="evaluate", tenant_id=settings.default_tenant)
    kb = create_kb(first, CreateKbRequest(kb_id=kb_id, name=f"evaluation: {set_name}"), caller)
    shared: dict[str, float] = {}

    def each(
        s: Services, step: Callable[[Services, StepEvent], StepEvent], states: list[StepEvent]
    ) -> list[StepEvent]:
        # The state machine's AnyDocumentLeft choice: a batch with no document left skips to Finalize.
        return [step(s, state) if state.get("documents") else state for state in states]

    with _timer(shared, "submit_s"):
        refs: list[DocumentRef] = []
        doc_of: dict[str, str] = {}
        for position, row in enumerate(corpus):
            if position % DRAIN_EVERY == 0:
                _drain_queue(first)
            title = str(row.get("title") or "").strip()
            text = f"# {title}\n\n{row['text']}" if title else str(row["text"])
            request = IngestRequest(text=text, source_name=f"{row['id']}.md", title=title or None)
            accepted = first.ingestion.submit(kb, request, caller)
            refs.append(
                DocumentRef(task_id=accepted.task.task_id, kb_id=kb_id, document_id=accepted.document_id)
            )
            doc_of[accepted.document_id] = str(row["id"])
    states = [
        BatchState(batch_id=batch_id([r.task_id for r in batch]), documents=batch).dump()
        for batch in (refs[i : i + batch_size] for i in range(0, len(refs), batch_size))
    ]
    with _timer(shared, "parse_s"):
        states = each(first, steps.parse, states)
    with _timer(shared, "chunk_s"):
        chunked = each(first, steps.chunk, states)

    # Every child of the corpus, in corpus order, keyed as eval_retrieval keys its cache.
    children: list[tuple[str, str]] = []
    cache_ids: list[str] = []
    for state in chunked:
        if not state.get("documents"):
            continue
        batch = BatchState.model_validate(state)
        work_chunks = unstash_json(first, batch.chunks)
        for document in batch.documents:
            corpus_id = doc_of[document.document_id]
            for child in work_chunks[document.task_id]["children"]:
                children.append((corpus_id, child["text"]))
                cache_ids.append(f"{corpus_id}:{child['index']}")
    texts = [t for _, t in children]

    by_embedder: dict[str, Indexed] = {}
    indexed = chunked
    for kind, embedder in embedders.items():
        own: dict[str, float] = {}
        cache_dir = eval_retrieval.RESULTS / "cache"
        present = all((cache_dir / f"{set_name}-{kind}.{ext}").exists() for ext in ("npy", "json"))
        with _timer(own, "embed_or_cache_s"):
            vectors = eval_retrieval.embed_cached(set_name, kind, embedder, texts, cache_ids)
        served[kind].update(zip(texts, np.asarray(vectors, dtype=np.float32), strict=True))
        s = services[kind]
        with _timer(own, "embed_step_s"):
            embedded = each(s, steps.embed, chunked)
        with _timer(own, "index_step_s"):
            indexed = each(s, steps.index, embedded)
        if (misses := servings[kind].misses) > 0:
            raise RuntimeError(f"{misses} children were embedded outside the cache: the chunks changed")
        by_embedder[kind] = Indexed(
            services=s,
            children=[(cid, text, vec) for (cid, text), vec in zip(children, vectors, strict=True)],
            timings_s=own,
            cache_before="present" if present else "absent",
        )
    with _timer(shared, "finalize_s"):
        summaries = [steps.finalize(first, state) for state in indexed]
    failed = [f for summary in summaries for f in summary["failed"]]
    if failed:
        raise RuntimeError(f"{len(failed)} documents of {set_name} failed ingestion: {failed[:3]}")
    return IngestedSet(
        kb_id=kb_id,
        doc_of=doc_of,
        by_embedder=by_embedder,
        shared_timings_s=shared,
        counts={
            "documents": sum(len(summary["succeeded"]) for summary in summaries),
            "children": len(children),
            "indexed": first.index.count(kb_id),
            "batches": len(summaries),
        },
    )
