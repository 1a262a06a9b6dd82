"""The pages' files in AWS: ui/dist (widget.js, console/) in a private S3 bucket behind CloudFront
(origin access control: only this distribution reads the bucket), with security headers and a
Content Security Policy that allows exactly what the console needs: its own files, and requests to
the API, the documents bucket (presigned uploads) and the OIDC issuer (the PKCE token exchange).

widget.js is loaded by documentation sites on other origins with a plain <script> tag (no CORS
needed); what it sends goes to the API, whose CORS allows the configured `page_origins`
(citegate.platform.resources.CORS). The local gateway serves the same files (citegate.runtime.static).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from aws_cdk import Annotations, CfnOutput, Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy

from constructs import Construct, IConstruct
from infra.constructs import _flatten, acknowledge

DIST = Path(__file__).resolve().parents[2] / "ui" / "dist"

# "/console/" and "/console" are the console's index.html; other paths are files as they are.
_INDEX_REWRITE = """
function handler(event) {
  var request = event.request;
  var uri = request.uri;
  if (uri === '/' || uri === '/console') {
    request.uri = '/console/index.html';
  } else if (uri.endsWith('/')) {
    request.uri = uri + 'index.html';
  }
  return request;
}
"""


def _origin(url: str) -> str:
    """A URL's origin, as CSP matches it (a source with a path would match that path only); a
    deploy-time token (the API's URL) is an origin already."""
    if Token.is_unresolved(url):
        return url
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else url.rstrip("/")


def content_security_policy(connect: Sequence[str]) -> str:
    """The console's policy: scripts, styles, fonts and images from its own origin only, requests to
    its own origin and `connect` (the API, the upload bucket, the issuer), no framing, no forms,
    no plugins, no <base>."""
    sources = " ".join(["'self'", *dict.fromkeys(_origin(c) for c in connect if c)])
    return "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            "font-src 'self'",
            f"connect-src {sources}",
            "manifest-src 'self'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )


class WebHosting(Construct):
    """S3 + CloudFront for ui/dist. `api_urls`: the API's URLs (tokens are fine); `upload_origin`:
    the documents bucket's https origin; `oidc_issuer`: the issuer's URL when people sign in;
    `connect_origins`: anything else the console must reach (an OIDC token endpoint on another
    host than its issuer, as Cognito's)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        api_urls: Sequence[str],
        upload_origin: str | None = None,
        oidc_issuer: str | None = None,
        connect_origins: Sequence[str] = (),
        dist: Path = DIST,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
    ) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Files",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            versioned=False,
            removal_policy=removal_policy,
            # A stage that is destroyed (not prod) empties the bucket first, as the data buckets do.
            auto_delete_objects=removal_policy == RemovalPolicy.DESTROY,
        )
        connect = [*api_urls, upload_origin or "", oidc_issuer or "", *connect_origins]
        self.csp = content_security_policy(connect)
        headers = cloudfront.ResponseHeadersPolicy(
            self,
            "Headers",
            comment="citegate pages: CSP and security headers",
            security_headers_behavior=cloudfront.ResponseSecurityHeadersBehavior(
                content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
                    content_security_policy=self.csp, override=True
                ),
                content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
                frame_options=cloudfront.ResponseHeadersFrameOptions(
                    frame_option=cloudfront.HeadersFrameOption.DENY, override=True
                ),
                referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
                    referrer_policy=cloudfront.HeadersReferrerPolicy.STRICT_ORIGIN_WHEN_CROSS_ORIGIN,
                    override=True,
                ),
                strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                    access_control_max_age=Duration.days(365), include_subdomains=True, override=True
                ),
            ),
        )
        rewrite = cloudfront.Function(
            self,
            "IndexRewrite",
            code=cloudfront.FunctionCode.from_inline(_INDEX_REWRITE),
            runtime=cloudfront.FunctionRuntime.JS_2_0,
            comment="directory URLs to their index.html",
        )
        self.distribution = cloudfront.Distribution(
            self,
            "Distribution",
            comment="citegate widget.js and console",
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_GET_HEAD,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=headers,
                compress=True,
                function_associations=[
                    cloudfront.FunctionAssociation(
                        function=rewrite, event_type=cloudfront.FunctionEventType.VIEWER_REQUEST
                    )
                ],
            ),
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            price_class=cloudfront.PriceClass.PRICE_CLASS_100,
        )
        if (dist / "widget.js").is_file():
            s3deploy.BucketDeployment(
                self,
                "Deploy",
                sources=[
                    s3deploy.Source.asset(str(dist)),
                    # Where the console sends its calls: the API is on another origin than the pages.
                    s3deploy.Source.json_data("console/config.json", {"apiBase": api_urls[0]}),
                ],
                destination_bucket=self.bucket,
                distribution=self.distribution,
                distribution_paths=["/*"],
                # Short browser caching: files keep their names, so a new build shows within minutes.
                cache_control=[s3deploy.CacheControl.from_string("public, max-age=300")],
                memory_limit=256,
                # Its function's logs kept and removed as the stage's other logs are (CDK's default:
                # 731 days, retained).
                log_group=logs.LogGroup(
                    self, "DeployLogs", retention=log_retention, removal_policy=removal_policy
                ),
                # Its reply then carries no list of object keys: it stays small whatever ui/dist holds.
                output_object_keys=False,
            )
        else:
            Annotations.of(self).add_warning_v2(
                "citegate:ui-not-built", f"{dist} has no widget.js: run `make ui` before deploying the pages"
            )
        domain = self.distribution.distribution_domain_name
        CfnOutput(self, "WidgetUrl", value=f"https://{domain}/widget.js")
        CfnOutput(self, "ConsoleUrl", value=f"https://{domain}/console/")
        self._acknowledge()

    def _acknowledge(self) -> None:
        acknowledge(
            self.bucket,
            "AwsSolutions-S1",
            "Built, public files (widget.js, the console) only; CloudFront is the only reader, "
            "and the API audits every call.",
        )
        acknowledge(
            self.distribution,
            "AwsSolutions-CFR1",
            "Documentation readers anywhere; the API's policies, not geography, decide what is answered.",
        )
        acknowledge(
            self.distribution,
            "AwsSolutions-CFR2",
            "Static files only; abuse is limited where it costs, at the API "
            "(per-caller and anonymous rate limits).",
        )
        acknowledge(
            self.distribution,
            "AwsSolutions-CFR3",
            "Static, public files; requests that matter are the API's, which are logged and audited.",
        )
        acknowledge(
            self.distribution,
            "AwsSolutions-CFR4",
            "The default *.cloudfront.net certificate cannot pin a minimum TLS version; "
            "a custom domain sets TLSv1.2_2021.",
        )
        # BucketDeployment's provider is one function per stack, beside this construct.
        for provider in Stack.of(self).node.children:
            if provider.node.id.startswith("Custom::CDKBucketDeployment"):
                _acknowledge_deployment_provider(provider)


def _acknowledge_deployment_provider(provider: IConstruct) -> None:
    acknowledge(
        provider,
        "AwsSolutions-L1",
        "CDK's BucketDeployment provider function; its runtime is chosen by aws-cdk-lib.",
    )
    acknowledge(
        provider,
        "AwsSolutions-IAM4",
        "CDK's BucketDeployment function writes its logs with AWSLambdaBasicExecutionRole.",
        findings=["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"],
    )
    # Exactly the wildcards CDK granted it: read the asset, replace the pages' bucket's objects, and
    # invalidate the distribution (CloudFront invalidations take no resource ARN).
    stack = Stack.of(provider)
    findings: set[str] = set()
    for policy in provider.node.find_all():
        if isinstance(policy, iam.CfnPolicy):
            document = stack.resolve(policy.policy_document)
            for statement in document.get("Statement", []):
                actions = statement.get("Action", [])
                resources = statement.get("Resource", [])
                for action in [actions] if isinstance(actions, str) else actions:
                    if "*" in action:
                        findings.add(f"Action::{action}")
                for resource in [resources] if isinstance(resources, (str, dict)) else resources:
                    flat = _flatten(resource)
                    if "*" in flat:
                        findings.add(f"Resource::{flat}")
    if findings:
        acknowledge(
            provider,
            "AwsSolutions-IAM5",
            "CDK's BucketDeployment grants: read the build's asset, replace the pages' bucket "
            "objects, invalidate the distribution.",
            findings=sorted(findings),
        )
