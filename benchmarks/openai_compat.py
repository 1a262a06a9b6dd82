"""Latency of the OpenAI-compatible route beside `/v1/kb/{kb}/ask` (issue 30).

A benchmark: it prints figures and asserts nothing. The local stack (embedded AWS endpoint, tantivy,
the default embedder unless --embedder says otherwise) behind the real gateway on a loopback port,
with samples/ ingested into one approved knowledge base; then, one client, the same questions in turn
(a different one each request, each asked once per route per round, so no route is served from
another's warm cache more than the others):

- `POST /v1/kb/{kb}/ask` (httpx), the engine's own route;
- `POST /v1/chat/completions` (the official `openai` SDK), `model: citegate/<kb>`, not streamed;
- the same with `stream: true`: time to the first content delta, and to the end (`[DONE]`);
- `POST /v1/chat/completions` with `model: citegate` (every knowledge base the policy allows).

Milliseconds, p50 and p95 (nearest rank) over all requests of a kind.

    .venv/bin/python benchmarks/openai_compat.py [--rounds 10] [--embedder hashing]

The machine may be shared: the load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from provenance import stamp

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "bench-openai"
KB = "bench"
QUESTIONS = [
    "How long does sunlight take to reach Earth?",
    "What is the diameter of the Sun?",
    "Which planets are the terrestrial planets?",
    "How often does the Sun's activity cycle repeat?",
    "How hot is the core of the Sun?",
    "What is an astronomical unit?",
    "How should green tea be brewed?",
    "How old is the Solar System?",
]


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, min(len(ordered) - 1, round(share * len(ordered) + 0.5) - 1))]


def variant(question: str, n: int, mark: str) -> str:
    """The question with the same words, a new text: an extra space after its n-th word and the
    route's own final punctuation, so no route is served a query embedding another route cached
    (new words would change the answer: the extractive answerer declines unknown terms)."""
    words = question.rstrip("?").split(" ")
    at = n % len(words)
    return (
        " ".join(words[: at + 1]) + "  " + " ".join(words[at + 1 :]) + mark
        if at + 1 < len(words)
        else (" ".join(words) + " " + mark)
    )


def serve(port: int) -> Any:
    import uvicorn

    from citegate.runtime.gateway import create_app

    server = uvicorn.Server(
        uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="error", access_log=False)
    )
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.02)
    return server


def ingest(client: Any) -> None:
    client.post("/v1/kb", json={"kb_id": KB, "name": "samples", "status": "approved"}).raise_for_status()
    tasks = []
    for path in sorted((ROOT / "samples").glob("*")):
        if path.suffix not in (".md", ".txt"):
            continue
        body = {"text": path.read_text(encoding="utf-8"), "source_name": path.name}
        tasks.append(client.post(f"/v1/kb/{KB}/documents", json=body).json()["task_id"])
    for task in tasks:
        deadline = time.monotonic() + 300
        while client.get(f"/v1/tasks/{task}").json()["status"] not in ("succeeded", "failed"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"task {task} did not finish")
            time.sleep(0.1)


def run(rounds: int, port: int) -> dict[str, Any]:
    import httpx
    import openai

    url = f"http://127.0.0.1:{port}"
    samples: dict[str, list[float]] = {
        "kb_ask": [],
        "chat_completions": [],
        "chat_completions_stream_first_delta": [],
        "chat_completions_stream_done": [],
        "chat_completions_every_kb": [],
    }
    with (
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120) as client,
        openai.OpenAI(base_url=f"{url}/v1", api_key=TOKEN, max_retries=0, timeout=120) as sdk,
    ):
        ingest(client)
        for question in QUESTIONS:  # warm-up: models loaded, caches of the engine filled alike
            client.post(f"/v1/kb/{KB}/ask", json={"question": f"warm {question}"}).raise_for_status()
            sdk.chat.completions.create(
                model=f"citegate/{KB}", messages=[{"role": "user", "content": question}]
            )
        answered = {"kb_ask": 0, "chat_completions": 0}
        for n in range(rounds):
            for question in QUESTIONS:
                started = time.perf_counter()
                body = client.post(f"/v1/kb/{KB}/ask", json={"question": variant(question, n, "?")}).json()
                samples["kb_ask"].append((time.perf_counter() - started) * 1000)
                answered["kb_ask"] += not body["no_answer"]

                started = time.perf_counter()
                reply = sdk.chat.completions.create(
                    model=f"citegate/{KB}",
                    messages=[{"role": "user", "content": variant(question, n, "??")}],
                )
                samples["chat_completions"].append((time.perf_counter() - started) * 1000)
                answered["chat_completions"] += not (reply.model_extra or {})["citegate"]["no_answer"]

                started = time.perf_counter()
                first = None
                for chunk in sdk.chat.completions.create(
                    model=f"citegate/{KB}",
                    messages=[{"role": "user", "content": variant(question, n, "?!")}],
                    stream=True,
                ):
                    if first is None and chunk.choices and chunk.choices[0].delta.content:
                        first = (time.perf_counter() - started) * 1000
                samples["chat_completions_stream_done"].append((time.perf_counter() - started) * 1000)
                samples["chat_completions_stream_first_delta"].append(first if first is not None else 0.0)

                started = time.perf_counter()
                sdk.chat.completions.create(
                    model="citegate", messages=[{"role": "user", "content": variant(question, n, "?.")}]
                )
                samples["chat_completions_every_kb"].append((time.perf_counter() - started) * 1000)
    return {
        "requests_per_kind": rounds * len(QUESTIONS),
        "answered": answered,
        "latency_ms": {
            kind: {"p50": round(percentile(v, 0.50), 1), "p95": round(percentile(v, 0.95), 1)}
            for kind, v in samples.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="rounds over the questions")
    parser.add_argument("--embedder", default=None, help="CITEGATE_EMBEDDER (default: the bundled one)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="citegate-bench-openai-") as root:
        os.environ.update(
            {"RAG_DATA_ROOT": root, "RAG_API_TOKEN": TOKEN, "CITEGATE_IP_RATE_LIMIT": "1000000"}
        )
        os.environ["CITEGATE_DEFAULT_RATE_LIMIT"] = "1000000"
        if args.embedder:
            os.environ["CITEGATE_EMBEDDER"] = args.embedder
        from citegate.platform.settings import get_settings, reset_settings
        from citegate.runtime.aws_endpoint import free_port
        from citegate.runtime.stack import LocalStack

        reset_settings()
        settings = get_settings()
        stack = LocalStack(settings, persist=False).start()
        port = free_port()
        server = serve(port)
        try:
            result = {**stamp(), "embedder": settings.embedder, **run(args.rounds, port)}
            result["load_average_end"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        finally:
            server.should_exit = True
            stack.stop()
    print(json.dumps(result, indent=2))
    print()
    print(f"{'route':<44} {'p50 ms':>8} {'p95 ms':>8}")
    for kind, figures in result["latency_ms"].items():
        print(f"{kind:<44} {figures['p50']:>8.1f} {figures['p95']:>8.1f}")


if __name__ == "__main__":
    main()
