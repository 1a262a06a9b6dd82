"""Durable state for the embedded AWS endpoint: a write-ahead journal of DynamoDB and S3 writes.

moto keeps everything in memory. In front of it sits a WSGI middleware that appends every
successful DynamoDB or S3 write to `journal.jsonl` (request bodies of S3 objects go to a content-
addressed blob folder). On start the journal is replayed into a fresh moto, then compacted into
one put per live item and object, so it never grows beyond the state it describes. Writes are
serialised while they are applied and journaled, so the journal's order is the order moto saw.

SQS messages and Step Functions executions are not kept: the local stack re-enqueues unfinished
tasks on start instead (a resumed task's steps skip what already finished).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from werkzeug.test import EnvironBuilder

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

_DYNAMODB_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
_KEPT_HEADERS = ("content-type", "x-amz-target", "authorization", "content-md5", "x-amz-content-sha256")


def _service_of(environ: dict[str, Any]) -> str | None:
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if target.startswith("DynamoDB_"):
        return "dynamodb" if target.split(".", 1)[1] in _DYNAMODB_WRITES else None
    auth = environ.get("HTTP_AUTHORIZATION", "") + environ.get("QUERY_STRING", "")
    if ("/s3/aws4_request" in auth or "%2Fs3%2Faws4_request" in auth) and environ["REQUEST_METHOD"] in (
        "PUT",
        "POST",
        "DELETE",
    ):
        return "s3"
    return None


class Journal:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / "journal.jsonl"
        self.blobs = directory / "blobs"
        self.blobs.mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        self._file: io.TextIOWrapper | None = None

    def open(self) -> None:
        self._file = self.path.open("a", encoding="utf-8")

    def close(self) -> None:
        with self.lock:
            if self._file:
                self._file.close()
                self._file = None

    def store_blob(self, body: bytes) -> str:
        digest = hashlib.sha256(body).hexdigest()
        target = self.blobs / digest
        if not target.exists():
            tmp = target.with_suffix(".tmp")
            tmp.write_bytes(body)
            os.replace(tmp, target)
        return digest

    def entry(self, environ: dict[str, Any], body: bytes, service: str) -> dict[str, Any]:
        headers = {
            name: environ[key]
            for name in _KEPT_HEADERS
            if (key := "HTTP_" + name.upper().replace("-", "_")) in environ
            or (key := name.upper().replace("-", "_")) in environ
        }
        record: dict[str, Any] = {
            "service": service,
            "method": environ["REQUEST_METHOD"],
            "path": environ.get("PATH_INFO", "/"),
            "query": environ.get("QUERY_STRING", ""),
            "headers": headers,
        }
        if service == "s3" and body:
            record["blob"] = self.store_blob(body)
        else:
            record["body"] = base64.b64encode(body).decode()
        return record

    def append(self, record: dict[str, Any]) -> None:
        assert self._file is not None, "journal is not open"
        self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._file.flush()

    def records(self) -> Iterable[dict[str, Any]]:
        if not self.path.exists():
            return
        with self.path.open(encoding="utf-8") as lines:
            for line in lines:
                line = line.strip()
                if line:
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError:
                        return  # a torn last line from a crash: everything before it stands

    def body_of(self, record: dict[str, Any]) -> bytes:
        if "blob" in record:
            return (self.blobs / str(record["blob"])).read_bytes()
        return base64.b64decode(record.get("body", ""))


class JournalingMiddleware:
    def __init__(self, app: WSGIApp, journal: Journal) -> None:
        self.app = app
        self.journal = journal
        self.recording = False  # off while the journal is replayed

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        service = _service_of(environ) if self.recording else None
        if service is None:
            return self.app(environ, start_response)
        body = _request_body(environ)
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        status: list[str] = []

        def capture(status_line: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            status.append(status_line)
            return start_response(status_line, headers, exc_info)

        with self.journal.lock:
            result = list(self.app(environ, capture))
            if status and status[0][:1] == "2":
                self.journal.append(self.journal.entry(environ, body, service))
        return result


def _request_body(environ: dict[str, Any]) -> bytes:
    """The whole body: Content-Length bytes, or a chunked body to its end (the server marks it
    terminated); with neither there is none, and reading would wait for a client that has
    nothing more to send (a DeleteObject, for one)."""
    stream = environ["wsgi.input"]
    if environ.get("CONTENT_LENGTH"):
        return bytes(stream.read(int(environ["CONTENT_LENGTH"])))
    if environ.get("wsgi.input_terminated"):
        return bytes(stream.read())
    return b""


def replay(app: WSGIApp, journal: Journal) -> int:
    """Apply every journaled write to `app` (a fresh moto); returns how many were applied."""
    applied = 0
    for record in journal.records():
        builder = EnvironBuilder(
            method=record["method"],
            path=record["path"],
            query_string=record["query"],
            headers=record["headers"],
            data=journal.body_of(record),
            base_url="http://127.0.0.1",
        )
        environ = builder.get_environ()
        builder.close()
        for _ in app(environ, lambda *args, **kwargs: None):
            pass
        applied += 1
    return applied
