"""Lazily built boto3 clients, one set per process.

boto3 honours AWS_ENDPOINT_URL, so the same code talks to AWS or to the embedded endpoint.
"""

from __future__ import annotations

import threading
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from citegate.platform.settings import Settings

_lock = threading.Lock()


class AwsClients:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def _session(self) -> Any:
        import boto3

        return boto3.session.Session(region_name=self._settings.region)

    def _config(self) -> Any:
        from botocore.config import Config

        return Config(retries={"max_attempts": 3, "mode": "standard"}, max_pool_connections=32)

    @cached_property
    def dynamodb(self) -> Any:
        with _lock:
            return self._session().resource("dynamodb", config=self._config())

    @cached_property
    def s3(self) -> Any:
        from botocore.config import Config

        # Path-style addressing works against any endpoint, the embedded one included.
        config = self._config().merge(Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
        with _lock:
            return self._session().client("s3", config=config)

    @cached_property
    def sqs(self) -> Any:
        with _lock:
            return self._session().client("sqs", config=self._config())

    @cached_property
    def stepfunctions(self) -> Any:
        with _lock:
            return self._session().client("stepfunctions", config=self._config())

    @cached_property
    def sts(self) -> Any:
        with _lock:
            return self._session().client("sts", config=self._config())

    @cached_property
    def account_id(self) -> str:
        return str(self.sts.get_caller_identity()["Account"])
