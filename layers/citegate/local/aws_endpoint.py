"""The embedded AWS endpoint: moto on a loopback port, durable through the journal, with Lambda
invocations dispatched to our own handlers in this process.

Relies on moto internals in six places (pinned in pyproject.toml, covered by tests): the
simple Lambda backend's `invoke`, the Step Functions interpreter's Lambda client factory, the
server's WSGI application and how it finds a request's service, how DynamoDB item results are
written out, and SQS's retention check.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import socket
import threading
import traceback
from pathlib import Path
from typing import Any

from werkzeug.serving import BaseWSGIServer, make_server

from citegate.local.functions import invoke
from citegate.local.journal import Journal, JournalingMiddleware, replay

MOTO_CONFIG = {"lambda": {"use_docker": False}, "stepfunctions": {"execute_state_machine": True}}
# Lambda function name (citegate-<stage>-<function>) -> our folder name under functions/.
_function_routes: dict[str, str] = {}


def _dispatching_invoke(
    self: Any, function_name: str, qualifier: str | None, body: Any, headers: Any, response_headers: Any
) -> bytes:
    name = function_name.rsplit(":", 1)[-1] if function_name.startswith("arn:") else function_name
    function = _function_routes.get(name)
    if function is None:
        response_headers["x-amz-function-error"] = "Unhandled"
        return json.dumps(
            {"errorType": "ResourceNotFound", "errorMessage": f"no local function {name}"}
        ).encode()
    event = json.loads(body) if body else {}
    try:
        result = invoke(function, event)
    except Exception as error:  # reported to the caller as a Lambda function error, as AWS does
        response_headers["x-amz-function-error"] = "Unhandled"
        return json.dumps(
            {
                "errorType": type(error).__name__,
                "errorMessage": str(error),
                "stackTrace": traceback.format_exception(error)[-3:],
            }
        ).encode()
    return json.dumps(result).encode()


def route_lambda(function_name: str, function: str) -> None:
    _function_routes[function_name] = function


def _install_lambda_dispatch() -> None:
    from moto.awslambda_simple.models import LambdaSimpleBackend
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils

    LambdaSimpleBackend.invoke = _dispatching_invoke  # type: ignore[method-assign]
    # moto's Step Functions interpreter builds a new boto3 client for every Lambda task it runs
    # (tens of milliseconds of CPU each); boto3 clients are thread-safe, so one per region will do.
    utils: Any = lambda_eval_utils
    original = getattr(utils.boto_client_for, "__wrapped__", utils.boto_client_for)
    utils.boto_client_for = _cached_client_factory(original)


def _cached_client_factory(create: Any) -> Any:
    from moto.settings import moto_server_port

    clients: dict[tuple[str, str, str], Any] = {}
    lock = threading.Lock()

    def boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
        key = (region, service, moto_server_port())  # a restarted endpoint has a new port
        with lock:
            if key not in clients:
                clients[key] = create(region=region, service=service, state_credentials=state_credentials)
            return clients[key]

    boto_client_for.__wrapped__ = create  # type: ignore[attr-defined]
    return boto_client_for


# DynamoDB operations whose results moto holds as plain wire-format data (DynamoDB JSON).
FAST_ITEM_OPERATIONS = frozenset(
    {"GetItem", "BatchGetItem", "Query", "Scan", "PutItem", "UpdateItem", "DeleteItem", "TransactGetItems"}
)


def _blob_as_base64(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")  # how the JSON protocol carries a blob
    raise TypeError(f"not plain data: {type(value).__name__}")


def _install_fast_item_results() -> None:
    """moto writes every response by walking the operation's output model value by value, about
    1 ms per item read: a third of the local ingestion pipeline's CPU went there. Item results are
    already DynamoDB JSON, so they are dumped as they are; anything that is not plain data (a
    timestamp, say) still goes the model's way. tests/integration/test_fast_item_results.py checks
    that both ways give the same responses."""
    from moto.dynamodb.responses import DynamoResult

    if getattr(DynamoResult.execute_result, "citegate_fast", False):
        return
    by_model = DynamoResult.execute_result

    def execute_result(self: Any, context: Any) -> Any:
        operation = context.operation_model
        if operation.name in FAST_ITEM_OPERATIONS and isinstance(self.result, dict):
            # Only what the output model names (moto adds bookkeeping keys the model drops).
            members = operation.output_shape.members
            result = {k: v for k, v in self.result.items() if k in members and v is not None}
            try:
                body = json.dumps(result, default=_blob_as_base64, separators=(",", ":"))
            except (TypeError, ValueError):
                pass
            else:
                return 200, {"Content-Type": "application/x-amz-json-1.0"}, body
        return execute_result.by_model(self, context)  # type: ignore[attr-defined]

    execute_result.citegate_fast = True  # type: ignore[attr-defined]
    execute_result.by_model = by_model  # type: ignore[attr-defined]
    DynamoResult.execute_result = execute_result  # type: ignore[method-assign]


def _install_fast_sqs_retention() -> None:
    """moto checks every message it hands out against the queue's retention period by building all
    of the queue's attributes, three counts over every message among them: a ReceiveMessage of 10
    from a queue holding 200 took 150 ms, 100 documents waiting for the ingestion consumer more
    than a second. The period is read from the queue itself; the check is the same (see
    tests/integration/test_local_queue.py)."""
    from moto.core.utils import unix_time
    from moto.sqs.models import SQSBackend

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        period = int(self.get_queue(queue_name).message_retention_period)
        return bool(period + message.sent_timestamp / 1000 > unix_time())

    SQSBackend.is_message_valid_based_on_retention_period = (  # type: ignore[method-assign]
        is_message_valid_based_on_retention_period
    )


def _dispatcher_with_known_hosts(base: Any) -> Any:
    """moto's dispatcher finds each request's service by listing its own package folder and then
    matching URL patterns, under one lock, on every request (about 0.4 ms of 3); which service a
    host names never changes, so it is remembered (bounded: S3 hosts can name buckets)."""

    class KnownHosts(base):  # type: ignore[misc]
        @functools.lru_cache(maxsize=1024)  # noqa: B019 - one dispatcher per endpoint, kept for its life
        def get_backend_for_host(self, host: str | None) -> Any:
            return super().get_backend_for_host(host)

    return KnownHosts


class _QuietHandler:
    @staticmethod
    def of(base: Any) -> Any:
        class Quiet(base):  # type: ignore[misc]
            def log_request(self, *args: Any, **kwargs: Any) -> None:  # one line per AWS call is noise
                pass

        return Quiet


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EmbeddedAws:
    """moto served on 127.0.0.1, with writes journaled under `state_dir` when one is given."""

    def __init__(self, state_dir: Path | None, port: int | None = None) -> None:
        self.state_dir = state_dir
        self.port = port or free_port()
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.journal = Journal(state_dir) if state_dir else None
        self.middleware: JournalingMiddleware | None = None
        self.replayed = 0

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        from moto.core import models as moto_models
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )

        # moto's Step Functions interpreter calls Lambda back through this port.
        os.environ["MOTO_PORT"] = str(self.port)
        user_config: Any = moto_models.default_user_config  # type: ignore[attr-defined]
        for service, options in MOTO_CONFIG.items():
            user_config.setdefault(service, {}).update(options)
        _install_lambda_dispatch()
        _install_fast_item_results()
        _install_fast_sqs_retention()
        app: Any = _dispatcher_with_known_hosts(DomainDispatcherApplication)(create_backend_app)
        if self.journal:
            self.middleware = JournalingMiddleware(app, self.journal)
            app = self.middleware
        self._app = app
        self._server = make_server(
            "127.0.0.1", self.port, app, threaded=True, request_handler=_QuietHandler.of(MotoRequestHandler)
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="embedded-aws", daemon=True)
        self._thread.start()

    def restore(self) -> int:
        """Replay the journal into this (fresh) moto; call after the resources exist."""
        if not self.journal or not self.middleware:
            return 0
        self.replayed = replay(self.middleware.app, self.journal)
        return self.replayed

    def start_recording(self) -> None:
        if self.journal and self.middleware:
            self.journal.open()
            self.middleware.recording = True

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
        if self._thread:
            self._thread.join(timeout=5)
        if self.journal:
            self.journal.close()
        self._reset_moto()

    @staticmethod
    def _reset_moto() -> None:
        """moto's backends are process-global: a stopped endpoint must not leak state into the next."""
        from moto.moto_api._internal.models import moto_api_backend

        moto_api_backend.reset()
