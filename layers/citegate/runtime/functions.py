"""The local Lambda service: each function in functions/ served as Lambda serves it.

Lambda runs a function in execution environments, each handling one event at a time; concurrency
comes from more environments, never from two events sharing one. Locally an environment is a
copy of the function's handler module loaded on its own (its own resolver, its own module
state), checked out for one event and returned when the event is done: for a streaming
response, when the stream has been read to its end or closed. A function has at most
`CITEGATE_LOCAL_ENVIRONMENTS` environments (default 8, like a reserved concurrency); an event
that finds them all busy waits for one, and after `ENVIRONMENT_WAIT_SECONDS` is refused as
throttled (`TooManyRequestsException`, as Lambda does). A throttled Invoke from the ingestion
workflow reaches Step Functions as Lambda's 429 (`citegate.runtime.aws_endpoint`), so the state
machine's declared Retry on `Lambda.TooManyRequestsException` waits and retries it locally too.

What environments share is what Lambda's would share too if they were threads of one process:
the layer's modules. So the layer keeps no request state in module or class attributes either
(Powertools' resolver keeps the current event on its class; `citegate.api.http` makes it
request-local). docs/architecture.md ("One request, one execution") says why both.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

Handler = Callable[[dict[str, Any], Any], Any]

DEFAULT_ENVIRONMENTS = 8
ENVIRONMENT_WAIT_SECONDS = 30.0  # about API Gateway's integration timeout


class TooManyRequestsException(Exception):
    """Every environment of the function stayed busy for ENVIRONMENT_WAIT_SECONDS (Lambda's throttle)."""


def functions_dir() -> Path:
    configured = os.environ.get("CITEGATE_FUNCTIONS_DIR")
    if configured:
        return Path(configured)
    # layers/citegate/runtime/functions.py -> repository root
    return Path(__file__).resolve().parents[3] / "functions"


def max_environments() -> int:
    configured = os.environ.get("CITEGATE_LOCAL_ENVIRONMENTS", "")
    return max(1, int(configured)) if configured.strip() else DEFAULT_ENVIRONMENTS


_serial = itertools.count(1)


def load_module(function: str) -> ModuleType:
    """A fresh copy of the function's handler module: what an execution environment's init does."""
    path = functions_dir() / function / "handler.py"
    if not path.is_file():
        raise LookupError(f"no handler for function {function!r} at {path}")
    name = f"citegate_functions.{function}.env{next(_serial)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(eq=False)
class Environment:
    function: str
    module: ModuleType
    invocations: int = 0

    @property
    def handler(self) -> Handler:
        handler: Handler = self.module.lambda_handler
        return handler


class FunctionPool:
    """The execution environments of one function, created on demand up to `limit`."""

    def __init__(self, function: str, limit: int) -> None:
        self.function = function
        self.limit = limit
        self._idle: list[Environment] = []
        self._created = 0
        self._busy = 0
        self._ready = threading.Condition()

    @property
    def created(self) -> int:
        return self._created

    @property
    def busy(self) -> int:
        return self._busy

    def acquire(self, timeout: float | None = None) -> Environment:
        timeout = ENVIRONMENT_WAIT_SECONDS if timeout is None else timeout
        with self._ready:
            if not self._ready.wait_for(lambda: bool(self._idle) or self._created < self.limit, timeout):
                raise TooManyRequestsException(
                    f"all {self.limit} environments of {self.function} stayed busy for {timeout:.0f}s"
                )
            self._busy += 1
            if self._idle:
                return self._idle.pop()
            self._created += 1  # reserved now; loaded below, outside the lock
        try:
            return Environment(self.function, load_module(self.function))
        except BaseException:
            with self._ready:
                self._created -= 1
                self._busy -= 1
                self._ready.notify()
            raise

    def release(self, environment: Environment) -> None:
        with self._ready:
            self._busy -= 1
            self._idle.append(environment)
            self._ready.notify()


_pools: dict[str, FunctionPool] = {}
_pools_lock = threading.Lock()


def pool(function: str) -> FunctionPool:
    with _pools_lock:
        found = _pools.get(function)
        if found is None:
            found = _pools[function] = FunctionPool(function, max_environments())
        return found


def reset_pools() -> None:
    """Forget every environment (a new stack, or a test that changes the limit)."""
    with _pools_lock:
        _pools.clear()


@dataclass
class LocalLambdaContext:
    """The fields of the Lambda context object that Powertools and our handlers read."""

    function_name: str
    memory_limit_in_mb: int = 1024
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    region: str = "us-east-1"
    account: str = "000000000000"
    log_group_name: str = ""
    log_stream_name: str = ""

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{self.account}:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


class ClosableStream(Protocol):
    def __iter__(self) -> Iterator[str]: ...

    def __next__(self) -> str: ...

    def close(self) -> None: ...


class EnvironmentStream:
    """A streaming response that keeps its environment until it is read to the end or closed,
    as a Lambda invocation lasts until its response stream ends. Whoever reads it must close it
    (the gateway does, on the request's own path, also when the client hangs up)."""

    def __init__(self, frames: Iterator[str], done: Callable[[], None]) -> None:
        self._frames = frames
        self._done: Callable[[], None] | None = done
        self._lock = threading.Lock()

    def __iter__(self) -> EnvironmentStream:
        return self

    def __next__(self) -> str:
        try:
            return next(self._frames)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        with self._lock:
            done, self._done = self._done, None
        if done is None:
            return
        try:
            close = getattr(self._frames, "close", None)
            if close is not None:
                close()
        finally:
            done()


def is_stream(result: Any) -> bool:
    """A streaming handler's result: an iterator of frames (not a response dict or a body)."""
    return isinstance(result, Iterator) and not isinstance(result, dict | str | bytes)


def invoke(function: str, event: dict[str, Any]) -> Any:
    """Run one event in a free environment of `function` (Lambda's synchronous invoke)."""
    functions = pool(function)
    environment = functions.acquire()
    try:
        environment.invocations += 1
        result = environment.handler(event, LocalLambdaContext(function_name=function))
    except BaseException:
        functions.release(environment)
        raise
    if is_stream(result):
        return EnvironmentStream(result, lambda: functions.release(environment))
    functions.release(environment)
    return result
