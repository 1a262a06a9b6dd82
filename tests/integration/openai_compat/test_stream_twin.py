"""Issue 30: in AWS an OpenAI client's one `base_url` is the chat completions' streaming function URL;
that twin (citegate.api.stream_app, run under uvicorn as run.sh runs it, on loopback against the
embedded AWS endpoint) serves GET /v1/models too, under the same admission, policy and audit, so the
`openai` SDK both lists models and streams on it. Other routes stay off that URL."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from starlette.testclient import TestClient

from citegate.api import routes, stream_app
from citegate.runtime.aws_endpoint import free_port
from tests.integration.conftest import TOKEN, audited
from tests.integration.openai_compat.test_openai_sdk import (  # noqa: F401
    agent_key,
    ask,
    extra,
    planets,
    service,
)

FUNCTION = "openai_chat_completions"
HANDLER = Path(__file__).resolve().parents[3] / "functions" / FUNCTION / "handler.py"


@pytest.fixture(scope="module")
def twin_url(stack: Any) -> Iterator[str]:
    app = stream_app.create_app(FUNCTION, HANDLER)
    port = free_port()
    server = stream_app.server(app, port)
    thread = threading.Thread(target=server.run, name="openai-stream-twin", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the streaming entry did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def twin_sdk(twin_url: str, key: str = TOKEN) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{twin_url}/v1", api_key=key, max_retries=0, timeout=60)


def test_the_twin_serves_both_routes() -> None:
    assert [r.route_key for r in routes.stream_routes(FUNCTION)] == [
        "GET /v1/models",
        "POST /v1/chat/completions",
    ]
    assert '@app.get("/v1/models")' in HANDLER.read_text()


def test_one_base_url_lists_models_and_streams(twin_url: str, planets: str, stack: Any) -> None:  # noqa: F811
    client = twin_sdk(twin_url)
    raw = client.models.with_raw_response.list()
    assert f"citegate/{planets}" in {m.id for m in raw.parse().data}
    (record,) = audited(stack, raw.headers["x-request-id"])
    assert (record.route, record.tool, record.status) == ("GET /v1/models", "ask", 200)
    chunks = list(
        client.chat.completions.create(
            model=f"citegate/{planets}", messages=ask("What colour is the surface of Mars?"), stream=True
        )
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "red" in content and "[1]" in content
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop" and extra(last, "citations")
    assert last.choices[0].delta.model_extra and last.choices[0].delta.model_extra["annotations"]
    whole = client.chat.completions.create(
        model=f"citegate/{planets}", messages=ask("What colour is the surface of Mars?")
    )
    assert extra(whole, "citations")


def test_the_twin_governs_models_as_the_http_api_does(
    twin_url: str,
    service: TestClient,  # noqa: F811
    planets: str,  # noqa: F811
) -> None:
    key = agent_key(service, {"tools": ["ask"], "knowledge_bases": [planets]})
    assert [m.id for m in twin_sdk(twin_url, key).models.list()] == ["citegate", f"citegate/{planets}"]
    barred = agent_key(service, {"tools": ["rag_retrieve"], "knowledge_bases": [planets]})
    with pytest.raises(openai.PermissionDeniedError) as refused:
        twin_sdk(twin_url, barred).models.list()
    assert refused.value.code == "forbidden_tool"
    with pytest.raises(openai.AuthenticationError):
        twin_sdk(twin_url, "cgat_never-issued-0123456789").models.list()


def test_other_routes_are_not_on_the_twins_url(twin_url: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    missing = httpx.get(f"{twin_url}/v1/kb", headers=headers, timeout=10)
    assert missing.status_code == 404 and set(missing.json()["error"]) >= {"message", "type", "code"}
    wrong = httpx.delete(f"{twin_url}/v1/models", headers=headers, timeout=10)
    assert wrong.status_code == 405
