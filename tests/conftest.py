"""Shared test set-up: every test runs with a clean environment and no network beyond loopback."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

# Tests never reach real AWS: a stray client would fail fast against these fake keys.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "citegate-test")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "citegate-test-secret")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# CDK's jsii runtime warns on every import under Node 20, which is what this machine has.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def moto_in_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto's in-process mock for a unit test, without moto's reset on entry and exit: its
    backends are process-wide, and a reset would wipe the tables of an embedded stack that an
    integration test in the same worker started. Tests name their resources uniquely instead."""
    from moto import mock_aws

    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    mock = mock_aws()
    mock.start(reset=False)
    try:
        yield
    finally:
        mock.stop(remove_data=False)


@pytest.fixture
def bedrock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The loopback Bedrock runtime (tests/fakes/bedrock_server.py), with its test credentials in the
    environment, where botocore's default chain finds them (as it finds a function's role's)."""
    from tests.fakes.bedrock_server import ACCESS_KEY, SECRET_KEY, FakeBedrock

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with FakeBedrock() as server:
        yield server
