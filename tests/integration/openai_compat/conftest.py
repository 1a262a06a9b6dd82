"""The OpenAI-compatible routes driven by the official `openai` SDK through the real gateway on a
loopback port (the in-process local stack, as the concurrency tier runs it)."""

from tests.integration.concurrency.conftest import live_url  # noqa: F401  (the same fixture)
