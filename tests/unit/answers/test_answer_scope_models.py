"""Answer scopes as OpenAI-compatible model ids (citegate.answers.conversation): what a suffix asks
for, and which scopes a policy's grant names (what /v1/models lists)."""

from __future__ import annotations

import pytest

from citegate.answers.conversation import named_scopes, requested_scope
from citegate.governance.policy.model import RequestedScope, ScopeGrant
from citegate.platform.errors import ModelNotFound


@pytest.mark.parametrize(
    ("model", "base", "scope"),
    [
        ("citegate", "citegate", None),
        ("citegate/docs", "citegate/docs", None),
        ("citegate/docs@project=kunora-kgent", "citegate/docs", RequestedScope(projects=["kunora-kgent"])),
        (
            "citegate@path=publish/system/components/kunora-kgent",
            "citegate",
            RequestedScope(paths=["publish/system/components/kunora-kgent"]),
        ),
        (
            "citegate/docs@project=a@project=b@version=main@path=x/y",
            "citegate/docs",
            RequestedScope(projects=["a", "b"], paths=["x/y"], version="main"),
        ),
        # A value may hold '@' when what follows is not an axis.
        ("citegate@project=team@home", "citegate", RequestedScope(projects=["team@home"])),
    ],
)
def test_a_suffix_is_a_requested_scope(model: str, base: str, scope: RequestedScope | None) -> None:
    assert requested_scope(model) == (base, scope)


@pytest.mark.parametrize(
    "model",
    ["citegate@", "citegate@colour=red", "citegate@project=", "citegate@version=a@version=b", "citegate@=x"],
)
def test_a_suffix_that_is_no_scope_is_a_model_not_found(model: str) -> None:
    with pytest.raises(ModelNotFound) as missing:
        requested_scope(model)
    assert missing.value.details == {"model": model}


def test_the_scopes_a_grant_names() -> None:
    grant = ScopeGrant(
        projects=["orbit", "ground", "orbit"],
        path_prefixes=["/guides/orbit/", "", "a/../../x"],
        versions=["v2"],
    )
    assert named_scopes(grant) == [
        ("project", "orbit"),
        ("project", "ground"),
        ("path", "guides/orbit"),  # normalised; the root and a path escaping it name nothing
        ("version", "v2"),
    ]
    assert named_scopes(ScopeGrant()) == []  # unrestricted: nothing to list, anything narrower to ask
