"""Issue 20: an agent on the IAM front door is the IAM principal API Gateway verified. STS names an
assumed role without its path, so a policy that lists the role as IAM shows it (an SSO role's ARN
has the path aws-reserved/sso.amazonaws.com/<region>/) still matches, in every partition.
"""

from __future__ import annotations

from typing import Any

from citegate.governance.policy.store import PolicyStore, iam_identity

SSO_ROLE = (
    "arn:aws:iam::123456789012:role/aws-reserved/sso.amazonaws.com/eu-west-1/AWSReservedSSO_Docs_0123abcd"
)
SSO_SESSION = "arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Docs_0123abcd/alice@example.com"
CHINA_ROLE = "arn:aws-cn:iam::123456789012:role/service/docs-bot"
CHINA_SESSION = "arn:aws-cn:sts::123456789012:assumed-role/docs-bot/run-17"


class Policies:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def scan(self, **_: Any) -> dict[str, Any]:
        return {"Items": self.items}


def store(*agents: tuple[str, list[str]]) -> PolicyStore:
    items = [{"principal_key": key, "tenant_id": "default", "iam_arns": arns} for key, arns in agents]
    return PolicyStore(Policies(items), credentials=None)


def agent(found: Any) -> str | None:
    return None if found is None else str(found.principal_key)


def test_an_sso_session_acts_as_the_agent_whose_policy_lists_its_role_with_the_path() -> None:
    policies = store(("agent:docs", [SSO_ROLE]), ("agent:other", ["arn:aws:iam::123456789012:role/Other"]))
    assert agent(policies.agent_for_iam_arn(SSO_SESSION)) == "agent:docs"


def test_the_partition_is_the_callers_not_always_aws() -> None:
    policies = store(("agent:cn", [CHINA_ROLE]))
    assert agent(policies.agent_for_iam_arn(CHINA_SESSION)) == "agent:cn"
    # The same role name in the aws partition (another account space) is someone else.
    assert policies.agent_for_iam_arn("arn:aws:sts::123456789012:assumed-role/docs-bot/run-17") is None


def test_roles_match_by_account_and_name_only() -> None:
    policies = store(("agent:docs", [SSO_ROLE]))
    other_account = SSO_SESSION.replace("123456789012", "210987654321")
    assert policies.agent_for_iam_arn(other_account) is None
    assert policies.agent_for_iam_arn(SSO_SESSION.replace("_Docs_", "_Ops_")) is None


def test_a_listed_session_is_that_session_not_every_session_of_its_role() -> None:
    policies = store(("agent:alice", [SSO_SESSION]))
    assert agent(policies.agent_for_iam_arn(SSO_SESSION)) == "agent:alice"
    assert policies.agent_for_iam_arn(SSO_SESSION.replace("alice", "bob")) is None


def test_users_match_with_or_without_their_path() -> None:
    policies = store(("agent:ci", ["arn:aws:iam::123456789012:user/ci/deployer"]))
    assert agent(policies.agent_for_iam_arn("arn:aws:iam::123456789012:user/ci/deployer")) == "agent:ci"
    assert (
        iam_identity("arn:aws:iam::123456789012:user/ci/deployer")
        == "arn:aws:iam::123456789012:user/deployer"
    )
    assert iam_identity(SSO_SESSION) == SSO_SESSION
