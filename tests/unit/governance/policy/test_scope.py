"""Scope arithmetic: a request narrower than the grant is honoured, a wider one refused, and no
path trick escapes a grant."""

from __future__ import annotations

import pytest

from citegate.governance.policy.model import (
    InvalidPath,
    RequestedScope,
    ScopeGrant,
    ScopeViolation,
    effective_scope,
    normalize_path,
)

GRANT = ScopeGrant(projects=["kgent"], path_prefixes=["publish/system/components/kgent"], versions=["main"])


def scope(**requested: object) -> object:
    return effective_scope(RequestedScope(**requested), GRANT, working_docs_allowed=False)


def test_nothing_requested_means_the_whole_grant() -> None:
    effective = effective_scope(None, GRANT, working_docs_allowed=False)
    assert effective.projects == ["kgent"]
    assert effective.path_prefixes == ["publish/system/components/kgent/"]
    assert effective.versions == ["main"]
    assert effective.label() == "main:publish/system/components/kgent"


def test_a_narrower_request_is_honoured() -> None:
    effective = scope(paths=["publish/system/components/kgent/memory"], version="main", projects=["kgent"])
    assert effective.path_prefixes == ["publish/system/components/kgent/memory/"]


@pytest.mark.parametrize(
    "requested",
    [
        {"paths": ["publish/system"]},
        {"paths": ["publish/system/components/kgent-private"]},
        {"paths": ["publish/system/components/other"]},
        {"projects": ["kgent", "other"]},
        {"version": "dev"},
        {"includeWorkingDocs": True},
    ],
)
def test_a_wider_request_is_refused_never_widened(requested: dict[str, object]) -> None:
    with pytest.raises(ScopeViolation):
        scope(**requested)


ESCAPES = [
    "publish/system/components/kgent/../other",
    "publish/system/components/kgent/../../../private",
    "publish/system/components/kgent/%2e%2e/other",
    "publish/system/components/kgent/%252e%252e/other",
    "publish/system/components/kgent%2F..%2Fother",
    "publish/system/components/kgent/..%5Cother",
    "publish/system/components/kgent\\..\\other",
    "publish//system//components//other",
    "/publish/system/components/other",
    "PUBLISH/system/components/kgent",
    "publish/system/components/KGENT",
    "publish/system/components/kgent/./../other",
    "publish/system/components/kgentx",
    "../publish/system/components/kgent",
    "publish/system/components/kgent/\x00/x",
    "publish/system/components/kgent/%00/x",
]


@pytest.mark.parametrize("path", ESCAPES)
def test_no_path_trick_escapes_the_grant(path: str) -> None:
    with pytest.raises(ScopeViolation):
        scope(paths=[path])


@pytest.mark.parametrize(
    "path",
    [
        "publish/system/components/kgent/guide",
        "/publish/system/components/kgent/guide/",
        "publish//system/./components/kgent/guide",
        "publish/system/components/kgent/a/../guide",
        "publish%2Fsystem%2Fcomponents%2Fkgent%2Fguide",
    ],
)
def test_equivalent_spellings_inside_the_grant_are_honoured(path: str) -> None:
    assert scope(paths=[path]).path_prefixes == ["publish/system/components/kgent/guide/"]


def test_normalisation() -> None:
    assert normalize_path("a//b/./c/../d/") == "a/b/d"
    assert normalize_path("a%252Fb") == "a/b", "decoding repeats until stable"
    for escaping in ("../x", "%252e%252e%252fx", "a/../../x"):
        with pytest.raises(InvalidPath):
            normalize_path(escaping)
    with pytest.raises(InvalidPath):
        normalize_path("a/\x01")


def test_working_docs_need_the_grant() -> None:
    effective = effective_scope(RequestedScope(includeWorkingDocs=True), GRANT, working_docs_allowed=True)
    assert effective.include_working_docs is True
