"""The policy document and the scope arithmetic.

A caller's scope is a request, never a grant: the effective scope is the requested one when it is
inside the grant, the grant itself when nothing narrower was asked for, and a refusal
(forbidden_scope) when the request reaches outside it. Paths are normalised before any comparison.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, Literal
from urllib.parse import unquote

from pydantic import BaseModel, Field, model_validator

# "sources": create, change and delete a knowledge base's sources; syncing one is "ingest" (what a
# sync writes is documents), so an agent may be let sync sources it cannot create (docs/sources.md).
# "insights": marking a gap group fixed (citegate.insights; the tool `insights` reads the gaps).
WriteAction = Literal["ingest", "kb_admin", "feedback", "improvement_task", "insights", "admin", "sources"]
ANY = "*"


class ScopeGrant(BaseModel):
    """What part of the corpus a principal may see. None means unrestricted on that axis."""

    projects: list[str] | None = None
    path_prefixes: list[str] | None = None
    versions: list[str] | None = None


class WebGrant(BaseModel):
    # A policy that does not say: the web is granted with every tool ("*"), not otherwise.
    enabled: bool = False
    domains: list[str] = Field(default_factory=list)  # empty with enabled: any public domain


class Policy(BaseModel):
    """One principal's grants. Held in DynamoDB; seeded from config/policies.json."""

    principal_key: str  # "agent:<id>", "human:<id>", "human:*", "anonymous", "service:<id>"
    tenant_id: str
    description: str = ""
    # Tool and route names (citegate.api.routes; "*" for all): e.g. "insights" reads the gap groups
    # and the answer summary of the knowledge bases granted here (docs/insights.md).
    tools: list[str] = Field(default_factory=list)
    knowledge_bases: list[str] = Field(default_factory=list)  # kb ids; "*" for all in the tenant
    files: dict[str, list[str]] | None = None  # kb_id -> source names (spec 002 file-level grants)
    scope: ScopeGrant = Field(default_factory=ScopeGrant)
    write_actions: list[WriteAction] = Field(default_factory=list)
    working_docs: bool = False
    web: WebGrant = Field(default_factory=WebGrant)
    model_fallback: bool = False
    rate_limit_per_minute: int = Field(120, ge=1)
    token_budget_per_day: int | None = Field(None, ge=1)
    iam_arns: list[str] = Field(default_factory=list)  # IAM principals that act as this agent

    @model_validator(mode="before")
    @classmethod
    def _every_tool_grants_the_web(cls, data: Any) -> Any:
        """A policy granting every tool ("*") grants the web too, unless its `web.enabled` says
        otherwise; any other policy has the web only when it says so."""
        tools = data.get("tools") if isinstance(data, dict) else None
        if not isinstance(tools, list) or ANY not in tools:
            return data  # not a policy granting every tool (or not valid: validation says why)
        web = data.get("web")
        if web is None:
            return {**data, "web": {"enabled": True}}
        if isinstance(web, dict) and "enabled" not in web:
            return {**data, "web": {**web, "enabled": True}}
        return data

    def allows_tool(self, tool: str) -> bool:
        return ANY in self.tools or tool in self.tools

    def allows_kb(self, kb_id: str) -> bool:
        return ANY in self.knowledge_bases or kb_id in self.knowledge_bases

    def allows_write(self, action: WriteAction) -> bool:
        return "admin" in self.write_actions or action in self.write_actions


class RequestedScope(BaseModel):
    """Spec 000's `scope` as a caller sends it."""

    projects: list[str] | None = None
    paths: list[str] | None = None
    version: str | None = None
    includeWorkingDocs: bool = False


class EffectiveScope(BaseModel):
    projects: list[str] | None = None
    path_prefixes: list[str] | None = None
    versions: list[str] | None = None
    include_working_docs: bool = False

    def label(self) -> str:
        """Spec 000's audit `scope` string, e.g. `main:publish/system/components/kunora-kgent`."""
        version = ",".join(self.versions) if self.versions else "*"
        paths = ",".join(p.rstrip("/") for p in self.path_prefixes) if self.path_prefixes else "*"
        return f"{version}:{paths}"


class ScopeViolation(Exception):
    """The requested scope reaches outside the grant."""


class InvalidPath(ValueError):
    """A path that cannot be normalised safely (control characters, escaping the root)."""


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def normalize_path(path: str) -> str:
    """A canonical relative path: decoded, forward slashes, no `.`/`..`, no duplicate or edge slashes.

    Percent-decoding repeats until stable, so double-encoded `%252e%252e` cannot smuggle `..`
    past the comparison; `..` above the root is refused rather than clamped.
    """
    decoded = path
    for _ in range(4):
        once = unquote(decoded)
        if once == decoded:
            break
        decoded = once
    else:
        raise InvalidPath("path is encoded too many times")
    if _CONTROL.search(decoded):
        raise InvalidPath("path contains control characters")
    decoded = decoded.replace("\\", "/")
    parts: list[str] = []
    for segment in decoded.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not parts:
                raise InvalidPath("path escapes the root")
            parts.pop()
            continue
        parts.append(segment)
    return posixpath.join(*parts) if parts else ""


def _within(path: str, prefix: str) -> bool:
    """Segment-wise containment: `a/b` is within `a` but `ab` is not. Case-sensitive on purpose:
    stored paths are, so `PUBLISH/x` is simply another path, outside a grant on `publish`."""
    return prefix == "" or path == prefix or path.startswith(prefix + "/")


def as_filter_prefix(path: str) -> str:
    """Directory semantics for the search filter: `a/b` admits `a/b/...`, never `a/bc`."""
    return "" if path == "" else path + "/"


def effective_scope(
    requested: RequestedScope | None, grant: ScopeGrant, *, working_docs_allowed: bool
) -> EffectiveScope:
    requested = requested or RequestedScope()
    projects = grant.projects
    if requested.projects is not None:
        outside = [p for p in requested.projects if grant.projects is not None and p not in grant.projects]
        if outside:
            raise ScopeViolation(f"projects not granted: {', '.join(outside)}")
        projects = list(requested.projects)

    granted_paths = (
        [normalize_path(p) for p in grant.path_prefixes] if grant.path_prefixes is not None else None
    )
    paths = granted_paths
    if requested.paths is not None:
        try:
            wanted = [normalize_path(p) for p in requested.paths]
        except InvalidPath as error:
            raise ScopeViolation(f"invalid path: {error}") from error
        if granted_paths is not None:
            outside = [w for w in wanted if not any(_within(w, g) for g in granted_paths)]
            if outside:
                raise ScopeViolation(f"paths not granted: {', '.join(outside)}")
        paths = wanted

    versions = grant.versions
    if requested.version is not None:
        if grant.versions is not None and requested.version not in grant.versions:
            raise ScopeViolation(f"version not granted: {requested.version}")
        versions = [requested.version]

    if requested.includeWorkingDocs and not working_docs_allowed:
        raise ScopeViolation("working docs are not granted")
    return EffectiveScope(
        projects=projects,
        path_prefixes=[as_filter_prefix(p) for p in paths] if paths is not None else None,
        versions=versions,
        include_working_docs=requested.includeWorkingDocs,
    )


class PolicyUpdate(Policy):
    """PUT /admin/policies/{key}: the key comes from the path, the tenant from the caller."""

    model_config = {"extra": "forbid"}

    principal_key: str = ""
    tenant_id: str = ""
