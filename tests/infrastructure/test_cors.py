"""Issue 19: CORS is defined once (citegate.platform.resources.CORS, origins per deployment). The synthesized
public API's CorsConfiguration and the local gateway's answer to a preflight say the same thing;
the agent (IAM) API has none (SigV4 callers are not pages).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient
from tests.infrastructure.synth import Synth, synthesize

from citegate.platform import resources
from citegate.platform.settings import reset_settings
from citegate.runtime.gateway import create_app

ORIGINS = ("https://docs.example.com", "https://console.example.com")


@pytest.fixture(scope="module")
def synth() -> Synth:
    return synthesize({"stage": "test", "citegate:page_origins": ",".join(ORIGINS)})


def _apis(synth: Synth) -> dict[str, dict[str, Any]]:
    return {
        v["Properties"]["Name"].rsplit("-", 1)[-1]: v["Properties"]
        for v in synth.resources.values()
        if v["Type"] == "AWS::ApiGatewayV2::Api"
    }


@pytest.fixture
def local(monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("CITEGATE_ALLOWED_ORIGINS", ",".join(ORIGINS))
    reset_settings()
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        yield client
    reset_settings()


def test_the_template_and_the_local_gateway_answer_preflights_alike(synth: Synth, local: TestClient) -> None:
    cors = _apis(synth)["api"]["CorsConfiguration"]
    assert "CorsConfiguration" not in _apis(synth)["agents"]
    assert cors["AllowOrigins"] == list(ORIGINS)
    for origin in ORIGINS:
        response = local.options(
            "/answer/sessions",
            headers={"Origin": origin, "Access-Control-Request-Method": "POST"},
        )
        assert response.status_code == 204
        assert response.headers["access-control-allow-origin"] in cors["AllowOrigins"]
        assert response.headers["access-control-allow-methods"].split(",") == cors["AllowMethods"]
        assert response.headers["access-control-allow-headers"].split(",") == cors["AllowHeaders"]
        assert int(response.headers["access-control-max-age"]) == cors["MaxAge"]
        assert cors.get("AllowCredentials") in (None, False)
        assert "access-control-allow-credentials" not in response.headers
    actual = local.get("/api/v1/agent/nothing", headers={"Origin": ORIGINS[0]})
    assert actual.headers["access-control-expose-headers"].split(",") == cors["ExposeHeaders"]
    # Every method a route uses and every request header the API reads may cross origins.
    assert {"GET", "POST", "PUT", "PATCH", "DELETE"} <= set(cors["AllowMethods"])
    assert {"authorization", "content-type", "x-session-token", "x-caller-agent-key"} <= set(
        cors["AllowHeaders"]
    )
    assert list(resources.CORS.allow_headers) == cors["AllowHeaders"]
