"""The embedded AWS endpoint: moto on a loopback port, durable through the journal, with Lambda
invocations dispatched to our own handlers in this process.

Relies on moto internals (pinned in pyproject.toml, covered by tests): the simple Lambda
backend's `invoke`, the Step Functions interpreter's Lambda client factory, the server's WSGI
application and how it finds a request's service, how DynamoDB item results are written out,
SQS's retention check and its deleted-message bookkeeping, the list every model instance is added
to, Step Functions' executions, and (for the journal) the backends' items and objects
(citegate.runtime.moto_state).

A long-running server must not grow without bound: moto keeps some things forever that AWS does
not, and those are bounded here (`_install_memory_bounds`, tests/unit/local/test_moto_bounds.py).
"""

from __future__ import annotations

import base64
import functools
import gc
import json
import os
import socket
import threading
import traceback
from pathlib import Path
from typing import Any

from werkzeug.serving import BaseWSGIServer, make_server

from citegate.runtime import moto_state
from citegate.runtime.compaction import Compactor, last_records
from citegate.runtime.functions import TooManyRequestsException, invoke
from citegate.runtime.journal import Journal, JournalingMiddleware, replay

MOTO_CONFIG = {"lambda": {"use_docker": False}, "stepfunctions": {"execute_state_machine": True}}
# Lambda function name (citegate-<stage>-<function>) -> our folder name under functions/.
_function_routes: dict[str, str] = {}


@functools.cache
def _throttle_error() -> type[Exception]:
    """moto's error for a throttled Invoke: HTTP 429, TooManyRequestsException (built on first use,
    so importing this module does not import moto)."""
    from moto.awslambda.exceptions import LambdaClientError

    class LambdaThrottled(LambdaClientError):
        code = 429

        def __init__(self, message: str) -> None:
            super().__init__("TooManyRequestsException", message)

    return LambdaThrottled


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
    except TooManyRequestsException as busy:
        # Lambda refuses a throttled Invoke with HTTP 429 TooManyRequestsException (not a function
        # error), so Step Functions reports `Lambda.TooManyRequestsException` and the workflow's
        # declared Retry waits and tries again, as in AWS.
        raise _throttle_error()(str(busy)) from busy
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


# Finished Step Functions executions kept for describe/list calls (moto keeps every one, with its
# history, its copy of the state machine and its worker threads: about 110 KiB for a batch of one
# small document).
KEPT_FINISHED_EXECUTIONS = 100
# Receipt handles of deleted SQS messages remembered, so that deleting one again still succeeds.
KEPT_DELETED_RECEIPTS = 10_000


class RecentSet:
    """A set that forgets its oldest members beyond `limit` (moto's deleted-receipt bookkeeping)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._members: dict[Any, None] = {}

    def __contains__(self, member: object) -> bool:
        return member in self._members

    def __len__(self) -> int:
        return len(self._members)

    def __iter__(self) -> Any:
        return iter(list(self._members))

    def add(self, member: Any) -> None:
        self._members.pop(member, None)
        self._members[member] = None
        while len(self._members) > self.limit:
            del self._members[next(iter(self._members))]

    def update(self, members: Any) -> None:
        for member in members:
            self.add(member)

    def discard(self, member: Any) -> None:
        self._members.pop(member, None)


def _untracked_new(cls: Any, *args: Any, **kwargs: Any) -> Any:
    from moto.core.common_models import BaseModel

    return super(BaseModel, cls).__new__(cls)


def prune_executions(executions: list[Any], keep: int = KEPT_FINISHED_EXECUTIONS) -> None:
    """Drop all but the `keep` most recently finished executions (running ones all stay), in place."""
    finished = [e for e in executions if getattr(e, "stop_date", None) is not None]
    if len(finished) <= keep:
        return
    finished.sort(key=lambda e: e.stop_date)
    dropped = {id(e) for e in finished[: len(finished) - keep]}
    executions[:] = [e for e in executions if id(e) not in dropped]


def _install_memory_bounds() -> None:
    """What moto would otherwise keep for the life of the process.

    - Every model object it ever creates (each DynamoDB item, including the copy UpdateItem makes
      of the item it updates and the copies of whole tables TransactWriteItems makes, each S3 object
      and SQS message) is appended to a class-level list for moto's dashboard, so nothing is ever
      freed: a server's memory grew from 475 to 555 MiB over 2,000 mixed requests, 15,485 stale
      items and 924 table copies among it. Objects are no longer listed (the dashboard is not used).
    - Each state machine keeps every execution; beyond the newest KEPT_FINISHED_EXECUTIONS
      finished ones they are dropped when another starts (AWS keeps them 90 days, but the local
      stack does not keep them across restarts either, and only an ingestion's tasks are read).
    - Each SQS queue remembers the receipt handle of every message ever deleted; the newest
      KEPT_DELETED_RECEIPTS are remembered.
    """
    from moto.core.common_models import BaseModel
    from moto.core.model_instances import reset_model_data
    from moto.sqs.models import Queue
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    if getattr(BaseModel, "citegate_untracked", False):
        return
    BaseModel.__new__ = staticmethod(_untracked_new)  # type: ignore[method-assign]
    BaseModel.citegate_untracked = True  # type: ignore[attr-defined]
    reset_model_data()  # what was listed so far

    queue_init = Queue.__init__

    def init_queue(self: Any, *args: Any, **kwargs: Any) -> None:
        queue_init(self, *args, **kwargs)
        self.deleted_messages = RecentSet(KEPT_DELETED_RECEIPTS)

    Queue.__init__ = init_queue  # type: ignore[method-assign]

    start_execution = StepFunctionsParserBackend.start_execution

    def start_execution_pruned(self: Any, state_machine_arn: str, *args: Any, **kwargs: Any) -> Any:
        execution = start_execution(self, state_machine_arn, *args, **kwargs)
        prune_executions(self.describe_state_machine(state_machine_arn).executions)
        return execution

    StepFunctionsParserBackend.start_execution = start_execution_pruned  # type: ignore[method-assign]


_transaction = threading.local()


class _TablesNotCopied:
    """moto's DynamoDB module's `copy`, except that a table is not deep-copied inside a transaction
    (`_install_item_level_transactions` backs up the items the transaction names instead)."""

    def __init__(self, module: Any) -> None:
        self._copy = module

    def deepcopy(self, value: Any, memo: Any = None) -> Any:
        from moto.dynamodb.models.table import Table

        if getattr(_transaction, "active", False) and isinstance(value, Table):
            return value
        return self._copy.deepcopy(value, memo)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._copy, name)


def _named_items_of(backend: Any, actions: list[dict[str, Any]]) -> list[tuple[Any, Any, Any, Any]]:
    """(table, partition key, sort key, a deep copy of the item or None) for each item named."""
    import copy

    from moto.dynamodb.models.dynamo_type import DynamoType

    found = []
    for action in actions:
        try:
            [(kind, detail)] = action.items()
            table = backend.tables.get(detail.get("TableName"))
            if table is None:
                continue
            key = detail["Item"] if kind == "Put" else detail["Key"]
            partition = DynamoType(key[table.hash_key_attr])
            sort = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
            found.append((table, partition, sort, copy.deepcopy(table.get_item(partition, sort))))
        except Exception:  # moto refuses such an action itself, before changing anything
            continue
    return found


def _put_back(items: list[tuple[Any, Any, Any, Any]]) -> None:
    for table, partition, sort, item in reversed(items):
        if item is None:
            table.delete_item(partition, sort)
        elif sort is not None:
            table.items[partition][sort] = item
        else:
            table.items[partition] = item


def _install_item_level_transactions() -> None:
    """moto backs up every table a TransactWriteItems names by deep-copying it whole, to put it
    back if the transaction fails: a chat message (a transaction on the chats table) cost a copy of
    every chat and message, ever longer as they accumulate (772 ms per transaction with 5,000
    items in the table, against 12 ms now, on a loaded machine). Only the items the transaction
    names can change, so those are backed up and put back instead
    (tests/integration/test_local_transactions.py checks both outcomes)."""
    from moto.dynamodb import models
    from moto.dynamodb.models import DynamoDBBackend

    if getattr(DynamoDBBackend.transact_write_items, "citegate_item_level", False):
        return
    models.copy = _TablesNotCopied(models.copy)  # type: ignore[assignment,attr-defined]
    whole_tables = DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        backups = _named_items_of(self, transact_items)
        _transaction.active = True
        try:
            whole_tables(self, transact_items)
        except Exception:
            _put_back(backups)
            raise
        finally:
            _transaction.active = False

    transact_write_items.citegate_item_level = True  # type: ignore[attr-defined]
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


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
        self.compactor: Compactor | None = None
        self.replayed = 0
        self.loader: moto_state.Loader | None = None
        self.live_records = 0  # items and objects the restored journal held

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
        _install_memory_bounds()
        _install_item_level_transactions()
        app: Any = _dispatcher_with_known_hosts(DomainDispatcherApplication)(create_backend_app)
        if self.journal:
            self.middleware = JournalingMiddleware(app, self.journal, images=moto_state.item_images)
            app = self.middleware
        self._app = app
        self._server = make_server(
            "127.0.0.1", self.port, app, threaded=True, request_handler=_QuietHandler.of(MotoRequestHandler)
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="embedded-aws", daemon=True)
        self._thread.start()

    def restore(self) -> int:
        """Restore the journal into this (fresh) moto; call after the resources exist. Items and
        objects are put into moto directly (an item's earlier records passed over), requests
        replayed through it."""
        if not self.journal or not self.middleware:
            return 0
        found = last_records(self.journal.path)
        self.loader = moto_state.Loader(self.journal, None if found.requests else found.index)
        # Millions of objects are made and none is garbage: without the collector, restoring took
        # a third of the time. Frozen afterwards, they are left out of its later full passes.
        gc.disable()
        try:
            self.replayed = replay(self.middleware.app, self.journal, load=self.loader)
        finally:
            gc.enable()
        gc.freeze()
        self.live_records = found.live
        return self.replayed

    def start_recording(self) -> None:
        """Journal every write from now on, and compact the journal in the background as it grows.
        A journal of requests (an older format) is first replaced by a snapshot of moto's state."""
        if self.journal and self.middleware:
            compactor = Compactor(self.journal)
            if self.loader is not None and self.loader.dynamodb_requests:
                compactor.compact_state()
            else:
                compactor.baseline = self.live_records
            self.journal.open()
            self.middleware.recording = True
            self.compactor = compactor
            compactor.start()

    def stop(self) -> None:
        if self.compactor:
            self.compactor.stop()
        if self._server:
            self._server.shutdown()
            self._server.server_close()
        if self._thread:
            self._thread.join(timeout=5)
        if self.journal:
            self.journal.close()
        self._reset_moto()
        gc.unfreeze()  # what restore froze can be collected again

    @staticmethod
    def _reset_moto() -> None:
        """moto's backends are process-global: a stopped endpoint must not leak state into the next."""
        from moto.moto_api._internal.models import moto_api_backend

        moto_api_backend.reset()
