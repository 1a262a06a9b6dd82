"""The principal of a request, from what the front door attached to the event.

- IAM front door (SigV4): `requestContext.authorizer.iam` carries the verified IAM principal; it
  acts as the agent whose policy lists its ARN.
- Token front door: the Lambda authorizer's context carries the principal, or why the
  credentials were refused.
- Neither: an anonymous caller of the default tenant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from citegate.platform.errors import Forbidden, Unauthorized
from citegate.platform.principal import Principal, anonymous

if TYPE_CHECKING:
    from citegate.governance.ports import Identifying


def resolve_principal(event: dict[str, Any], s: Identifying) -> Principal:
    authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
    iam = authorizer.get("iam")
    if iam:
        arn = str(iam.get("userArn") or "")
        policy = s.policies.agent_for_iam_arn(arn)
        if policy is None:
            raise Unauthorized(f"the IAM principal {arn} is not mapped to an agent")
        return Principal(
            type="agent",
            id=policy.principal_key.split(":", 1)[1],
            tenant_id=policy.tenant_id,
            claims={"iam_arn": arn, "access_key": iam.get("accessKey"), "auth": "sigv4"},
        )
    context = authorizer.get("lambda") or {}
    if context.get("auth_error"):
        # The authorizer says 403 when the credentials are fine but the request is refused (a
        # cookie-authenticated request from a foreign origin); otherwise the credentials are bad.
        refused = Forbidden if str(context.get("auth_status")) == "403" else Unauthorized
        raise refused(str(context["auth_error"]))
    found = Principal.from_authorizer_context(context)
    return found or anonymous(s.settings.default_tenant)
