"""Secrets by reference: a function gets an ARN and reads the value, cached, from Secrets Manager."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import boto3
import pytest
from pydantic import SecretStr

from citegate.governance.identity.authenticate import authenticate
from citegate.platform import secrets
from citegate.platform.settings import Settings


@pytest.fixture
def secret_arn(monkeypatch: pytest.MonkeyPatch, moto_in_process: None) -> Iterator[str]:
    monkeypatch.delenv("RAG_API_TOKEN", raising=False)  # the Makefile exports a development token
    monkeypatch.setattr(secrets, "_client", None)
    secrets.clear_cache()
    client = boto3.client("secretsmanager", region_name="us-east-1")
    name = f"citegate/api-token-{uuid.uuid4().hex[:8]}"  # moto is not reset between tests
    yield client.create_secret(Name=name, SecretString="from-the-vault")["ARN"]
    monkeypatch.setattr(secrets, "_client", None)
    secrets.clear_cache()


def test_a_plain_setting_wins_and_an_arn_is_resolved(secret_arn: str) -> None:
    assert secrets.secret_value(SecretStr("plain"), secret_arn) == "plain"
    assert secrets.secret_value(None, secret_arn) == "from-the-vault"
    assert secrets.secret_value(None, None) is None


def test_the_service_token_can_come_from_secrets_manager(secret_arn: str) -> None:
    settings = Settings(RAG_API_TOKEN_SECRET_ARN=secret_arn)  # type: ignore[call-arg]
    ok = authenticate({"Authorization": "Bearer from-the-vault"}, settings)
    assert ok.principal is not None and ok.principal.type == "service"
    assert authenticate({"Authorization": "Bearer guess"}, settings).principal is None
