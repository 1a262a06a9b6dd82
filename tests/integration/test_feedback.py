"""No-answer feedback and improvement tasks (spec 000 8.1 and the acceptance case of section 10):
the same gap reported again reuses its open record (and issue), a retried call with the same
idempotencyKey is answered from the first call and counted once, and closed records stay closed.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from starlette.testclient import TestClient

from citegate.answers import feedback
from citegate.runtime.aws_endpoint import free_port
from citegate.runtime.gateway import create_app
from tests.integration.test_governance import _agent, _as

FEEDBACK = "/agent/tools/create_feedback"
TASK = "/agent/tools/create_improvement_task"
SCOPE = {"paths": ["publish/system/components/kunora-kgent"], "version": "main"}


def _body(**overrides: Any) -> dict[str, Any]:
    # A unique question per test: records live for the whole session's stack.
    body: dict[str, Any] = {
        "eventType": "qa_no_answer",
        "question": f"How is the kgent memory TTL configured ({uuid.uuid4().hex[:8]})?",
        "scope": SCOPE,
        "citations": [],
        "caller": {"type": "agent", "id": "kunora-coding-agent"},
    }
    body.update(overrides)
    return body


def _records(client: TestClient, dedupe_key: str, **params: str) -> list[dict[str, Any]]:
    response = client.get("/admin/feedback", params={"limit": "1000", **params})
    assert response.status_code == 200, response.text
    return [r for r in response.json()["records"] if r["dedupeKey"] == dedupe_key]


@pytest.fixture(autouse=True)
def _no_sink(monkeypatch: pytest.MonkeyPatch) -> None:
    # The sink is read from the environment per call; tests that want it set it themselves.
    for name in ("CITEGATE_GITHUB_REPOSITORY", "CITEGATE_GITHUB_TOKEN", "CITEGATE_GITHUB_API_URL"):
        monkeypatch.delenv(name, raising=False)


def test_the_same_no_answer_feedback_twice_reuses_one_record(client: TestClient) -> None:
    body = _body()
    first = client.post(FEEDBACK, json=body)
    assert first.status_code == 200, first.text
    one = first.json()
    assert one["created"] is True and one["duplicateOf"] is None
    assert one["record"]["count"] == 1 and one["record"]["status"] == "open"

    second = client.post(FEEDBACK, json=body).json()
    assert second["created"] is False
    assert second["record"]["recordId"] == one["record"]["recordId"] == second["duplicateOf"]
    assert second["record"]["count"] == 2
    assert second["record"]["firstSeen"] == one["record"]["firstSeen"]
    assert second["record"]["lastSeen"] >= one["record"]["lastSeen"]

    # Case, spacing and trailing punctuation do not make a new gap.
    variant = {**body, "question": "  " + body["question"].upper().rstrip("?") + " ？"}
    third = client.post(FEEDBACK, json=variant).json()
    assert third["created"] is False and third["record"]["count"] == 3
    assert third["dedupeKey"] == one["dedupeKey"]

    [record] = _records(client, one["dedupeKey"], kind="feedback")
    assert record["count"] == 3 and record["status"] == "open"
    assert record["question"] == body["question"]
    # Every report keeps who (type and id, for maintainers) and when.
    assert [r["callerType"] for r in record["reports"]] == ["service"] * 3
    assert all(r["callerId"] and r["at"] and r["requestId"] for r in record["reports"])
    # Callers see types and times only.
    assert third["record"]["callers"] == {"service": 3}
    assert all(set(r) == {"callerType", "at"} for r in third["record"]["recent"])


def test_fifty_concurrent_retries_with_one_idempotency_key_count_once(client: TestClient) -> None:
    body = _body(idempotencyKey="retry-" + uuid.uuid4().hex)
    with ThreadPoolExecutor(max_workers=50) as pool:
        responses = list(pool.map(lambda _: client.post(FEEDBACK, json=body), range(50)))
    assert [r.status_code for r in responses] == [200] * 50, {r.text for r in responses}
    bodies = {r.text for r in responses}
    assert len(bodies) == 1  # all fifty answers are the first call's answer
    answer = responses[0].json()
    assert answer["created"] is True and answer["record"]["count"] == 1
    assert sum(r.headers.get("idempotency-replayed") == "true" for r in responses) == 49

    [record] = _records(client, answer["dedupeKey"])
    assert record["count"] == 1 and len(record["reports"]) == 1
    # A later retry is still answered from the store and still not counted.
    again = client.post(FEEDBACK, json=body)
    assert again.text in bodies and again.headers["idempotency-replayed"] == "true"
    assert _records(client, answer["dedupeKey"])[0]["count"] == 1


def test_fifty_reports_with_different_idempotency_keys_count_fifty(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feedback, "REPORTS_KEPT", 20)
    body = _body()
    with ThreadPoolExecutor(max_workers=50) as pool:
        responses = list(
            pool.map(lambda i: client.post(FEEDBACK, json={**body, "idempotencyKey": f"k-{i}"}), range(50))
        )
    assert [r.status_code for r in responses] == [200] * 50, {r.text for r in responses}
    answers = [r.json() for r in responses]
    assert sum(a["created"] for a in answers) == 1  # concurrent first reports still make one record
    assert len({a["record"]["recordId"] for a in answers}) == 1
    assert sorted(a["record"]["count"] for a in answers) == list(range(1, 51))

    [record] = _records(client, answers[0]["dedupeKey"])
    assert record["count"] == 50 and record["callers"] == {"service": 50}
    assert len(record["reports"]) <= 20  # the history is bounded; the counters are not


def test_a_closed_record_does_not_absorb_new_reports(client: TestClient) -> None:
    body = _body()
    first = client.post(FEEDBACK, json=body).json()
    client.post(FEEDBACK, json=body)
    open_id = first["record"]["recordId"]

    closed = client.post(f"/admin/feedback/{open_id}/close", json={"resolution": "documented in memory.md"})
    assert closed.status_code == 200, closed.text
    closed_record = closed.json()
    assert closed_record["status"] == "closed" and closed_record["count"] == 2
    assert closed_record["recordId"].startswith(open_id + ":closed:")
    assert closed_record["resolution"] == "documented in memory.md" and closed_record["closedAt"]

    again = client.post(FEEDBACK, json=body).json()
    assert again["created"] is True and again["record"]["count"] == 1
    assert again["record"]["status"] == "open"

    [still_closed] = _records(client, first["dedupeKey"], status="closed")
    assert still_closed["count"] == 2 and still_closed["recordId"] == closed_record["recordId"]
    [reopened] = _records(client, first["dedupeKey"], status="open")
    assert reopened["count"] == 1

    twice = client.post(f"/admin/feedback/{closed_record['recordId']}/close", json={})
    assert twice.status_code == 409 and twice.json()["error"] == "conflict"
    missing = client.post("/admin/feedback/feedback:default:nothing/close", json={})
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"


def test_improvement_tasks_are_their_own_records(client: TestClient) -> None:
    body = _body()
    body.pop("eventType")
    task = client.post(TASK, json={**body, "title": "Document the memory TTL"})
    assert task.status_code == 200, task.text
    report = client.post(FEEDBACK, json=body).json()
    assert task.json()["created"] is True and report["created"] is True
    assert task.json()["record"]["kind"] == "improvement_task"
    assert task.json()["record"]["eventType"] == "knowledge_gap"
    assert report["record"]["eventType"] == "qa_no_answer"
    assert task.json()["dedupeKey"] != report["dedupeKey"]
    [listed] = _records(client, task.json()["dedupeKey"], kind="improvement_task")
    assert listed["title"] == "Document the memory TTL"


def test_write_action_and_tool_are_checked(client: TestClient) -> None:
    _, no_write = _agent(client, {"tools": ["create_feedback"]})
    _, no_tool = _agent(client, {"tools": ["ask"], "write_actions": ["feedback"]})
    grant = {"tools": ["create_feedback"], "write_actions": ["feedback"]}
    _, allowed = _agent(client, {**grant, "scope": {"path_prefixes": ["publish"]}})
    with _as(no_write) as agent:
        refused = agent.post(FEEDBACK, json=_body())
        assert refused.status_code == 403 and refused.json()["error"] == "forbidden_action"
        assert refused.json()["details"]["action"] == "feedback"
        assert agent.get("/admin/feedback").status_code == 403
    with _as(no_tool) as agent:
        refused = agent.post(FEEDBACK, json=_body())
        assert refused.status_code == 403 and refused.json()["error"] == "forbidden_tool"
        assert refused.json()["details"]["tool"] == "create_feedback"
        # The tool is checked before the body: no schema hints for callers without the grant.
        assert agent.post(FEEDBACK, json={"question": ""}).status_code == 403
        assert agent.post(TASK, json=_body()).status_code == 403
    with _as(allowed) as agent:
        ok = agent.post(FEEDBACK, json=_body())
        assert ok.status_code == 200 and ok.json()["record"]["callers"] == {"agent": 1}
        outside = agent.post(FEEDBACK, json=_body(scope={"paths": ["private/secrets"]}))
        assert outside.status_code == 403 and outside.json()["error"] == "forbidden_scope"


def test_anonymous_readers_may_report_no_answer_but_not_open_tasks(stack: Any) -> None:
    with TestClient(create_app()) as anonymous:
        reported = anonymous.post(FEEDBACK, json=_body())
        assert reported.status_code == 200, reported.text
        assert reported.json()["record"]["callers"] == {"anonymous": 1}
        task = anonymous.post(TASK, json=_body())
        assert task.status_code == 401 and task.json()["error"] == "unauthorized"


@pytest.mark.parametrize(
    "body",
    [
        {"question": ""},
        {"scope": SCOPE},
        {"question": "q", "dedupeKey": "not-a-sha256"},
        {"question": "q", "dedupeKey": "A" * 64},
        {"question": "q", "idempotencyKey": "x" * 201},
        {"question": "q", "unknownField": 1},
        {"question": "q", "citations": [{"chunkId": "c1"}]},
        {"question": "q", "eventType": "no spaces allowed"},
    ],
)
def test_invalid_bodies_are_invalid_request(client: TestClient, body: dict[str, Any]) -> None:
    response = client.post(FEEDBACK, json=body)
    assert response.status_code == 400 and response.json()["error"] == "invalid_request", response.text


def test_malformed_json_and_reused_idempotency_keys_are_invalid_request(client: TestClient) -> None:
    raw = client.post(FEEDBACK, content=b"{not json", headers={"Content-Type": "application/json"})
    assert raw.status_code == 400 and raw.json()["error"] == "invalid_request"
    key = "reuse-" + uuid.uuid4().hex
    assert client.post(FEEDBACK, json=_body(idempotencyKey=key)).status_code == 200
    reused = client.post(FEEDBACK, json=_body(idempotencyKey=key))  # another question, same key
    assert reused.status_code == 400 and reused.json()["details"]["reason"] == "idempotency_key_reused"


def test_the_server_derives_the_dedupe_key(client: TestClient) -> None:
    body = _body(dedupeKey="0" * 64)
    answer = client.post(FEEDBACK, json=body).json()
    expected = feedback.dedupe_key("qa_no_answer", body["question"], SCOPE, [])
    assert answer["dedupeKey"] == expected and answer["clientDedupeKey"] == "0" * 64
    assert body["question"].split()[1] not in answer["record"]["recordId"]
    matching = client.post(FEEDBACK, json={**body, "dedupeKey": expected}).json()
    assert matching["clientDedupeKey"] is None and matching["record"]["count"] == 2


# --- the GitHub sink against a loopback fake ---------------------------------------------------


class FakeGitHub:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.issues = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                payload = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "json": payload,
                        "authorization": self.headers.get("Authorization"),
                    }
                )
                if self.command == "POST" and self.path.endswith("/issues"):
                    fake.issues += 1
                    number = 100 + fake.issues
                    url = f"https://github.test/issues/{number}"
                    status, reply = 201, {"number": number, "html_url": url}
                elif self.command == "POST":
                    status, reply = 201, {"id": len(fake.requests)}
                else:
                    status, reply = 200, {"state": "closed"}
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_POST = do_PATCH = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def of(self, method: str, suffix: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == method and r["path"].endswith(suffix)]


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    fake.thread.start()
    monkeypatch.setenv("CITEGATE_GITHUB_REPOSITORY", "acme/docs")
    monkeypatch.setenv("CITEGATE_GITHUB_TOKEN", "ghp_fake_token_not_secret")
    monkeypatch.setenv("CITEGATE_GITHUB_API_URL", fake.url)
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


def test_one_issue_per_open_record_then_a_comment_per_report(client: TestClient, github: FakeGitHub) -> None:
    body = _body(comment="Found nothing about the TTL")
    first = client.post(FEEDBACK, json=body).json()
    assert first["record"]["issueNumber"] == 101
    assert first["record"]["issueUrl"] == "https://github.test/issues/101"
    [issue] = github.of("POST", "/repos/acme/docs/issues")
    assert issue["authorization"] == "Bearer ghp_fake_token_not_secret"
    assert first["dedupeKey"] in issue["json"]["body"] and first["dedupeKey"][:12] in issue["json"]["title"]
    text = json.dumps(issue["json"])
    assert "ghp_fake_token_not_secret" not in text and "rag-service" not in text

    for _ in range(2):
        again = client.post(FEEDBACK, json=body).json()
        assert again["created"] is False and again["record"]["issueNumber"] == 101
    assert len(github.of("POST", "/issues")) == 1  # never a second issue for the same gap
    comments = github.of("POST", "/repos/acme/docs/issues/101/comments")
    assert len(comments) == 2 and "count 3" in comments[-1]["json"]["body"]

    closed = client.post(f"/admin/feedback/{first['record']['recordId']}/close", json={"resolution": "fixed"})
    assert closed.status_code == 200 and closed.json()["sinkError"] is None
    assert github.of("PATCH", "/repos/acme/docs/issues/101")[0]["json"]["state"] == "closed"

    reopened = client.post(FEEDBACK, json=body).json()
    assert reopened["created"] is True and reopened["record"]["issueNumber"] == 102


def test_a_sink_outage_never_loses_the_report(
    client: TestClient, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CITEGATE_GITHUB_API_URL", f"http://127.0.0.1:{free_port()}")  # nobody listens
    body = _body()
    down = client.post(FEEDBACK, json=body)
    assert down.status_code == 200, down.text
    record = down.json()["record"]
    assert record["count"] == 1 and record["issueNumber"] is None and record["sinkError"]
    [stored] = _records(client, down.json()["dedupeKey"])
    assert stored["sinkError"] and stored["count"] == 1

    # Back up: the next report of the same gap opens the issue and clears the error.
    monkeypatch.setenv("CITEGATE_GITHUB_API_URL", github.url)
    up = client.post(FEEDBACK, json=body).json()
    assert up["record"]["count"] == 2 and up["record"]["issueNumber"] == 101
    assert up["record"]["sinkError"] is None
    assert len(github.of("POST", "/issues")) == 1 and not github.of("POST", "/comments")
