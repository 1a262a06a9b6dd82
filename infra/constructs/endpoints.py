"""Nested stacks: one per group of endpoint functions (each function with its routes), and the
resource budget every stack is held to.

The top-level stack keeps what is shared (tables, bucket, queues, layers, the search domain, the two
APIs with their stages and authorizer, monitoring); a function, its role, policy and log group, and
its routes, integrations and invoke permissions on both front doors are created in the nested stack
of its group (`endpoint_function.group_of`). CloudFormation counts a nested stack as one resource of
its parent, so adding an endpoint adds nothing to the top-level stack.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import jsii
from aws_cdk import CfnResource, NestedStack, Stack

from constructs import Construct, IConstruct, IValidation
from infra.constructs.api import Api, camel
from infra.constructs.endpoint_function import (
    GROUP_DESCRIPTIONS,
    RESOURCE_BUDGET,
    EndpointFunction,
    StackGroup,
)
from infra.constructs.streaming import StreamingEntry, streaming_functions

MakeFunction = Callable[..., EndpointFunction]


class EndpointStack(NestedStack):
    """The functions of one group and their routes."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        group: StackGroup,
        functions: Sequence[str],
        make_function: MakeFunction,
        api: Api,
        depends_on: Iterable[IConstruct] = (),
    ) -> None:
        super().__init__(scope, construct_id, description=f"citegate endpoints: {GROUP_DESCRIPTIONS[group]}")
        self.group = group
        self.functions: dict[str, EndpointFunction] = {}
        self.streaming: dict[str, StreamingEntry] = {}
        streams = set(streaming_functions())
        for name in functions:
            function = make_function(self, name)
            api.add_routes(self, function)
            self.functions[name] = function
            if name in streams:  # its twin with function URLs that stream (infra/constructs/streaming.py)
                self.streaming[name] = StreamingEntry(
                    self, f"{camel(name)}Streaming", function=name, make_function=make_function
                )
        for dependency in depends_on:
            self.node.add_dependency(dependency)


def resource_counts(top: Stack, nested: Mapping[str, Stack]) -> dict[str, int]:
    """The resources each stack's template will hold: `top` (where each nested stack is one
    resource) and each nested stack. A nested stack's subtree holds only its own resources (its
    AWS::CloudFormation::Stack resource is in the parent), so counting is one walk per stack with no
    further calls into the CDK runtime."""

    def count(stack: Stack) -> int:
        return sum(1 for node in stack.node.find_all() if isinstance(node, CfnResource))

    counts = {name: count(stack) for name, stack in nested.items()}
    return {top.node.id: count(top) - sum(counts.values()), **counts}


@jsii.implements(IValidation)
class ResourceBudget:
    """Fails the synth when a stack holds more than RESOURCE_BUDGET resources (checked after every
    construct is in place), with what to do about it."""

    def __init__(self, top: Stack, nested: Mapping[str, Stack], budget: int = RESOURCE_BUDGET) -> None:
        self.top = top
        self.nested = nested
        self.budget = budget

    def validate(self) -> list[str]:
        return [
            f"{name} holds {count} resources, over the budget of {self.budget} (CloudFormation's limit is "
            "500): give some functions another group (FunctionSpec.group, or a new StackGroup with its "
            "ROUTE_GROUPS prefixes) in infra/constructs/endpoint_function.py"
            for name, count in resource_counts(self.top, self.nested).items()
            if count > self.budget
        ]
