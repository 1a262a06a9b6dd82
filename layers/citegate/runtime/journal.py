"""Durable state for the embedded AWS endpoint: a write-ahead journal of DynamoDB and S3 writes.

moto keeps everything in memory. In front of it sits a WSGI middleware that appends every
successful DynamoDB or S3 write to `journal.jsonl` (request bodies of S3 objects go to a content-
addressed blob folder). A DynamoDB write is journaled by the items it left behind, read back from
moto (`images`, citegate.runtime.moto_state), an S3 write as its request. Writes are serialised
while they are applied and journaled, so the journal's order is the order moto saw. On start the
journal is restored into a fresh moto (`replay`); while the server runs it is compacted to one
record per live item and object whenever it has grown enough (citegate.runtime.compaction).

SQS messages and Step Functions executions are not kept: the local stack re-enqueues unfinished
tasks on start instead (a resumed task's steps skip what already finished).
"""

from __future__ import annotations

import base64
import contextlib
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
        self.lines = 0  # records in the file (counted by `records`, then by `append` and `swap`)

    def open(self) -> None:
        self._drop_torn_end()
        self._file = self.path.open("a", encoding="utf-8")

    def _drop_torn_end(self) -> None:
        """A crash midway through an append leaves a last line without its newline; it was never
        applied (`records` stops there), and what is appended next must not follow it."""
        if not self.path.exists():
            return
        with self.path.open("rb+") as file:
            size = file.seek(0, os.SEEK_END)
            end = size
            while end > 0:
                start = max(0, end - 65536)
                file.seek(start)
                chunk = file.read(end - start)
                newline = chunk.rfind(b"\n")
                if newline >= 0:
                    end = start + newline + 1
                    break
                end = start
            if end < size:
                file.truncate(end)

    def size(self) -> int:
        """The file's length in bytes, everything appended so far included."""
        with self.lock:
            if self._file:
                self._file.flush()
                return os.fstat(self._file.fileno()).st_size
            return self.path.stat().st_size if self.path.exists() else 0

    def swap(self, replacement: Path, lines: int) -> None:
        """Make `replacement` (complete and synced) the journal, atomically: a crash leaves either
        file whole. Call with `lock` held, so that nothing is appended to the old one meanwhile."""
        with self.lock:
            os.replace(replacement, self.path)  # if this fails, nothing has changed
            self.lines = lines
            if self._file:  # appends go to the new file from now on
                previous, self._file = self._file, self.path.open("a", encoding="utf-8")
                previous.close()
            _sync_directory(self.directory)

    def close(self) -> None:
        with self.lock:
            if self._file:
                self._file.close()
                self._file = None

    def store_blob(self, body: bytes, digest: str | None = None) -> str:
        digest = digest or hashlib.sha256(body).hexdigest()
        target = self.blobs / digest
        if not target.exists():
            # Named per thread: a compaction may store the same body as a request at the same time.
            tmp = target.with_name(f"{digest}.{threading.get_ident()}.tmp")
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
        self.lines += 1

    def records(self) -> Iterable[dict[str, Any]]:
        if not self.path.exists():
            return
        self.lines = 0
        with self.path.open(encoding="utf-8") as lines:
            for line in lines:
                if not line.endswith("\n"):
                    return  # a torn last line from a crash (`open` cuts it off)
                line = line.strip()
                if line:
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError:
                        return  # a torn last line from a crash: everything before it stands
                    self.lines += 1
                    yield record

    def body_of(self, record: dict[str, Any]) -> bytes:
        """The write's body; UnusableBlob if its blob is missing or is not the bytes it names."""
        if "blob" in record:
            name = str(record["blob"])
            try:
                data = (self.blobs / name).read_bytes()
            except OSError as error:
                raise UnusableBlob(f"its body aws/blobs/{name} is missing or unreadable") from error
            if hashlib.sha256(data).hexdigest() != name:
                # Set aside, so that the same body written again is stored anew (store_blob keeps
                # a blob that exists); compaction deletes it with the other unused files.
                with contextlib.suppress(OSError):
                    (self.blobs / name).replace(self.blobs / f"{name}.corrupt")
                raise UnusableBlob(f"its body aws/blobs/{name} does not match its hash (set aside)")
            return data
        return base64.b64decode(record.get("body", ""))


# What a DynamoDB write left behind, as journal records (citegate.runtime.moto_state.item_images);
# None when it cannot tell, and the request itself is journaled.
Images = Callable[[str, bytes], list[dict[str, Any]] | None]


class JournalingMiddleware:
    def __init__(self, app: WSGIApp, journal: Journal, images: Images | None = None) -> None:
        self.app = app
        self.journal = journal
        self.images = images
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
                images = None
                if service == "dynamodb" and self.images is not None:
                    try:
                        images = self.images(environ["HTTP_X_AMZ_TARGET"].split(".", 1)[1], body)
                    except Exception:  # the write is applied: journal it as a request instead
                        from citegate.platform.observability import logger

                        logger.exception("journal: could not read back a DynamoDB write's items")
                if images is None:
                    self.journal.append(self.journal.entry(environ, body, service))
                else:
                    for record in images:
                        self.journal.append(record)
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


class UnusableBlob(Exception):
    """A journaled S3 write whose body is missing from aws/blobs or does not hash to its name."""


def _skipped(record: dict[str, Any], error: UnusableBlob) -> None:
    from citegate.platform.observability import logger

    logger.warning(f"journal: skipped {record.get('method')} {record.get('path')}: {error}")


def _sync_directory(directory: Path) -> None:
    """A rename is durable once its folder is synced."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replay(app: WSGIApp, journal: Journal, load: Callable[[dict[str, Any]], bool] | None = None) -> int:
    """Apply every journaled write to `app` (a fresh moto); returns how many were applied.
    `load` restores the records it knows directly (it answers True for those)."""
    applied = 0
    for record in journal.records():
        if load is not None and load(record):
            applied += 1
            continue
        try:
            body = journal.body_of(record)
        except UnusableBlob as error:
            # Left out, as if never written: reading the object answers NoSuchKey, so what it held
            # (a document's raw file) fails alone with a reason, and the server starts.
            _skipped(record, error)
            continue
        builder = EnvironBuilder(
            method=record["method"],
            path=record["path"],
            query_string=record["query"],
            headers=record["headers"],
            data=body,
            base_url="http://127.0.0.1",
        )
        environ = builder.get_environ()
        builder.close()
        for _ in app(environ, lambda *args, **kwargs: None):
            pass
        applied += 1
    return applied
