"""The embedded endpoint's journal records each write's whole body, however the client framed it,
and never waits for a body that is not coming."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from citegate.runtime.journal import Journal, JournalingMiddleware

S3_AUTH = (
    "AWS4-HMAC-SHA256 Credential=test/20261122/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0"
)


class OpenConnection(io.RawIOBase):
    """A request stream whose client sent what it had and keeps the connection open: reading
    to the end would wait forever, so here it fails the test instead."""

    def __init__(self, data: bytes = b"") -> None:
        self.data = io.BytesIO(data)

    def read(self, size: int | None = -1) -> bytes:
        assert size is not None and size >= 0, "read to the end of a stream that has no end"
        return self.data.read(size)


def _app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("204 No Content", [])
    return [b""]


def _recorded(tmp_path: Path, **environ: Any) -> list[dict[str, Any]]:
    journal = Journal(tmp_path)
    journal.open()
    middleware = JournalingMiddleware(_app, journal)
    middleware.recording = True
    base = {"REQUEST_METHOD": "DELETE", "PATH_INFO": "/bucket/key", "HTTP_AUTHORIZATION": S3_AUTH}
    list(middleware({**base, **environ}, lambda *args: None))
    journal.close()
    return list(journal.records())


def test_a_write_without_a_body_is_journaled_without_waiting_for_one(tmp_path: Path) -> None:
    [record] = _recorded(tmp_path, **{"wsgi.input": OpenConnection()})
    assert record["method"] == "DELETE" and record["body"] == ""


def test_a_body_is_read_to_its_content_length(tmp_path: Path) -> None:
    [record] = _recorded(
        tmp_path, REQUEST_METHOD="PUT", CONTENT_LENGTH="5", **{"wsgi.input": OpenConnection(b"hello")}
    )
    assert Journal(tmp_path).body_of(record) == b"hello"


def test_a_chunked_body_is_read_to_its_end(tmp_path: Path) -> None:
    [record] = _recorded(
        tmp_path,
        REQUEST_METHOD="PUT",
        **{"wsgi.input": io.BytesIO(b"chunked"), "wsgi.input_terminated": True},
    )
    assert Journal(tmp_path).body_of(record) == b"chunked"
