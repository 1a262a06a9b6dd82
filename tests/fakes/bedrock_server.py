"""A loopback Amazon Bedrock runtime that speaks the wire protocol as botocore sends it.

- Every request's SigV4 signature is checked the way AWS checks it: botocore's own signer
  recomputes the signature from the request as received (method, path, query, the signed
  headers, the body's hash) and the known test credentials; a mismatch, a wrong access key, a
  credential scope for another region or service, or a stale X-Amz-Date is a 403
  InvalidSignatureException / UnrecognizedClientException, as Bedrock answers.
- POST /model/{modelId}/converse, /converse-stream and /invoke take and return the real JSON
  shapes (Converse's messages, system, inferenceConfig and toolConfig; Titan Text Embeddings V2's
  and Cohere Embed v3's bodies), and refuse what Bedrock refuses (ValidationException: more than
  96 texts for Cohere, a text over 2,048 characters, an unknown Titan dimension, a Converse
  conversation that does not start with the user or does not alternate, ...).
- ConverseStream answers application/vnd.amazon.eventstream: binary frames (prelude with total
  and header lengths, prelude CRC32, typed headers, JSON payload, message CRC32), sent in chunks
  as they are produced; an error midway is an exception frame.
- Errors carry x-amzn-ErrorType and a JSON message, as rest-json services do.

The model id picks a behaviour (BEHAVIOURS below; anything else answers properly, citing [1]),
so one server serves every test. `throttle_next` makes the next n requests 429s whatever their model.
"""

from __future__ import annotations

import binascii
import contextlib
import hmac
import itertools
import json
import re
import struct
import threading
import time
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from citegate.knowledge.embedding import HashingEmbedder
from tests.fakes.openai_server import _reply

ACCESS_KEY = "AKIDBEDROCKTEST00001"
SECRET_KEY = "bedrock-test-secret-key/0123456789abcdef"
REGION = "us-east-1"
# What AccessDeniedException says in AWS: the role and the account, which no caller may see.
ROLE_ARN = "arn:aws:sts::123456789012:assumed-role/citegate-dev-KbAsk-AbCdEf/citegate-dev-kb-ask"

BEHAVIOURS = {
    "throttle-always": "429 ThrottlingException on every call",
    "throttle-once": "429 ThrottlingException on the first call per model, then a proper answer",
    "access-denied": "403 AccessDeniedException naming the role and the account",
    "not-enabled": "403 AccessDeniedException: no access to the model (model access not granted)",
    "validation": "400 ValidationException",
    "no-forced-tool": "refuses toolChoice.tool with ValidationException; answers JSON text without it",
    "text-json": "ignores the forced tool and answers the JSON object as text",
    "stream-dies": "streams two deltas, then a modelStreamErrorException frame",
    "stream-throttled": "a throttlingException frame before any delta",
    "stream-cut": "streams one delta and closes without messageStop",
    "stream-bad-crc": "one frame whose message CRC is wrong",
    "agent-tools": "calls retrieve_knowledge twice, then answers; streams a cited summary",
}
# The OpenAI fake's answer behaviours (tests/fakes/openai_server.py), by the same names.
ANSWER_BEHAVIOURS = ("cite-foreign", "forge-all", "malformed", "decline", "cite-mixed")
STREAM_PIECES = ["Olympus Mons rises about 22 km ", "[", "1", "] and is very old [9", "9].", " Done."]
EMBEDDING_SIZE_CHARS = {"titan": 50_000, "cohere": 2048}


# ---- event stream ------------------------------------------------------------------------------


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    # name length (1 byte), name, value type 7 (string), value length (2 bytes), value
    return bytes([len(raw_name)]) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value


def frame(headers: dict[str, str], payload: bytes, *, corrupt: bool = False) -> bytes:
    """One event-stream message: prelude (total length, headers length), prelude CRC32, headers,
    payload, CRC32 of everything before it."""
    encoded = b"".join(_header(name, value) for name, value in headers.items())
    prelude = struct.pack(">II", 16 + len(encoded) + len(payload), len(encoded))
    message = prelude + struct.pack(">I", binascii.crc32(prelude)) + encoded + payload
    crc = binascii.crc32(message) ^ (0xFFFF if corrupt else 0)
    return message + struct.pack(">I", crc)


def event(kind: str, payload: dict[str, Any], *, corrupt: bool = False) -> bytes:
    headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
    return frame(headers, json.dumps(payload).encode(), corrupt=corrupt)


def exception(kind: str, message: str) -> bytes:
    headers = {":exception-type": kind, ":content-type": "application/json", ":message-type": "exception"}
    return frame(headers, json.dumps({"message": message}).encode())


# ---- SigV4 -------------------------------------------------------------------------------------

_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)"
    r"/aws4_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=(?P<signature>[0-9a-f]{64})"
)


def check_signature(
    method: str, url: str, headers: dict[str, str], body: bytes, region: str = REGION
) -> tuple[str, str] | None:
    """None when the request is signed by the test credentials for `region` and bedrock;
    otherwise (error code, message) as AWS would answer."""
    found = _AUTHORIZATION.fullmatch(headers.get("authorization", ""))
    if found is None:
        return "IncompleteSignature", "Authorization header requires a SigV4 signature"
    if found["key"] != ACCESS_KEY:
        return "UnrecognizedClientException", "The security token included in the request is invalid."
    if found["region"] != region or found["service"] != "bedrock":
        return "InvalidSignatureException", f"Credential should be scoped to {region}/bedrock"
    stamp = headers.get("x-amz-date", "")
    try:
        signed_at = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "IncompleteSignature", "X-Amz-Date is missing or malformed"
    if found["date"] != stamp[:8] or abs((datetime.now(UTC) - signed_at).total_seconds()) > 300:
        return "InvalidSignatureException", "Signature expired or the credential date is not the request's"
    signed = found["signed"].split(";")
    if "host" not in signed or any(name not in headers for name in signed):
        return "InvalidSignatureException", "A signed header is missing"
    request = AWSRequest(method=method, url=url, data=body, headers={n: headers[n] for n in signed})
    request.context["timestamp"] = stamp
    signer = SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "bedrock", region)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if not hmac.compare_digest(expected, found["signature"]):
        return (
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided.",
        )
    return None


# ---- the server --------------------------------------------------------------------------------


class Refused(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def invalid(message: str) -> Refused:
    return Refused(400, "ValidationException", message)


SLOW_DOWN = "Too many requests, please wait before trying again."
NO_ACCESS = "You don't have access to the model with the specified model ID."


def throttled() -> Refused:
    return Refused(429, "ThrottlingException", SLOW_DOWN)


def _usage(given: int, made: int) -> dict[str, int]:
    return {"inputTokens": given, "outputTokens": made, "totalTokens": given + made}


def _search(query: str) -> dict[str, Any]:
    return {"query": query, "top_k": 3}


def _converse_prompt(body: dict[str, Any]) -> str:
    parts = [block.get("text", "") for block in body.get("system") or []]
    for message in body.get("messages") or []:
        parts.extend(block["text"] for block in message.get("content") or [] if "text" in block)
    return "\n".join(parts)


def _check_converse(body: dict[str, Any]) -> None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("messages: at least one message is required")
    if messages[0].get("role") != "user":
        raise invalid("A conversation must start with a user message.")
    for before, after in itertools.pairwise(messages):
        if before.get("role") == after.get("role"):
            raise invalid("A conversation must alternate between user and assistant roles.")
    for message in messages:
        for block in message.get("content") or []:
            if not isinstance(block, dict) or not block.keys() & {"text", "toolUse", "toolResult"}:
                raise invalid("A content block is malformed.")
            if block.get("text") == "":
                raise invalid("The text field in the ContentBlock object is blank.")
    uses = any("toolUse" in b or "toolResult" in b for m in messages for b in m.get("content") or [])
    if uses and not body.get("toolConfig"):
        raise invalid(
            "The toolConfig field must be defined when using toolUse and toolResult content blocks.",
        )
    config = body.get("toolConfig")
    if config is not None:
        names = [t["toolSpec"]["name"] for t in config.get("tools") or []]
        forced = ((config.get("toolChoice") or {}).get("tool") or {}).get("name")
        if not names or (forced is not None and forced not in names):
            raise invalid("toolChoice names a tool that is not defined.")
        for tool in config["tools"]:
            if not isinstance(tool["toolSpec"].get("inputSchema", {}).get("json"), dict):
                raise invalid("inputSchema.json must be a JSON schema object.")


class _Handler(BaseHTTPRequestHandler):
    server: FakeBedrock  # type: ignore[assignment]
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def handle(self) -> None:
        # The client hung up (a stream it abandoned, a timeout): nothing to answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            super().handle()

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, refused: Refused) -> None:
        self._send(
            refused.status,
            {"message": refused.message},
            {"x-amzn-ErrorType": f"{refused.code}:http://internal.amazon.com/coral/com.amazon.bedrock/"},
        )

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {name.lower(): value for name, value in self.headers.items()}
        url = f"http://{self.headers['Host']}{self.path}"
        problem = check_signature("POST", url, headers, body, self.server.region)
        found = re.fullmatch(r"/model/([^/]+)/(converse|converse-stream|invoke)", self.path)
        record: dict[str, Any] = {
            "path": self.path,
            "headers": headers,
            "signature_ok": problem is None,
            "model": unquote(found.group(1)) if found else None,
            "operation": found.group(2) if found else None,
        }
        try:
            record["body"] = json.loads(body) if body else None
        except ValueError:
            record["body"] = None
        with self.server.lock:
            self.server.calls.append(record)
        try:
            if problem is not None:
                status = 403
                raise Refused(status, *problem)
            if found is None:
                raise Refused(404, "UnknownOperationException", "no such operation")
            if record["body"] is None:
                raise invalid("The request body is not JSON.")
            with self.server.lock:
                if self.server.throttle_next > 0:
                    self.server.throttle_next -= 1
                    raise Refused(
                        429, "ThrottlingException", "Too many requests, please wait before trying again."
                    )
            self._operation(record["operation"], record["model"], record["body"])
        except Refused as refused:
            self._error(refused)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _refuse_by_model(self, model: str) -> None:
        if self.server.fail_all is not None:
            raise self.server.fail_all
        if model == "throttle-always":
            raise throttled()
        if model == "throttle-once":
            with self.server.lock:
                seen = self.server.throttled.get(model, 0)
                self.server.throttled[model] = seen + 1
            if seen == 0:
                raise Refused(
                    429, "ThrottlingException", "Too many requests, please wait before trying again."
                )
        if model == "access-denied":
            raise Refused(
                403,
                "AccessDeniedException",
                f"User: {ROLE_ARN} is not authorized to perform: bedrock:InvokeModel on resource: "
                f"arn:aws:bedrock:{self.server.region}::foundation-model/{model} because no "
                "identity-based policy allows the bedrock:InvokeModel action",
            )
        if model == "not-enabled":
            raise Refused(
                403,
                "AccessDeniedException",
                "You don't have access to the model with the specified model ID.",
            )
        if model == "validation":
            raise invalid(
                "Malformed input request: #: extraneous key [foo] is not permitted",
            )

    def _operation(self, operation: str, model: str, body: dict[str, Any]) -> None:
        self._refuse_by_model(model)
        if operation == "invoke":
            self._send(200, self._embedding(model, body))
            return
        _check_converse(body)
        if operation == "converse":
            self._send(200, self._converse(model, body))
            return
        self._stream(model, body)

    # -- Converse

    def _converse(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        config = body.get("toolConfig") or {}
        tools = [t["toolSpec"]["name"] for t in config.get("tools") or []]
        forced = ((config.get("toolChoice") or {}).get("tool") or {}).get("name")
        if model == "no-forced-tool" and forced:
            raise invalid(
                "This model doesn't support the toolConfig.toolChoice.tool field. Remove "
                "toolConfig.toolChoice.tool and try again.",
            )
        prompt = _converse_prompt(body)
        content: list[dict[str, Any]]
        if "retrieve_knowledge" in tools:
            answered = any("toolResult" in b for m in body["messages"] for b in m.get("content") or [])
            calls = [] if answered or model != "agent-tools" else ["Olympus Mons height", "Mars volcano"]
            content = [
                {
                    "toolUse": {
                        "toolUseId": f"tooluse_{n}",
                        "name": "retrieve_knowledge",
                        "input": {"query": q, "top_k": 3},
                    }
                }
                for n, q in enumerate(calls)
            ] or [{"text": "enough"}]
            stop = "tool_use" if calls else "end_turn"
        else:
            behaviour = (
                model
                if model in ("cite-foreign", "forge-all", "malformed", "decline", "cite-mixed")
                else "cite-first"
            )
            _, completion = _reply(behaviour, prompt)
            text = completion["choices"][0]["message"]["content"]
            if forced and model != "text-json":
                try:
                    given = json.loads(text)
                except ValueError:
                    # A tool input is always an object; a model that goes wrong in one writes a
                    # list as a JSON string, as models do.
                    given = {"answer": text, "used_refs": '["r_0123456789abcdef"]'}
                content = [
                    {
                        "toolUse": {
                            "toolUseId": f"tooluse_{uuid.uuid4().hex[:20]}",
                            "name": forced,
                            "input": given,
                        }
                    }
                ]
                stop = "tool_use"
            else:
                content = [{"text": text}]
                stop = "end_turn"
        return {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": stop,
            "usage": {
                "inputTokens": len(prompt) // 4,
                "outputTokens": 60,
                "totalTokens": len(prompt) // 4 + 60,
            },
            "metrics": {"latencyMs": 5},
        }

    # -- ConverseStream

    def _stream(self, model: str, body: dict[str, Any]) -> None:
        if model == "stream-throttled":
            frames = [exception("throttlingException", SLOW_DOWN)]
        else:
            pieces = STREAM_PIECES if model in ("agent-tools", "stream-dies") else [STREAM_PIECES[0]]
            if model not in ("agent-tools", "stream-dies", "stream-cut", "stream-bad-crc"):
                pieces = ["Olympus Mons is the tallest volcano [1]."]
            frames = [event("messageStart", {"role": "assistant"})]
            for piece in pieces[:2] if model == "stream-dies" else pieces:
                frames.append(event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}}))
            if model == "stream-dies":
                frames.append(
                    exception("modelStreamErrorException", "The model stopped: internal detail 10.0.0.7")
                )
            elif model == "stream-bad-crc":
                frames = [
                    event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x"}}, corrupt=True)
                ]
            elif model != "stream-cut":
                frames += [
                    event("contentBlockStop", {"contentBlockIndex": 0}),
                    event("messageStop", {"stopReason": "end_turn"}),
                    event(
                        "metadata",
                        {
                            "usage": {"inputTokens": 10, "outputTokens": 12, "totalTokens": 22},
                            "metrics": {"latencyMs": 9},
                        },
                    ),
                ]
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.amazon.eventstream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        self.end_headers()
        with self.server.lock:
            self.server.streamed_frames.extend(frames)
        for data in frames:  # one chunk per frame, flushed: the client reads them as they come
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
            time.sleep(self.server.frame_delay)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    # -- InvokeModel (embeddings)

    def _embedding(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.server.lock:
            self.server.in_flight += 1
            self.server.most_in_flight = max(self.server.most_in_flight, self.server.in_flight)
        try:
            time.sleep(self.server.invoke_delay)
            if model.startswith("amazon.titan-embed-text-v2"):
                return self._titan(body)
            if model.startswith("cohere.embed-"):
                return self._cohere(body)
            raise invalid("The provided model identifier is invalid.")
        finally:
            with self.server.lock:
                self.server.in_flight -= 1

    def _titan(self, body: dict[str, Any]) -> dict[str, Any]:
        allowed = {"inputText", "dimensions", "normalize", "embeddingTypes"}
        extra = sorted(set(body) - allowed)
        if extra:
            raise invalid(f"Malformed input request: extraneous key [{extra[0]}] is not permitted")
        text = body.get("inputText")
        if not isinstance(text, str) or not text or len(text) > EMBEDDING_SIZE_CHARS["titan"]:
            raise invalid(
                "Malformed input request: inputText: expected minLength: 1, maxLength: 50000",
            )
        dimension = body.get("dimensions", 1024)
        if dimension not in (256, 512, 1024):
            raise invalid("Malformed input request: dimensions: 1024|512|256")
        vector = HashingEmbedder(dimension).embed_query(text)
        return {
            "embedding": [float(x) for x in vector],
            "embeddingsByType": {"float": [float(x) for x in vector]},
            "inputTextTokenCount": max(1, len(text) // 4),
        }

    def _cohere(self, body: dict[str, Any]) -> dict[str, Any]:
        texts = body.get("texts")
        if not isinstance(texts, list) or not texts or len(texts) > 96:
            raise invalid("Malformed input request: #/texts: expected maxItems: 96")
        if any(not isinstance(t, str) or len(t) > EMBEDDING_SIZE_CHARS["cohere"] for t in texts):
            raise invalid("Malformed input request: #/texts: expected maxLength: 2048")
        if body.get("input_type") not in ("search_document", "search_query", "classification", "clustering"):
            raise invalid("Malformed input request: #/input_type: is not a valid enum value")
        if body.get("truncate", "NONE") not in ("NONE", "START", "END"):
            raise invalid("Malformed input request: #/truncate: is not a valid enum value")
        embedder = HashingEmbedder(1024)
        return {
            "id": str(uuid.uuid4()),
            "texts": texts,
            "embeddings": [[float(x) for x in embedder.embed_query(t)] for t in texts],
            "response_type": "embeddings_floats",
        }


class FakeBedrock(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, region: str = REGION) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.region = region
        self.lock = threading.Lock()
        self.calls: list[dict[str, Any]] = []
        self.throttled: dict[str, int] = {}
        self.throttle_next = 0
        # Every operation fails with this, whatever the model (embedding models have fixed ids).
        self.fail_all: Refused | None = None
        self.streamed_frames: list[bytes] = []
        self.invoke_delay = 0.0
        self.frame_delay = 0.0
        self.in_flight = 0
        self.most_in_flight = 0
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> FakeBedrock:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
