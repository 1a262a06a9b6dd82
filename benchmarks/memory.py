"""The local server's memory over a long run of mixed requests: does it reach a plateau?

A benchmark: it prints figures and asserts nothing (issue 18: on main the server's RSS grew from
683 to 1,384 MiB over about 20,000 requests, without a plateau). It starts `citegate serve` on a
new data folder and a free port (CITEGATE_EMBEDDER=hashing unless told), ingests a few documents,
then sends `--requests` requests from `--clients` threads, a mix of what a long-running server
sees: retrieve and ask (most), the audit log, agent chats (created, a message, listed, deleted),
document listings and now and then an ingestion. Every `--every` requests it reads the server's
VmRSS; at the end it prints the series and the growth over each half of the run.

    uv run python benchmarks/memory.py [--requests 4000] [--clients 4] [--every 500]

The machine may be shared: the load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from provenance import stamp

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "memory-token-123"
KB = "mem"
SAMPLES = ("solar-system.md", "tea-guide.txt", "长城.md")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mib(pid: int) -> float:
    """VmRSS of the process and its children, in MiB."""
    total = 0
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return round(total / 1024, 1)


def _wait(client: httpx.Client, task_id: str, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = str(client.get(f"/v1/tasks/{task_id}").json()["status"])
        if status in ("succeeded", "failed"):
            return status
        time.sleep(0.2)
    return "timeout"


def _request(client: httpx.Client, n: int) -> int:
    kind = n % 20
    if kind < 8:
        return client.post(
            f"/v1/kb/{KB}/retrieve", json={"query": f"tallest volcano {n}", "top_k": 5}
        ).status_code
    if kind < 12:
        return client.post(
            f"/v1/kb/{KB}/ask", json={"question": f"How high is Olympus Mons? ({n % 13})"}
        ).status_code
    if kind < 14:
        return client.get("/admin/audit", params={"limit": 20}).status_code
    if kind < 16:
        chat = client.post("/api/v1/agent/chats", json={"title": f"chat {n}"}).json()
        client.post(f"/api/v1/agent/chats/{chat['id']}/messages", json={"content": "What is green tea?"})
        client.get("/api/v1/agent/chats", params={"limit": 20})
        return client.delete(f"/api/v1/agent/chats/{chat['id']}").status_code
    if kind < 19 or n % 100 != 19:
        return client.get(f"/v1/kb/{KB}/documents").status_code
    text = f"# Note {n}\n\nLighthouse number {n} stands on the rocks of the bay. " * 30
    return client.post(
        f"/v1/kb/{KB}/documents", json={"text": text, "source_name": f"note-{n % 10}.md"}
    ).status_code


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--every", type=int, default=500, help="requests between RSS readings")
    parser.add_argument("--embedder", default=os.environ.get("CITEGATE_EMBEDDER", "hashing"))
    parser.add_argument("--keep", action="store_true", help="keep the data folder")
    args = parser.parse_args()

    data = Path(tempfile.mkdtemp(prefix="citegate-memory-"))
    port = _free_port()
    env = {
        **os.environ,
        "RAG_DATA_ROOT": str(data),
        "PORT": str(port),
        "RAG_API_TOKEN": TOKEN,
        "CITEGATE_EMBEDDER": args.embedder,
        "CITEGATE_DEFAULT_RATE_LIMIT": "1000000",
        "CITEGATE_IP_RATE_LIMIT": "1000000",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }
    log = (data / "server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "citegate.clients.cli", "serve"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    figures: dict[str, Any] = {"stamp": stamp(), "requests": args.requests, "clients": args.clients}
    try:
        base = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=base, headers=headers, timeout=120) as client:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if client.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"the server did not start; see {data / 'server.log'}")
                time.sleep(0.2)
            client.post("/v1/kb", json={"kb_id": KB, "name": "Memory"})
            for name in SAMPLES:
                text = (ROOT / "samples" / name).read_text()
                accepted = client.post(f"/v1/kb/{KB}/documents", json={"text": text, "source_name": name})
                _wait(client, accepted.json()["task_id"])
        series = [{"requests": 0, "rss_mib": rss_mib(server.pid), "seconds": 0.0}]
        counter = itertools.count()
        statuses: dict[int, int] = {}
        lock = threading.Lock()
        started = time.perf_counter()

        def client_loop() -> None:
            with httpx.Client(base_url=base, headers=headers, timeout=120) as client:
                while (n := next(counter)) < args.requests:
                    try:
                        status = _request(client, n)
                    except (httpx.HTTPError, KeyError, ValueError):
                        status = 0
                    with lock:
                        statuses[status] = statuses.get(status, 0) + 1
                        done = sum(statuses.values())
                        if done % args.every == 0:
                            series.append(
                                {
                                    "requests": done,
                                    "rss_mib": rss_mib(server.pid),
                                    "seconds": round(time.perf_counter() - started, 1),
                                }
                            )

        threads = [threading.Thread(target=client_loop) for _ in range(args.clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        half = len(series) // 2
        figures |= {
            "statuses": statuses,
            "rss_series": series,
            "growth_first_half_mib": round(series[half]["rss_mib"] - series[0]["rss_mib"], 1),
            "growth_second_half_mib": round(series[-1]["rss_mib"] - series[half]["rss_mib"], 1),
            "journal_lines": sum(1 for _ in (data / "aws" / "journal.jsonl").open("rb")),
        }
        print(json.dumps(figures))
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        if not args.keep:
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
