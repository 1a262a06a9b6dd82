"""Issue 22: the widget and the console in AWS (infra/constructs/web_hosting.py): ui/dist in a
private bucket that only CloudFront reads (origin access control), directory URLs served their
index.html, and a Content Security Policy that lets the console reach exactly its own files, the
API, the upload bucket and the OIDC issuer. cdk-nag finds nothing unacknowledged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks
from infra.constructs.web_hosting import WebHosting, content_security_policy

API = "https://abc123.execute-api.eu-west-1.amazonaws.com"
UPLOADS = "https://docs-bucket.s3.eu-west-1.amazonaws.com"
ISSUER = "https://login.example.com/realms/docs"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Stack, Template, WebHosting]:
    dist = tmp_path_factory.mktemp("dist")
    (dist / "console").mkdir()
    (dist / "widget.js").write_text("(()=>{})();")
    (dist / "console" / "index.html").write_text("<!doctype html><title>console</title>")
    stack = Stack(App(), "Pages")
    web = WebHosting(stack, "Web", api_urls=[API], upload_origin=UPLOADS, oidc_issuer=ISSUER, dist=dist)
    return stack, Template.from_stack(stack), web


def _one(template: Template, kind: str) -> dict[str, Any]:
    [resource] = template.find_resources(kind).values()
    return resource["Properties"]


def test_only_cloudfront_reads_the_private_bucket(built: tuple[Stack, Template, WebHosting]) -> None:
    _, template, _ = built
    bucket = _one(template, "AWS::S3::Bucket")
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert _one(template, "AWS::CloudFront::OriginAccessControl")["OriginAccessControlConfig"][
        "SigningBehavior"
    ] == ("always")
    statements = _one(template, "AWS::S3::BucketPolicy")["PolicyDocument"]["Statement"]
    reads = [s for s in statements if s.get("Principal") == {"Service": "cloudfront.amazonaws.com"}]
    assert len(reads) == 1 and reads[0]["Action"] == "s3:GetObject"
    assert "AWS:SourceArn" in reads[0]["Condition"]["StringEquals"]  # this distribution only
    denies = [s for s in statements if s["Effect"] == "Deny"]
    assert denies and denies[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_the_distribution_serves_https_with_the_csp(built: tuple[Stack, Template, WebHosting]) -> None:
    _, template, web = built
    config = _one(template, "AWS::CloudFront::Distribution")["DistributionConfig"]
    behavior = config["DefaultCacheBehavior"]
    assert behavior["ViewerProtocolPolicy"] == "redirect-to-https"
    assert behavior["AllowedMethods"] == ["GET", "HEAD"]
    assert behavior["FunctionAssociations"][0]["EventType"] == "viewer-request"
    headers = _one(template, "AWS::CloudFront::ResponseHeadersPolicy")["ResponseHeadersPolicyConfig"]
    security = headers["SecurityHeadersConfig"]
    assert security["ContentSecurityPolicy"] == {"ContentSecurityPolicy": web.csp, "Override": True}
    assert security["FrameOptions"]["FrameOption"] == "DENY"
    assert "connect-src 'self' " + API + " " + UPLOADS + " https://login.example.com;" in web.csp
    # The pages are uploaded by the deployment, and the distribution is invalidated with them.
    deployment = _one(template, "Custom::CDKBucketDeployment")
    assert deployment["DistributionPaths"] == ["/*"]
    template.has_output("*", {"Value": Match.object_like({"Fn::Join": Match.any_value()})})


def test_directory_urls_get_their_index(built: tuple[Stack, Template, WebHosting]) -> None:
    _, template, _ = built
    code = _one(template, "AWS::CloudFront::Function")["FunctionCode"]
    assert "request.uri = '/console/index.html'" in code and "uri + 'index.html'" in code


def test_the_policy_allows_nothing_else() -> None:
    csp = content_security_policy(["https://api.example.com/", "https://login.example.com/realms/x", ""])
    directives = dict(d.split(" ", 1) for d in csp.split("; "))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == directives["style-src"] == "'self'"
    assert directives["connect-src"] == "'self' https://api.example.com https://login.example.com"
    assert directives["frame-ancestors"] == directives["base-uri"] == directives["form-action"] == "'none'"
    assert "unsafe" not in csp


def test_cdk_nag_finds_nothing_unacknowledged(built: tuple[Stack, Template, WebHosting]) -> None:
    stack, _, _ = built
    report = AwsSolutionsChecks().validate_scope(stack)
    assert [
        f"{v.rule_name}: {[r.construct_path for r in v.violating_resources]}" for v in report.violations
    ] == []


def test_without_a_build_nothing_is_uploaded(tmp_path: Path) -> None:
    stack = Stack(App(), "NoBuild")
    WebHosting(stack, "Web", api_urls=[API], dist=tmp_path)
    assert Template.from_stack(stack).find_resources("Custom::CDKBucketDeployment") == {}
