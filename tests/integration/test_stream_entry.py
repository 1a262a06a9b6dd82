"""The streaming routes' AWS entry (citegate.api.stream_app), run the way Lambda runs it: the ASGI
app under uvicorn as run.sh starts it (`stream_app.server`), on a loopback port, against the
embedded AWS endpoint of the integration tier. Requests carry what the Lambda Web Adapter adds
(`x-amzn-request-context`, `x-amzn-lambda-context`): the public function URL's context has no
authorizer (the app authenticates the caller itself), the agents' URL's carries `authorizer.iam`.

The story: a client reads the first frame long before the answer ends (time to first frame is
printed), the cited summary arrives whole, callers are authenticated as on the HTTP API, and a
client that hangs up mid-stream is audited once, as closed by the client.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from citegate.agents import query_v2
from citegate.api import stream_app
from citegate.runtime.aws_endpoint import free_port
from tests.integration.conftest import TOKEN, audited, ingest

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"
CLIENT_CLOSED = 499
FUNCTION_NAME = "citegate-test-query-v2-stream"
MARS = (
    "# Mars\n\nOlympus Mons on Mars is the tallest volcano in the solar system. "
    "It rises about 22 km above the surrounding plains, nearly three times the height of Everest."
)


def _lwa_headers(request_id: str, iam: dict[str, Any] | None = None) -> dict[str, str]:
    """The two headers LWA adds to every request (a function URL's request context)."""
    context: dict[str, Any] = {
        "accountId": "anonymous",
        "requestId": request_id,
        "domainName": "abc.lambda-url.eu-west-1.on.aws",
        "http": {"method": "POST", "sourceIp": "203.0.113.7", "protocol": "HTTP/1.1", "userAgent": "t"},
        "timeEpoch": int(time.time() * 1000),
    }
    if iam is not None:
        context["authorizer"] = {"iam": iam}
    lambda_context = {
        "request_id": request_id,
        "deadline": int(time.time() * 1000) + 900_000,
        "invoked_function_arn": f"arn:aws:lambda:eu-west-1:123456789012:function:{FUNCTION_NAME}",
        "env_config": {
            "function_name": FUNCTION_NAME,
            "memory": 2048,
            "version": "$LATEST",
        },
    }
    return {
        stream_app.REQUEST_CONTEXT_HEADER: json.dumps(context),
        stream_app.LAMBDA_CONTEXT_HEADER: json.dumps(lambda_context),
    }


def _serve(function: str) -> Iterator[str]:
    app = stream_app.create_app(function, FUNCTIONS / function / "handler.py")
    port = free_port()
    server = stream_app.server(app, port)
    thread = threading.Thread(target=server.run, name=f"stream-entry-{function}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the streaming entry did not start"
        time.sleep(0.02)
    assert httpx.get(f"http://127.0.0.1:{port}{stream_app.READY_PATH}").status_code == 200
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def query_url(stack: Any) -> Iterator[str]:
    yield from _serve("query_v2")


@pytest.fixture(scope="module")
def chat_url(stack: Any) -> Iterator[str]:
    yield from _serve("agent_chat_message")


@pytest.fixture(scope="module")
def mars_kb(client: TestClient) -> str:
    kb_id = str(client.post("/v1/kb", json={"name": "mars " + uuid.uuid4().hex[:6]}).json()["kb_id"])
    ingest(client, kb_id, text=MARS, source_name="mars.md", metadata={"url": "https://example.org/mars"})
    return kb_id


@pytest.fixture
def slow_query(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """/api/v2/query's agent replaced by one that streams 20 frames 100 ms apart (2 s in all),
    or until its stream is closed; counts the streams started and closed."""
    seen = {"started": 0, "closed": 0}

    def run_query(*args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        seen["started"] += 1
        try:
            for n in range(20):
                yield {"message_type": query_v2.CONTENT, "content": f"part {n}. "}
                time.sleep(0.1)
        finally:
            seen["closed"] += 1

    monkeypatch.setattr(query_v2, "run_query", run_query)
    return seen


def _bearer(request_id: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}", **_lwa_headers(request_id)}


def _timed_frames(url: str, request_id: str) -> list[float]:
    """The seconds from sending the request to each frame's arrival."""
    started = time.monotonic()
    arrivals = []
    with (
        httpx.Client(base_url=url, timeout=30) as http,
        http.stream(
            "POST", "/api/v2/query", json={"query": "anything"}, headers=_bearer(request_id)
        ) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert "content-length" not in response.headers  # chunked: what LWA streams on
        for line in response.iter_lines():
            if line.startswith("data: "):
                assert json.loads(line.removeprefix("data: "))["message_type"] == query_v2.CONTENT
                arrivals.append(time.monotonic() - started)
    return arrivals


def test_the_first_frame_arrives_long_before_the_answer_ends(
    query_url: str, stack: Any, slow_query: dict[str, int]
) -> None:
    # The first request of an execution environment imports what its route needs (the resolver,
    # pydantic, governance...); the second is what every later caller of that environment sees.
    first_call, request_id = _timed_frames(query_url, str(uuid.uuid4())), str(uuid.uuid4())
    warm = _timed_frames(query_url, request_id)
    for label, arrivals in (("first request", first_call), ("warm", warm)):
        print(
            f"\nstreaming entry, {label}: time to first frame {arrivals[0] * 1000:.0f} ms, "
            f"last of {len(arrivals)} frames at {arrivals[-1] * 1000:.0f} ms"
        )
        # Delivered as produced: 20 frames 100 ms apart arrive over about 2 s, not all at the end.
        assert len(arrivals) == 20 and arrivals[-1] - arrivals[0] > 1.5
    assert warm[0] < 1.0
    assert [(r.status, r.route) for r in audited(stack, request_id)] == [(200, "POST /api/v2/query")]


def test_a_real_query_streams_its_cited_summary_whole(
    query_url: str, client: TestClient, mars_kb: str
) -> None:
    # The service token's policy grants working docs, as on the HTTP API.
    request_id = str(uuid.uuid4())
    body = {"query": "How high is Olympus Mons on Mars?", "include_working_docs": True}
    started = time.monotonic()
    events, first = [], None
    with (
        httpx.Client(base_url=query_url, timeout=60) as http,
        http.stream("POST", "/api/v2/query", json=body, headers=_bearer(request_id)) as response,
    ):
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: "):
                first = first if first is not None else time.monotonic() - started
                events.append(json.loads(line.removeprefix("data: ")))
    total = time.monotonic() - started
    assert first is not None
    print(f"\nreal query: first frame {first * 1000:.0f} ms, answer ended at {total * 1000:.0f} ms")
    types = [e["message_type"] for e in events]
    assert types[-2:] == [204, 0] and 22 not in types
    answer = "".join(e["content"] for e in events if e["message_type"] == query_v2.CONTENT)
    assert "22 km" in answer
    references = events[-2]["content"]
    # (other tests' knowledge bases, which the service token also reads, may hold Mars too)
    assert any(r.get("doc_url") == "https://example.org/mars" for r in references), references


def test_callers_are_authenticated_as_the_http_api_authenticates_them(
    query_url: str, client: TestClient, slow_query: dict[str, int]
) -> None:
    with httpx.Client(base_url=query_url, timeout=30) as http:
        bad = http.post(
            "/api/v2/query",
            json={"query": "q"},
            headers={"Authorization": "Bearer not-a-token", **_lwa_headers(str(uuid.uuid4()))},
        )
        assert bad.status_code == 401 and bad.json()["error"] == "UNAUTHORIZED", bad.text
        # The agents' URL: Lambda verified the signature; the ARN must be mapped to an agent.
        arn = f"arn:aws:iam::123456789012:role/stream-{uuid.uuid4().hex[:6]}"
        iam = {"accessKey": "AKIDEXAMPLE", "accountId": "123456789012", "userArn": arn, "userId": "AROA"}
        unmapped = http.post("/api/v2/query", json={"query": "q"}, headers=_lwa_headers("r1", iam))
        assert unmapped.status_code == 401 and arn in unmapped.json()["message"]
        agent = "agent-" + uuid.uuid4().hex[:8]
        client.put(f"/admin/policies/agent:{agent}", json={"tools": ["query_v2"], "iam_arns": [arn]})
        mapped = http.post("/api/v2/query", json={"query": "q"}, headers=_lwa_headers("r2", iam))
        assert mapped.status_code == 200 and mapped.text.startswith("data: ")
        # Only this function's routes are served on its URL.
        other = http.get("/v1/kb", headers=_bearer(str(uuid.uuid4())))
        assert other.status_code == 404 and other.json()["error"] == "NOT_FOUND"
        # A client claiming an IAM identity in a header of its own changes nothing: LWA replaces
        # x-amzn-request-context, and without it the caller is whoever the credentials say.
        bad_body = http.post("/api/v2/query", content=b"{", headers=_bearer(str(uuid.uuid4())))
        assert bad_body.status_code == 400 and bad_body.headers["content-type"] == "application/json"


def test_hanging_up_mid_stream_is_audited_once_and_stops_the_agent(
    query_url: str, stack: Any, slow_query: dict[str, int]
) -> None:
    request_id = str(uuid.uuid4())
    with (
        httpx.Client(base_url=query_url, timeout=30) as http,
        http.stream("POST", "/api/v2/query", json={"query": "q"}, headers=_bearer(request_id)) as response,
    ):
        assert response.status_code == 200
        assert next(line for line in response.iter_lines() if line.startswith("data: "))
    deadline = time.monotonic() + 10
    while slow_query["closed"] < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert slow_query == {"started": 1, "closed": 1}
    assert [(r.status, r.reason) for r in audited(stack, request_id)] == [
        (CLIENT_CLOSED, "client_closed_request")
    ]
    time.sleep(0.5)  # nothing more is written for it later
    assert len(audited(stack, request_id)) == 1


def test_a_chat_turn_streams_through_its_own_entry(chat_url: str, client: TestClient) -> None:
    chat_id = client.post("/api/v1/agent/chats", json={"title": "streamed " + uuid.uuid4().hex[:6]}).json()[
        "id"
    ]
    request_id = str(uuid.uuid4())
    with (
        httpx.Client(base_url=chat_url, timeout=60) as http,
        http.stream(
            "POST",
            f"/api/v1/agent/chats/{chat_id}/messages",
            json={"content": "How high is Olympus Mons?", "stream": True},
            headers=_bearer(request_id),
        ) as response,
    ):
        assert response.status_code == 200, response.read()
        frames = [
            json.loads(x.removeprefix("data: ")) for x in response.iter_lines() if x.startswith("data: ")
        ]
    assert frames and frames[-1]
    messages = client.get(f"/api/v1/agent/chats/{chat_id}").json()["messages"]
    assert [m["type"] for m in messages] == ["user", "assistant"]


def test_behind_the_http_api_the_same_handler_answers_one_body(
    stack: Any, slow_query: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deployed HTTP API's entry (the Python runtime calling handler.lambda_handler) cannot
    stream: there the frames are joined into one body; under the streaming entry, the same call
    hands back the stream itself."""
    from citegate.api.streaming import delivering_frames

    handler = stream_app.load_handler(FUNCTIONS / "query_v2" / "handler.py").lambda_handler
    monkeypatch.setattr(stack.services.settings, "runtime", "aws")

    def event() -> dict[str, Any]:
        found: dict[str, Any] = {
            "version": "2.0",
            "routeKey": "POST /api/v2/query",
            "rawPath": "/api/v2/query",
            "rawQueryString": "",
            "headers": {"content-type": "application/json", "authorization": f"Bearer {TOKEN}"},
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "routeKey": "POST /api/v2/query",
                "stage": "$default",
                "http": {"method": "POST", "path": "/api/v2/query", "sourceIp": "127.0.0.1"},
            },
            "body": json.dumps({"query": "q"}),
            "isBase64Encoded": False,
        }
        verdict = stream_app.invoke_authorizer(stream_app.authorizer_event(found))
        found["requestContext"]["authorizer"] = {"lambda": verdict["context"]}
        return found

    context = stream_app.InvocationContext(function_name="query_v2", aws_request_id="r")
    joined = handler(event(), context)
    assert joined["statusCode"] == 200 and joined["headers"]["Content-Type"] == "text/event-stream"
    assert joined["body"].count("data: ") == 20
    with delivering_frames():
        stream = handler(event(), context)
    try:
        assert not isinstance(stream, dict) and next(stream).startswith("data: ")
    finally:
        stream.close()
