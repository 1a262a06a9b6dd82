"""Secrets by reference: in AWS a function gets a Secrets Manager ARN, never the secret itself.

`secret_value(plain, arn)` returns the plaintext setting when one is given (local runs), otherwise
the secret's current value, cached for a few minutes so a rotated secret is picked up.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from pydantic import SecretStr

CACHE_SECONDS = 300.0
_cache: dict[str, tuple[float, str]] = {}
_lock = threading.Lock()
_client: Any = None


def _secretsmanager() -> Any:
    global _client
    if _client is None:
        import boto3

        _client = boto3.client("secretsmanager")
    return _client


def secret_value(plain: SecretStr | None, arn: str | None) -> str | None:
    if plain is not None:
        return plain.get_secret_value()
    if not arn:
        return None
    with _lock:
        cached = _cache.get(arn)
        if cached and time.monotonic() - cached[0] < CACHE_SECONDS:
            return cached[1]
    value = str(_secretsmanager().get_secret_value(SecretId=arn)["SecretString"])
    with _lock:
        _cache[arn] = (time.monotonic(), value)
    return value


def clear_cache() -> None:
    with _lock:
        _cache.clear()
