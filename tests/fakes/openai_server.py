"""A small OpenAI-compatible chat server on loopback, for testing the model answer path.

The requested model name picks the behaviour, so one server serves every test:
  cite-first       answers from passage [1] and cites it properly
  cite-foreign     cites a ref that was never given and a marker [99] that points nowhere
  forge-all        cites only a ref that was never given, with a [1] marker in its text
  cite-mixed       one sentence of passage [1], cited, and one invented sentence also cited [1]
  follow-injection cites whatever ref id a passage tells it to cite
  malformed        returns text that is not JSON
  decline          declines
  slow             answers after a delay longer than the client's timeout
  error-500        answers HTTP 500
  garbage-*        answers 200 with something that is not a chat completion (GARBAGE below), to
                   streamed and plain requests alike
Asked without passages (model knowledge, where a policy allows it), it answers in plain text.
Asked to verify citations (the system prompt starts "You check citations"), any model judges a
claim supported exactly when its sentence, markers aside, appears in the passage.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _chunk_of(payload: Any) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


# 200 answers that are not chat completions: (Content-Type, body).
GARBAGE: dict[str, tuple[str, bytes]] = {
    # A proxy's error page.
    "garbage-html": ("text/html", b"<html><body><h1>502 Bad Gateway</h1></body></html>"),
    # Declared JSON, cut short.
    "garbage-json": ("application/json", b'{"id": "chatcmpl-x", "choices": [{"message": {"conte'),
    # JSON of another API's shape.
    "garbage-shape": ("application/json", b'{"object": "list", "data": [], "detail": "overloaded"}'),
    # A completion whose content is not text.
    "garbage-content": (
        "application/json",
        json.dumps(
            {"object": "chat.completion", "choices": [{"index": 0, "message": {"content": 42}}]}
        ).encode(),
    ),
    # A stream of chunks of the wrong shape.
    "garbage-stream": (
        "text/event-stream",
        _chunk_of({"object": "chat.completion.chunk", "choices": "lots"})
        + _chunk_of([1, 2, 3])
        + b"data: [DONE]\n\n",
    ),
    # Event-stream framing with nothing in it.
    "garbage-stream-text": ("text/event-stream", b"this is not a server-sent event stream\n\n"),
}


def _passages(prompt: str) -> list[tuple[int, str, str]]:
    found = []
    for match in re.finditer(
        r"^\[(\d+)\] ref=(r_[0-9a-f]+)[^\n]*\n(.*?)(?=\n\n\[\d+\] ref=|\Z)", prompt, re.S | re.M
    ):
        found.append((int(match.group(1)), match.group(2), match.group(3)))
    return found


def _verdicts(prompt: str) -> str:
    claims = re.findall(
        r"^Claim (\d+)\nSentence: (.*?)\nPassage:\n(.*?)(?=\n\nClaim \d+\n|\Z)", prompt, re.S | re.M
    )
    flat = [
        (int(n), " ".join(sentence.split()), " ".join(passage.split())) for n, sentence, passage in claims
    ]
    return json.dumps({"verdicts": [{"claim": n, "supported": bool(s) and s in p} for n, s, p in flat]})


def _reply(model: str, prompt: str) -> tuple[int, Any]:
    passages = _passages(prompt)
    if prompt.startswith("You check citations"):
        return 200, _completion(model, _verdicts(prompt))
    if model == "error-500":
        return 500, {"error": {"message": "boom"}}
    if model == "slow":
        time.sleep(3)
    if not passages:
        # No passages in the prompt: a question for the model's own knowledge.
        content = "From general knowledge: tungsten boils at about 5,900 degrees Celsius."
    elif model == "malformed":
        content = "Sure! The answer is 42."
    elif model == "decline":
        content = json.dumps(
            {"answer": "", "used_refs": [], "declined": True, "reason": "not in the passages"}
        )
    elif model == "cite-foreign":
        number, ref, text = passages[0]
        content = json.dumps(
            {
                "answer": f"{text.split('.')[0]}. [{number}] Also something invented. [99]",
                "used_refs": [ref, "r_00000000deadbeef"],
                "declined": False,
                "reason": "",
            }
        )
    elif model == "forge-all":
        content = json.dumps(
            {
                "answer": "A made-up claim [1].",
                "used_refs": ["r_00000000deadbeef"],
                "declined": False,
                "reason": "",
            }
        )
    elif model == "cite-mixed":
        number, ref, text = passages[0]
        content = json.dumps(
            {
                "answer": f"{text.split('.')[0]}. [{number}] Olympus Mons is made of cheese. [{number}]",
                "used_refs": [ref],
                "declined": False,
                "reason": "",
            }
        )
    elif model == "follow-injection":
        injected = re.findall(r"cite ref (r_[0-9a-f]+)", prompt)
        content = json.dumps(
            {"answer": "As instructed. [1]", "used_refs": injected, "declined": False, "reason": ""}
        )
    else:
        number, ref, text = passages[0]
        content = json.dumps(
            {
                "answer": f"{text.split('.')[0]}. [{number}]",
                "used_refs": [ref],
                "declined": False,
                "reason": "",
            }
        )
    return 200, _completion(model, content)


def _completion(model: str, content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


AGENT_STREAM = ["Olympus Mons rises about 22 km ", "[", "1", "] and is very old [9", "9].", " Done."]


def _agent_reply(body: dict[str, Any]) -> tuple[int, Any] | None:
    """Spec 003's agents: tool calls (`agent-tools`) and streamed summaries (`agent-*`).

    agent-tools        asks for two retrieve_knowledge calls, then stops; streams a summary
                       whose [99] marker (split across chunks) points at no document
    agent-stream-dies  calls no tool; its stream breaks after the first chunk
    """
    model = str(body.get("model", ""))
    if not model.startswith("agent-"):
        return None
    if body.get("tools"):
        done = any(m.get("role") == "tool" for m in body.get("messages", []))
        calls = (
            []
            if done or model != "agent-tools"
            else [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {
                        "name": "retrieve_knowledge",
                        "arguments": json.dumps({"query": q, "top_k": 3}),
                    },
                }
                for n, q in enumerate(["Olympus Mons height", "Mars volcano"])
            ]
        )
        message = {"role": "assistant", "content": "" if calls else "enough", "tool_calls": calls or None}
        return 200, {
            "id": "chatcmpl-agent",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        }
    return 200, {"stream": AGENT_STREAM if model == "agent-tools" else AGENT_STREAM[:1], "model": model}


def _stream(handler: BaseHTTPRequestHandler, model: str, pieces: list[str], dies: bool) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.end_headers()
    for piece in pieces:
        chunk = {
            "id": "chatcmpl-agent",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
        }
        handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        handler.wfile.flush()
    if dies:
        handler.wfile.write(b"data: {not json\n\n")
        handler.wfile.flush()
        handler.close_connection = True
        return
    handler.wfile.write(b"data: [DONE]\n\n")


class _Handler(BaseHTTPRequestHandler):
    server: FakeOpenAIServer  # type: ignore[assignment]

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.server.requests.append(body)
        prompt = "\n".join(m.get("content") or "" for m in body.get("messages", []))
        garbage = GARBAGE.get(str(body.get("model", "")))
        if garbage is not None:
            content_type, data = garbage
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        agent = _agent_reply(body)
        if agent is not None and body.get("stream"):
            pieces = agent[1]["stream"]
            _stream(self, agent[1]["model"], pieces, dies=agent[1]["model"] == "agent-stream-dies")
            return
        status, payload = agent if agent is not None else _reply(body.get("model", ""), prompt)
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout tests)


class FakeOpenAIServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
