"""A small OpenAI-compatible chat server on loopback, for testing the model answer path.

The requested model name picks the behaviour, so one server serves every test:
  cite-first       answers from passage [1] and cites it properly
  cite-foreign     cites a ref that was never given and a marker [99] that points nowhere
  follow-injection cites whatever ref id a passage tells it to cite
  malformed        returns text that is not JSON
  decline          declines
  slow             answers after a delay longer than the client's timeout
  error-500        answers HTTP 500
Asked without passages (model knowledge, where a policy allows it), it answers in plain text.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _passages(prompt: str) -> list[tuple[int, str, str]]:
    found = []
    for match in re.finditer(
        r"^\[(\d+)\] ref=(r_[0-9a-f]+)[^\n]*\n(.*?)(?=\n\n\[\d+\] ref=|\Z)", prompt, re.S | re.M
    ):
        found.append((int(match.group(1)), match.group(2), match.group(3)))
    return found


def _reply(model: str, prompt: str) -> tuple[int, Any]:
    passages = _passages(prompt)
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
    return 200, {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class _Handler(BaseHTTPRequestHandler):
    server: FakeOpenAIServer  # type: ignore[assignment]

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.server.requests.append(body)
        prompt = "\n".join(m.get("content", "") for m in body.get("messages", []))
        status, payload = _reply(body.get("model", ""), prompt)
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
