"""One module load at a time in the local runtime's process.

On AWS each Lambda execution environment is a process that runs one invocation at a time, so a
handler's imports (those at load and the ones it defers to its first event) never run beside
another thread's. Here every function runs in one process, on many threads at once: the gateway's
request threads, the queue poller, moto's threads running Step Functions' Lambda tasks, the
warm-up thread. Right after a restart, with tasks to resume, several of them import the same
packages for the first time together.

CPython 3.11's import locks are per module, and a submodule's import does not wait for its
package's `__init__` when another thread is still running it: thread A runs `pkg/__init__`, which
imports `pkg.sub`; thread B imports `pkg.sub` directly (the package is already in sys.modules, half
initialised) and needs a module A holds. Each holds the lock the other wants; the deadlock
detector lets one of them go on with a partially initialised module, its `from .sub import X`
fails, the failed `pkg` is removed from sys.modules, and the other thread's import then fails
with `KeyError: 'pkg'` (seen as `KeyError: 'aws_lambda_powertools.utilities.data_classes'` from the
ingestion consumer's first pass after a restart, with a request thread importing the same package
through the event handler). tests/unit/local/test_imports.py reproduces it with two threads.

`serialize_imports` makes `importlib._bootstrap._find_and_load`, through which every load of a
module not yet in sys.modules goes (`import`, `importlib.import_module`, a package's parent
import), hold one process-wide re-entrant lock. Only loads pay for it: a module already loaded is
found by the interpreter without calling it. A thread meeting a module that another thread is
still loading still waits for it on that module's own lock, as before.
"""

from __future__ import annotations

import importlib
import sys
import threading
from typing import Any

# The frozen importlib the interpreter itself calls (typeshed does not describe its internals).
_bootstrap: Any = importlib._bootstrap
_load_lock = threading.RLock()
# A safety valve, never reached in practice: a module whose import waited for another thread that
# was itself waiting to import would otherwise hang the process. Past this wait the load goes on
# under CPython's own per-module locks, as it would without serialization, and says so.
LOAD_WAIT_SECONDS = 60.0


def serialize_imports() -> None:
    """From now on, one thread at a time loads modules in this process (idempotent)."""
    current: Any = _bootstrap._find_and_load
    if getattr(current, "citegate_serialized", False):
        return

    def _find_and_load(name: str, import_: Any) -> Any:
        if not _load_lock.acquire(timeout=LOAD_WAIT_SECONDS):
            sys.stderr.write(f"citegate: loading {name} waited {LOAD_WAIT_SECONDS:.0f}s for another import\n")
            return current(name, import_)
        try:
            return current(name, import_)
        finally:
            _load_lock.release()

    _find_and_load.citegate_serialized = True  # type: ignore[attr-defined]
    _find_and_load.__wrapped__ = current  # type: ignore[attr-defined]
    _bootstrap._find_and_load = _find_and_load


def imports_serialized() -> bool:
    return bool(getattr(_bootstrap._find_and_load, "citegate_serialized", False))
