"""Issue 30: answer scopes as models. A policy's scope (spec 000 section 4: projects, path prefixes,
versions) is listed by /v1/models as `citegate[/<kb_id>]@<axis>=<value>` models; asking one narrows
the answer to that scope (never past the caller's own), and a scope outside the grant is a model
the caller does not have: 404 `model_not_found` in OpenAI's error shape. Driven with the official
`openai` SDK over loopback, through the real gateway."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from starlette.testclient import TestClient

from tests.integration.conftest import audited, ingest
from tests.integration.openai_compat.test_openai_sdk import agent_key, ask, extra, sdk, service  # noqa: F401

LAUNCH = (
    "The orbit team opens the launch window at dawn. The window stays open for forty minutes "
    "while the upper stage is fuelled."
)
PAD = (
    "The ground team cools the launch pad with a deluge of water. "
    "The deluge starts ten seconds before ignition."
)
PAD_QUESTION = "How is the launch pad cooled before ignition?"


@pytest.fixture(scope="module")
def missions(service: TestClient) -> str:  # noqa: F811
    """An approved knowledge base with one document per project, path and version."""
    kb = service.post("/v1/kb", json={"name": "Missions", "status": "approved"}).json()["kb_id"]
    ingest(
        service,
        kb,
        text=LAUNCH,
        source_name="launch.md",
        metadata={"project": "orbit", "path": "guides/orbit/launch.md", "version": "v2"},
    )
    ingest(
        service,
        kb,
        text=PAD,
        source_name="pad.md",
        metadata={"project": "ground", "path": "guides/ground/pad.md", "version": "v1"},
    )
    return str(kb)


def test_scope_models_are_listed_only_as_the_policy_names_them(
    live_url: str,
    service: TestClient,  # noqa: F811
    missions: str,
) -> None:
    key = agent_key(
        service,
        {
            "tools": ["ask"],
            "knowledge_bases": [missions],
            "scope": {
                "projects": ["orbit", "ground"],
                "path_prefixes": ["guides/orbit/"],
                "versions": ["v2"],
            },
        },
    )
    listed = sdk(live_url, key).models.list().data
    ids = [m.id for m in listed]
    suffixes = ["@project=orbit", "@project=ground", "@path=guides/orbit", "@version=v2"]
    assert ids == [
        "citegate",
        *(f"citegate{s}" for s in suffixes),
        f"citegate/{missions}",
        *(f"citegate/{missions}{s}" for s in suffixes),
    ]
    scoped = {m.id: extra(m, "scope") for m in listed}
    assert scoped[f"citegate/{missions}@project=ground"] == {"project": "ground"}
    assert scoped[f"citegate/{missions}"] is None
    # A policy that names one project offers that one only; an unrestricted one names none.
    one = agent_key(
        service, {"tools": ["ask"], "knowledge_bases": [missions], "scope": {"projects": ["orbit"]}}
    )
    assert [m.id for m in sdk(live_url, one).models.list()] == [
        "citegate",
        "citegate@project=orbit",
        f"citegate/{missions}",
        f"citegate/{missions}@project=orbit",
    ]
    free = agent_key(service, {"tools": ["ask"], "knowledge_bases": [missions]})
    assert [m.id for m in sdk(live_url, free).models.list()] == ["citegate", f"citegate/{missions}"]


def test_asking_a_scope_model_narrows_the_answer(
    live_url: str,
    missions: str,
    stack: Any,
) -> None:
    client = sdk(live_url)  # the service token: unrestricted, so any narrower scope may be asked
    whole = client.chat.completions.create(model=f"citegate/{missions}", messages=ask(PAD_QUESTION))
    assert "deluge" in (whole.choices[0].message.content or "")
    assert [c["source_name"] for c in extra(whole, "citations")] == ["pad.md"]
    # Narrowed to the orbit project (or its path, or version v2), the pad's document is out of reach.
    for scope in ("@project=orbit", "@path=guides/orbit", "@version=v2", "@project=orbit@version=v2"):
        raw = client.chat.completions.with_raw_response.create(
            model=f"citegate/{missions}{scope}", messages=ask(PAD_QUESTION)
        )
        reply = raw.parse()
        content = reply.choices[0].message.content or ""
        assert "deluge" not in content, scope
        assert all(c["source_name"] == "launch.md" for c in extra(reply, "citations")), scope
        (record,) = audited(stack, raw.headers["apigw-requestid"])
        assert record.status == 200 and record.requested_scope, scope
        assert "pad.md" not in " ".join(record.cited_paths)
    raw = client.chat.completions.with_raw_response.create(
        model="citegate@project=ground", messages=ask(PAD_QUESTION)
    )
    reply = raw.parse()
    assert [c["source_name"] for c in extra(reply, "citations")] == ["pad.md"]
    (record,) = audited(stack, raw.headers["apigw-requestid"])
    assert record.requested_scope == {"projects": ["ground"], "includeWorkingDocs": False}
    assert record.effective_scope and record.effective_scope["projects"] == ["ground"]


def test_a_scope_model_streams_within_its_scope(live_url: str, missions: str) -> None:
    chunks = list(
        sdk(live_url).chat.completions.create(
            model=f"citegate/{missions}@project=ground", messages=ask(PAD_QUESTION), stream=True
        )
    )
    assert chunks and chunks[-1].choices[0].finish_reason == "stop"
    assert [c["source_name"] for c in extra(chunks[-1], "citations")] == ["pad.md"]


def test_a_scope_outside_the_grant_is_404_model_not_found(
    live_url: str,
    service: TestClient,  # noqa: F811
    missions: str,
    stack: Any,
) -> None:
    key = agent_key(
        service, {"tools": ["ask"], "knowledge_bases": [missions], "scope": {"projects": ["orbit"]}}
    )
    client = sdk(live_url, key)
    for model in (
        f"citegate/{missions}@project=ground",  # a project the policy does not grant
        "citegate@project=orbit@project=ground",
        f"citegate/{missions}@path=../guides",  # escapes the root
        f"citegate/{missions}@colour=red",  # no such axis
        f"citegate/{missions}@version=",  # empty
        f"citegate/{missions}@version=v1@version=v2",  # one version at most
    ):
        with pytest.raises(openai.NotFoundError) as missing:
            client.chat.completions.create(model=model, messages=ask(PAD_QUESTION))
        error = missing.value
        body = error.body
        assert isinstance(body, dict) and set(body) == {"message", "type", "param", "code"}, model
        assert (error.code, error.type) == ("model_not_found", "invalid_request_error"), model
        records = audited(stack, error.response.headers["apigw-requestid"])
        assert [(r.status, r.reason) for r in records] == [(404, "model_not_found")], model
    with pytest.raises(openai.NotFoundError):  # streamed or not
        client.chat.completions.create(
            model=f"citegate/{missions}@project=ground", messages=ask(PAD_QUESTION), stream=True
        )
    # Its own scope answers, from its own project only.
    mine = client.chat.completions.create(
        model=f"citegate/{missions}@project=orbit", messages=ask(PAD_QUESTION)
    )
    assert all(c["source_name"] == "launch.md" for c in extra(mine, "citations"))
