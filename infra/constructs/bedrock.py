"""Amazon Bedrock models by IAM: what a function may invoke, as exact ARNs.

A model id is one of:
- a foundation model (`anthropic.claude-3-5-haiku-20241022-v1:0`, `amazon.titan-embed-text-v2:0`):
  `arn:<partition>:bedrock:<region>::foundation-model/<id>`;
- a cross-region inference profile (`us.anthropic.claude-3-5-haiku-20241022-v1:0`, `eu.`, `apac.`,
  ... prefixes): the profile in the calling region,
  `arn:<partition>:bedrock:<region>:<account>:inference-profile/<id>`, and the foundation model
  (the id without its prefix) in every region the profile routes to, because Bedrock authorizes
  the routed call against the foundation model in the region that serves it;
- a full ARN (provisioned throughput, an application inference profile): that ARN, as given.

Converse and ConverseStream are authorized as bedrock:InvokeModel and
bedrock:InvokeModelWithResponseStream, so those two actions are all an answering function needs;
an embedding function needs only bedrock:InvokeModel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Aws
from aws_cdk import aws_iam as iam

from infra.constructs import acknowledge_wildcards
from infra.constructs.endpoint_function import EndpointFunction

INVOKE = "bedrock:InvokeModel"
INVOKE_STREAM = "bedrock:InvokeModelWithResponseStream"

# Where each geography's system-defined inference profiles route (Bedrock's documentation as of
# 2025-06; a profile may route to fewer: set citegate:bedrock_profile_regions to the exact list
# `aws bedrock get-inference-profile --inference-profile-identifier <id>` shows).
PROFILE_REGIONS: Mapping[str, tuple[str, ...]] = {
    "us": ("us-east-1", "us-east-2", "us-west-1", "us-west-2"),
    "us-gov": ("us-gov-east-1", "us-gov-west-1"),
    "eu": ("eu-central-1", "eu-north-1", "eu-south-1", "eu-south-2", "eu-west-1", "eu-west-3"),
    "apac": (
        "ap-northeast-1",
        "ap-northeast-2",
        "ap-northeast-3",
        "ap-south-1",
        "ap-south-2",
        "ap-southeast-1",
        "ap-southeast-2",
        "ap-southeast-4",
    ),
    "jp": ("ap-northeast-1", "ap-northeast-3"),
    "au": ("ap-southeast-2", "ap-southeast-4"),
    # Global profiles route to any commercial region: the foundation model in every region.
    "global": ("*",),
}


def profile_prefix(model_id: str) -> str | None:
    """The geography of a cross-region inference profile id (`us`, `eu`, ...), else None."""
    head, dot, rest = model_id.partition(".")
    return head if dot and rest and head in PROFILE_REGIONS else None


def model_arns(model_id: str, region: str, profile_regions: Sequence[str] = ()) -> list[str]:
    """The ARNs a function must be allowed to invoke to use `model_id` from `region` (strings
    with CloudFormation tokens for the partition and account)."""
    if model_id.startswith("arn:"):
        return [model_id]
    partition = Aws.PARTITION
    prefix = profile_prefix(model_id)
    if prefix is None:
        return [f"arn:{partition}:bedrock:{region}::foundation-model/{model_id}"]
    base = model_id.split(".", 1)[1]
    regions = tuple(profile_regions) or PROFILE_REGIONS[prefix]
    return [
        f"arn:{partition}:bedrock:{region}:{Aws.ACCOUNT_ID}:inference-profile/{model_id}",
        *(f"arn:{partition}:bedrock:{r}::foundation-model/{base}" for r in regions),
    ]


def grant_invoke(
    function: EndpointFunction,
    model_id: str,
    *,
    region: str,
    profile_regions: Sequence[str] = (),
    stream: bool,
) -> None:
    """bedrock:InvokeModel (and InvokeModelWithResponseStream when `stream`) on exactly the ARNs of
    `model_id`, for this function's role only."""
    resources = model_arns(model_id, region, profile_regions)
    actions = [INVOKE, INVOKE_STREAM] if stream else [INVOKE]
    function.role.add_to_principal_policy(iam.PolicyStatement(actions=actions, resources=resources))
    wildcards = [r for r in resources if "*" in r]
    if wildcards:
        acknowledge_wildcards(
            function,
            "A global cross-region inference profile routes to the foundation model in any commercial "
            "region; the wildcard is the region only, the model is named exactly.",
            wildcards,
        )
