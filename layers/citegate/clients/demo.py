"""`make demo` / `citegate demo`: the whole job on the embedded defaults, over real HTTP.

Starts the local stack (unless one already answers on the port), creates a knowledge base,
ingests the sample corpus, asks one answerable and one unanswerable question, and prints the
answers with their resolved citations; then asks spec 003's dual agent in Chinese and prints its
stream (searches, the summary as it arrives, the references).
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from citegate.knowledge.citations import excerpt
from citegate.runtime import example_site

SAMPLES = Path(__file__).resolve().parents[3] / "samples"
QUESTIONS = ("How high is Olympus Mons?", "What is the boiling point of tungsten?")
KB_ID = "demo"


def _running(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _start_server(url: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "citegate.clients.cli", "serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("citegate ready on"):
            print(line.strip())
            return process
    raise SystemExit(f"the local stack did not start (exit code {process.wait()})")


def _wait(client: httpx.Client, task_id: str, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        task: dict[str, Any] = client.get(f"/v1/tasks/{task_id}").json()
        if task["status"] in ("succeeded", "failed"):
            return task
        time.sleep(0.2)
    raise SystemExit(f"task {task_id} did not finish in {timeout:.0f}s")


def _print_answer(question: str, body: dict[str, Any]) -> None:
    print(f"\nQ: {question}")
    if body["no_answer"]:
        print(f"A: (no answer) {body['answer']}\n   reason: {body['no_answer_reason']}")
        return
    print(f"A: {body['answer']}")
    for number, citation in enumerate(body["citations"], start=1):
        where = citation["source_name"]
        if citation.get("heading"):
            where += f" › {citation['heading']}"
        if citation.get("page_hint"):
            where += f" (page {citation['page_hint']})"
        # Whole sentences, from those the answer rests on.
        shown = excerpt(citation["snippet"], 240, citation.get("answer_sentences") or ())
        print(f"   [{number}] {where}: “{shown}”")


AGENT_QUESTION = "明长城的总长度是多少？"


def _stream_agents(client: httpx.Client, question: str) -> None:
    """Spec 003's dual agent, printed as its events arrive (GET the stream, line by line)."""
    import json

    print(f"\nQ (/api/v2/query, streamed): {question}")
    with client.stream("POST", "/api/v2/query", json={"query": question}) as response:
        response.raise_for_status()
        at_line_start = True
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[len("data: ") :])
            kind = event["message_type"]
            if kind != 1 and not at_line_start:
                print()
                at_line_start = True
            if kind == 201:
                print(f"  [status] {event['content']}")
            elif kind == 301:
                print(f"  [search] {event['arguments']['query']!r}", end="")
                at_line_start = False
            elif kind == 302:
                print(f"  -> {len(event['result']['results'])} passages")
                at_line_start = True
            elif kind == 1:
                if at_line_start:
                    print("  A: ", end="")
                print(event["content"], end="", flush=True)
                at_line_start = False
            elif kind == 204:
                for ref in event["content"][:3]:
                    print(f"     [{ref['id']}] {ref['source']}: “{ref['content_preview'][:60]}”")
            elif kind == 22:
                print(f"  [error] {event['content']}")


def _print_pages(url: str, stays: bool) -> None:
    """Where a person takes over in a browser (served while `make serve` runs)."""
    print(f"\nIn a browser{'' if stays else ' (while `make serve` runs)'}:")
    print(f"  example docs with the Ask widget: {url}/{example_site.SECTION}/")
    print(f"  the widget script:                {url}/widget.js")
    print(f"  the operator console:             {url}/console/")


def run_demo(port: int | None = None) -> int:
    port = port or int(os.environ.get("PORT", "8099"))
    url = f"http://127.0.0.1:{port}"
    token = os.environ.get("RAG_API_TOKEN")
    if not token:
        raise SystemExit("set RAG_API_TOKEN (the Makefile sets a development token)")
    server = None if _running(url) else _start_server(url)
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as client:
            created = client.post(
                "/v1/kb", json={"kb_id": KB_ID, "name": "citegate demo", "status": "approved"}
            )
            if created.status_code not in (201, 409):
                raise SystemExit(f"could not create the knowledge base: {created.text}")
            print(f"knowledge base: {KB_ID}")
            started = time.perf_counter()
            accepted: dict[str, str] = {}
            for path in sorted(SAMPLES.iterdir()):
                if path.suffix not in (".md", ".txt", ".pdf") or path.name == "README.md":
                    continue
                body: dict[str, Any] = {
                    "base64_file": base64.b64encode(path.read_bytes()).decode(),
                    "source_name": path.name,
                }
                page = example_site.page_for(path.stem.lower())
                if page is not None:  # its page on the example site: the widget's citations link there
                    body["metadata"] = example_site.ingest_metadata(page)
                response = client.post(f"/v1/kb/{KB_ID}/documents", json=body)
                response.raise_for_status()
                accepted[path.name] = response.json()["task_id"]
            for name, task_id in accepted.items():
                task = _wait(client, task_id)
                counts = task["counts"]
                state = "ok" if task["status"] == "succeeded" else f"FAILED: {task.get('error')}"
                print(
                    f"  ingested {name:<18} {counts['parents']:>2} parents "
                    f"{counts['children']:>3} children  {state}"
                )
            print(f"ingestion took {time.perf_counter() - started:.1f}s")
            for question in QUESTIONS:
                response = client.post(f"/v1/kb/{KB_ID}/ask", json={"question": question})
                response.raise_for_status()
                _print_answer(question, response.json())
            _stream_agents(client, AGENT_QUESTION)
            _print_pages(url, stays=server is None)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=60)
    return 0
