"""Synthesize the app once and read it as one template: the top-level stack and its nested stacks.

`flatten` merges the nested stacks' resources into the top-level ones (ids `<nested logical>.<id>`)
and replaces every cross-stack hop by what it stands for: a nested stack's parameter becomes the
value its parent passes, and a parent's `Fn::GetAtt <nested>.Outputs.X` becomes the nested output's
value. A function in a nested stack then refers to a table, layer or API exactly as it would in one
big stack, and the tests can follow references across the split.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("CITEGATE_SKIP_DEPENDENCY_LAYER_BUILD", "1")

from infra.app import build
from infra.stack import CitegateStack

REPO = Path(__file__).resolve().parents[2]
Resources = dict[str, dict[str, Any]]


@dataclass
class Synth:
    stack: CitegateStack
    parent: dict[str, Any]  # the top-level template
    nested: dict[str, dict[str, Any]]  # logical id of the nested stack resource -> its template
    names: dict[str, str]  # nested logical id -> construct id (IngestionStack, KnowledgeEndpoints, ...)
    resources: Resources  # flattened
    template_files: list[Path]  # the top-level template and every nested one, as synthesized

    def templates(self) -> dict[str, dict[str, Any]]:
        """Every template by a readable name: the stack's, and each nested stack's construct id."""
        return {self.stack.stack_name: self.parent, **{self.names[k]: v for k, v in self.nested.items()}}


def synthesize(overrides: dict[str, Any]) -> Synth:
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    context.update({"citegate:skip_dependency_layer_build": True, **overrides})
    app, stack = build(context, nag=False)
    assembly = app.synth()
    parent = assembly.get_stack_artifact(stack.artifact_id).template
    nested, names = {}, {}
    files = [Path(assembly.directory) / stack.template_file]
    for construct_id, nested_stack in ((s.node.id, s) for s in stack.nested_stacks.values()):
        logical = stack.resolve(nested_stack.nested_stack_resource.logical_id)  # type: ignore[union-attr]
        files.append(Path(assembly.directory) / nested_stack.template_file)
        nested[logical] = json.loads(files[-1].read_text())
        names[logical] = construct_id
    return Synth(stack, parent, nested, names, flatten(parent, nested), files)


def flatten(parent: dict[str, Any], nested: dict[str, dict[str, Any]]) -> Resources:
    parent_resources: Resources = parent["Resources"]

    def local(scope: str | None, name: str) -> bool:
        return scope is not None and name in nested[scope]["Resources"]

    def resolve(node: Any, scope: str | None) -> Any:
        if isinstance(node, list):
            return [resolve(item, scope) for item in node]
        if not isinstance(node, dict):
            return node
        if set(node) == {"Ref"} and isinstance(node["Ref"], str):
            name = node["Ref"]
            if scope is not None and name in nested[scope].get("Parameters", {}):
                return resolve(parent_resources[scope]["Properties"]["Parameters"][name], None)
            return {"Ref": f"{scope}.{name}"} if local(scope, name) else node
        if set(node) == {"Fn::GetAtt"}:
            target, attribute = node["Fn::GetAtt"]
            if scope is None and target in nested and str(attribute).startswith("Outputs."):
                output = nested[target]["Outputs"][str(attribute).removeprefix("Outputs.")]
                return resolve(output["Value"], target)
            if local(scope, target):
                return {"Fn::GetAtt": [f"{scope}.{target}", attribute]}
            return node
        return {key: resolve(value, scope) for key, value in node.items()}

    def resource(body: dict[str, Any], scope: str | None) -> dict[str, Any]:
        out = resolve(body, scope)
        depends = body.get("DependsOn")
        if scope is not None and depends:
            names = [depends] if isinstance(depends, str) else depends
            out["DependsOn"] = [f"{scope}.{name}" for name in names]
        return dict(out)

    flat = {logical: resource(body, None) for logical, body in parent_resources.items()}
    for scope, template in nested.items():
        for logical, body in template["Resources"].items():
            flat[f"{scope}.{logical}"] = resource(body, scope)
    return flat


def text(node: Any) -> str:
    """A value as cdk-nag reads it: Fn::Join concatenated, Ref and GetAtt as <name> / <name.attr>."""
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return json.dumps([text(item) for item in node])
    if isinstance(node, dict):
        if "Fn::Join" in node:
            delimiter, items = node["Fn::Join"]
            return str(delimiter).join(text(item) for item in items)
        if "Ref" in node:
            return f"<{node['Ref']}>"
        if "Fn::GetAtt" in node:
            return f"<{node['Fn::GetAtt'][0]}.{node['Fn::GetAtt'][1]}>"
    return json.dumps(node, sort_keys=True)


def join_with_slots(node: Any) -> tuple[str, dict[str, Any]]:
    """An Fn::Join of JSON fragments as text whose tokens are slots `@@<n>@@`, and the slots."""
    if isinstance(node, str):
        return node, {}
    delimiter, items = node["Fn::Join"]
    slots: dict[str, Any] = {}
    parts = []
    for item in items:
        if isinstance(item, str):
            parts.append(item)
        else:
            key = f"@@{len(slots)}@@"
            slots[key] = item
            parts.append(key)
    return str(delimiter).join(parts), slots


def fill(value: Any, slots: dict[str, Any]) -> Any:
    """Put the tokens back into a value parsed from slotted text (a whole-string slot only)."""
    if isinstance(value, str):
        if value in slots:
            return slots[value]
        return re.sub(r"@@\d+@@", lambda m: text(slots[m.group(0)]), value)
    if isinstance(value, list):
        return [fill(item, slots) for item in value]
    if isinstance(value, dict):
        return {key: fill(item, slots) for key, item in value.items()}
    return value


def domain_access_policy(resources: Resources) -> dict[str, Any]:
    """The OpenSearch domain's access policy: its own AccessPolicies property."""
    (domain,) = [v for v in resources.values() if v["Type"] == "AWS::OpenSearchService::Domain"]
    policy: dict[str, Any] = domain["Properties"]["AccessPolicies"]
    return policy


def refs(node: Any) -> Iterator[str]:
    """The logical ids a template fragment refers to (Ref and Fn::GetAtt), anywhere inside it."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Ref" and isinstance(value, str):
                yield value
            elif key == "Fn::GetAtt":
                yield value[0]
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


def function_of(res: Resources, node: Any) -> str:
    """The logical id of the AWS::Lambda::Function a fragment calls (an integration's URI, an event
    source's FunctionName, a task's resource): every caller goes through the function's `live`
    alias (infra/constructs/endpoint_function.py), which is followed to its function."""
    for logical in refs(node):
        kind = res.get(logical, {}).get("Type")
        if kind == "AWS::Lambda::Function":
            return logical
        if kind == "AWS::Lambda::Alias":
            return function_of(res, res[logical]["Properties"]["FunctionName"])
    raise LookupError(f"no function behind {node!r}")


def alias_of(res: Resources, node: Any) -> dict[str, Any]:
    """The properties of the alias a fragment calls (LookupError: it calls no alias)."""
    for logical in refs(node):
        if res.get(logical, {}).get("Type") == "AWS::Lambda::Alias":
            properties: dict[str, Any] = res[logical]["Properties"]
            return properties
    raise LookupError(f"no alias behind {node!r}")
