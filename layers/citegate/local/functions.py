"""Loading the Lambda handlers in functions/ by name, as the Lambda runtime would."""

from __future__ import annotations

import importlib.util
import os
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

Handler = Callable[[dict[str, Any], Any], Any]

_lock = threading.Lock()
_modules: dict[str, ModuleType] = {}


def functions_dir() -> Path:
    configured = os.environ.get("CITEGATE_FUNCTIONS_DIR")
    if configured:
        return Path(configured)
    # layers/citegate/local/functions.py -> repository root
    return Path(__file__).resolve().parents[3] / "functions"


def load_handler(function: str) -> Handler:
    with _lock:
        module = _modules.get(function)
        if module is None:
            path = functions_dir() / function / "handler.py"
            if not path.is_file():
                raise LookupError(f"no handler for function {function!r} at {path}")
            spec = importlib.util.spec_from_file_location(f"citegate_functions.{function}.handler", path)
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _modules[function] = module
    handler: Handler = module.lambda_handler
    return handler


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


def invoke(function: str, event: dict[str, Any]) -> Any:
    return load_handler(function)(event, LocalLambdaContext(function_name=function))
