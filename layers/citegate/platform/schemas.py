from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

# How deep a caller's free-form JSON (document metadata) may nest. DynamoDB refuses items nested
# more than 32 levels, and the stores walk values recursively: 16 leaves room for both.
MAX_FREE_FORM_DEPTH = 16


def nesting_depth(value: Any) -> int:
    """How many levels of objects and lists `value` has (0 for a scalar), without recursing."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            deepest = max(deepest, depth)
            continue
        deepest = max(deepest, depth + 1)
        pending.extend((child, depth + 1) for child in children)
    return deepest


class StrictModel(BaseModel):
    """Request models refuse unknown fields, so a typo is a 400 naming it, not a silent default."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)
