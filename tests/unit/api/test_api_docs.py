"""Issue 19: docs/api.md covers every route in the table, every request header and credential the
API reads, the maintainer claim and every setting that configures identity locally."""

from __future__ import annotations

from pathlib import Path

import pytest

from citegate.api import routes

API_MD = Path(__file__).resolve().parents[3] / "docs" / "api.md"


@pytest.fixture(scope="module")
def text() -> str:
    return API_MD.read_text(encoding="utf-8")


@pytest.mark.parametrize("route_key", [r.route_key for r in routes.ROUTES])
def test_every_route_is_documented(text: str, route_key: str) -> None:
    assert route_key in text, f"docs/api.md does not mention `{route_key}`"


@pytest.mark.parametrize(
    "name",
    [
        # Headers and credentials.
        "Authorization: Bearer",
        "AWS4-HMAC-SHA256",
        "X-Caller-Agent-Key",
        "metadata.caller_agent_key",
        "X-Session-Token",
        "Idempotency-Key",
        "citegate_token",
        "apigw-requestid",
        "Retry-After",
        # Claims and identity settings (layers/citegate/platform/settings.py).
        "CITEGATE_MAINTAINER_CLAIM",
        "citegate:maintainer",
        "roles",
        "CITEGATE_OIDC_ISSUER",
        "CITEGATE_OIDC_AUDIENCE",
        "CITEGATE_OIDC_JWKS_URL",
        "CITEGATE_LOCAL_IAM_CREDENTIALS",
        "iam_arns",
        "CITEGATE_ALLOWED_ORIGINS",
        "CITEGATE_AUTH_COOKIE",
        "CITEGATE_SERVICE_PRINCIPAL",
        # CORS.
        "Access-Control-Allow-Origin",
        "page_origins",
    ],
)
def test_every_header_claim_and_identity_setting_is_documented(text: str, name: str) -> None:
    assert name in text, f"docs/api.md does not mention {name}"
