"""The stack's domain constructs: data, layers, search, ingestion, api, monitoring, and the one
`EndpointFunction` every Lambda function is made with.

cdk-nag 3 reads acknowledgements from CDK's own `Validations.of(scope).acknowledge(...)`; rules
that report several findings (IAM5: one per wildcard) are acknowledged one finding at a time, as
`RULE[finding]`, so a new wildcard is never covered by an old reason.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from aws_cdk import Acknowledgment, Stack, Validations

from constructs import IConstruct


def acknowledge(scope: IConstruct, rule: str, reason: str, findings: Iterable[str] = ()) -> None:
    """Acknowledge `rule` (or each `rule[finding]`) on `scope` and its children, with the reason."""
    ids = [f"{rule}[{finding}]" for finding in findings] or [rule]
    Validations.of(scope).acknowledge(*(Acknowledgment(id=i, reason=reason) for i in ids))


def _flatten(node: Any) -> str:
    """cdk-nag's flattenCfnReference: how a resolved resource reads in an IAM5 finding."""
    if node is None:
        return ""
    if isinstance(node, str):
        return node.replace("${", "<").replace("}", ">")
    if isinstance(node, dict):
        if "Fn::Join" in node:
            delimiter, items = node["Fn::Join"]
            return str(delimiter).join(_flatten(item) for item in items)
        if "Fn::Sub" in node:
            return _flatten(node["Fn::Sub"])
        if "Fn::GetAtt" in node:
            resource, attribute = node["Fn::GetAtt"]
            return f"<{_flatten(resource)}.{_flatten(attribute)}>"
        if "Fn::ImportValue" in node:
            return _flatten(node["Fn::ImportValue"])
        if "Ref" in node:
            return f"<{_flatten(node['Ref'])}>"
    return json.dumps(node, separators=(",", ":"))


def acknowledge_wildcards(scope: IConstruct, reason: str, resources: Iterable[str]) -> None:
    """Acknowledge AwsSolutions-IAM5 for exactly these wildcard resources (ARN strings with tokens)."""
    stack = Stack.of(scope)
    findings = sorted({f"Resource::{_flatten(stack.resolve(r))}" for r in resources})
    if findings:
        acknowledge(scope, "AwsSolutions-IAM5", reason, findings=findings)


def acknowledge_provider(provider: IConstruct, on_event_function_arn: str) -> None:
    """What CDK's custom-resource provider framework brings with it, acknowledged with reasons."""
    acknowledge(
        provider,
        "AwsSolutions-IAM4",
        "The CDK custom resource provider framework's own function uses AWSLambdaBasicExecutionRole; "
        "it only relays the CloudFormation event to the on-event function.",
        findings=["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"],
    )
    acknowledge_wildcards(
        provider,
        "The provider framework may invoke any version of its on-event function (<function arn>:*), "
        "as CDK generates it.",
        [f"{on_event_function_arn}:*"],
    )
    acknowledge(
        provider,
        "AwsSolutions-L1",
        "The provider framework's Node.js runtime is chosen by CDK, not by this app.",
    )
