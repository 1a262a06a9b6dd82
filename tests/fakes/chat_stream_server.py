"""The fake OpenAI-compatible server, plus token streaming (`stream: true`) for the chat models.

Only these model names stream; every other request is answered by tests.fakes.openai_server:
  chat-stream         summarises document [1] of spec 003's context format, in small deltas, with
                      a marker [9] that points nowhere (the gate must drop it); asked without
                      documents (model knowledge), answers from "general knowledge" with a stray [1]
  chat-stream-nocite  answers without citing any document
  chat-stream-error   sends two deltas, then an error event (the model fails midway)
  chat-stream-cut     sends two deltas, then drops the connection mid-body
"""

from __future__ import annotations

import io
import json
import re
import socket
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Any

from tests.fakes.openai_server import FakeOpenAIServer, _Handler

STREAM_MODELS = frozenset({"chat-stream", "chat-stream-nocite", "chat-stream-error", "chat-stream-cut"})
GENERAL_KNOWLEDGE = "From general knowledge: tungsten boils at about 5,900 degrees Celsius. [1]"

_DOCUMENT = re.compile(r"^\[(\d+)\] 来源：[^\n]*\n内容：(.*?)(?=\n\n\[\d+\] 来源：|\Z)", re.S | re.M)


def stream_text(model: str, messages: list[dict[str, Any]]) -> str:
    prompt = str(messages[-1].get("content", "")) if messages else ""
    documents = _DOCUMENT.findall(prompt)
    if not documents:
        return GENERAL_KNOWLEDGE
    first = documents[0][1].split(".")[0].strip()
    if model == "chat-stream-nocite":
        return f"{first}."
    return f"{first}. [1] Nothing else is known. [9]"


def pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _chunk(model: str, content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stream",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}],
    }


class _StreamingHandler(_Handler):
    protocol_version = "HTTP/1.1"  # chunked bodies, so that a cut connection is an incomplete one

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.loads(raw)
        if not (body.get("stream") and body.get("model") in STREAM_MODELS):
            self.rfile = io.BytesIO(raw)
            super().do_POST()
            return
        self.server.requests.append(body)
        model = str(body["model"])
        deltas = pieces(stream_text(model, body.get("messages") or []))
        if model in ("chat-stream-error", "chat-stream-cut"):
            deltas = deltas[:2]
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for delta in deltas:
                self._write(f"data: {json.dumps(_chunk(model, delta))}\n\n")
            if model == "chat-stream-cut":
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            if model == "chat-stream-error":
                self._write(f"data: {json.dumps({'error': {'message': 'the model is overloaded'}})}\n\n")
            self._write("data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def _write(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


class StreamingOpenAIServer(FakeOpenAIServer):
    """FakeOpenAIServer with the streaming chat models above."""

    def __init__(self) -> None:
        ThreadingHTTPServer.__init__(self, ("127.0.0.1", 0), _StreamingHandler)
        self.requests: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
