"""The bulk commands' client waits out 429s (citegate.clients.cli.PatientClient), within a bound."""

from __future__ import annotations

from typing import Any

import pytest

from citegate.clients import cli
from citegate.clients.http_client import ApiError, CitegateClient, Credentials


def _scripted(monkeypatch: pytest.MonkeyPatch, answers: list[Any]) -> list[float]:
    """CitegateClient.request replays `answers` (an ApiError is raised); sleeps are recorded, not slept."""
    slept: list[float] = []

    def request(self: CitegateClient, method: str, path: str, body: Any = None) -> dict[str, Any]:
        answer = answers.pop(0)
        if isinstance(answer, ApiError):
            raise answer
        return dict(answer)

    monkeypatch.setattr(CitegateClient, "request", request)
    monkeypatch.setattr(cli.time, "sleep", slept.append)
    return slept


def _limited(retry_after: int | None) -> ApiError:
    details = {"retry_after": retry_after} if retry_after is not None else {}
    return ApiError(429, {"error": "rate_limited", "details": details})


def test_waits_the_servers_retry_after_then_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    slept = _scripted(monkeypatch, [_limited(3), _limited(None), {"ok": True}])
    client = cli.PatientClient("http://x", Credentials())
    assert client.get("/v1/kb") == {"ok": True}
    assert slept == [pytest.approx(3.1), 2.0]  # the hint, then the default without one
    assert client.waits == 2


def test_gives_up_past_its_patience_and_other_errors_are_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    _scripted(monkeypatch, [_limited(30), _limited(30)])
    client = cli.PatientClient("http://x", Credentials(), patience=40)
    with pytest.raises(ApiError) as raised:
        client.get("/v1/kb")
    assert raised.value.status == 429 and client.waits == 1

    _scripted(monkeypatch, [ApiError(404, {"error": "kb_not_found"})])
    with pytest.raises(ApiError):
        cli.PatientClient("http://x", Credentials()).get("/v1/kb/x")
