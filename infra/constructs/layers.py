"""The Lambda layers: the shared `citegate` package and the dependency layers (infra/bundling.py).

Functions get `shared + base` and, where their spec says so, the other groups of
infra/bundling.py (`bundling.groups_for`). Lambda allows 250 MB unzipped per function, code and
layers together; `layers_for` refuses a function over `bundling.FUNCTION_BUDGET`
(60% of it) or over Lambda's 5 layers.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from aws_cdk import AssetHashType, RemovalPolicy
from aws_cdk import aws_lambda as lambda_

from citegate.platform import resources
from constructs import Construct
from infra import bundling
from infra.constructs.endpoint_function import RUNTIME


class Layers(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        architecture: str,
        embedder: str,
        build_dir: Path,
        skip_dependency_build: bool,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.architecture = architecture
        self.embedder = embedder
        lambda_arch = architecture_of(architecture)

        shared_dir = bundling.build_shared_layer(build_dir / "shared")
        if skip_dependency_build:
            groups = list(bundling.layer_groups(bundling.LockGraph.load(), embedder))
            self.dependencies = bundling.build_placeholder_layers(build_dir, groups)
        else:
            self.dependencies = bundling.build_dependency_layers(
                build_dir, architecture=architecture, embedder=embedder
            )
        self.placeholder = self.dependencies.placeholder
        self.sizes = {"shared": bundling.folder_size(shared_dir), **self.dependencies.sizes}

        def layer(layer_id: str, name: str, folder: Path, description: str) -> lambda_.LayerVersion:
            return lambda_.LayerVersion(
                self,
                layer_id,
                layer_version_name=f"{resources.APP}-{stage}-{name}",
                # The folder's name is its build key (requirements, platform, recipe; or the sources'
                # digest): as the asset hash it spares CDK hashing ~300 MB of layers on every synth.
                code=lambda_.Code.from_asset(
                    str(folder), asset_hash=folder.name, asset_hash_type=AssetHashType.CUSTOM
                ),
                compatible_runtimes=[RUNTIME],
                compatible_architectures=[lambda_arch],
                description=description[:256],
                removal_policy=removal_policy,
            )

        self.shared = layer("Shared", "shared", shared_dir, "citegate: the shared package (layers/citegate)")
        self.by_group: dict[str, lambda_.LayerVersion] = {}
        for group, folder in self.dependencies.folders.items():
            self.by_group[group] = layer(
                f"Deps{''.join(part.title() for part in group.split('-'))}",
                f"deps-{group}",
                folder,
                f"citegate: {group} dependencies from uv.lock ({architecture})"
                + (" [placeholder]" if self.placeholder else ""),
            )

    def groups_for(self, extras: Sequence[str]) -> list[str]:
        return bundling.groups_for(extras, self.embedder)

    def layers_for(self, function: str, extras: Sequence[str], code_size: int) -> list[lambda_.ILayerVersion]:
        """The function's layers; the synth fails when they with its code would unzip to more than
        bundling.FUNCTION_BUDGET, or with more layers than Lambda allows."""
        total, groups = bundling.function_total(self.sizes, extras, self.embedder, code_size)
        # Placeholder layers (tests, quick synths) are too small to weigh: their count still counts.
        budget = sys.maxsize if self.placeholder else bundling.FUNCTION_BUDGET
        refused = bundling.over_budget(function, total, groups, budget)
        if refused is not None:
            raise ValueError(refused)
        return [self.shared, *(self.by_group[g] for g in groups)]


def architecture_of(name: str) -> lambda_.Architecture:
    if name == "x86_64":
        return lambda_.Architecture.X86_64
    if name == "arm64":
        return lambda_.Architecture.ARM_64
    raise ValueError(f"unknown architecture {name!r}: x86_64 or arm64")
