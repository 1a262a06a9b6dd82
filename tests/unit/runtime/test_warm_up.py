"""`citegate serve` loads in the background, once ready, what the first ingestion or question
would otherwise wait for, and never calls a remote embedding endpoint to do it."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest

from citegate.knowledge.search import analysis
from citegate.platform.observability import logger
from citegate.platform.settings import Settings
from citegate.runtime.stack import LocalStack


class RecordingEmbedder:
    def __init__(self) -> None:
        self.queries: list[str] = []

    def embed_query(self, text: str) -> Any:
        self.queries.append(text)


def _stack(embedder_name: str, embedder: RecordingEmbedder) -> LocalStack:
    settings = Settings.model_validate({"CITEGATE_EMBEDDER": embedder_name})
    return LocalStack(settings=settings, services=SimpleNamespace(embedder=embedder))  # type: ignore[arg-type]


def test_the_model_jieba_and_the_pdf_parser_are_loaded_in_the_background(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(analysis, "_jieba", None)
    monkeypatch.delitem(sys.modules, "pypdf", raising=False)
    embedder = RecordingEmbedder()
    thread = _stack("use", embedder).warm_up()
    thread.join(timeout=60)
    assert not thread.is_alive() and thread.daemon
    assert embedder.queries == ["warm up"]
    assert analysis._jieba is not None
    assert "pypdf" in sys.modules


def test_a_remote_embedder_is_not_called_to_warm_up() -> None:
    embedder = RecordingEmbedder()
    _stack("openai", embedder).warm_up().join(timeout=60)
    assert embedder.queries == []


def test_a_failed_warm_up_is_logged_and_harms_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken(RecordingEmbedder):
        def embed_query(self, text: str) -> Any:
            raise RuntimeError("no weights")

    warnings: list[str] = []
    monkeypatch.setattr(logger, "warning", lambda message, **kwargs: warnings.append(message))
    _stack("e5", Broken()).warm_up().join(timeout=60)
    assert warnings == ["warming up the local stack failed"]
