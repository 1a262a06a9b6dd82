"""Policies and agent credentials in DynamoDB, with reviewed defaults for the built-in principals."""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from citegate.governance.identity.credential_cache import forget as forget_credential
from citegate.governance.policy.model import Policy
from citegate.platform.dynamo import from_item, is_conditional_failure, query_all, scan_all, to_item, utc_now
from citegate.platform.errors import NotFound
from citegate.platform.principal import Principal

SEED_FILE = Path(__file__).resolve().parents[4] / "config" / "policies.json"
# Principals whose policy is cached at once: every person signing in has a key of their own, and a
# long-running process must not keep one for each of them forever.
POLICY_CACHE_ENTRIES = 1024


def principal_key(principal: Principal) -> str:
    if principal.type == "anonymous":
        return "anonymous"
    return f"{principal.type}:{principal.id}"


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class PolicyStore:
    """Policies are read on every call, so they are cached for a few seconds per process: a change
    through the admin route applies at once here and within `cache_seconds` everywhere else.
    The store never caches credentials; the authorizer remembers accepted ones for at most 60 s
    (citegate.governance.identity.credential_cache), so a revocation applies at once in this process and
    within 60 s everywhere else."""

    def __init__(self, policies: Any, credentials: Any, cache_seconds: float = 5.0) -> None:
        self._policies = policies
        self._credentials = credentials
        self._cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, Policy | None]] = {}  # oldest read first
        self._cache_lock = threading.Lock()
        self._all: tuple[float, list[Policy]] | None = None

    # -- policies ---------------------------------------------------------------------------

    def find(self, key: str) -> Policy | None:
        cached = self._cache.get(key)
        if cached and time.monotonic() - cached[0] < self._cache_seconds:
            return cached[1]
        item = self._policies.get_item(Key={"principal_key": key}, ConsistentRead=True).get("Item")
        policy = Policy.model_validate(from_item(item)) if item else None
        with self._cache_lock:
            self._cache.pop(key, None)
            self._cache[key] = (time.monotonic(), policy)
            while len(self._cache) > POLICY_CACHE_ENTRIES:
                del self._cache[next(iter(self._cache))]
        return policy

    def for_principal(self, principal: Principal) -> Policy | None:
        """The principal's own policy; people without one get the authenticated-read default."""
        policy = self.find(principal_key(principal))
        if policy is None and principal.type == "human":
            policy = self.find("human:*")
        if policy is not None and policy.tenant_id != principal.tenant_id:
            return None  # a policy never reaches across tenants
        return policy

    def put(self, policy: Policy) -> Policy:
        self._policies.put_item(Item=to_item(policy.model_dump()))
        with self._cache_lock:
            self._cache.pop(policy.principal_key, None)
        self._all = None
        return policy

    def all(self) -> list[Policy]:
        if self._all and time.monotonic() - self._all[0] < self._cache_seconds:
            return self._all[1]
        policies = sorted(
            (Policy.model_validate(i) for i in scan_all(self._policies)), key=lambda p: p.principal_key
        )
        self._all = (time.monotonic(), policies)
        return policies

    def agent_for_iam_arn(self, arn: str) -> Policy | None:
        """The agent an IAM principal acts as. Assumed-role ARNs match their role (by name: STS
        drops the role's path), and a listed role or user matches with or without its path."""
        candidates = {arn, iam_identity(_role_of(arn))}
        for policy in self.all():
            if not policy.principal_key.startswith("agent:"):
                continue
            if candidates & {iam_identity(listed) for listed in policy.iam_arns}:
                return policy
        return None

    def seed(self, path: Path = SEED_FILE, *, tenant_id: str | None = None) -> int:
        """Write the reviewed seed policies that do not exist yet; admin changes are never overwritten."""
        written = 0
        for policy in seed_policies(path, tenant_id=tenant_id):
            try:
                self._policies.put_item(
                    Item=to_item(policy.model_dump()),
                    ConditionExpression="attribute_not_exists(principal_key)",
                )
                written += 1
            except Exception as error:
                if not is_conditional_failure(error):
                    raise
        return written

    def reseed(
        self, path: Path = SEED_FILE, *, keys: list[str] | None = None, tenant_id: str | None = None
    ) -> list[str]:
        """Recovery by hand (`citegate policies reseed`): overwrite the named principal keys (all of
        the file's when none are named) with the seed file's policies; returns the keys written."""
        policies = {p.principal_key: p for p in seed_policies(path, tenant_id=tenant_id)}
        unknown = sorted(set(keys or []) - set(policies))
        if unknown:
            raise NotFound(f"not in {path}: {', '.join(unknown)}")
        chosen = [policies[k] for k in keys] if keys else list(policies.values())
        return [self.put(policy).principal_key for policy in chosen]

    # -- agent credentials (tokens and caller agent keys) -------------------------------------

    def issue_credential(
        self, agent_id: str, tenant_id: str, kind: str, description: str = ""
    ) -> dict[str, Any]:
        """Create a secret for an agent; only its hash is stored, the secret is returned once."""
        credential_id = "c_" + secrets.token_hex(6)
        prefix = "cgat" if kind == "token" else "cgak"
        secret = f"{prefix}_{credential_id[2:]}_{secrets.token_urlsafe(24)}"
        record = {
            "credential_hash": _hash(secret),
            "credential_id": credential_id,
            "agent_id": agent_id,
            "tenant_id": tenant_id,
            "kind": kind,
            "status": "active",
            "description": description,
            "created_at": utc_now(),
        }
        self._credentials.put_item(Item=record)
        public = {k: v for k, v in record.items() if k != "credential_hash"}
        return {**public, "secret": secret}

    def agent_for_secret(self, secret: str, kind: str) -> dict[str, Any] | None:
        item = self._credentials.get_item(Key={"credential_hash": _hash(secret)}, ConsistentRead=True).get(
            "Item"
        )
        if not item or item.get("status") != "active" or item.get("kind") != kind:
            return None
        return dict(from_item(item))

    def list_credentials(self, agent_id: str) -> list[dict[str, Any]]:
        from boto3.dynamodb.conditions import Key

        items = query_all(
            self._credentials, IndexName="by_agent", KeyConditionExpression=Key("agent_id").eq(agent_id)
        )
        return [{k: v for k, v in i.items() if k != "credential_hash"} for i in items]

    def revoke_credential(self, agent_id: str, credential_id: str) -> dict[str, Any]:
        from boto3.dynamodb.conditions import Key

        for item in query_all(
            self._credentials,
            IndexName="by_agent",
            KeyConditionExpression=Key("agent_id").eq(agent_id) & Key("credential_id").eq(credential_id),
        ):
            self._credentials.update_item(
                Key={"credential_hash": item["credential_hash"]},
                UpdateExpression="SET #s = :revoked, revoked_at = :now",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":revoked": "revoked", ":now": utc_now()},
            )
            forget_credential(item["credential_hash"])
            return {"credential_id": credential_id, "agent_id": agent_id, "status": "revoked"}
        raise NotFound(f"credential {credential_id!r} of agent {agent_id!r} not found")


def seed_policies(path: Path = SEED_FILE, *, tenant_id: str | None = None) -> list[Policy]:
    """The reviewed policies of a seed file (config/policies.json), in the given default tenant."""
    document = json.loads(path.read_text())
    return [
        Policy.model_validate({**raw, "tenant_id": raw.get("tenant_id") or tenant_id or "default"})
        for raw in document["policies"]
    ]


def bootstrap_key(service_principal_id: str) -> str:
    """The principal key of the deployment's own service token (spec 004's RAG_API_TOKEN)."""
    return f"service:{service_principal_id}"


def keeps_admin(policy: Policy) -> bool:
    """Whether a policy still lets its principal administer: the admin tool and the admin write."""
    return policy.allows_tool("admin") and "admin" in policy.write_actions


def _role_of(arn: str) -> str:
    """arn:<partition>:sts::123:assumed-role/Role/session -> arn:<partition>:iam::123:role/Role.
    STS names the role without its path (an SSO role's is aws-reserved/sso.amazonaws.com/...)."""
    parts = arn.split(":")
    if len(parts) == 6 and parts[2] == "sts" and parts[5].startswith("assumed-role/"):
        role = parts[5].split("/")[1]
        return f"arn:{parts[1]}:iam::{parts[4]}:role/{role}"
    return arn


def iam_identity(arn: str) -> str:
    """An IAM role or user ARN without its path (names are unique in an account whatever the
    path, and STS's ARNs carry none): arn:aws:iam::123:role/aws-reserved/x/Name -> .../role/Name.
    Any other ARN (an assumed-role session, say) is itself."""
    parts = arn.split(":")
    if len(parts) == 6 and parts[2] == "iam":
        kind, _, rest = parts[5].partition("/")
        if kind in ("role", "user") and rest:
            return ":".join([*parts[:5], f"{kind}/{rest.rsplit('/', 1)[-1]}"])
    return arn
