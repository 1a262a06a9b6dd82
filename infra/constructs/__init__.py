"""The stack's domain constructs: data, layers, search, ingestion, api, monitoring, and the one
`EndpointFunction` every Lambda function is made with.

cdk-nag 3 reads acknowledgements from CDK's own `Validations.of(scope).acknowledge(...)`; rules
that report several findings (IAM5: one per wildcard) are acknowledged one finding at a time, as
`RULE[finding]`, so a new wildcard is never covered by an old reason.
"""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import Acknowledgment, CfnElement, Stack, Validations
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule: str, reason: str, findings: Iterable[str] = ()) -> None:
    """Acknowledge `rule` (or each `rule[finding]`) on `scope` and its children, with the reason."""
    ids = [f"{rule}[{finding}]" for finding in findings] or [rule]
    Validations.of(scope).acknowledge(*(Acknowledgment(id=i, reason=reason) for i in ids))


def logical_id(construct: IConstruct) -> str:
    """The CloudFormation logical id of an L2 construct's resource (as cdk-nag prints `<Id.Arn>`)."""
    element = construct.node.default_child if not isinstance(construct, CfnElement) else construct
    assert isinstance(element, CfnElement)
    return Stack.of(construct).resolve(Stack.of(construct).get_logical_id(element))
