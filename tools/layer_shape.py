"""The layer's shape in two numbers: the entries at the top of `layers/citegate/` and the largest
import cycle (strongly connected component of the module import graph, grimp's, which
import-linter checks the contracts on; imports under `if TYPE_CHECKING:` and inside functions count).

    uv run --frozen python tools/layer_shape.py [--members] [--rev REV]

`--rev c9c8791` measures the layer as it was at that commit (extracted with git archive into a
temporary folder; a namespace package there is given an empty __init__.py so that grimp sees it).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import grimp

LAYER = Path(__file__).resolve().parents[1] / "layers" / "citegate"


def top_level_entries(layer: Path) -> list[str]:
    return sorted(
        p.name
        for p in layer.iterdir()
        if p.name != "__pycache__" and (p.suffix == ".py" or (p.is_dir() and any(p.glob("*.py"))))
    )


def strongly_connected(graph: grimp.ImportGraph) -> list[set[str]]:
    """Tarjan's algorithm, iterative, on module -> imported module."""
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []
    counter = 0
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            recurse = False
            for j in range(i, len(edges[node])):
                nxt = edges[node][j]
                if nxt not in index:
                    work.append((node, j + 1))
                    work.append((nxt, 0))
                    recurse = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if recurse:
                continue
            if low[node] == index[node]:
                component = set()
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.add(top)
                    if top == node:
                        break
                components.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return components


def _extract(rev: str, folder: Path) -> Path:
    archive = subprocess.run(
        ["git", "archive", rev, "layers/citegate"], cwd=LAYER.parents[1], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    layer = folder / "layers" / "citegate"
    for package in layer.rglob("*"):
        if package.is_dir() and any(package.glob("*.py")) and not (package / "__init__.py").exists():
            (package / "__init__.py").touch()
            print(f"note: {package.relative_to(layer)}/ is a namespace package at {rev}: given __init__.py")
    return layer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", action="store_true", help="list the largest cycle's modules")
    parser.add_argument("--layer", type=Path, default=LAYER, help="another copy of layers/citegate")
    parser.add_argument("--rev", help="measure layers/citegate as it was at this commit")
    args = parser.parse_args(argv)
    layer: Path = args.layer.resolve()
    if args.rev:
        layer = _extract(args.rev, Path(tempfile.mkdtemp(prefix="layer-shape-")))
    # grimp sees a folder only if it has an __init__.py: a namespace package would drop out unseen.
    namespace = [
        p.name
        for p in layer.iterdir()
        if p.is_dir() and any(p.glob("*.py")) and not (p / "__init__.py").exists()
    ]
    if namespace:
        print(f"warning: namespace packages grimp does not see: {' '.join(sorted(namespace))}")
    sys.path.insert(0, str(layer.parent))
    entries = top_level_entries(layer)
    loose = [e for e in entries if e.endswith(".py")]
    print(f"top-level entries: {len(entries)} ({len(loose)} modules, {len(entries) - len(loose)} packages)")
    print("  " + " ".join(entries))
    graph = grimp.build_graph("citegate", cache_dir=None)
    cycles = sorted((c for c in strongly_connected(graph) if len(c) > 1), key=len, reverse=True)
    largest = cycles[0] if cycles else set()
    print(f"modules: {len(graph.modules)}; import cycles: {len(cycles)}; largest: {len(largest)} modules")
    if args.members and largest:
        for name in sorted(largest):
            print("  " + name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
