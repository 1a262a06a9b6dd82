"""The `citegate` command: run the local stack (`serve`, `demo`) and use any citegate over HTTP.

Client commands talk to `--url` / $CITEGATE_URL with `--token` / $RAG_API_TOKEN or `--sigv4`.
Exit codes (docs/cli.md): 0 ok, 1 failures reported, 2 usage error, 3 auth error, 4 server unavailable.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

from citegate.clients.http_client import (
    DEFAULT_URL,
    ApiError,
    CitegateClient,
    Credentials,
    Unauthenticated,
    Unavailable,
    base_url,
    credentials_for,
    describe_error,
)
from citegate.knowledge.ingest.selection import SKIPPED_SOURCE_COPY, Selection, SelectionError, select_files

EXIT_OK, EXIT_FAILURES, EXIT_USAGE, EXIT_AUTH, EXIT_UNAVAILABLE = 0, 1, 2, 3, 4
INLINE_LIMIT = 4 * 1024 * 1024  # the API's decoded base64_file limit (settings); larger: an upload
UNAVAILABLE_STATUSES = (502, 503, 504)
RATE_LIMIT_PATIENCE_S = 900  # bulk commands wait out 429s for at most this long in all


class CliError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


# --- connection ----------------------------------------------------------------------------------


class PatientClient(CitegateClient):
    """For bulk commands (ingest, eval): a 429 is waited out (the server's `details.retry_after`,
    else 2 s) and retried, up to `patience` seconds of waiting in all, instead of failing the run.

    `waited_s` lets a caller that times requests leave the waits out of its latency.
    """

    def __init__(self, url: str, credentials: Credentials, patience: float = RATE_LIMIT_PATIENCE_S) -> None:
        super().__init__(url, credentials)
        self.patience, self.waits, self.waited_s = patience, 0, 0.0
        self._granted_s = 0.0  # waits asked for so far, against `patience`

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        while True:
            try:
                return super().request(method, path, body)
            except ApiError as error:
                if error.status != 429:
                    raise
                details = error.body.get("details")
                hint = details.get("retry_after") if isinstance(details, dict) else None
                wait = float(hint) + 0.1 if isinstance(hint, int | float) and hint >= 0 else 2.0
                if self._granted_s + wait > self.patience:
                    raise
                self._granted_s += wait
                started = time.perf_counter()
                time.sleep(wait)
                self.waits += 1
                self.waited_s += time.perf_counter() - started


def _client(args: argparse.Namespace, patient: bool = False) -> CitegateClient:
    # One rule for every command, `mcp --stdio` included (citegate.clients.http_client; docs/cli.md's table).
    url, credentials = base_url(args.url), credentials_for(args.token, sigv4=args.sigv4)
    return PatientClient(url, credentials) if patient else CitegateClient(url, credentials)


def _fail_for(error: ApiError) -> CliError:
    if error.status in (401, 403):
        return CliError(describe_error(error.status, error.body), EXIT_AUTH)
    if error.status in UNAVAILABLE_STATUSES:
        return CliError(describe_error(error.status, error.body), EXIT_UNAVAILABLE)
    return CliError(describe_error(error.status, error.body), EXIT_FAILURES)


def _call(
    client: CitegateClient, method: str, path: str, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    try:
        return client.request(method, path, body)
    except ApiError as error:
        raise _fail_for(error) from error


def _print_json(body: Any) -> None:
    print(json.dumps(body, ensure_ascii=False, indent=2))


# --- knowledge bases, tasks, questions --------------------------------------------------------------


def cmd_kb_create(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.name, "status": args.status}
    if args.id:
        body["kb_id"] = args.id
    if args.description:
        body["description"] = args.description
    with _client(args) as client:
        kb = _call(client, "POST", "/v1/kb", body)
    if args.json:
        _print_json(kb)
    else:
        print(f"{kb['kb_id']}\t{kb['name']}\t{kb['status']}")
    return EXIT_OK


def cmd_kb_list(args: argparse.Namespace) -> int:
    with _client(args) as client:
        found = _call(client, "GET", "/v1/kb")
    if args.json:
        _print_json(found)
        return EXIT_OK
    for kb in found.get("knowledge_bases", []):
        print(f"{kb['kb_id']}\t{kb['name']}\t{kb['status']}\t{kb.get('document_count', 0)} documents")
    return EXIT_OK


def cmd_tasks(args: argparse.Namespace) -> int:
    with _client(args) as client:
        task = _call(client, "GET", f"/v1/tasks/{args.task_id}")
    if args.json:
        _print_json(task)
    else:
        counts = task.get("counts") or {}
        print(
            f"{task['task_id']}\t{task['status']}\tparents={counts.get('parents', 0)} "
            f"children={counts.get('children', 0)}"
            + (f"\terror: {task['error']}" if task.get("error") else "")
        )
    return EXIT_OK if task["status"] != "failed" else EXIT_FAILURES


def _where(citation: dict[str, Any]) -> str:
    where = str(citation["source_name"])
    if citation.get("heading"):
        where += f" › {citation['heading']}"
    if citation.get("page_hint"):
        where += f" (page {citation['page_hint']})"
    return where


def cmd_ask(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"question": args.question, "top_k": args.top_k}
    with _client(args) as client:
        answer = _call(client, "POST", f"/v1/kb/{args.kb}/ask", body)
    if args.json:
        _print_json(answer)
        return EXIT_OK
    if answer.get("no_answer"):
        print(f"(no answer) {answer['answer']}")
        if answer.get("no_answer_reason"):
            print(f"reason: {answer['no_answer_reason']}")
        return EXIT_OK
    print(answer["answer"])
    if answer.get("citations"):
        print()
    from citegate.knowledge.citations import excerpt

    for number, citation in enumerate(answer.get("citations", []), start=1):
        # Whole sentences, from those the answer rests on (the answer sentences bound to it).
        shown = excerpt(str(citation.get("snippet", "")), 240, citation.get("answer_sentences") or ())
        print(f"[{number}] {_where(citation)}: “{shown}”")
    return EXIT_OK


def cmd_retrieve(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"query": args.query, "top_k": args.top_k}
    with _client(args) as client:
        found = _call(client, "POST", f"/v1/kb/{args.kb}/retrieve", body)
    if args.json:
        _print_json(found)
        return EXIT_OK
    from citegate.knowledge.citations import snippet

    # In rank order, the order of the rank score; the relevance beside it is absolute (docs/api.md).
    for rank, hit in enumerate(found.get("results", []), start=1):
        rank_score = hit.get("rank_score")
        ranked = f"rank {rank_score:.3f} " if isinstance(rank_score, int | float) else ""
        text = snippet(str(hit["chunk_text"]), 160)
        print(f"[{rank}] {ranked}relevance {hit['score']:.3f} {hit['ref_id']}: {text}")
    return EXIT_OK


# --- ingestion ----------------------------------------------------------------------------------


class Progress:
    """A one-line progress bar on stderr over files (or passages, queries): how many are done
    (each counted when its task ends: succeeded, failed, or skipped as unchanged), how many were
    sent, how many failed, and the chunks the finished tasks made."""

    def __init__(self, total: int, enabled: bool, unit: str = "files", chunks: bool = True) -> None:
        self.total, self.done, self.sent, self.failed, self.chunks = total, 0, 0, 0, 0
        self.enabled = enabled and total > 0
        self.unit, self.show_chunks = unit, chunks

    def advance(self, chunks: int = 0, failed: bool = False) -> None:
        """One item is done."""
        self.done += 1
        self.failed += failed
        self.chunks += chunks
        self.draw()

    def sending(self, note: str = "") -> None:
        """One more item was sent to the server (its task is not done yet)."""
        self.sent += 1
        self.draw(note)

    def draw(self, note: str = "") -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * self.done / self.total)
        bar = "#" * filled + "-" * (width - filled)
        counts = f"{self.done}/{self.total} {self.unit} done"
        if self.sent:
            counts += f", {self.sent} sent"
        if self.failed:
            counts += f", {self.failed} failed"
        if self.show_chunks:
            counts += f", {self.chunks} chunks"
        sys.stderr.write(f"\r[{bar}] {counts} {note[:40]:<40}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _selection(args: argparse.Namespace) -> Selection:
    """The files `ingest` sends (citegate.knowledge.ingest.selection): folders recursively, minus what the
    globs leave out and the source copies of rendered pages, unless --all-files."""
    try:
        return select_files(
            args.paths,
            include=args.include or (),
            exclude=args.exclude or (),
            keep_source_copies=args.all_files,
        )
    except SelectionError as error:
        raise CliError(str(error), EXIT_USAGE) from error


def _state_path(args: argparse.Namespace) -> Path:
    if args.state:
        return Path(args.state)
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "citegate" / "ingest-state.json"


def _load_state(path: Path) -> dict[str, Any]:
    try:
        state = json.loads(path.read_text())
        return state if isinstance(state, dict) else {}
    except (OSError, json.JSONDecodeError):
        return {}


def _save_state(path: Path, state: dict[str, Any]) -> None:
    # Write-then-rename, so an interrupted run never leaves a truncated state file.
    path.parent.mkdir(parents=True, exist_ok=True)
    unfinished = path.with_suffix(".tmp")
    unfinished.write_text(json.dumps(state, indent=1, sort_keys=True))
    unfinished.replace(path)


def _submit(client: CitegateClient, data: bytes, *, kb: str, file: Path, name: str) -> str:
    metadata = {"path": name}
    if len(data) <= INLINE_LIMIT:
        body = {"base64_file": base64.b64encode(data).decode(), "source_name": name, "metadata": metadata}
        return str(client.post(f"/v1/kb/{kb}/documents", body)["task_id"])
    upload = client.post(f"/v1/kb/{kb}/uploads", {"source_name": name})
    client.put_presigned(upload["url"], upload.get("headers") or {}, data)
    body = {"s3_key": upload["s3_key"], "source_name": name, "metadata": metadata}
    return str(client.post(f"/v1/kb/{kb}/documents", body)["task_id"])


@dataclass(frozen=True)
class Submission:
    """One document to ingest: `content` (read when its turn comes) decides whether it changed."""

    name: str  # the source name, the key of the resume state
    content: Callable[[], bytes]
    send: Callable[[CitegateClient, bytes], str]  # submits the content, returns the task id


@dataclass(frozen=True)
class FileOutcome:
    """What became of one file (or passage): `ingest --json` prints one per line."""

    name: str
    status: Literal["succeeded", "skipped", "failed"]
    task_id: str | None = None
    chunks: int = 0
    error: str | None = None


@dataclass
class Ingested:
    total: int
    files: list[FileOutcome] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def succeeded(self) -> int:
        return self.count("succeeded")

    @property
    def skipped(self) -> int:
        return self.count("skipped")

    @property
    def chunks(self) -> int:
        return sum(f.chunks for f in self.files)

    @property
    def failures(self) -> list[tuple[str, str]]:
        return [(f.name, f.error or "ingestion failed") for f in self.files if f.status == "failed"]


# The document list is read at most this often, and never more than a tenth of the time.
MIN_WATCH_INTERVAL_S = 0.25
WATCH_COST_SHARE = 10


class TaskWatch:
    """Which submitted tasks have ended, at a bounded cost per pass.

    A pass reads the knowledge base's document list once (`GET /v1/kb/{kb}/documents`: every
    document's status, `indexed` or `failed` once its latest task ended, and its chunk count),
    plus one `GET /v1/tasks/{id}` per task found failed (for its error). A task the list does not
    show as its document's latest (outside the caller's scope, re-submitted meanwhile, or a
    caller not granted the list) is read on its own, in submission order, up to the first one
    still running: tasks finish roughly in that order, so that costs one request per finished
    task, never one per pending task. Passes are spaced by `MIN_WATCH_INTERVAL_S`, and by ten
    times the list's own latency, so a large knowledge base is not listed faster than it answers.
    """

    def __init__(self, client: CitegateClient, kb: str) -> None:
        self.client, self.kb = client, kb
        self.listing = True  # off after the list is refused: one task at a time, as above
        self.next_pass = 0.0

    def due(self) -> bool:
        return time.monotonic() >= self.next_pass

    def wait(self) -> None:
        time.sleep(max(0.0, self.next_pass - time.monotonic()))

    def ended(
        self, pending: dict[str, tuple[str, str]], every: bool = False
    ) -> list[tuple[str, dict[str, Any]]]:
        """(name, task) for each pending task that has ended; `every`: read each unlisted task,
        not only up to the first still running (the last look before calling the rest late)."""
        started = time.monotonic()
        listed = self._listed()
        self.next_pass = time.monotonic() + max(
            MIN_WATCH_INTERVAL_S, WATCH_COST_SHARE * (time.monotonic() - started)
        )
        found: list[tuple[str, dict[str, Any]]] = []
        blocked = False
        for name, (task_id, _) in pending.items():
            document = listed.get(name)
            if document is not None and document.get("task_id") == task_id:
                status = document.get("status")
                if status == "indexed":
                    counts = document.get("counts") or {}
                    found.append((name, {"task_id": task_id, "status": "succeeded", "counts": counts}))
                elif status == "failed":
                    found.append((name, _call(self.client, "GET", f"/v1/tasks/{task_id}")))
                continue
            if blocked:
                continue
            task = _call(self.client, "GET", f"/v1/tasks/{task_id}")
            if task["status"] in ("succeeded", "failed"):
                found.append((name, task))
            elif not every:
                blocked = True  # later ones wait for the next pass (the class docstring says why)
        return found

    def _listed(self) -> dict[str, dict[str, Any]]:
        if not self.listing:
            return {}
        try:
            documents = self.client.get(f"/v1/kb/{self.kb}/documents").get("documents") or []
        except ApiError as error:
            if error.status in (401, 403, 404, 405):
                self.listing = False  # e.g. a token granted ingestion but not the document list
                return {}
            raise _fail_for(error) from error
        return {str(d.get("source_name")): d for d in documents if isinstance(d, dict)}


def _ingest(
    client: CitegateClient,
    kb: str,
    submissions: Sequence[Submission],
    args: argparse.Namespace,
    unit: str,
    on_file: Callable[[FileOutcome], None] | None = None,
) -> Ingested:
    """Submit what changed since its last success, wait for the tasks, record each success.

    The state file (`--state`) maps "url|kb" to {source name: sha256 of what succeeded}, so a run
    interrupted at any point resumes where it stopped; `--force` resends everything. Each file is
    counted (and passed to `on_file`) when its task ends, also while later files are still being
    sent (TaskWatch says what a look costs).
    """
    state_file = _state_path(args)
    state = _load_state(state_file)
    done: dict[str, str] = state.setdefault(f"{client.url}|{kb}", {})
    if getattr(args, "sync", False) and not args.force:
        # The server's own hashes decide what is unchanged: exact whatever the state file says.
        done.update(_indexed_hashes(client, kb))
    progress = Progress(len(submissions), enabled=not args.quiet, unit=unit)
    outcome = Ingested(total=len(submissions))
    pending: dict[str, tuple[str, str]] = {}  # name -> (task id, content sha256), in submission order
    watch = TaskWatch(client, kb)

    def finish(file: FileOutcome, digest: str = "") -> None:
        outcome.files.append(file)
        if file.status == "succeeded":
            done[file.name] = digest
            _save_state(state_file, state)  # after each document, so an interrupted run resumes
        progress.advance(file.chunks, failed=file.status == "failed")
        if on_file is not None:
            on_file(file)

    def collect(every: bool = False) -> None:
        for name, task in watch.ended(pending, every=every):
            task_id, digest = pending.pop(name)
            chunks = int((task.get("counts") or {}).get("children", 0))
            if task["status"] == "succeeded":
                finish(FileOutcome(name, "succeeded", task_id, chunks), digest)
            else:
                error = str(task.get("error") or "ingestion failed")
                finish(FileOutcome(name, "failed", task_id, chunks, error))

    try:
        for item in submissions:
            data = item.content()
            digest = hashlib.sha256(data).hexdigest()
            if done.get(item.name) == digest and not args.force:
                finish(FileOutcome(item.name, "skipped"))
                continue
            try:
                pending[item.name] = (item.send(client, data), digest)
                progress.sending(item.name)
            except ApiError as error:
                if error.status in (401, 403) or error.code == "kb_not_found":
                    raise _fail_for(error) from error
                if error.status in UNAVAILABLE_STATUSES and error.code == "storage_unavailable":
                    raise _fail_for(error) from error
                finish(FileOutcome(item.name, "failed", error=describe_error(error.status, error.body)))
            if pending and watch.due():
                collect()  # tasks already done while the rest is being sent
        deadline = time.monotonic() + args.timeout
        while pending:
            watch.wait()
            late = time.monotonic() > deadline
            collect(every=late)  # past the deadline: a last look at every task before calling it late
            if pending and late:
                for name, (task_id, _) in list(pending.items()):
                    del pending[name]
                    finish(
                        FileOutcome(
                            name,
                            "failed",
                            task_id,
                            error=f"task {task_id} did not finish in {args.timeout:.0f}s",
                        )
                    )
    finally:
        progress.close()
    _save_state(state_file, state)
    return outcome


def _kb_documents(client: CitegateClient, kb: str) -> list[dict[str, Any]]:
    documents = _call(client, "GET", f"/v1/kb/{kb}/documents").get("documents") or []
    return [d for d in documents if isinstance(d, dict)]


def _indexed_hashes(client: CitegateClient, kb: str) -> dict[str, str]:
    return {
        str(d["source_name"]): str(d.get("content_sha256") or "")
        for d in _kb_documents(client, kb)
        if d.get("status") == "indexed"
    }


def _delete_gone(client: CitegateClient, kb: str, names: set[str]) -> list[str]:
    """`ingest --sync`: delete the knowledge base's documents the folder no longer has (not those a
    source brings: its own syncs keep them)."""
    gone = [d for d in _kb_documents(client, kb) if d["source_name"] not in names and not d.get("source_id")]
    for document in gone:
        _call(client, "DELETE", f"/v1/kb/{kb}/documents/{document['document_id']}")
    return sorted(str(d["source_name"]) for d in gone)


def _report_failures(outcome: Ingested) -> None:
    for name, reason in outcome.failures:
        print(f"  FAILED {name}: {reason}", file=sys.stderr)


def _print_line(body: dict[str, Any]) -> None:
    print(json.dumps(body, ensure_ascii=False), flush=True)


def cmd_ingest(args: argparse.Namespace) -> int:
    selection = _selection(args)
    submissions = [
        Submission(name, file.read_bytes, partial(_submit, kb=args.kb, file=file, name=name))
        for file, name in selection.files
    ]
    copies = selection.skipped_for(SKIPPED_SOURCE_COPY)
    if copies:  # stderr, as the progress bar: stdout stays one JSON object a line
        print(
            f"left out {copies} source cop{'y' if copies == 1 else 'ies'} of rendered pages "
            "(Sphinx _sources/, x.txt beside x.html); --all-files sends them too",
            file=sys.stderr,
        )
    # --json: one line per file as its task ends ({"type": "file", ...}), then {"type": "summary"}.
    on_file = (lambda f: _print_line({"type": "file", **asdict(f)})) if args.json else None
    deleted: list[str] = []
    with _client(args, patient=True) as client:
        outcome = _ingest(client, args.kb, submissions, args, unit="files", on_file=on_file)
        if args.sync:
            deleted = _delete_gone(client, args.kb, {name for _, name in selection.files})
    failed = len(outcome.failures)
    if args.json:
        _print_line(
            {
                "type": "summary",
                "kb": args.kb,
                "total": outcome.total,
                "succeeded": outcome.succeeded,
                "skipped": outcome.skipped,
                "failed": failed,
                "chunks": outcome.chunks,
                "left_out": len(selection.skipped),
                **({"deleted": len(deleted)} if args.sync else {}),
            }
        )
    else:
        print(
            f"ingested {outcome.succeeded}, skipped {outcome.skipped} (unchanged), failed {failed} "
            f"of {outcome.total} file(s) into {args.kb}; {outcome.chunks} chunks"
            + (f"; deleted {len(deleted)} gone from the folder" if args.sync else "")
        )
    _report_failures(outcome)
    return EXIT_FAILURES if outcome.failures else EXIT_OK


# --- sources --------------------------------------------------------------------------------------


def _source_settings(args: argparse.Namespace) -> dict[str, Any]:
    settings: dict[str, Any]
    if args.folder:
        settings = {"kind": "folder", "path": str(Path(args.folder).resolve())}
    elif args.git:
        settings = {"kind": "git", "url": args.git, "ref": args.ref, "subdir": args.subdir}
    elif args.website or args.sitemap:
        settings = {"kind": "website", "start_url": args.website or "", "sitemap_url": args.sitemap or ""}
        settings.update(prefix=args.url_prefix or "", max_pages=args.max_pages, requests_per_second=args.rate)
    else:
        bucket, _, prefix = str(args.s3).removeprefix("s3://").partition("/")
        settings = {"kind": "s3", "bucket": bucket, "prefix": prefix}
    for name in ("include", "exclude"):
        if getattr(args, name):
            settings[name] = getattr(args, name)
    for name in ("project", "version", "base_url", "path_prefix", "name_prefix"):
        if getattr(args, name):
            settings[name] = getattr(args, name)
    if args.strip_suffix:
        settings["strip_suffix"] = True
    if args.all_files:
        settings["keep_source_copies"] = True
    return settings


def _run_line(run: dict[str, Any]) -> str:
    c = run.get("counts") or {}
    line = (
        f"{run['run_id']}\t{run['status']}\t{run.get('started_at', '')}\t"
        f"added {c.get('added', 0)}, changed {c.get('changed', 0)}, unchanged {c.get('unchanged', 0)}, "
        f"deleted {c.get('deleted', 0)}, failed {c.get('failed', 0)}"
    )
    if c.get("requeued"):
        line += f", requeued {c['requeued']}"
    if run.get("duration_ms") is not None:
        line += f"\t{run['duration_ms'] / 1000:.1f}s"
    return line + (f"\t{run['error']}" if run.get("error") else "")


def cmd_sources_add(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.name, "settings": _source_settings(args)}
    if args.schedule:
        body["schedule_minutes"] = args.schedule
    with _client(args) as client:
        source = _call(client, "POST", f"/v1/kb/{args.kb}/sources", body)
    if args.json:
        _print_json(source)
    else:
        print(f"{source['source_id']}\t{source['kind']}\t{source['name']}")
    return EXIT_OK


def cmd_sources_list(args: argparse.Namespace) -> int:
    with _client(args) as client:
        found = _call(client, "GET", f"/v1/kb/{args.kb}/sources")
    if args.json:
        _print_json(found)
        return EXIT_OK
    for source in found.get("sources", []):
        last = source.get("last_run") or {}
        schedule = (
            f"every {source['schedule_minutes']} min" if source.get("schedule_minutes") else "on demand"
        )
        print(
            f"{source['source_id']}\t{source['kind']}\t{source['name']}\t{schedule}\t"
            f"last run: {last.get('status', 'never')} {last.get('finished_at') or ''}".rstrip()
        )
    return EXIT_OK


FINISHED_RUN = ("succeeded", "failed", "abandoned")


def cmd_sources_sync(args: argparse.Namespace) -> int:
    with _client(args, patient=True) as client:
        # 202: the run is queued; the sync function does the work (docs/sources.md).
        run = _call(client, "POST", f"/v1/kb/{args.kb}/sources/{args.source_id}/sync")
        link = str((run.get("links") or {}).get("self") or "")
        failed_tasks = 0
        deadline = time.monotonic() + args.timeout
        if args.wait and link:
            while run["status"] not in FINISHED_RUN and time.monotonic() < deadline:
                time.sleep(0.25)
                run = _call(client, "GET", link)
            if run["status"] not in FINISHED_RUN:
                print(
                    f"citegate: run {run['run_id']} still {run['status']} after {args.timeout:.0f}s",
                    file=sys.stderr,
                )
        if args.wait and run.get("task_ids"):
            pending = list(run["task_ids"])
            while pending and time.monotonic() < deadline:
                task = _call(client, "GET", f"/v1/tasks/{pending[0]}")
                if task["status"] in ("succeeded", "failed"):
                    failed_tasks += task["status"] == "failed"
                    pending.pop(0)
                else:
                    time.sleep(0.25)
            if pending:
                print(
                    f"citegate: {len(pending)} ingestion(s) still running after {args.timeout:.0f}s",
                    file=sys.stderr,
                )
    if args.json:
        _print_json(run)
    else:
        print(_run_line(run))
        for failure in run.get("failures") or []:
            print(f"  FAILED {failure['name']}: {failure['reason']}", file=sys.stderr)
    # Without --wait the run is only queued: a refusal would have been an error already.
    if (
        run["status"] not in (("succeeded",) if args.wait else ("succeeded", "queued", "running"))
        or failed_tasks
    ):
        return EXIT_FAILURES
    return EXIT_OK


def cmd_sources_runs(args: argparse.Namespace) -> int:
    with _client(args) as client:
        found = _call(client, "GET", f"/v1/kb/{args.kb}/sources/{args.source_id}/runs?limit={args.limit}")
    if args.json:
        _print_json(found)
        return EXIT_OK
    for run in found.get("runs", []):
        print(_run_line(run))
    return EXIT_OK


# --- evaluation -----------------------------------------------------------------------------------


def _submit_text(client: CitegateClient, data: bytes, *, kb: str, name: str, title: str) -> str:
    body = {"text": data.decode(), "source_name": name, "mime_type": "text/markdown"}
    if title:
        body["title"] = title
    return str(client.post(f"/v1/kb/{kb}/documents", body)["task_id"])


def _ensure_kb(client: CitegateClient, kb: str) -> None:
    try:
        client.get(f"/v1/kb/{kb}")
    except ApiError as error:
        if error.code != "kb_not_found":
            raise _fail_for(error) from error
        _call(client, "POST", "/v1/kb", {"kb_id": kb, "name": kb})


def cmd_eval(args: argparse.Namespace) -> int:
    from citegate.clients.evaluation.dataset import SPLITS, DatasetError, load_dataset, passage_document
    from citegate.clients.evaluation.remote import MAX_TOP_K, RemoteOptions, asks, run_remote, selected
    from citegate.clients.evaluation.report import render_table

    if not 1 <= args.top_k <= MAX_TOP_K:
        raise CliError(f"--top-k must be between 1 and {MAX_TOP_K} (the API's limit)", EXIT_USAGE)
    if args.limit is not None and args.limit < 1:
        raise CliError("--limit must be at least 1", EXIT_USAGE)
    splits = SPLITS if args.split == "both" else (args.split,)
    try:
        dataset = load_dataset(Path(args.folder), splits)
    except DatasetError as error:
        raise CliError(str(error), EXIT_USAGE) from error
    out = Path(args.out) if args.out else None
    if out is not None and not out.parent.is_dir():
        raise CliError(f"--out: no such folder: {out.parent}", EXIT_USAGE)
    options = RemoteOptions(kb=args.kb, splits=splits, top_k=args.top_k, limit=args.limit, ask=args.ask)
    ingested, ingest_report = None, None
    with _client(args, patient=True) as client:
        if args.ingest:
            started = time.perf_counter()
            _ensure_kb(client, args.kb)
            submissions = [
                Submission(
                    pid,
                    partial(str.encode, passage_document(title, text)),
                    partial(_submit_text, kb=args.kb, name=pid, title=title.strip()),
                )
                for pid, (title, text) in dataset.passages.items()
            ]
            ingested = _ingest(client, args.kb, submissions, args, unit="passages")
            ingest_report = {
                "passages": ingested.total,
                "ingested": ingested.succeeded,
                "skipped": ingested.skipped,
                "failed": len(ingested.failures),
                "chunks": ingested.chunks,
                "seconds": round(time.perf_counter() - started, 1),
            }
        queries = sum(len(q) for q in selected(dataset, options).values())
        progress = Progress(queries * (2 if asks(dataset, options) else 1), not args.quiet, "calls", False)
        report = run_remote(client, dataset, options, tick=progress.advance)
        progress.close()
    report["folder"] = str(Path(args.folder).resolve())
    report["ingest"] = ingest_report
    if out is not None:
        out.write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n")
    if args.json:
        _print_json(report)
    else:
        print(render_table(report))
    if ingested is not None and ingested.failures:
        print(
            f"citegate: {len(ingested.failures)} passage(s) failed to ingest: figures are over an "
            "incomplete corpus",
            file=sys.stderr,
        )
        _report_failures(ingested)
        return EXIT_FAILURES
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    from citegate.clients.mcp_server import AdapterConfig, create_streamable_http_app, serve_stdio

    if args.http:
        import uvicorn

        config = AdapterConfig(url=base_url(args.url))
        config.read_local_files = False  # a shared server must not read its own disk for callers
        uvicorn.run(create_streamable_http_app(config), host=args.host, port=args.port, log_level="warning")
        return EXIT_OK
    return serve_stdio(AdapterConfig.from_env(sigv4=args.sigv4, url=args.url, token=args.token))


def cmd_policies_reseed(args: argparse.Namespace) -> int:
    """Overwrite policies with the seed file's: recovery by hand (docs/deploy.md). Writes to the
    policies table directly, never through the API: locally the stopped server's data folder
    ($RAG_DATA_ROOT), in AWS (CITEGATE_RUNTIME=aws, CITEGATE_STAGE) the stage's table."""
    from citegate.governance.policy.store import SEED_FILE
    from citegate.platform.errors import NotFound
    from citegate.platform.settings import get_settings

    settings = get_settings()
    path = Path(args.file) if args.file else (settings.policy_seed_file or SEED_FILE)
    tenant = args.tenant or settings.default_tenant
    try:
        if settings.runtime == "aws":
            from citegate.container import services

            written = services().policies.reseed(path, keys=args.keys or None, tenant_id=tenant)
        else:
            from citegate.runtime.stack import DataRootInUse, LocalStack

            stack = LocalStack(settings, poll=False)
            try:
                stack.start()
            except DataRootInUse as error:
                raise CliError(f"{error} (stop the server first)", EXIT_USAGE) from error
            try:
                assert stack.services is not None
                written = stack.services.policies.reseed(path, keys=args.keys or None, tenant_id=tenant)
            finally:
                stack.stop()
    except (NotFound, OSError, ValueError) as error:
        raise CliError(str(error), EXIT_USAGE) from error
    for key in written:
        print(f"reseeded {key} from {path}")
    return EXIT_OK


# --- parser ---------------------------------------------------------------------------------------


def _ingest_options(parser: argparse.ArgumentParser, timeout: float) -> None:
    """What the bulk commands that ingest (ingest, eval --ingest) share: resuming and waiting."""
    parser.add_argument("--state", help="resume file (default: $XDG_STATE_HOME/citegate/ingest-state.json)")
    parser.add_argument("--force", action="store_true", help="send everything, even unchanged since success")
    parser.add_argument("--timeout", type=float, default=timeout, help="seconds to wait for the tasks")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _connection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help=f"citegate base URL (default: $CITEGATE_URL or {DEFAULT_URL})")
    auth = parser.add_mutually_exclusive_group()
    auth.add_argument("--token", help="bearer token (default: $RAG_API_TOKEN)")
    auth.add_argument("--sigv4", action="store_true", help="sign with AWS SigV4 (botocore credential chain)")
    parser.add_argument("--json", action="store_true", help="print the server's JSON")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="citegate", description="Governed, cited knowledge answering.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the local stack and gateway on one machine")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=None, help="default: $PORT or 8099")
    demo = commands.add_parser("demo", help="start the local stack, ingest the samples, ask two questions")
    demo.add_argument("--port", type=int, default=None)

    kb = commands.add_parser("kb", help="knowledge bases")
    kb_commands = kb.add_subparsers(dest="kb_command", required=True)
    create = kb_commands.add_parser("create", help="create a knowledge base")
    create.add_argument("name")
    create.add_argument("--id", help="kb id (default: derived from the name)")
    create.add_argument("--description", default="")
    create.add_argument("--status", choices=("working", "approved"), default="working")
    _connection_options(create)
    create.set_defaults(run=cmd_kb_create)
    listing = kb_commands.add_parser("list", help="list knowledge bases")
    _connection_options(listing)
    listing.set_defaults(run=cmd_kb_list)

    ingest = commands.add_parser("ingest", help="ingest files and folders (Markdown, PDF, text, HTML)")
    ingest.add_argument("paths", nargs="+", metavar="PATH")
    ingest.add_argument("--kb", required=True, help="knowledge base id")
    ingest.add_argument(
        "--include",
        action="append",
        metavar="GLOB",
        help="only files matching (repeatable; with a / against the path in the folder, else the name)",
    )
    ingest.add_argument(
        "--exclude", action="append", metavar="GLOB", help="leave out matching files (repeatable)"
    )
    ingest.add_argument(
        "--all-files",
        action="store_true",
        help="also send the source copies of rendered pages (Sphinx _sources/, x.txt beside x.html)",
    )
    ingest.add_argument(
        "--sync",
        action="store_true",
        help="mirror the folder: skip what the server holds unchanged, delete documents gone from it",
    )
    _ingest_options(ingest, timeout=600)
    _connection_options(ingest)
    ingest.set_defaults(run=cmd_ingest)

    sources = commands.add_parser("sources", help="sources a knowledge base follows (docs/sources.md)")
    source_commands = sources.add_subparsers(dest="sources_command", required=True)
    add = source_commands.add_parser("add", help="add a folder, Git repository, website or S3 source")
    add.add_argument("name")
    add.add_argument("--kb", required=True, help="knowledge base id")
    kind = add.add_mutually_exclusive_group(required=True)
    kind.add_argument(
        "--folder", metavar="PATH", help="a local folder (local runtime, inside CITEGATE_LOCAL_INGEST_ROOT)"
    )
    kind.add_argument("--git", metavar="URL", help="a Git clone URL (locally also file:// or a path)")
    kind.add_argument("--website", metavar="URL", help="crawl from this start URL")
    kind.add_argument("--sitemap", metavar="URL", help="the pages of this sitemap")
    kind.add_argument("--s3", metavar="s3://BUCKET/PREFIX", help="the objects under an S3 prefix")
    add.add_argument("--ref", default="HEAD", help="git: branch, tag or commit")
    add.add_argument("--subdir", default="", help="git: the folder of the repository to follow")
    add.add_argument(
        "--url-prefix", help="website: follow links under this URL (default: the start URL's folder)"
    )
    add.add_argument("--max-pages", type=int, default=1000)
    add.add_argument("--rate", type=float, default=5.0, help="website: requests per second")
    add.add_argument("--include", action="append", metavar="GLOB")
    add.add_argument("--exclude", action="append", metavar="GLOB")
    add.add_argument("--all-files", action="store_true", help="keep source copies of rendered pages")
    add.add_argument("--project", help="metadata project of its documents")
    add.add_argument("--version", help="metadata version (git: the ref by default)")
    add.add_argument("--base-url", help="page URL = base URL + path in the source")
    add.add_argument("--strip-suffix", action="store_true", help="drop .md/.html from page URLs")
    add.add_argument("--path-prefix", help="metadata path = this prefix + path in the source")
    add.add_argument("--name-prefix", help="document names = this prefix + path in the source")
    add.add_argument("--schedule", type=int, metavar="MINUTES", help="sync by itself every MINUTES (>= 5)")
    _connection_options(add)
    add.set_defaults(run=cmd_sources_add)
    source_list = source_commands.add_parser("list", help="a knowledge base's sources")
    source_list.add_argument("--kb", required=True)
    _connection_options(source_list)
    source_list.set_defaults(run=cmd_sources_list)
    sync = source_commands.add_parser("sync", help="sync a source now")
    sync.add_argument("source_id")
    sync.add_argument("--kb", required=True)
    sync.add_argument(
        "--wait",
        action="store_true",
        help="wait for the run to end (its counts) and its ingestions to finish",
    )
    sync.add_argument("--timeout", type=float, default=1800)
    _connection_options(sync)
    sync.set_defaults(run=cmd_sources_sync)
    runs = source_commands.add_parser("runs", help="a source's latest sync runs")
    runs.add_argument("source_id")
    runs.add_argument("--kb", required=True)
    runs.add_argument("--limit", type=int, default=20)
    _connection_options(runs)
    runs.set_defaults(run=cmd_sources_runs)

    ask = commands.add_parser("ask", help="ask a question; an answer with numbered citations")
    ask.add_argument("question")
    ask.add_argument("--kb", required=True)
    ask.add_argument("--top-k", type=int, default=8)
    _connection_options(ask)
    ask.set_defaults(run=cmd_ask)

    retrieve = commands.add_parser("retrieve", help="ranked passages for a query")
    retrieve.add_argument("query")
    retrieve.add_argument("--kb", required=True)
    retrieve.add_argument("--top-k", type=int, default=8)
    _connection_options(retrieve)
    retrieve.set_defaults(run=cmd_retrieve)

    tasks = commands.add_parser("tasks", help="an ingestion or reindex task's status")
    tasks.add_argument("task_id")
    _connection_options(tasks)
    tasks.set_defaults(run=cmd_tasks)

    evaluation = commands.add_parser(
        "eval", help="measure a citegate on a labelled set folder (corpus, qrels, dev/test queries)"
    )
    evaluation.add_argument("folder", help="a set folder: corpus.jsonl, qrels.tsv, dev.jsonl, test.jsonl")
    evaluation.add_argument("--kb", required=True, help="knowledge base holding (or to hold) the corpus")
    evaluation.add_argument("--split", choices=("dev", "test", "both"), default="test")
    evaluation.add_argument("--limit", type=int, help="the first N queries of each split")
    evaluation.add_argument("--top-k", type=int, default=50, help="children retrieved per query (max 50)")
    evaluation.add_argument("--ask", action="store_true", help="also score answers (sets with answers)")
    evaluation.add_argument("--ingest", action="store_true", help="first ingest the corpus (resumable)")
    evaluation.add_argument("--out", help="also write the JSON report to this file")
    _ingest_options(evaluation, timeout=3600)
    _connection_options(evaluation)
    evaluation.set_defaults(run=cmd_eval)

    policies = commands.add_parser("policies", help="server-held policies (recovery by hand)")
    policy_commands = policies.add_subparsers(dest="policies_command", required=True)
    reseed = policy_commands.add_parser(
        "reseed", help="overwrite policies with the seed file's (default: every key in it)"
    )
    reseed.add_argument("keys", nargs="*", metavar="PRINCIPAL_KEY", help="e.g. service:rag-service")
    reseed.add_argument(
        "--file", help="seed file (default: $CITEGATE_POLICY_SEED_FILE or config/policies.json)"
    )
    reseed.add_argument("--tenant", help="tenant of policies that name none (default: the deployment's)")
    reseed.set_defaults(run=cmd_policies_reseed)

    mcp = commands.add_parser("mcp", help="run the MCP server (stdio by default)")
    transport = mcp.add_mutually_exclusive_group()
    transport.add_argument("--stdio", action="store_true", help="serve MCP over stdin/stdout (default)")
    transport.add_argument("--http", action="store_true", help="serve streamable HTTP (stateless) at /mcp")
    mcp.add_argument("--host", default="127.0.0.1")
    mcp.add_argument("--port", type=int, default=8765)
    _connection_options(mcp)
    mcp.set_defaults(run=cmd_mcp)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        from citegate.runtime.serve import serve as run_serve

        return run_serve(args.host, args.port)
    if args.command == "demo":
        from citegate.clients.demo import run_demo

        return run_demo(args.port)
    try:
        return int(args.run(args))
    except CliError as error:
        print(f"citegate: {error}", file=sys.stderr)
        return error.code
    except Unavailable as error:
        print(f"citegate: server unavailable: {error}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except Unauthenticated as error:
        print(f"citegate: {error}", file=sys.stderr)
        return EXIT_AUTH
    except ApiError as error:
        failure = _fail_for(error)
        print(f"citegate: {failure}", file=sys.stderr)
        return failure.code
    except KeyboardInterrupt:
        print("citegate: interrupted (finished files are recorded; run again to resume)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
