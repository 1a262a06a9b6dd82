"""The dedupeKey names one knowledge gap: stable under cosmetic changes, different for different
gaps, and free of plaintext (spec 000 8.1)."""

from __future__ import annotations

import re

import pytest

from citegate.answers.feedback import canonical_scope, dedupe_key, normalize_question
from citegate.answers.schemas.feedback import FeedbackBody

SCOPE = {"paths": ["publish/system/components/kunora-kgent"], "version": "main"}
QUESTION = "How do I configure Kgent memory?"


def key(
    question: str = QUESTION,
    scope: dict[str, object] | None = None,
    citations: list[str] | None = None,
    event: str = "qa_no_answer",
) -> str:
    return dedupe_key(event, question, SCOPE if scope is None else scope, citations or [])


def test_the_key_is_a_sha256_hex_without_plaintext() -> None:
    secret_question = "Where is the signing secret hunter2 for kgent?"
    value = key(secret_question)
    assert re.fullmatch(r"[0-9a-f]{64}", value)
    for word in ("signing", "secret", "hunter2", "kgent", "publish", "main", "qa_no_answer"):
        assert word not in value


@pytest.mark.parametrize(
    "variant",
    [
        "how do i configure kgent memory?",
        "  HOW   do I\tconfigure\nKgent memory  ",
        "How do I configure Kgent memory？",
        "How do I configure Kgent memory?!.",
        "Ｈｏｗ ｄｏ Ｉ configure Kgent memory",  # full-width letters (NFKC)
    ],
)
def test_cosmetic_changes_to_the_question_keep_the_key(variant: str) -> None:
    assert key(variant) == key()


def test_chinese_punctuation_and_spacing() -> None:
    assert key("如何配置 Kgent 的记忆？") == key("如何配置  kgent 的记忆。")
    assert key("如何配置 Kgent 的记忆？") != key("如何配置 Kgent 的权限？")


def test_scope_is_canonical() -> None:
    base = key(scope={"paths": ["publish/a", "publish/b"], "projects": ["x", "y"], "version": "main"})
    same = key(
        scope={
            "version": "main",
            "projects": ["y", "x", "x"],
            "paths": ["./publish/b/", "publish//a", "publish/b"],
            "includeWorkingDocs": False,
        }
    )
    assert base == same
    assert key(scope={}) == dedupe_key("qa_no_answer", QUESTION, None, [])
    assert key(scope={"version": None}) == dedupe_key("qa_no_answer", QUESTION, None, [])


def test_a_requested_and_an_effective_scope_for_the_same_paths_hash_alike() -> None:
    requested = {"paths": ["publish/a"], "version": "main", "includeWorkingDocs": False}
    effective = {"path_prefixes": ["publish/a/"], "versions": ["main"], "include_working_docs": False}
    assert key(scope=requested) == key(scope=effective)
    assert canonical_scope(effective) == {"paths": ["publish/a"], "versions": ["main"]}
    unrestricted = {"projects": None, "path_prefixes": None, "versions": None, "include_working_docs": False}
    assert key(scope=unrestricted) == key(scope={})


def test_invalid_paths_are_kept_as_given() -> None:
    assert canonical_scope({"paths": ["../outside"]}) == {"paths": ["../outside"]}
    assert key(scope={"paths": ["../outside"]}) != key(scope={"paths": ["outside"]})


def test_paths_stay_case_sensitive() -> None:
    assert key(scope={"paths": ["publish/A"]}) != key(scope={"paths": ["publish/a"]})


def test_citation_paths_are_sorted_unique_and_normalised() -> None:
    one = key(citations=["docs/b.md", "docs/a.md"])
    assert one == key(citations=["docs/a.md", "./docs/b.md", "docs/a.md"])
    assert one != key(citations=["docs/a.md"])


def test_different_gaps_get_different_keys() -> None:
    assert key() != key("How do I configure Kgent logging?")
    assert key() != key(scope={"paths": ["publish/other"], "version": "main"})
    assert key() != key(scope={"paths": SCOPE["paths"], "version": "v2"})
    assert key() != key(event="knowledge_gap")
    assert key(event="QA_No_Answer") == key()


def test_inner_punctuation_matters() -> None:
    assert normalize_question("Is it 1.5?") == "is it 1.5"
    assert key("Is it 1.5?") != key("Is it 15?")


def test_the_body_feeds_the_key_the_same_way_as_the_answer_api() -> None:
    # AnswerResult.actions[].dedupeKey is computed from the ask request's scope as sent; a client
    # that echoes question, scope and citations gets the same key from create_feedback.
    body = FeedbackBody.model_validate(
        {
            "question": QUESTION,
            "scope": SCOPE,
            "citations": ["docs/a.md", {"path": "docs/b.md", "chunkId": "c1"}],
        }
    )
    assert dedupe_key(body.eventType, body.question, body.scope_dict(), body.citation_paths()) == key(
        citations=["docs/a.md", "docs/b.md"]
    )
