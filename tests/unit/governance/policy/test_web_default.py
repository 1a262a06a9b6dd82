"""A policy granting every tool ("*") grants the web unless it says otherwise (issue 19); any other
policy has the web only when it says so. The bootstrap principal's admin check."""

from __future__ import annotations

from typing import Any

import pytest

from citegate.governance.policy.model import Policy, PolicyUpdate
from citegate.governance.policy.store import keeps_admin


def policy(**fields: Any) -> Policy:
    return Policy.model_validate({"principal_key": "service:x", "tenant_id": "t", **fields})


@pytest.mark.parametrize(
    ("fields", "enabled"),
    [
        ({"tools": ["*"]}, True),
        ({"tools": ["*"], "web": {"domains": ["docs.example.com"]}}, True),
        ({"tools": ["*"], "web": {"enabled": False}}, False),
        ({"tools": ["chat", "web_search"]}, False),
        ({"tools": ["chat"], "web": {"enabled": True}}, True),
        ({}, False),
    ],
)
def test_every_tool_grants_the_web_unless_the_policy_says_otherwise(
    fields: dict[str, Any], enabled: bool
) -> None:
    assert policy(**fields).web.enabled is enabled


def test_the_rule_survives_storage_and_the_admin_route() -> None:
    stored = policy(tools=["*"]).model_dump()
    assert Policy.model_validate(stored).web.enabled is True
    refused = policy(tools=["*"], web={"enabled": False}).model_dump()
    assert Policy.model_validate(refused).web.enabled is False  # an explicit "no" is kept
    assert PolicyUpdate.model_validate({"tools": ["*"]}).web.enabled is True
    domains = PolicyUpdate.model_validate({"tools": ["*"], "web": {"domains": ["a.example"]}}).web
    assert domains.enabled and domains.domains == ["a.example"]


def test_admin_needs_the_tool_and_the_write_action() -> None:
    assert keeps_admin(policy(tools=["*"], write_actions=["admin"]))
    assert keeps_admin(policy(tools=["admin"], write_actions=["admin"]))
    assert not keeps_admin(policy(tools=["e"], write_actions=["admin"]))
    assert not keeps_admin(policy(tools=["*"], write_actions=["ingest"]))


def test_a_policy_body_of_the_wrong_shape_is_a_validation_error_not_a_crash() -> None:
    import pytest
    from pydantic import ValidationError

    from citegate.governance.policy.model import PolicyUpdate

    for tools in (22166907, "*", {"a": 1}, None):
        with pytest.raises(ValidationError):
            PolicyUpdate.model_validate({"tools": tools, "working_docs": True})
