"""OpenAICompatibleEmbedder against a tiny OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from citegate.knowledge.embedding import (
    CachedEmbedder,
    EmbeddingUnavailable,
    HashingEmbedder,
    InMemoryEmbeddingCache,
    OpenAICompatibleEmbedder,
)

DIM = 8
_reference = HashingEmbedder(DIM)


def raw_vector(text: str) -> list[float]:
    # Deterministic and deliberately not unit length: the client must normalise.
    return [3.0 * x for x in _reference.embed_query(text).tolist()]


class FakeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.mode = "ok"
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out leaves a broken pipe behind; not worth a traceback


class Handler(BaseHTTPRequestHandler):
    server: FakeServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: object) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        if self.path != "/v1/embeddings":
            self._send(404, {"error": {"message": "not found"}})
            return
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(request)
        self.server.authorizations.append(self.headers.get("Authorization"))
        mode = self.server.mode
        if mode == "500":
            self._send(500, {"error": {"message": "model crashed", "type": "server_error"}})
            return
        if mode == "slow":
            time.sleep(0.5)
        inputs = request["input"] if isinstance(request["input"], list) else [request["input"]]
        data: list[dict[str, Any]] = [
            {"object": "embedding", "index": i, "embedding": raw_vector(t)} for i, t in enumerate(inputs)
        ]
        if mode == "reversed":
            data.reverse()
        if mode == "short":
            data = data[:-1]
        if mode == "ragged":
            data[0]["embedding"] = data[0]["embedding"][:-1]
        if mode == "no-index":
            del data[0]["index"]
        self._send(200, {"object": "list", "data": data, "model": request["model"], "usage": {}})


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    srv = FakeServer()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def fake(server: FakeServer) -> FakeServer:
    server.mode = "ok"
    server.requests.clear()
    server.authorizations.clear()
    return server


def make(server: FakeServer, **kwargs: Any) -> OpenAICompatibleEmbedder:
    port = server.server_address[1]
    options: dict[str, Any] = {"max_retries": 0, "timeout": 5.0}
    options.update(kwargs)
    return OpenAICompatibleEmbedder(f"http://127.0.0.1:{port}/v1", "sk-test", "fake-embed", **options)


def expected(texts: list[str]) -> np.ndarray:
    return _reference.embed_documents(texts)


def test_embeds_in_batches_and_normalises(fake: FakeServer) -> None:
    emb = make(fake, batch_size=2)
    texts = ["alpha", "beta", "gamma", "delta", "epsilon"]
    rows = emb.embed_documents(texts)
    assert rows.shape == (5, DIM) and rows.dtype == np.float32
    np.testing.assert_allclose(rows, expected(texts), atol=1e-6)
    assert [r["input"] for r in fake.requests] == [["alpha", "beta"], ["gamma", "delta"], ["epsilon"]]
    assert all(r["model"] == "fake-embed" and r["encoding_format"] == "float" for r in fake.requests)
    assert fake.authorizations[0] == "Bearer sk-test"
    assert emb.dimension == DIM  # learnt from the first response


def test_out_of_order_indexes_are_put_back_in_order(fake: FakeServer) -> None:
    fake.mode = "reversed"
    texts = ["one", "two", "three"]
    np.testing.assert_allclose(make(fake).embed_documents(texts), expected(texts), atol=1e-6)


def test_query_and_document_prefixes(fake: FakeServer) -> None:
    emb = make(fake, query_prefix="query: ", document_prefix="passage: ")
    q = emb.embed_query("what is alpha")
    emb.embed_documents(["alpha is a letter"])
    assert q.shape == (DIM,)
    assert [r["input"] for r in fake.requests] == [["query: what is alpha"], ["passage: alpha is a letter"]]
    np.testing.assert_allclose(q, _reference.embed_query("query: what is alpha"), atol=1e-6)
    # The document prefix changes stored vectors, so it is part of the cache identity.
    assert emb.model_id.startswith("fake-embed+") and make(fake).model_id == "fake-embed"


def test_blank_text_is_sent_as_a_space(fake: FakeServer) -> None:
    make(fake).embed_documents(["", "x"])
    assert fake.requests[0]["input"] == [" ", "x"]


def test_dimension_is_probed_when_read_first(fake: FakeServer) -> None:
    emb = make(fake)
    assert emb.dimension == DIM
    assert len(fake.requests) == 1
    assert emb.embed_documents([]).shape == (0, DIM)
    assert len(fake.requests) == 1


def test_declared_dimension_is_checked(fake: FakeServer) -> None:
    emb = make(fake, dimension=16)
    assert emb.dimension == 16 and not fake.requests
    with pytest.raises(EmbeddingUnavailable, match="8-d vectors"):
        emb.embed_query("alpha")


def test_http_500_is_unavailable(fake: FakeServer) -> None:
    fake.mode = "500"
    with pytest.raises(EmbeddingUnavailable, match="HTTP 500"):
        make(fake).embed_documents(["alpha"])


def test_missing_rows_are_unavailable(fake: FakeServer) -> None:
    fake.mode = "short"
    with pytest.raises(EmbeddingUnavailable, match="returned 1 embeddings for 2 inputs"):
        make(fake).embed_documents(["alpha", "beta"])


@pytest.mark.parametrize("mode", ["ragged", "no-index"])
def test_malformed_vectors_are_unavailable(fake: FakeServer, mode: str) -> None:
    fake.mode = mode
    with pytest.raises(EmbeddingUnavailable, match="malformed"):
        make(fake).embed_documents(["alpha", "beta"])


def test_timeout_is_unavailable(fake: FakeServer) -> None:
    fake.mode = "slow"
    with pytest.raises(EmbeddingUnavailable, match="timed out"):
        make(fake, timeout=0.1).embed_query("alpha")


def test_unreachable_port_is_unavailable() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    emb = OpenAICompatibleEmbedder(f"http://127.0.0.1:{port}/v1", None, "fake-embed", max_retries=0)
    with pytest.raises(EmbeddingUnavailable, match="cannot reach"):
        emb.embed_query("alpha")


def test_api_key_is_not_in_repr(fake: FakeServer) -> None:
    assert "sk-test" not in repr(make(fake))


def test_cached_remote_embedder_skips_the_network(fake: FakeServer) -> None:
    cached = CachedEmbedder(make(fake), InMemoryEmbeddingCache())
    first = cached.embed_documents(["alpha", "beta"])
    n_requests = len(fake.requests)
    np.testing.assert_array_equal(cached.embed_documents(["beta", "alpha"]), first[::-1])
    assert len(fake.requests) == n_requests
    assert (cached.hits, cached.misses) == (2, 2)
