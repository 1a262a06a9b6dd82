"""The real service as a user runs it: `citegate serve` in its own process, `citegate kb create` and
`citegate ingest` as commands, questions over HTTP. Nothing here reaches into the server's memory.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

TOKEN = "manuals-eval-token"
READY_TIMEOUT_S = 600.0
STOP_TIMEOUT_S = 120.0
# `citegate ingest` prints "ingested N, skipped N (unchanged), failed N of T file(s) into KB; C chunks"
# then one "  FAILED name: reason" line per failure on stderr (docs/cli.md).
_SUMMARY = re.compile(
    r"ingested (\d+), skipped (\d+) \(unchanged\), failed (\d+) of (\d+) file\(s\) into \S+; (\d+) chunks"
)
_FAILED = re.compile(r"^\s*FAILED (.+?): (.*)$")


def citegate_command() -> list[str]:
    """The `citegate` script of this environment (its console entry point), else the module."""
    beside = Path(sys.executable).parent / "citegate"
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("citegate")
    return [found] if found else [sys.executable, "-m", "citegate.clients.cli"]


def free_port(preferred: int = 0) -> int:
    """`preferred` when it is free, else any free loopback port."""
    for port in (preferred, 0) if preferred else (0,):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(sock.getsockname()[1])
    raise ServerError("no free loopback port")


class ServerError(Exception):
    pass


class Server:
    """`citegate serve` on a free loopback port over `data_root`, logging to `log`."""

    def __init__(self, data_root: Path, log: Path, env: dict[str, str] | None = None, port: int = 0) -> None:
        self.data_root, self.log_path = data_root, log
        self.port = free_port(port)
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "RAG_DATA_ROOT": str(data_root),
            "RAG_API_TOKEN": TOKEN,
            "PORT": str(self.port),
            "POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL", "WARNING"),
            **(env or {}),
        }
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.ready_s = 0.0

    def start(self) -> Server:
        self.data_root.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        started = time.perf_counter()
        self.process = subprocess.Popen(
            [*citegate_command(), "serve", "--port", str(self.port)],
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C of the harness reaches the server through stop() only
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerError(
                    f"citegate serve exited with {self.process.returncode}: see {self.log_path}"
                )
            try:
                if httpx.get(f"{self.url}/healthz", timeout=5).status_code == 200:
                    self.ready_s = round(time.perf_counter() - started, 1)
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise ServerError(
            f"citegate serve was not healthy within {READY_TIMEOUT_S:.0f}s: see {self.log_path}"
        )

    def stop(self) -> None:
        """SIGTERM (the server stops its stack cleanly), then SIGKILL if it does not exit."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def cli(self, *args: str, log: Path | None = None, timeout: float | None = None) -> tuple[int, str, str]:
        """A `citegate` client command against this server: (exit code, stdout, stderr)."""
        env = {**self.env, "CITEGATE_URL": self.url}
        done = subprocess.run(
            [*citegate_command(), *args], env=env, capture_output=True, text=True, timeout=timeout
        )
        if log is not None:
            with log.open("a", encoding="utf-8") as out:
                out.write(
                    f"$ citegate {' '.join(args)}\n{done.stdout}{done.stderr}\n[exit {done.returncode}]\n"
                )
        return done.returncode, done.stdout, done.stderr


@dataclass
class IngestRun:
    """One `citegate ingest` run as its user sees it."""

    files: int
    ingested: int
    skipped: int
    failed: int
    chunks: int
    wall_s: float
    exit_code: int
    failures: list[tuple[str, str]] = field(default_factory=list)
    load_average: str = ""

    @property
    def chunks_per_s(self) -> float:
        return round(self.chunks / self.wall_s, 1) if self.wall_s else 0.0

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["chunks_per_s"] = self.chunks_per_s
        out["failure_reasons"] = failure_reasons(self.failures)
        return out


def failure_reasons(failures: Sequence[tuple[str, str]]) -> dict[str, int]:
    """How many files failed for each reason (numbers and names taken out, so alike ones group)."""
    counts: dict[str, int] = {}
    for _, reason in failures:
        key = re.sub(r"\b(task|t)_[0-9a-z]+\b", "<task>", reason)
        key = re.sub(r"\d+(\.\d+)?", "N", key)
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def parse_ingest_output(stdout: str, stderr: str) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """The summary line's counts and the FAILED lines of a `citegate ingest` run."""
    match = _SUMMARY.search(stdout)
    if match is None:
        raise ServerError(f"citegate ingest printed no summary line: {stdout[-500:]!r} {stderr[-500:]!r}")
    ingested, skipped, failed, files, chunks = (int(g) for g in match.groups())
    failures = []
    for line in re.split(r"[\r\n]", stderr):
        found = _FAILED.match(line)
        if found:
            failures.append((found.group(1), found.group(2)))
    counts = {"ingested": ingested, "skipped": skipped, "failed": failed, "files": files, "chunks": chunks}
    return counts, failures


def ingest(server: Server, root: Path, kb: str, state: Path, log: Path, timeout_s: float) -> IngestRun:
    """ONE `citegate ingest <root> --kb <kb>` run (its own resume state file), timed from outside."""
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else ""
    started = time.perf_counter()
    code, stdout, stderr = server.cli(
        "ingest", str(root), "--kb", kb, "--state", str(state), "--timeout", str(int(timeout_s)), log=log
    )
    wall = round(time.perf_counter() - started, 1)
    counts, failures = parse_ingest_output(stdout, stderr)
    return IngestRun(
        files=counts["files"],
        ingested=counts["ingested"],
        skipped=counts["skipped"],
        failed=counts["failed"],
        chunks=counts["chunks"],
        wall_s=wall,
        exit_code=code,
        failures=failures,
        load_average=load,
    )
