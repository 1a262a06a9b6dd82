"""One manual end to end against the real service: fetch, serve, ingest (timed), ask, score."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.manuals import fetch, scoring, service
from benchmarks.manuals.sets import SETS, Question, load_split
from benchmarks.provenance import stamp

HISTORY = "manuals-ingest-runs.json"  # every ingest run over one data root, oldest first
INGEST_TIMEOUT_S = 3600  # `citegate ingest --timeout`: the run is measured to its end, not cut at 600 s


@dataclass(frozen=True)
class Options:
    splits: tuple[str, ...] = ("test", "dev")
    only_ingest: bool = False
    bench: bool = False
    keep_server: bool = False
    data_root: Path | None = None  # reuse (and keep) this folder; default: a fresh temporary one
    complete_runs: int = 5  # further `citegate ingest` runs when the first leaves files out
    sets: Path = SETS
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)


def _history(data_root: Path) -> list[dict[str, Any]]:
    path = data_root / HISTORY
    return list(json.loads(path.read_text())) if path.is_file() else []


def _record(data_root: Path, run: dict[str, Any]) -> list[dict[str, Any]]:
    runs = [*_history(data_root), run]
    (data_root / HISTORY).write_text(json.dumps(runs, indent=1) + "\n")
    return runs


def _ingest_summary(runs: list[dict[str, Any]], files_total: int) -> dict[str, Any]:
    """The first run over this data root is the measurement (a fresh knowledge base, one command);
    the later ones are the resumes it took until every file was in."""
    complete_after = next((i + 1 for i, r in enumerate(runs) if r["exit_code"] == 0), None)
    return {
        "first": runs[0],
        "runs": runs,
        "runs_to_complete": complete_after,
        "files": files_total,
    }


class Asker:
    """The questions over HTTP, as a client written from docs/api.md would send them."""

    def __init__(self, url: str, kb: str) -> None:
        from citegate.clients.cli import PatientClient
        from citegate.clients.http_client import Credentials

        self.client = PatientClient(url, Credentials(token=service.TOKEN))
        self.kb = kb

    def close(self) -> None:
        self.client.__exit__(None, None, None)  # the client closes its connections on exit

    def _timed(self, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
        waited = self.client.waited_s
        started = time.perf_counter()
        response = self.client.post(path, body)
        # Waits for the rate limit are not the service's latency.
        return response, (time.perf_counter() - started - (self.client.waited_s - waited)) * 1000

    def retrieve(self, text: str) -> tuple[list[str], float]:
        found, ms = self._timed(f"/v1/kb/{self.kb}/retrieve", {"query": text, "top_k": scoring.TOP_K})
        refs = [hit["ref_id"] for hit in found.get("results", [])]
        if not refs:
            return [], ms
        resolved = self.client.post(f"/v1/kb/{self.kb}/resolve_refs", {"ref_ids": refs})
        pages = {c["ref_id"]: scoring.page_of(c) for c in resolved.get("citations", [])}
        return [pages.get(ref, "?") for ref in refs], ms

    def ask(self, text: str) -> tuple[dict[str, Any], float]:
        from citegate.clients.http_client import ApiError, describe_error

        try:
            return self._timed(f"/v1/kb/{self.kb}/ask", {"question": text})
        except ApiError as error:
            return {"error": describe_error(error.status, error.body)}, float("nan")

    def indexed(self) -> tuple[set[str], int]:
        """(source names of the indexed documents, their children) as the knowledge base holds them."""
        listing = self.client.get(f"/v1/kb/{self.kb}/documents")
        docs = [d for d in listing.get("documents", []) if d.get("status") == "indexed"]
        return {str(d["source_name"]) for d in docs}, sum(
            int((d.get("counts") or {}).get("children", 0)) for d in docs
        )


def ask_all(
    asker: Asker, questions: Sequence[Question], indexed: set[str], log: Callable[[str], None]
) -> list[dict[str, Any]]:
    outcomes = []
    for number, question in enumerate(questions, 1):
        pages, retrieve_ms = asker.retrieve(question.text)
        answer, ask_ms = asker.ask(question.text)
        outcome = scoring.judge(question, pages, answer, ask_ms=ask_ms, retrieve_ms=retrieve_ms)
        if question.answerable:
            outcome.extra["expected_page_indexed"] = bool(set(question.pages) & indexed)
        outcomes.append(outcome.to_json())
        if number % 10 == 0 or number == len(questions):
            log(f"  {number}/{len(questions)} questions")
    return outcomes


def run_manual(name: str, manual: fetch.Manual, options: Options) -> dict[str, Any]:
    log = options.log
    questions = {} if options.only_ingest else {s: load_split(name, s, options.sets) for s in options.splits}
    root = fetch.html_root(manual)
    from benchmarks.manuals.bench import ingested_files

    files_total = len(ingested_files(root))
    log(f"{name}: {manual.package} {manual.version}, {files_total} files under {root}")
    import citegate

    measured = stamp()
    if os.environ.get("CITEGATE_CODE_COMMIT"):  # the layer comes from elsewhere (PYTHONPATH): say which
        measured["commit"] = os.environ["CITEGATE_CODE_COMMIT"]
    result: dict[str, Any] = {
        **measured,
        # The code measured: the layer this run (and the server it starts, same environment) imports.
        "citegate_package": str(Path(citegate.__file__).resolve().parent),
        "manual": name,
        "package": manual.package,
        "version": manual.version,
        "sha256": manual.sha256,
        "html_root": manual.html_root,
    }
    with ExitStack() as stack:
        if (
            options.data_root is None and options.keep_server
        ):  # the server outlives this run: so does its folder
            data_root = Path(tempfile.mkdtemp(prefix=f"citegate-manual-{name}-"))
        elif options.data_root is None:
            data_root = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix=f"citegate-manual-{name}-"))
            )
        else:
            data_root = options.data_root / name
            data_root.mkdir(parents=True, exist_ok=True)
        # `citegate ingest` keys its resume state by server URL: a reused data root gets its port back.
        port_file = data_root / "port"
        port = int(port_file.read_text()) if port_file.is_file() else 0
        server = service.Server(data_root / "data", data_root / "serve.log", port=port)
        port_file.write_text(f"{server.port}\n")
        server.start()
        if not options.keep_server:
            stack.callback(server.stop)
        log(f"{name}: citegate serve ready at {server.url} in {server.ready_s}s (data {data_root})")
        result["server_ready_s"] = server.ready_s
        cli_log = data_root / "cli.log"
        code, _, err = server.cli("kb", "create", name, "--id", name, log=cli_log)
        if code != 0 and "kb_exists" not in err:
            raise service.ServerError(f"citegate kb create {name} failed ({code}): {err.strip()}")

        state = data_root / "ingest-state.json"
        asker = Asker(server.url, name)
        stack.callback(asker.close)
        _, before = asker.indexed()
        for attempt in range(1 + options.complete_runs):
            log(f"{name}: citegate ingest {root} --kb {name} (run {attempt + 1}); log {cli_log}")
            run = service.ingest(server, root, name, state, cli_log, INGEST_TIMEOUT_S)
            indexed, after = asker.indexed()
            record = run.to_json()
            # The chunks this run added to the knowledge base (the command's own count also adds
            # those of tasks that failed after chunking).
            record.update(
                cli_chunks=run.chunks,
                chunks=after - before,
                chunks_per_s=round((after - before) / run.wall_s, 1) if run.wall_s else 0.0,
                indexed_documents=len(indexed),
            )
            before = after
            runs = _record(data_root, record)
            log(
                f"{name}: ingested {run.ingested}, skipped {run.skipped}, failed {run.failed} of {run.files} "
                f"files in {run.wall_s}s; the knowledge base holds {len(indexed)} documents, {after} chunks "
                f"(+{record['chunks']}, {record['chunks_per_s']} chunks/s)"
            )
            if run.failed == 0 and run.exit_code == 0:
                break
        result["ingest"] = _ingest_summary(runs, files_total)
        result["ingest"].update({"kb_documents": len(indexed), "kb_chunks": after})
        result["embedder"] = server.env.get("CITEGATE_EMBEDDER", "use")
        for split, chosen in questions.items():
            log(f"{name}: {split}, {len(chosen)} questions")
            outcomes = ask_all(asker, chosen, indexed, log)
            result.setdefault("splits", {})[split] = {
                "summary": scoring.summarise([_outcome(o) for o in outcomes]),
                "questions": outcomes,
            }
        if options.keep_server:
            log(
                f"{name}: the server keeps running: {server.url} (RAG_API_TOKEN={service.TOKEN}, "
                f"pid {server.process.pid if server.process else '?'}, data {data_root})"
            )
        else:
            server.stop()
        if options.bench:
            from benchmarks.manuals.bench import embedder_alone

            first = result["ingest"]["first"]
            log(f"{name}: the embedder alone on the same children")
            result["embedder_alone"] = embedder_alone(root, first["wall_s"], first["chunks"])
    return result


def _outcome(row: dict[str, Any]) -> scoring.Outcome:
    return scoring.Outcome(**row)
