"""The layer's shape (issue 31, docs/architecture.md): the import contracts in pyproject.toml hold,
no import cycle is left in the layer, the top of the layer holds only the composition root and the
package's face, and the handlers reach neither the local runtime nor the clients."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp
from tools.layer_shape import LAYER, strongly_connected, top_level_entries

ROOT = Path(__file__).resolve().parents[2]
DOMAINS = ("agents", "answers", "governance", "insights", "knowledge", "web")


def test_the_import_contracts_hold() -> None:
    """import-linter's contracts ([tool.importlinter] in pyproject.toml): one direction from the
    clients down to the platform, knowledge without answers or agents, no domain importing the
    composition root, the runtime or the clients."""
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint_imports), str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_no_import_cycle_in_the_layer() -> None:
    """Imports under TYPE_CHECKING and inside functions count: a Protocol a domain defines, not the
    composition root's class, is what its functions are typed with."""
    graph = grimp.build_graph("citegate", cache_dir=None)
    cycles = [sorted(c) for c in strongly_connected(graph) if len(c) > 1]
    assert cycles == []


def test_the_top_of_the_layer_is_the_root_and_the_domains() -> None:
    assert top_level_entries(LAYER) == sorted(
        ["__init__.py", "container.py", "api", "clients", "platform", "runtime", *DOMAINS]
    )
    for package in LAYER.iterdir():
        if package.is_dir() and package.name != "__pycache__":
            assert (package / "__init__.py").exists(), f"{package.name} is a namespace package"


def _citegate_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("citegate"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("citegate"))
    return found


def test_handlers_import_the_api_the_root_and_domain_functions_only() -> None:
    """A handler imports the API's plumbing, the composition root's `services` and the domain
    functions its route calls; never the local runtime, and the clients only for /mcp (the MCP
    server is its domain function)."""
    offenders = []
    for handler in sorted((ROOT / "functions").glob("*/handler.py")):
        for module in _citegate_imports(handler):
            if module.startswith("citegate.runtime") or (
                module.startswith("citegate.clients") and handler.parent.name != "mcp"
            ):
                offenders.append(f"{handler.relative_to(ROOT)}: {module}")
    assert offenders == []
