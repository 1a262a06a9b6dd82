"""The Lambda entry points of the ingestion workflow's steps (functions/ingest_<step>/handler.py).

The steps need numpy, boto3 and pydantic; they are imported on the first event rather than when
the runtime imports the handler, so a cold start's import stays small (the bar is 300 ms).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from citegate.platform.observability import logged, traced

if TYPE_CHECKING:
    from citegate.knowledge.ports import Ingestion

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
STEPS = ("parse", "chunk", "embed", "index", "finalize", "mark_failed")


def step_handler(step: str, services: Callable[[], Ingestion]) -> Handler:
    """The handler that runs `citegate.knowledge.ingest.steps.<step>` on the state machine's input,
    with the composition root's `services` (citegate.container), called once per event."""
    if step not in STEPS:
        raise ValueError(f"unknown ingestion step {step!r}")

    @logged
    @traced
    def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        from citegate.knowledge.ingest import steps

        result: dict[str, Any] = getattr(steps, step)(services(), event)
        return result

    return lambda_handler
