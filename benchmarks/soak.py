"""Soak: the real server under mixed concurrent traffic, checking that every answer is its own.

Starts `python -m citegate.clients.cli serve` as a subprocess (its own temporary RAG_DATA_ROOT, a free
port, CITEGATE_EMBEDDER=use unless told), seeds one knowledge base with documents that each hold
a unique token, then runs N clients (threads, each with its own httpx connection) for a fixed time.
Every request carries something unique that its answer must reflect:

  retrieve       a seeded (or ingested) token: the top hit must hold that token
  ask, /answer/ask  a question on a token: the answer must quote it and cite only its document
                 (/answer/ask: citation paths; audit.requestId equal to the `apigw-requestid` header)
  ingest         a new source_name with new content: 202's document_id must be the one derived from
                 (kb, source_name); the task must name that document; after the run the document must
                 exist with its own source_name, content hash and task, and retrieving its token must
                 find it (resolve_refs names the document)
  feedback       a new question: dedupeKey must be the one derived from it, count 1, and the record must
                 be listed afterwards with that question
  kb create      a new kb_id and name: 201 with both; afterwards GET must find it
  404s           unknown kb / document / task ids: the error must name its own id, and its requestId
                 must equal the `apigw-requestid` header (so must every JSON body that has one)
  chat           a new chat titled with a new token, then a streamed message on a seeded token: the
                 title, the stream's text and sources must be its own; afterwards the chat must hold
                 exactly that user message
  /api/v2/query  streamed: the tool call's query, the summary and the references must be its own
  disconnect     a stream (query v2 or a chat message) closed after its first frame, then the probes

Two probes are polled throughout (and right after each disconnect, and after the run): /healthz and
a governed read (GET /v1/kb/soak: token, policy, rate limit, audit record), since a server can keep
answering /healthz while every governed call hangs. An answer slower than --stall-seconds, or none,
is a stall. The server's RSS (VmRSS of the process and its children) is sampled every
--rss-interval seconds. Prints requests, errors by status, accepted writes lost, answers that
belong to another request, probe latencies, the RSS series and throughput; writes
docs/results/soak.md and bench-results/soak.json. Exits 1 when an accepted write was lost (or
could not be checked), an answer was not its own, a request timed out, a probe stalled, or the
server died or did not stop on SIGTERM.

The control: one client and no probe beside it (--clients 1 --probe-interval 0) sends the same
requests one at a time, and every check must pass.

    make soak                                          # 16 clients, 120 s of traffic
    make soak SOAK_ARGS=--short                        # 30 s of traffic, 16 seed documents
    .venv/bin/python benchmarks/soak.py --clients 1 --probe-interval 0 --seconds 30   # the control
    .venv/bin/python benchmarks/soak.py --root /tmp/other-tree     # another checkout's server
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT / "layers"))
from provenance import stamp  # noqa: E402

from citegate.answers.feedback import dedupe_key  # noqa: E402
from citegate.platform.ids import document_id  # noqa: E402

TOKEN = "soak-token"
KB = "soak"
TENANT = "default"
# The mix each client draws from (weights).
MIX = {
    "retrieve": 20,
    "ask": 10,
    "answer_ask": 10,
    "ingest": 12,
    "feedback": 8,
    "chat": 8,
    "query_v2": 8,
    "disconnect": 6,
    "kb_create": 4,
    "not_found": 14,
}
TERMINAL = {"succeeded", "failed"}
REQUEST_TIMEOUT_S = 60.0
SYLLABLES = ("ba", "ke", "di", "mo", "lu", "fa", "ze", "ri", "po", "nu", "ta", "vi", "go", "he", "ju", "sy")
MARKER = re.compile(r"zq[a-z]{8}x")  # what every token looks like: finds other requests' tokens
REFUSAL = re.compile(r"(\w+): (Extra inputs are not permitted|Field required)")
COLORS = ("green", "red", "white", "amber", "blue", "violet")


def token(n: int) -> str:
    """A word no document or query holds unless this run put it there: zq + 4 syllables + x."""
    parts = []
    for _ in range(4):
        n, i = divmod(n, len(SYLLABLES))
        parts.append(SYLLABLES[i])
    return "zq" + "".join(parts) + "x"


def doc_text(tok: str, n: int) -> str:
    color = COLORS[n % len(COLORS)]
    return (
        f"# Note {tok}\n\nThe {tok} beacon stands on pier {n % 97 + 1} and flashes {color} every "
        f"{n % 11 + 2} seconds. It was built in {1850 + n % 150}."
    )


def question(tok: str) -> str:
    return f"How often does the {tok} beacon flash?"


def source_name(tok: str) -> str:
    return f"soak-{tok}.md"


def doc_id(tok: str) -> str:
    return document_id(KB, source_name(tok))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(samples: list[float], q: float) -> float:
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


# --- the server --------------------------------------------------------------------------------


class Server:
    """`citegate serve` as a subprocess; its output goes to a log file once it is ready."""

    def __init__(self, work: Path, embedder: str, port: int, root: Path = ROOT) -> None:
        self.work = work
        self.port = port
        self.root = root
        self.log_path = work / "server.log"
        seed = json.loads((root / "config" / "policies.json").read_text())
        for policy in seed["policies"]:
            if policy["principal_key"] == "service:rag-service":
                policy["rate_limit_per_minute"] = 100_000_000  # the soak measures routing, not limits
        (work / "policies.json").write_text(json.dumps(seed))
        self.env = {
            **os.environ,
            "RAG_DATA_ROOT": str(work / "data"),
            "RAG_API_TOKEN": TOKEN,
            "PORT": str(port),
            "CITEGATE_EMBEDDER": embedder,
            "CITEGATE_IP_RATE_LIMIT": "100000000",  # every client shares one address
            "CITEGATE_POLICY_SEED_FILE": str(work / "policies.json"),
            "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
        }
        if root != ROOT:
            # Another source tree (another commit, say): its layer and its functions, this venv.
            self.env["PYTHONPATH"] = os.pathsep.join(
                [str(root / "layers"), *filter(None, [os.environ.get("PYTHONPATH")])]
            )
            self.env["CITEGATE_FUNCTIONS_DIR"] = str(root / "functions")
        self.process: subprocess.Popen[str] | None = None
        self.ready_line = ""
        self._pump: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "citegate.clients.cli", "serve"],
            cwd=self.root,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        lines: list[str] = []
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            lines.append(line)
            if not line and self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{''.join(lines[-30:])}")
            if line.startswith("citegate ready on"):
                self.ready_line = line.strip()
                break
        else:
            self.stop()
            raise RuntimeError("server did not become ready in time")
        # Keep reading its output, or a full pipe would block the server.
        self._pump = threading.Thread(target=self._drain, args=(lines,), daemon=True)
        self._pump.start()

    def _drain(self, first: list[str]) -> None:
        assert self.process is not None and self.process.stdout is not None
        with self.log_path.open("w") as log:
            log.writelines(first)
            for line in self.process.stdout:
                log.write(line)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def rss_mb(self) -> float | None:
        """VmRSS of the server and every process under it, in MB."""
        if not self.alive():
            return None
        assert self.process is not None
        total, todo, seen = 0, [self.process.pid], set()
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            try:
                status = Path(f"/proc/{pid}/status").read_text()
                total += next(int(x.split()[1]) for x in status.splitlines() if x.startswith("VmRSS:"))
                for task in Path(f"/proc/{pid}/task").iterdir():
                    todo += [int(c) for c in (task / "children").read_text().split()]
            except (OSError, StopIteration, ValueError):
                continue
        return round(total / 1024, 1)

    def stop(self) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self._pump is not None:
            self._pump.join(timeout=5)
        return self.process.returncode

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


# --- what the run records ----------------------------------------------------------------------


@dataclass
class Ingest:
    tok: str
    source_name: str
    document_id: str
    task_id: str
    sha256: str
    status: str = "queued"
    # The 202 named another document: its task is another request's, so only the document is checked.
    foreign_task: bool = False


@dataclass
class Ledger:
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)  # "op status"
    unexpected: Counter[str] = field(default_factory=Counter)  # "status" -> count (errors by status)
    transport: Counter[str] = field(default_factory=Counter)
    misrouted: Counter[str] = field(default_factory=Counter)  # op -> answers that were not their own
    foreign: int = 0  # of those, answers carrying another request's token, id or requestId
    examples: list[str] = field(default_factory=list)
    error_examples: list[str] = field(default_factory=list)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    ingests: list[Ingest] = field(default_factory=list)
    kbs: list[tuple[str, str]] = field(default_factory=list)
    feedback: list[tuple[str, str]] = field(default_factory=list)  # (recordId, question)
    chats: list[tuple[str, str, str | None]] = field(default_factory=list)  # (id, title, question)
    retrievable: list[str] = field(default_factory=list)  # tokens whose document is indexed
    # (t, ms, phase, probe, answered): phase traffic | after_disconnect | after_run
    probes: list[tuple[float, float, str, str, bool]] = field(default_factory=list)

    def misroute(self, op: str, why: str, *, foreign: bool = False) -> None:
        with self.lock:
            self.misrouted[op] += 1
            self.foreign += int(foreign)
            if len(self.examples) < 30:
                self.examples.append(f"{op}: {why}")


def foreign_markers(text: str, own: str | None) -> list[str]:
    return sorted({m for m in MARKER.findall(text) if m != own})


class Client:
    """One traffic client: its own connection, its own random choices."""

    def __init__(self, index: int, url: str, ledger: Ledger, tokens: Callable[[], str], seed: int) -> None:
        self.index = index
        self.ledger = ledger
        self.next_token = tokens
        self.rng = random.Random(seed * 1000 + index)
        self.url = url
        self.http = self._connect()
        self.flagged = False  # the last request's answer was already counted as not its own

    def _connect(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=httpx.Timeout(REQUEST_TIMEOUT_S, connect=10.0),
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        )

    def close(self) -> None:
        self.http.close()

    def misroute(self, op: str, why: str, *, foreign: bool = False) -> None:
        """Count the last request's answer as not its own, once however many checks it fails."""
        if not self.flagged:
            self.flagged = True
            self.ledger.misroute(op, why, foreign=foreign)

    # -- requests --

    def _note(self, op: str, status: int | str, started: float, expect: set[int], text: str) -> None:
        ms = (time.perf_counter() - started) * 1000
        with self.ledger.lock:
            self.ledger.requests[op] += 1
            self.ledger.statuses[f"{op} {status}"] += 1
            self.ledger.latencies.setdefault(op, []).append(ms)
            if status not in expect:
                self.ledger.unexpected[str(status)] += 1
                if len(self.ledger.error_examples) < 20:
                    self.ledger.error_examples.append(f"{op} -> {status}: {text[:200]}")

    def call(self, op: str, method: str, path: str, expect: set[int], **kw: Any) -> httpx.Response | None:
        self.flagged = False
        started = time.perf_counter()
        try:
            response = self.http.request(method, path, **kw)
        except httpx.HTTPError as error:
            self._note(op, type(error).__name__, started, expect, str(error))
            with self.ledger.lock:
                self.ledger.transport[type(error).__name__] += 1
            return None
        self._note(op, response.status_code, started, expect, response.text)
        self.check_request_id(op, response)
        if response.status_code == 400 and isinstance(kw.get("json"), dict):
            self.check_refusal(op, response, kw["json"])
        return response if response.status_code in expect else None

    def check_refusal(self, op: str, response: httpx.Response, sent: dict[str, Any]) -> None:
        """A 400 to a body this client sent that speaks of another body (empty, a field it did not send,
        a field it sent missing) answered another request's body."""
        try:
            message = str(response.json().get("message", ""))
        except (ValueError, AttributeError):
            return
        wrong = [
            f"{field}: {problem}"
            for field, problem in REFUSAL.findall(message)
            if (problem.startswith("Extra") and field not in sent)
            or (problem == "Field required" and field in sent)
        ]
        if "body is empty" in message or wrong:
            self.misroute(op, f"a 400 about another body: {message[:120]!r}", foreign=True)

    def check_request_id(self, op: str, response: httpx.Response) -> None:
        """Every JSON body that names a requestId must name the one in its own header."""
        header = response.headers.get("apigw-requestid")
        if not response.headers.get("content-type", "").startswith("application/json"):
            return
        try:
            body = response.json()
        except ValueError:
            return
        if not isinstance(body, dict):
            return
        named = body.get("requestId") or (body.get("audit") or {}).get("requestId")
        if named and named != header:
            self.misroute(op, f"body requestId {named} != header {header}", foreign=True)

    def stream(
        self, op: str, path: str, body: dict[str, Any], *, first_only: bool = False
    ) -> list[dict[str, Any]] | None:
        """POST and read the server-sent events; with first_only, hang up after the first frame."""
        self.flagged = False
        started = time.perf_counter()
        frames: list[dict[str, Any]] = []
        try:
            with self.http.stream("POST", path, json=body) as response:
                if response.status_code != 200:
                    response.read()
                    self._note(op, response.status_code, started, {200}, response.text)
                    self.check_request_id(op, response)
                    if response.status_code == 400:
                        self.check_refusal(op, response, body)
                    return None
                for line in response.iter_lines():
                    if line.startswith("data:"):
                        frames.append(json.loads(line[5:].strip()))
                        if first_only:
                            break
            if first_only:
                # Closing a response mid-body drops its connection; make sure of it.
                self.http.close()
                self.http = self._connect()
        except (httpx.HTTPError, ValueError) as error:
            self._note(op, type(error).__name__, started, {200}, str(error))
            with self.ledger.lock:
                self.ledger.transport[type(error).__name__] += 1
            return None
        self._note(op, 200, started, {200}, "")
        return frames

    def seeded(self) -> str:
        pool = self.ledger.retrievable
        return pool[self.rng.randrange(len(pool))]

    # -- the operations --

    def op_retrieve(self) -> None:
        tok = self.seeded()
        r = self.call("retrieve", "POST", f"/v1/kb/{KB}/retrieve", {200}, json={"query": f"{tok} beacon"})
        if r is None:
            return
        results = r.json().get("results") or []
        top = results[0]["chunk_text"] if results else ""
        if tok not in top:
            self.misroute(
                "retrieve",
                f"query on {tok}: top hit holds {foreign_markers(top, tok)}",
                foreign=bool(foreign_markers(top, tok)),
            )

    def op_ask(self) -> None:
        tok = self.seeded()
        r = self.call("ask", "POST", f"/v1/kb/{KB}/ask", {200}, json={"question": question(tok)})
        if r is None:
            return
        body = r.json()
        cited = {c.get("document_id") for c in body.get("citations") or []}
        answer = body.get("answer") or ""
        if body.get("no_answer") or tok not in answer or cited != {doc_id(tok)}:
            self.misroute(
                "ask",
                f"question on {tok}: answer {answer[:80]!r}, cited {sorted(cited)}",
                foreign=bool(foreign_markers(answer, tok)),
            )

    def op_answer_ask(self) -> None:
        tok = self.seeded()
        r = self.call("answer_ask", "POST", "/answer/ask", {200}, json={"question": question(tok)})
        if r is None:
            return
        body = r.json()
        paths = {c.get("path") for c in body.get("citations") or []}
        answer = body.get("answer") or ""
        if tok not in answer or paths != {f"soak/{tok}.md"}:
            self.misroute(
                "answer_ask",
                f"question on {tok}: answer {answer[:80]!r}, cited {sorted(paths)}",
                foreign=bool(foreign_markers(answer, tok)),
            )

    def op_ingest(self) -> None:
        n = self.rng.randrange(1_000_000)
        tok = self.next_token()
        text = doc_text(tok, n)
        ingest = submit(self, tok, text)
        if ingest is None:
            return
        # Follow the task for a while; the rest is checked after the run.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and ingest.status not in TERMINAL and not ingest.foreign_task:
            time.sleep(0.5)
            poll(self, ingest)

    def op_feedback(self) -> None:
        q = f"Where is the manual for the {self.next_token()} relay?"
        r = self.call("feedback", "POST", "/agent/tools/create_feedback", {200}, json={"question": q})
        if r is None:
            return
        body = r.json()
        key = dedupe_key("qa_no_answer", q, None, [])
        record = body.get("record") or {}
        with self.ledger.lock:  # accepted: its own record must exist afterwards, whatever came back
            self.ledger.feedback.append((f"feedback:{TENANT}:{key}", q))
        if (
            body.get("dedupeKey") != key
            or record.get("recordId") != f"feedback:{TENANT}:{key}"
            or record.get("count") != 1
            or body.get("created") is not True
        ):
            self.misroute(
                "feedback",
                f"report {q!r}: dedupeKey {str(body.get('dedupeKey'))[:12]}… (own {key[:12]}…), "
                f"count {record.get('count')}, created {body.get('created')}",
                foreign=body.get("dedupeKey") != key,
            )

    def new_chat(self, op: str) -> tuple[str, str] | None:
        title = f"soak chat {self.next_token()}"
        r = self.call(op, "POST", "/api/v1/agent/chats", {201}, json={"title": title})
        if r is None:
            return None
        body = r.json()
        if body.get("title") != title:
            self.misroute(op, f"chat titled {title!r} created as {body.get('title')!r}", foreign=True)
            with self.ledger.lock:  # accepted: a chat with its own title must exist afterwards
                self.ledger.chats.append((str(body.get("id")), title, None))
            return None
        return str(body["id"]), title

    def op_chat(self) -> None:
        made = self.new_chat("chat")
        if made is None:
            return
        chat, title = made
        tok = self.seeded()
        q = question(tok)
        frames = self.stream("chat", f"/api/v1/agent/chats/{chat}/messages", {"content": q, "stream": True})
        if frames is None:
            return
        with self.ledger.lock:
            self.ledger.chats.append((chat, title, q))
        text = "".join(f.get("content") or "" for f in frames if f.get("type") == "content")
        sources = [s for f in frames if f.get("type") == "sources" for s in f.get("sources") or []]
        cited = {s["metadata"].get("document_id") for s in sources if s.get("cited")}
        ids = [f.get("message_id") for f in frames if f.get("type") in ("start", "end")]
        errors = [f for f in frames if f.get("type") == "error"]
        if errors or tok not in text or cited != {doc_id(tok)} or len(set(ids)) != 1 or len(ids) != 2:
            self.misroute(
                "chat",
                f"message on {tok}: text {text[:80]!r}, cited {sorted(cited)}, errors {errors[:1]}",
                foreign=bool(foreign_markers(text, tok)),
            )

    def op_query_v2(self) -> None:
        tok = self.seeded()
        frames = self.stream("query_v2", "/api/v2/query", {"query": question(tok)})
        if frames is None:
            return
        queries = [
            str((f.get("arguments") or {}).get("query")) for f in frames if f.get("message_type") == 301
        ]
        text = "".join(f.get("content") or "" for f in frames if f.get("message_type") == 1)
        refs = [r for f in frames if f.get("message_type") == 204 for r in f.get("content") or []]
        errors = [f for f in frames if f.get("message_type") == 22]
        ended = bool(frames) and frames[-1].get("message_type") == 0
        if (
            not queries
            or any(tok not in q for q in queries)
            or tok not in text
            or not refs
            or refs[0].get("doc_id") != doc_id(tok)
            or errors
            or not ended
        ):
            self.misroute(
                "query_v2",
                f"query on {tok}: tool queries {queries[:1]}, text {text[:60]!r}, "
                f"first ref {refs[0].get('doc_id') if refs else None}, errors {errors[:1]}",
                foreign=bool(foreign_markers(" ".join(queries) + text, tok)),
            )

    def op_disconnect(self) -> None:
        tok = self.seeded()
        if self.rng.random() < 0.5:
            frames = self.stream("disconnect", "/api/v2/query", {"query": question(tok)}, first_only=True)
        else:
            made = self.new_chat("disconnect")
            if made is None:
                return
            body = {"content": question(tok), "stream": True}
            frames = self.stream(
                "disconnect", f"/api/v1/agent/chats/{made[0]}/messages", body, first_only=True
            )
        if frames is not None and not frames:
            self.misroute("disconnect", "a stream ended before its first frame")
        for name in PROBES:
            probe(self.http, self.ledger, name, "after_disconnect")

    def op_kb_create(self) -> None:
        tok = self.next_token()
        kb_id, name = f"soak-kb-{tok}", f"Soak KB {tok}"
        r = self.call("kb_create", "POST", "/v1/kb", {201, 409}, json={"kb_id": kb_id, "name": name})
        if r is None:
            return
        body = r.json()
        if r.status_code == 201:
            with self.ledger.lock:  # accepted: its own knowledge base must exist afterwards
                self.ledger.kbs.append((kb_id, name))
        if r.status_code == 409 or body.get("kb_id") != kb_id or body.get("name") != name:
            named = body.get("kb_id") or (body.get("details") or {}).get("kb_id")
            self.misroute(
                "kb_create", f"create {kb_id} answered {r.status_code} for {named}", foreign=named != kb_id
            )

    def op_not_found(self) -> None:
        tok = self.next_token()
        kind = self.rng.choice(("kb", "document", "task"))
        if kind == "kb":
            own, path, code, key = f"nokb-{tok}", f"/v1/kb/nokb-{tok}", "kb_not_found", "kb_id"
        elif kind == "document":
            own = "d_" + hashlib.sha256(tok.encode()).hexdigest()[:16]
            path, code, key = f"/v1/kb/{KB}/documents/{own}", "document_not_found", "document_id"
        else:
            own, path, code, key = f"t_{tok}", f"/v1/tasks/t_{tok}", "task_not_found", "task_id"
        r = self.call("not_found", "GET", path, {404})
        if r is None:
            return
        body = r.json()
        named = (body.get("details") or {}).get(key)
        if body.get("error") != code or named != own or own not in str(body.get("message")):
            self.misroute("not_found", f"404 for {own} named {named} ({body.get('error')})", foreign=True)

    def run(self, deadline: float, abort: threading.Event) -> None:
        ops = list(MIX)
        weights = [MIX[o] for o in ops]
        try:
            while time.monotonic() < deadline and not abort.is_set():
                getattr(self, f"op_{self.rng.choices(ops, weights)[0]}")()
        finally:
            self.close()


def submit(client: Client, tok: str, text: str) -> Ingest | None:
    name = source_name(tok)
    body = {"text": text, "source_name": name, "metadata": {"path": f"soak/{tok}.md"}}
    r = client.call("ingest", "POST", f"/v1/kb/{KB}/documents", {202}, json=body)
    if r is None:
        return None
    answer = r.json()
    foreign = answer.get("document_id") != doc_id(tok)
    if foreign:
        client.misroute(
            "ingest", f"{name} accepted as {answer.get('document_id')} (own {doc_id(tok)})", foreign=True
        )
    sha = hashlib.sha256(text.encode()).hexdigest()
    ingest = Ingest(tok, name, doc_id(tok), str(answer.get("task_id")), sha, foreign_task=foreign)
    with client.ledger.lock:
        client.ledger.ingests.append(ingest)
    return ingest


def poll(client: Client, ingest: Ingest, op: str = "task") -> None:
    if ingest.foreign_task:
        return
    r = client.call(op, "GET", f"/v1/tasks/{ingest.task_id}", {200})
    if r is None:
        return
    task = r.json()
    if task.get("task_id") != ingest.task_id or task.get("document_id") != ingest.document_id:
        client.misroute(
            op,
            f"task {ingest.task_id} answered as {task.get('task_id')} / {task.get('document_id')}",
            foreign=True,
        )
        return
    ingest.status = str(task.get("status"))
    if ingest.status == "succeeded":
        with client.ledger.lock:
            if ingest.tok not in client.ledger.retrievable:
                client.ledger.retrievable.append(ingest.tok)


# --- the phases ----------------------------------------------------------------------------------


def seed(client: Client, count: int, tokens: Callable[[], str], timeout: float = 300) -> None:
    r = client.call("seed", "POST", "/v1/kb", {201}, json={"kb_id": KB, "name": "Soak", "status": "approved"})
    if r is None:
        raise RuntimeError(f"could not create the knowledge base: {client.ledger.error_examples}")
    pending: list[Ingest] = []
    for n in range(count):
        tok = tokens()
        ingest = submit(client, tok, doc_text(tok, n))
        if ingest is not None:
            pending.append(ingest)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        time.sleep(0.5)
        for ingest in pending:
            poll(client, ingest, "seed")
        pending = [i for i in pending if i.status not in TERMINAL]
    if len(client.ledger.retrievable) < count:
        raise RuntimeError(f"only {len(client.ledger.retrievable)} of {count} seed documents were indexed")


# /healthz (no token, no audit) and a governed read (token, policy, rate limit, audit record): a
# server can answer the first while every governed call hangs.
PROBES = {"healthz": "/healthz", "governed": f"/v1/kb/{KB}"}


def probe(http: httpx.Client, ledger: Ledger, name: str, phase: str) -> None:
    started = time.perf_counter()
    try:
        answered = http.get(PROBES[name], headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    except httpx.HTTPError:
        answered = False
    with ledger.lock:
        ledger.probes.append(
            (time.monotonic(), (time.perf_counter() - started) * 1000, phase, name, answered)
        )


def probe_monitor(url: str, ledger: Ledger, stop: threading.Event, interval: float) -> None:
    with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) as http:
        while not stop.is_set():
            for name in PROBES:
                probe(http, ledger, name, "traffic")
            stop.wait(interval)


def rss_sampler(
    server: Server, series: list[tuple[float, float]], stop: threading.Event, every: float
) -> None:
    began = time.monotonic()
    while not stop.is_set():
        rss = server.rss_mb()
        if rss is not None:
            series.append((round(time.monotonic() - began, 1), rss))
        stop.wait(every)


class Unanswered(Exception):
    """A verification request got no answer (timeout, reset): the write can be neither found nor missed."""


def verify(url: str, ledger: Ledger, drain_seconds: float) -> dict[str, Any]:
    """After the traffic: every accepted write must be there, with its own content.

    A write is lost when the server says so (404, another content, a failed or never-finished task).
    When the server does not answer, the write is unverified (also a failure); after three
    unanswered requests in a row the rest is not tried."""
    checker = Client(-1, url, ledger, lambda: "", 0)
    checker.http.timeout = httpx.Timeout(30.0, connect=10.0)
    lost: Counter[str] = Counter()
    unverified: Counter[str] = Counter()
    examples: list[str] = []
    silent = 0

    def note(counter: Counter[str], kind: str, why: str) -> None:
        counter[kind] += 1
        if len(examples) < 20:
            examples.append(f"{kind}: {why}" + (" (no answer)" if counter is unverified else ""))

    def ask(method: str, path: str, expect: set[int], **kw: Any) -> httpx.Response:
        nonlocal silent
        if silent >= 3:
            raise Unanswered("the server stopped answering")
        before = sum(ledger.transport.values())
        r = checker.call("verify", method, path, expect, **kw)
        if r is None:
            silent += int(sum(ledger.transport.values()) > before)
            raise Unanswered(f"{method} {path}")
        silent = 0
        return r

    deadline = time.monotonic() + drain_seconds
    pending = [i for i in ledger.ingests if i.status not in TERMINAL and not i.foreign_task]
    while pending and time.monotonic() < deadline and silent < 3:
        for ingest in pending:
            with_answer = sum(ledger.transport.values())
            poll(checker, ingest, "verify")
            silent = silent + 1 if sum(ledger.transport.values()) > with_answer else 0
        pending = [i for i in pending if i.status not in TERMINAL]
        if pending:
            time.sleep(1)
    for ingest in ledger.ingests:
        where = f"{ingest.source_name} ({ingest.document_id}, task {ingest.task_id})"
        if ingest.status != "succeeded" and not ingest.foreign_task:
            note(unverified if silent >= 3 else lost, "ingest", f"{where}: task {ingest.status}")
            continue
        try:
            r = ask("GET", f"/v1/kb/{KB}/documents/{ingest.document_id}", {200, 404})
            if r.status_code != 200:
                note(lost, "ingest", f"{where}: no such document (404)")
                continue
            doc = r.json()
            wrong = [
                f"{k} {doc.get(k)!r}"
                for k, v in (
                    ("source_name", ingest.source_name),
                    ("content_sha256", ingest.sha256),
                    ("task_id", None if ingest.foreign_task else ingest.task_id),
                    ("status", "indexed"),
                )
                if v is not None and doc.get(k) != v
            ]
            if wrong:
                note(lost, "ingest", f"{where}: the document holds {', '.join(wrong)}")
                continue
            r = ask("POST", f"/v1/kb/{KB}/retrieve", {200}, json={"query": ingest.tok, "top_k": 1})
            hits = r.json().get("results") or []
            if not hits or ingest.tok not in hits[0]["chunk_text"]:
                note(lost, "ingest", f"{where}: its token finds no chunk of it")
                continue
            r = ask("POST", f"/v1/kb/{KB}/resolve_refs", {200}, json={"ref_ids": [hits[0]["ref_id"]]})
            cites = r.json().get("citations") or []
            if not cites or cites[0].get("document_id") != ingest.document_id:
                note(lost, "ingest", f"{where}: its chunk is {[c.get('document_id') for c in cites]}'s")
        except Unanswered as error:
            note(unverified, "ingest", f"{where}: {error}")
    listed: set[str] = set()
    try:
        r = ask("GET", f"/v1/kb/{KB}/documents", {200})
        listed = {d["document_id"] for d in r.json().get("documents") or []}
    except Unanswered:
        pass
    for kb_id, name in ledger.kbs:
        try:
            r = ask("GET", f"/v1/kb/{kb_id}", {200, 404})
            if r.status_code != 200 or r.json().get("name") != name:
                note(lost, "kb", f"{kb_id}: {r.status_code} {r.json().get('name')!r}")
        except Unanswered as error:
            note(unverified, "kb", f"{kb_id}: {error}")
    records: dict[str, Any] | None = None
    try:
        r = ask("GET", "/admin/feedback", {200}, params={"kind": "feedback", "limit": 1000})
        records = {x["recordId"]: x for x in r.json().get("records") or []}
    except Unanswered:
        pass
    for record_id, q in ledger.feedback:
        found = None if records is None else records.get(record_id)
        if records is None:
            note(unverified, "feedback", f"{q!r}: the list did not answer")
        elif found is None or found.get("question") != q or found.get("count") != 1:
            note(lost, "feedback", f"{q!r}: {'missing' if found is None else found.get('question')}")
    for chat, title, q in ledger.chats:
        try:
            r = ask("GET", f"/api/v1/agent/chats/{chat}", {200, 404})
            if r.status_code != 200:
                note(lost, "chat", f"{chat}: {r.status_code}")
                continue
            held = r.json()
            users = [m.get("content") for m in held.get("messages") or [] if m.get("type") == "user"]
            if held.get("title") != title or users != ([q] if q else []):
                note(lost, "chat", f"{chat} {title!r}: title {held.get('title')!r}, user messages {users}")
        except Unanswered as error:
            note(unverified, "chat", f"{chat}: {error}")
    checker.close()
    expected = {i.document_id for i in ledger.ingests}
    return {
        "lost": dict(lost),
        "lost_total": sum(lost.values()),
        "unverified": dict(unverified),
        "unverified_total": sum(unverified.values()),
        "examples": examples,
        "stray_documents": len(listed - expected),
        "accepted": {
            "ingest": len(ledger.ingests),
            "kb": len(ledger.kbs),
            "feedback": len(ledger.feedback),
            "chat": len(ledger.chats),
        },
        "documents_listed": len(listed),
    }


def summarize_probes(ledger: Ledger, name: str, stall_ms: float) -> dict[str, Any]:
    """A probe stalls when it answers later than stall_ms, or not at all."""
    rows = [(ms, phase, ok) for _, ms, phase, probe, ok in ledger.probes if probe == name]
    during = [ms for ms, phase, _ in rows if phase == "traffic"]
    disc = [ms for ms, phase, _ in rows if phase == "after_disconnect"]
    after = [ms for ms, phase, _ in rows if phase == "after_run"]
    return {
        "probes": len(rows),
        "failed": sum(1 for _, _, ok in rows if not ok),
        "during_max_ms": round(max(during, default=0.0), 1),
        "during_p95_ms": round(percentile(during, 0.95), 1),
        "after_disconnect_max_ms": round(max(disc, default=0.0), 1),
        "after_disconnect_probes": len(disc),
        "after_run_max_ms": round(max(after, default=0.0), 1),
        "stalls": sum(1 for ms, _, ok in rows if ms > stall_ms or not ok),
        "stall_ms": stall_ms,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="citegate-soak-", dir=args.tmp))
    server = Server(work, args.embedder, free_port(), args.root.resolve())
    ledger = Ledger()
    counter = itertools.count(random.Random(args.seed).randrange(1000, 20_000))
    count_lock = threading.Lock()

    def tokens() -> str:
        with count_lock:
            return token(next(counter))

    rss: list[tuple[float, float]] = []
    stop = threading.Event()
    threads: list[threading.Thread] = []
    result: dict[str, Any] = {
        **stamp(),
        "root": str(args.root),
        "clients": args.clients,
        "mix": dict(MIX),
        "seconds": args.seconds,
        "embedder": args.embedder,
    }
    try:
        started_at = time.monotonic()
        server.start()
        result["startup_s"] = round(time.monotonic() - started_at, 1)
        print(server.ready_line, flush=True)
        threads.append(
            threading.Thread(target=rss_sampler, args=(server, rss, stop, args.rss_interval), daemon=True)
        )
        threads[-1].start()
        seeding = time.monotonic()
        seeder = Client(-1, server.url, ledger, tokens, args.seed)
        seed(seeder, args.seeds, tokens)
        seeder.close()
        result["seed_s"] = round(time.monotonic() - seeding, 1)
        print(
            f"seeded {args.seeds} documents in {result['seed_s']} s; "
            f"{args.clients} clients for {args.seconds} s",
            flush=True,
        )
        # Seeding is not traffic: count only what the clients do from here on.
        ledger.requests.clear()
        ledger.statuses.clear()
        ledger.latencies.clear()
        if args.probe_interval > 0:  # 0: no probe beside the clients (the control: nothing concurrent)
            threads.append(
                threading.Thread(
                    target=probe_monitor, args=(server.url, ledger, stop, args.probe_interval), daemon=True
                )
            )
            threads[-1].start()
        result["rss_traffic_start_mb"] = server.rss_mb()
        began = time.monotonic()
        deadline = began + args.seconds
        abort = threading.Event()  # the server died: stop the clients
        workers = [
            threading.Thread(
                target=Client(i, server.url, ledger, tokens, args.seed).run,
                args=(deadline, abort),
                name=f"client-{i}",
            )
            for i in range(args.clients)
        ]
        for w in workers:
            w.start()
        while any(w.is_alive() for w in workers):
            time.sleep(5)
            if not server.alive():
                print(f"  the server exited ({server.process and server.process.returncode})", flush=True)
                abort.set()
                continue
            done = sum(ledger.requests.values())
            print(
                f"  {time.monotonic() - began:5.0f} s: {done} requests, {sum(ledger.misrouted.values())} "
                f"not their own, RSS {server.rss_mb()} MB",
                flush=True,
            )
        for w in workers:
            w.join()
        ended = time.monotonic()
        traffic = {op: n for op, n in ledger.requests.items()}
        total = sum(traffic.values())
        result["wall_s"] = round(ended - began, 1)
        result["requests"] = total
        result["throughput_rps"] = round(total / (ended - began), 1)
        result["requests_by_op"] = dict(sorted(traffic.items()))
        result["latency_by_op"] = {
            op: {
                "p50_ms": round(percentile(v, 0.5), 1),
                "p95_ms": round(percentile(v, 0.95), 1),
                "max_ms": round(max(v), 1),
            }
            for op, v in sorted(ledger.latencies.items())
        }
        result["errors_by_status"] = dict(sorted(ledger.unexpected.items()))
        result["statuses"] = dict(sorted(ledger.statuses.items()))
        result["transport_errors"] = dict(ledger.transport)
        result["timed_out"] = ledger.transport.get("ReadTimeout", 0) + ledger.transport.get("WriteTimeout", 0)
        result["timeout_s"] = REQUEST_TIMEOUT_S
        result["error_examples"] = list(ledger.error_examples)
        stop.set()
        # Right after the traffic: is the server still answering promptly? (Once is enough to know
        # that it is not: a stalled probe waits out its whole timeout.)
        with httpx.Client(base_url=server.url, timeout=REQUEST_TIMEOUT_S) as http:
            for _ in range(5):
                for name in PROBES:
                    probe(http, ledger, name, "after_run")
                _, ms, _, _, answered = ledger.probes[-1]
                if ms > args.stall_seconds * 1000 or not answered:
                    break
                time.sleep(0.2)
        for name in PROBES:
            result[name] = summarize_probes(ledger, name, args.stall_seconds * 1000)
        print("verifying every accepted write ...", flush=True)
        verifying = time.monotonic()
        result["verify"] = verify(server.url, ledger, args.drain_seconds)
        result["verify_s"] = round(time.monotonic() - verifying, 1)
        result["misrouted"] = sum(ledger.misrouted.values())  # verification counts too
        result["misrouted_by_op"] = dict(ledger.misrouted)
        result["misrouted_foreign"] = ledger.foreign
        result["misrouted_examples"] = list(ledger.examples)
        result["rss_mb"] = [mb for _, mb in rss]  # from readiness to the end of the traffic
        result["rss_interval_s"] = args.rss_interval
        result["rss_after_verify_mb"] = server.rss_mb()
        result["server_alive_at_end"] = server.alive()
    finally:
        stop.set()
        code = server.stop()
        result["server_exit_code"] = code
        log = server.log_path.read_text(errors="replace") if server.log_path.exists() else ""
        result["server_tracebacks"] = log.count("Traceback (most recent call last)")
        result["total_s"] = round(time.monotonic() - started_at, 1)
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return result


# --- reporting ---------------------------------------------------------------------------------


def rss_line(series: list[float], every: float) -> str:
    if not series:
        return "no samples"
    stride = max(1, len(series) // 40)
    shown = series if stride == 1 else [*series[::stride], series[-1]]
    step = every * stride
    return (
        f"start {series[0]:.0f}, end {series[-1]:.0f}, max {max(series):.0f} MB; every {step:.0f} s: "
        + " ".join(f"{mb:.0f}" for mb in shown)
    )


def verdict(r: dict[str, Any]) -> tuple[bool, list[str]]:
    problems = []
    if r["verify"]["lost_total"]:
        problems.append(f"{r['verify']['lost_total']} accepted writes lost")
    if r["verify"]["unverified_total"]:
        problems.append(f"{r['verify']['unverified_total']} accepted writes unverified (no answer)")
    if r["timed_out"]:
        problems.append(f"{r['timed_out']} requests timed out")
    if r["misrouted"]:
        problems.append(f"{r['misrouted']} answers not their own")
    for name, path in PROBES.items():
        if r[name]["stalls"]:
            problems.append(f"{r[name]['stalls']} {path} stalls (over {r[name]['stall_ms'] / 1000:.0f} s)")
    if not r.get("server_alive_at_end", False):
        problems.append("the server died")
    if r.get("server_exit_code") not in (0, None):
        problems.append(f"the server did not stop cleanly on SIGTERM (exit code {r['server_exit_code']})")
    return not problems, problems


def lines(r: dict[str, Any], command: str) -> list[str]:
    v = r["verify"]
    ok, problems = verdict(r)
    errors = ", ".join(f"{k}: {n}" for k, n in r["errors_by_status"].items()) or "none"
    return [
        f"- command: `{command}`",
        f"- {r['clients']} clients for {r['seconds']} s (embedder {r['embedder']}); commit {r['commit']}, "
        f"{r['measured_at']}, load average {r['load_average']}"
        + (f"; the server ran from {r['root']}" if r["root"] != str(ROOT) else ""),
        f"- run took {r['total_s']} s in all: server start {r['startup_s']} s, seeding {r['seed_s']} s, "
        f"traffic {r['wall_s']} s, verification {r['verify_s']} s",
        f"- requests: {r['requests']} ({', '.join(f'{k} {n}' for k, n in r['requests_by_op'].items())})",
        f"- throughput: {r['throughput_rps']} req/s",
        f"- errors by status: {errors}"
        + (
            f"; requests timed out (no answer in {r['timeout_s']:.0f} s): {r['timed_out']}"
            if r["timed_out"]
            else ""
        ),
        f"- accepted writes lost: **{v['lost_total']}** of {sum(v['accepted'].values())} "
        f"({', '.join(f'{k} {n}' for k, n in v['accepted'].items())}; lost {v['lost'] or 0}); "
        f"documents listed {v['documents_listed']}, stray {v['stray_documents']}"
        + (
            f"; **{v['unverified_total']}** could not be checked, no answer ({v['unverified']})"
            if v["unverified_total"]
            else ""
        ),
        f"- answers that belong to another request: **{r['misrouted']}** "
        f"({r['misrouted_by_op'] or 0}; {r['misrouted_foreign']} carry another request's token, id "
        "or requestId)",
        *[
            f"- {path}{' (governed: token, policy, rate limit, audit)' if name == 'governed' else ''}: "
            f"max {h['during_max_ms']} ms during the traffic (p95 {h['during_p95_ms']}), "
            f"max {h['after_disconnect_max_ms']} ms right after {h['after_disconnect_probes']} disconnects, "
            f"max {h['after_run_max_ms']} ms after the run; {h['stalls']} stalls over "
            f"{h['stall_ms'] / 1000:.0f} s or unanswered"
            for name, path in PROBES.items()
            for h in [r[name]]
        ],
        f"- server RSS: {rss_line(r['rss_mb'], r['rss_interval_s'])} (from readiness; "
        f"{r['rss_traffic_start_mb']} MB when the traffic started, {r['rss_after_verify_mb']} MB after "
        "the verification)",
        f"- server log: {r['server_tracebacks']} tracebacks; exit code {r['server_exit_code']}",
        f"- verdict: {'PASS' if ok else 'FAIL: ' + '; '.join(problems)}",
    ]


def report_md(r: dict[str, Any], command: str) -> str:
    out = [
        "# Soak (`make soak`)",
        "",
        "Generated by `benchmarks/soak.py`: the real server (`citegate serve`, a subprocess on its own data",
        "root) under mixed traffic from concurrent clients, each with its own connection: retrieve, ask",
        "(`/v1` and `/answer/ask`), ingest (then the task), feedback, kb creates, 404s on unknown ids, chats",
        "with a streamed message, `/api/v2/query` streams, and streams dropped after their first frame.",
        "Every request carries a unique token or id its answer must reflect; after the run every accepted",
        "write must exist with its own content. See the script's docstring for each check. Lost writes,",
        "answers that are not their own, requests that time out, probe stalls and a server that dies or",
        "does not stop on SIGTERM fail the run.",
        "",
        *lines(r, command),
        "",
        "| operation | requests | p50 ms | p95 ms | max ms |",
        "|---|---:|---:|---:|---:|",
        *[
            f"| {op} | {r['requests_by_op'].get(op, 0)} | {c['p50_ms']} | {c['p95_ms']} | {c['max_ms']} |"
            for op, c in r["latency_by_op"].items()
        ],
        "",
    ]
    if r["misrouted_examples"]:
        out += [
            "Answers that were not their own (first ones):",
            "",
            *[f"- {e}" for e in r["misrouted_examples"][:12]],
            "",
        ]
    if r["verify"]["examples"]:
        out += ["Lost writes (first ones):", "", *[f"- {e}" for e in r["verify"]["examples"][:12]], ""]
    if r["error_examples"]:
        out += ["Unexpected statuses (first ones):", "", *[f"- `{e}`" for e in r["error_examples"][:8]], ""]
    return "\n".join(out).rstrip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=120.0, help="traffic time (default 120)")
    parser.add_argument("--short", action="store_true", help="30 s of traffic and 16 seed documents")
    parser.add_argument("--seeds", type=int, default=32, help="documents seeded before the traffic")
    parser.add_argument("--embedder", default=os.environ.get("CITEGATE_EMBEDDER", "use"))
    parser.add_argument("--stall-seconds", type=float, default=5.0, help="a slower probe is a stall")
    parser.add_argument(
        "--probe-interval", type=float, default=0.5, help="seconds between probes during the traffic; 0: none"
    )
    parser.add_argument("--rss-interval", type=float, default=5.0)
    parser.add_argument("--drain-seconds", type=float, default=120.0, help="wait for accepted ingests")
    parser.add_argument(
        "--mix", default="", help="override weights, e.g. disconnect=0,ingest=20 (default " + str(MIX) + ")"
    )
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--tmp", default=None, help="where the temporary data root goes (default /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the data root and server log")
    parser.add_argument(
        "--root",
        type=Path,
        default=ROOT,
        help="the source tree whose server runs (default this one; e.g. `git archive` of another commit)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "soak.md")
    parser.add_argument("--json", type=Path, default=ROOT / "bench-results" / "soak.json")
    args = parser.parse_args()
    if args.short:
        args.seconds, args.seeds = 30.0, 16
    for item in filter(None, args.mix.split(",")):
        name, _, weight = item.partition("=")
        if name not in MIX:
            parser.error(f"--mix: no operation {name!r} (one of {', '.join(MIX)})")
        MIX[name] = int(weight)
    command = "python benchmarks/soak.py " + " ".join(sys.argv[1:])
    r = run(args)
    print()
    for line in lines(r, command.strip()):
        print(line.removeprefix("- ").replace("**", ""))
    for title, examples in (
        ("not their own", r["misrouted_examples"]),
        ("lost", r["verify"]["examples"]),
        ("unexpected statuses", r["error_examples"]),
    ):
        if examples:
            print(f"\nfirst {title}:")
            for e in examples[:8]:
                print(f"  {e}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(r, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report_md(r, command.strip()))
    print(f"\nwrote {args.out} and {args.json}")
    return 0 if verdict(r)[0] else 1


if __name__ == "__main__":
    sys.exit(main())
