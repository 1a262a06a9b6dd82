"""Start-up of the local stack after a long history of writes, and its memory once started.

A benchmark: it prints figures and asserts nothing (the bar is 5 s of `LocalStack.start()` after
100,000 journaled writes on 2 cores, issue 18). It runs in three fresh interpreters:

1. build: starts the local stack (embedded AWS, journaled) on a new data folder and sends
   `--writes` DynamoDB and S3 writes through the embedded endpoint, shaped like what the service
   writes (a real session's journal was the model): per simulated API call an audit record (and a
   pending one first for calls that change something), rate-limit counters claimed again and again
   in one-minute windows and deleted as the TTL sweeper does, documents ingested (their task in the
   ledger, the raw file and work files in S3, several status updates, parents and embeddings in
   batches), chats and their messages (transactions), answer sessions and idempotency records.
   The writes go through the journaling middleware exactly as served requests do, so whatever the
   running server does with its journal (compacting it as it grows) happens here too.
2. start: times `LocalStack(settings).start()` on that folder and reads the process's RSS after.
3. the same once more, to show that start-up does not depend on how many times it was restarted.

    uv run python benchmarks/startup.py [--writes 100000] [--data DIR] [--keep]

The machine may be shared: the load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from provenance import stamp

STAGE = "bench"
REGION = "us-east-1"
ACCOUNT_BUCKET = f"citegate-{STAGE}-000000000000-documents"


def _auth(service: str) -> str:
    scope = f"citegate-local/20260101/{REGION}/{service}/aws4_request"
    return f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders=host, Signature=0"


def _table(logical: str) -> str:
    return f"citegate-{STAGE}-{logical}"


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: float) -> dict[str, str]:
    return {"N": str(value)}


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


Write = tuple[str, dict[str, Any]]  # (DynamoDB operation, body) or ("s3:PUT" | "s3:DELETE", {...})


class History:
    """A deterministic stream of writes, one simulated API call at a time (about 0.1 s apart)."""

    def __init__(self, seed: int = 18) -> None:
        self.rng = random.Random(seed)
        self.now = time.time() - 3 * 3600  # the history ends about now
        self.calls = 0
        self.chats: list[tuple[str, str]] = []
        self.documents = 0
        self.words = [f"word{i}" for i in range(500)] + ["lighthouse", "volcano", "tea", "wall", "mars"]

    def text(self, words: int) -> str:
        return " ".join(self.rng.choice(self.words) for _ in range(words))

    def writes(self) -> Iterator[list[Write]]:
        """The writes of one call after another."""
        while True:
            self.calls += 1
            self.now += 0.1 + self.rng.random() * 0.2
            yield list(self.call())

    def audit(self, route: str, tool: str, decision: str, chunks: int) -> Iterator[Write]:
        request_id = str(uuid.UUID(int=self.rng.getrandbits(128)))
        stamp_ = _iso(self.now)
        item = {
            "request_id": _s(request_id),
            "timestamp": _s(stamp_),
            "tenant_id": _s("default"),
            "caller_type": _s("service"),
            "caller_id": _s("rag-service"),
            "route": _s(route),
            "tool": _s(tool),
            "source_ip": _s("127.0.0.1"),
            "effective_scope": {"M": {"include_working_docs": {"BOOL": False}}},
            "decision": _s(decision),
            "knowledge_bases": {"L": [_s("docs")]},
            "query": _s(self.text(6)),
            "result_count": _n(chunks),
            "retrieved_chunk_ids": {
                "L": [_s(f"docs:d_{self.rng.getrandbits(64):016x}:{i}") for i in range(chunks)]
            },
            "cited_chunk_ids": {"L": []},
            "latency_ms": _n(round(self.rng.random() * 50, 2)),
            "sk": _s(f"{stamp_}#{request_id}"),
            "caller_key": _s("default#service:rag-service"),
            "expires_at": _n(int(self.now) + 7 * 86400),
        }
        yield "PutItem", {"TableName": _table("audit"), "Item": item}

    def counter(self) -> Iterator[Write]:
        window = int(self.now // 60)
        for key in ("principal:service:rag-service", "ip:127.0.0.1"):
            yield (
                "UpdateItem",
                {
                    "TableName": _table("counters"),
                    "Key": {"counter_key": _s(f"{key}#{window}")},
                    "UpdateExpression": "ADD #n :amount SET expires_at = if_not_exists(expires_at, :expires)",
                    "ConditionExpression": "attribute_not_exists(#n) OR #n <= :room",
                    "ExpressionAttributeNames": {"#n": "count"},
                    "ExpressionAttributeValues": {
                        ":amount": _n(self.rng.choice((1, 2, 4, 8))),
                        ":expires": _n((window + 2) * 60),
                        ":room": _n(10**9),
                    },
                },
            )

    def sweep(self) -> Iterator[Write]:
        """What the TTL sweeper deletes: the counters of windows that have expired."""
        window = int(self.now // 60) - 3
        for key in ("principal:service:rag-service", "ip:127.0.0.1"):
            key_ = {"counter_key": _s(f"{key}#{window}")}
            yield "DeleteItem", {"TableName": _table("counters"), "Key": key_}

    def ingest(self) -> Iterator[Write]:
        self.documents += 1
        kb, doc = "docs", f"d_{self.documents % 700:016x}"  # some documents are ingested again
        task = f"t_{self.rng.getrandbits(128):032x}"
        raw = self.text(self.rng.randint(300, 3000)).encode()
        digest = hashlib.sha256(raw).hexdigest()
        yield from self.audit("POST /v1/kb/{kb_id}/documents", "rag_ingest", "pending", 0)
        yield (
            "BatchWriteItem",
            {
                "RequestItems": {
                    _table("tasks"): [
                        {
                            "PutRequest": {
                                "Item": {
                                    "task_id": _s(task),
                                    "kind": _s("ingest"),
                                    "kb_id": _s(kb),
                                    "document_id": _s(doc),
                                    "status": _s("queued"),
                                    "created_at": _s(_iso(self.now)),
                                    "updated_at": _s(_iso(self.now)),
                                    "expires_at": _n(int(self.now) + 30 * 86400),
                                }
                            }
                        }
                    ]
                }
            },
        )
        yield "s3:PUT", {"key": f"raw/{kb}/{doc}/{digest}", "body": raw, "content-type": "text/markdown"}
        yield (
            "PutItem",
            {
                "TableName": _table("documents"),
                "Item": {
                    "kb_id": _s(kb),
                    "document_id": _s(doc),
                    "source_name": _s(f"doc-{self.documents % 700}.md"),
                    "title": _s(""),
                    "mime_type": _s("text/markdown"),
                    "task_id": _s(task),
                    "status": _s("queued"),
                    "content_sha256": _s(digest),
                    "size_bytes": _n(len(raw)),
                    "raw_key": _s(f"raw/{kb}/{doc}/{digest}"),
                    "counts": {"M": {"parents": _n(0), "children": _n(0)}},
                    "metadata": {"M": {}},
                    "created_at": _s(_iso(self.now)),
                    "updated_at": _s(_iso(self.now)),
                },
            },
        )
        for step in ("running", "parsed", "chunked", "embedded"):
            yield (
                "UpdateItem",
                {
                    "TableName": _table("tasks"),
                    "Key": {"task_id": _s(task)},
                    "UpdateExpression": "SET #status = :status, #step = :step, updated_at = :at",
                    "ExpressionAttributeNames": {"#status": "status", "#step": "step"},
                    "ExpressionAttributeValues": {
                        ":status": _s("running"),
                        ":step": _s(step),
                        ":at": _s(_iso(self.now)),
                    },
                },
            )
        work = f"work/{task}/parsed.json"
        yield "s3:PUT", {"key": work, "body": raw[: len(raw) // 2], "content-type": "application/json"}
        parents = self.rng.randint(2, 8)
        yield (
            "BatchWriteItem",
            {
                "RequestItems": {
                    _table("parents"): [
                        {
                            "PutRequest": {
                                "Item": {
                                    "doc_key": _s(f"{kb}#{doc}"),
                                    "parent_id": _s(f"p{i}"),
                                    "text": _s(self.text(150)),
                                    "heading": _s(self.text(4)),
                                    "children": {"L": [_s(f"{doc}:{i}:{j}") for j in range(6)]},
                                }
                            }
                        }
                        for i in range(parents)
                    ]
                }
            },
        )
        yield (
            "BatchWriteItem",
            {
                "RequestItems": {
                    _table("embeddings"): [
                        {
                            "PutRequest": {
                                "Item": {
                                    "cache_key": _s(f"hashing-256#{self.rng.getrandbits(128):032x}"),
                                    "vector": {"B": base64.b64encode(self.rng.randbytes(256 * 4)).decode()},
                                    "dimension": _n(256),
                                }
                            }
                        }
                        for _ in range(min(25, parents * 3))
                    ]
                }
            },
        )
        yield "s3:DELETE", {"key": work}
        yield (
            "UpdateItem",
            {
                "TableName": _table("documents"),
                "Key": {"kb_id": _s(kb), "document_id": _s(doc)},
                "UpdateExpression": "SET #status = :status, #counts = :counts, updated_at = :at",
                "ConditionExpression": "task_id = :task",
                "ExpressionAttributeNames": {"#status": "status", "#counts": "counts"},
                "ExpressionAttributeValues": {
                    ":status": _s("indexed"),
                    ":counts": {"M": {"parents": _n(parents), "children": _n(parents * 6)}},
                    ":task": _s(task),
                    ":at": _s(_iso(self.now)),
                },
            },
        )
        yield (
            "UpdateItem",
            {
                "TableName": _table("tasks"),
                "Key": {"task_id": _s(task)},
                "UpdateExpression": "SET #status = :status, updated_at = :at",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {":status": _s("succeeded"), ":at": _s(_iso(self.now))},
            },
        )

    def chat(self) -> Iterator[Write]:
        owner = "service:default:rag-service"
        if not self.chats or self.rng.random() < 0.3:
            chat = f"chat_{self.rng.getrandbits(128):032x}"
            self.chats.append((owner, chat))
            yield (
                "PutItem",
                {
                    "TableName": _table("chats"),
                    "Item": {
                        "owner_key": _s(owner),
                        "sk": _s(f"chat#{chat}"),
                        "chat_id": _s(chat),
                        "title": _s(self.text(3)),
                        "created": _s(_iso(self.now)),
                        "updated": _s(_iso(self.now)),
                        "updated_sk": _s(f"{_iso(self.now)}#{chat}"),
                    },
                    "ConditionExpression": "attribute_not_exists(sk)",
                },
            )
        owner, chat = self.rng.choice(self.chats[-20:])
        for kind in ("user", "assistant"):
            message = f"msg_{self.rng.getrandbits(128):032x}"
            yield (
                "TransactWriteItems",
                {
                    "TransactItems": [
                        {
                            "Put": {
                                "TableName": _table("chats"),
                                "Item": {
                                    "owner_key": _s(owner),
                                    "sk": _s(f"msg#{chat}#{int(self.now * 1e6):020d}#{message}"),
                                    "message_id": _s(message),
                                    "chat_id": _s(chat),
                                    "type": _s(kind),
                                    "content": _s(self.text(20 if kind == "user" else 120)),
                                    "timestamp": _s(_iso(self.now)),
                                },
                                "ConditionExpression": "attribute_not_exists(sk)",
                            }
                        },
                        {
                            "Update": {
                                "TableName": _table("chats"),
                                "Key": {"owner_key": _s(owner), "sk": _s(f"chat#{chat}")},
                                "UpdateExpression": "SET updated = :u, updated_sk = :us",
                                "ExpressionAttributeValues": {
                                    ":u": _s(_iso(self.now)),
                                    ":us": _s(f"{_iso(self.now)}#{chat}"),
                                },
                            }
                        },
                    ]
                },
            )

    def session(self) -> Iterator[Write]:
        session_id = f"s_{self.rng.getrandbits(128):032x}"
        yield (
            "PutItem",
            {
                "TableName": _table("sessions"),
                "Item": {
                    "session_id": _s(session_id),
                    "owner": _s("service:rag-service"),
                    "scope": {"M": {"kb_ids": {"L": [_s("docs")]}}},
                    "expires_at": _s(_iso(self.now + 3600)),
                    "expires_at_epoch": _n(int(self.now) + 3600),
                },
            },
        )
        key = f"idem-{self.rng.getrandbits(64):016x}"
        yield (
            "PutItem",
            {
                "TableName": _table("idempotency"),
                "Item": {
                    "id": _s(key),
                    "status": _s("INPROGRESS"),
                    "expiration": _n(int(self.now) + 3600),
                },
            },
        )
        yield (
            "UpdateItem",
            {
                "TableName": _table("idempotency"),
                "Key": {"id": _s(key)},
                "UpdateExpression": "SET #s = :s, #d = :d",
                "ExpressionAttributeNames": {"#s": "status", "#d": "data"},
                "ExpressionAttributeValues": {":s": _s("COMPLETED"), ":d": _s(self.text(80))},
            },
        )

    def call(self) -> Iterator[Write]:
        roll = self.rng.random()
        if self.calls % 4 == 0:
            yield from self.counter()
        if self.calls % 600 == 0:
            yield from self.sweep()
        if roll < 0.03:
            yield from self.ingest()
        elif roll < 0.08:
            yield from self.chat()
        elif roll < 0.11:
            yield from self.session()
        yield from self.audit("POST /v1/kb/{kb_id}/retrieve", "rag_retrieve", "allow", 8)


def _environ(write: Write) -> dict[str, Any]:
    from werkzeug.test import EnvironBuilder

    operation, body = write
    if operation.startswith("s3:"):
        method = operation[3:]
        path = f"/{ACCOUNT_BUCKET}/{body['key']}"
        headers = {"authorization": _auth("s3")}
        data = b""
        if method == "PUT":
            headers["content-type"] = body["content-type"]
            data = body["body"]
    else:
        method, path, data = "POST", "/", json.dumps(body).encode()
        headers = {
            "content-type": "application/x-amz-json-1.0",
            "x-amz-target": f"DynamoDB_20120810.{operation}",
            "authorization": _auth("dynamodb"),
        }
    builder = EnvironBuilder(
        method=method, path=path, headers=headers, data=data, base_url="http://127.0.0.1"
    )
    environ = builder.get_environ()
    builder.close()
    return environ


def _environment(data: Path) -> dict[str, str]:
    return {
        **os.environ,
        "RAG_DATA_ROOT": str(data),
        "CITEGATE_STAGE": STAGE,
        "CITEGATE_EMBEDDER": "hashing",
        "AWS_REGION": REGION,
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }


def build(writes: int) -> dict[str, Any]:
    """In this process (a fresh interpreter): the local stack on RAG_DATA_ROOT, `writes` writes."""
    from citegate.platform.settings import get_settings
    from citegate.runtime.stack import LocalStack

    stack = LocalStack(get_settings(), poll=False).start()
    assert stack.aws is not None and stack.aws.middleware is not None
    app = stack.aws.middleware
    started = time.perf_counter()
    failed = sent = 0
    history = History()
    for call in history.writes():  # whole calls: no ingestion is left half done
        for write in call:
            status: list[str] = []
            for _ in app(_environ(write), functools.partial(_started, status)):
                pass
            if not status or not status[0].startswith("2"):
                failed += 1
            sent += 1
            if sent % 10_000 == 0:
                print(f"  {sent} writes, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        if sent >= writes:
            break
    elapsed = time.perf_counter() - started
    figures = {"writes": sent, "refused": failed, "calls": history.calls, "seconds": round(elapsed, 1)}
    compactor = getattr(stack.aws, "compactor", None)
    if compactor is not None:
        figures["compactions"] = compactor.compactions
        figures["journal_lines"] = stack.aws.journal.lines if stack.aws.journal else None
    stack.stop()
    return figures


def _started(status: list[str], line: str, headers: Any, exc_info: Any = None) -> None:
    status.append(line)


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def start() -> dict[str, Any]:
    """In this process: time LocalStack.start() on RAG_DATA_ROOT, and what it restored."""
    journal = Path(os.environ["RAG_DATA_ROOT"]) / "aws" / "journal.jsonl"
    lines = sum(1 for _ in journal.open("rb")) if journal.exists() else 0
    size = journal.stat().st_size if journal.exists() else 0
    imported = time.perf_counter()
    from citegate.platform.settings import get_settings
    from citegate.runtime.stack import LocalStack

    began = time.perf_counter()
    stack = LocalStack(get_settings()).start()
    seconds = time.perf_counter() - began
    figures = {
        "journal_lines_before": lines,
        "journal_mb_before": round(size / 1e6, 1),
        "import_s": round(began - imported, 2),
        "start_s": round(seconds, 2),
        "rss_mib_after_start": round(_rss_mib()),
        "restored_writes": stack.info.get("restored_writes"),
    }
    s = stack.services
    assert s is not None
    pages = s.aws.dynamodb.meta.client.get_paginator("scan").paginate(
        TableName=f"citegate-{STAGE}-audit", Select="COUNT"
    )
    figures["audit_items"] = sum(page["Count"] for page in pages)
    stack.stop()
    after = journal.stat().st_size if journal.exists() else 0
    figures["journal_mb_after"] = round(after / 1e6, 1)
    return figures


def _run(phase: str, data: Path, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--phase", phase, *args],
        env=_environment(data),
        capture_output=True,
        text=True,
        check=False,
    )
    sys.stderr.write(out.stderr[-4000:] if out.returncode else "")
    if out.returncode:
        raise SystemExit(f"{phase} failed ({out.returncode})")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--writes", type=int, default=100_000)
    parser.add_argument("--data", type=Path, help="the data folder to build (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the data folder")
    parser.add_argument("--starts", type=int, default=2, help="timed starts after the build")
    parser.add_argument("--no-build", action="store_true", help="time starts on an existing --data folder")
    parser.add_argument("--phase", choices=("build", "start"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase == "build":
        print(json.dumps(build(args.writes)))
        return
    if args.phase == "start":
        print(json.dumps(start()))
        return

    data = args.data or Path(tempfile.mkdtemp(prefix="citegate-startup-"))
    try:
        print(json.dumps({"stamp": stamp(), "data": str(data)}), flush=True)
        if not args.no_build:
            if data.exists() and any(data.iterdir()):
                raise SystemExit(f"{data} is not empty (use --no-build to time starts on it)")
            print(json.dumps({"build": _run("build", data, "--writes", str(args.writes))}), flush=True)
        for run in range(1, args.starts + 1):
            print(json.dumps({"start": run, **_run("start", data)}), flush=True)
    finally:
        if not args.keep and args.data is None:
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
