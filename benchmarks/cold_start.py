"""Cold start: each Lambda handler's import time, and the size of each deployment package and layer.

A benchmark: it prints and saves figures, it asserts nothing (the bar is 300 ms of import per
handler, PRODUCT.md / issue 10). Each handler is imported the way the Lambda runtime does it, in a
fresh interpreter with its folder first on `sys.path`:

    cd functions/<name> && python -X importtime -c "import handler"

run `--runs` times after one warm-up (which writes the .pyc files, as the layer build precompiles
them); the figure is the median of the `handler` line's cumulative time. Beside it: the direct
imports of the handler that cost most, and the third-party packages by the self time of their
modules (where the time goes).

Sizes: each function folder as CDK packages it (no __pycache__), the shared layer as
infra/bundling.py builds it (here, into a temporary folder), the dependency layers from the cached
build under .cache/layer-build or cdk.out/.layer-build (built by `make synth` or
`python -m infra.bundling --build-dir .cache/layer-build`; or CITEGATE_LAYER_BUILD_DIR), and each
function's total of code and layers unzipped against Lambda's 250 MB limit, the streaming entries
(`<function> (stream)`, with the web adapter's layer at its allowance) included.

    uv run python benchmarks/cold_start.py [--runs 5] [--only kb_ask answer_ask] [--no-sizes]

`--as-lambda` imports each handler as Lambda does instead: the runtime's Python
(infra.bundling.runtime_python(), or `--python`), no site-packages (`-S`), and on the path only
the function's own built layers (the newest build in the layer build folders made for that
Python's version) and the shared layer's sources. `--python python3.11` with the layers built
before the move to python3.12 gives the earlier figure (both are in docs/architecture.md).

The machine may be shared: the load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from provenance import stamp

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # infra.bundling, for the layer sizes
FUNCTIONS = REPO / "functions"
BAR_MS = 300.0
LAYER_BUILD_DIRS = (
    REPO / ".cache" / "layer-build",
    REPO / "cdk.out" / ".layer-build",
    *([Path(os.environ["CITEGATE_LAYER_BUILD_DIR"])] if os.environ.get("CITEGATE_LAYER_BUILD_DIR") else []),
)
MB = 1_000_000

_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)$")


@dataclass
class ImportLine:
    module: str
    self_us: int
    cumulative_us: int
    depth: int


@dataclass
class HandlerTiming:
    function: str
    runs_ms: list[float]
    median_ms: float | None  # the bar's figure: the handler's cumulative -X importtime, wall clock
    cpu_ms: float | None  # median CPU time of the process, less a bare interpreter's
    top_imports: list[tuple[str, float]] = field(default_factory=list)  # direct imports, cumulative
    top_packages: list[tuple[str, float]] = field(default_factory=list)  # third-party, self time
    error: str | None = None


def parse_importtime(stderr: str) -> list[ImportLine]:
    lines = []
    for raw in stderr.splitlines():
        match = _LINE.match(raw)
        if match:
            self_us, cumulative_us, indent, module = match.groups()
            lines.append(ImportLine(module, int(self_us), int(cumulative_us), len(indent) // 2))
    return lines


def handler_subtree(lines: list[ImportLine], root: str = "handler") -> tuple[ImportLine, list[ImportLine]]:
    """The root's line and its descendants: importtime prints children before their parent."""
    for index, line in enumerate(lines):
        if line.module == root and line.depth == 0:
            start = index
            while start > 0 and lines[start - 1].depth > 0:
                start -= 1
            return line, lines[start:index]
    raise LookupError(f"no top-level {root!r} import in the -X importtime output")


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class LambdaLike:
    """How to import a handler as Lambda does: this interpreter, and each function's layer folders."""

    python: str
    version: str  # its major.minor
    folders: dict[str, list[str]]  # function -> its layers' `python` folders, in Lambda's order


def import_once(
    function: str | None, tree: Path = REPO, as_lambda: LambdaLike | None = None
) -> tuple[list[ImportLine], float]:
    """One fresh interpreter importing the handler (None: importing nothing); its -X importtime
    lines and the CPU milliseconds the whole process used (less sensitive to a busy machine).
    `tree`: another checkout to measure (its layers/ comes first on the path), e.g. a baseline.
    `as_lambda`: the runtime's interpreter with only the function's layers on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONPROFILEIMPORTTIME")}
    python, flags = sys.executable, ["-X", "importtime"]
    if as_lambda is not None:
        python, flags = as_lambda.python, ["-S", "-X", "importtime"]
        folders = as_lambda.folders.get(function, []) if function else []
        env = {
            "PATH": env.get("PATH", ""),
            "PYTHONPATH": os.pathsep.join([*folders, str(tree / "layers")]),
            "AWS_DEFAULT_REGION": "us-east-1",
            "POWERTOOLS_TRACE_DISABLED": "1",
            "POWERTOOLS_METRICS_DISABLED": "1",
        }
    elif tree != REPO:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree / "layers"), env.get("PYTHONPATH")]))
    cpu = _children_cpu_s()
    done = subprocess.run(
        [python, *flags, "-c", "import handler" if function else "pass"],
        cwd=tree / "functions" / function if function else REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    cpu = _children_cpu_s() - cpu
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
        raise RuntimeError(tail[0])
    return parse_importtime(done.stderr), cpu * 1000


def bare_interpreter_cpu_ms(runs: int, as_lambda: LambdaLike | None = None) -> float:
    """The CPU time of an interpreter that imports nothing, subtracted from each handler's."""
    import_once(None, as_lambda=as_lambda)
    return statistics.median(import_once(None, as_lambda=as_lambda)[1] for _ in range(runs))


def time_handler(
    function: str,
    runs: int,
    top: int,
    bare_cpu_ms: float,
    tree: Path = REPO,
    as_lambda: LambdaLike | None = None,
) -> HandlerTiming:
    try:
        import_once(function, tree, as_lambda)  # warm-up: .pyc files written, page cache filled
        samples = [import_once(function, tree, as_lambda) for _ in range(runs)]
    except (RuntimeError, LookupError, subprocess.TimeoutExpired) as error:
        return HandlerTiming(function, [], None, None, error=str(error))
    trees = [handler_subtree(lines) for lines, _ in samples]
    totals = [root.cumulative_us / 1000 for root, _ in trees]
    median = statistics.median(totals)
    cpu = statistics.median(cpu_ms for _, cpu_ms in samples) - bare_cpu_ms
    # Describe the run closest to the median.
    _, children = trees[min(range(len(trees)), key=lambda i: abs(totals[i] - median))]
    direct = sorted((c for c in children if c.depth == 1), key=lambda c: -c.cumulative_us)
    packages: dict[str, int] = {}
    for line in children:
        package = line.module.split(".")[0]
        if package not in ("citegate", "handler") and package not in sys.stdlib_module_names:
            packages[package] = packages.get(package, 0) + line.self_us
    ranked = sorted(packages.items(), key=lambda item: -item[1])
    return HandlerTiming(
        function,
        [round(t, 1) for t in totals],
        round(median, 1),
        round(cpu, 1),
        top_imports=[(c.module, round(c.cumulative_us / 1000, 1)) for c in direct[:top]],
        top_packages=[(name, round(us / 1000, 1)) for name, us in ranked[:top]],
    )


# ----------------------------------------------------------------------------- sizes


def folder_size(path: Path, skip: tuple[str, ...] = ("__pycache__",)) -> int:
    return sum(
        p.stat().st_size
        for p in path.rglob("*")
        if p.is_file() and not p.is_symlink() and not any(part in skip for part in p.parts)
    )


def expected_dependency_folders(architecture: str, embedder: str) -> dict[str, str]:
    """Dependency layer group -> the folder name infra/bundling.py gives its current build.

    The same key as `bundling.build_dependency_layers` computes (which builds when the folder is
    missing; here nothing is built or downloaded): keep the two in step."""
    from infra import bundling

    graph = bundling.LockGraph.load()
    groups = bundling.layer_groups(graph, embedder)
    # The extras some layers take from the lock (the mcp layer's), where bundling has them.
    extras = sorted(set(getattr(bundling, "LAYER_EXTRAS", {}).values()))
    requirements = [
        bundling.pinned(r)
        for r in bundling.export_requirements(extras)
        if r.name not in bundling.UNUSED_PACKAGES
    ]
    names = {}
    for group, members in groups.items():
        lines = sorted(r.line for r in requirements if r.name in members)
        names[group] = bundling.layer_key(group, lines, architecture)[1]
    return names


def dependency_layer_sizes(architecture: str, embedder: str) -> tuple[dict[str, int], dict[str, str]]:
    """Measured sizes of the built dependency layers, and for each group where it was found.

    A group not built for the current uv.lock and recipe falls back to its newest earlier build,
    marked stale (a small lock change moves a layer by a few MB at most); a group never built has no
    size."""
    sizes: dict[str, int] = {}
    where: dict[str, str] = {}
    for group, name in expected_dependency_folders(architecture, embedder).items():
        current = [d / name for d in LAYER_BUILD_DIRS if (d / name / ".citegate-layer.json").exists()]
        earlier = sorted(
            (
                p
                for d in LAYER_BUILD_DIRS
                if d.is_dir()
                for p in d.glob(f"{group}-{architecture}-*")
                if (p / ".citegate-layer.json").exists()
            ),
            key=lambda p: (p / ".citegate-layer.json").stat().st_mtime,
        )
        found = current[0] if current else (earlier[-1] if earlier else None)
        if found is None:
            where[group] = "never built here"
            continue
        sizes[group] = int(json.loads((found / ".citegate-layer.json").read_text())["size"])
        stale = "" if current else " (STALE: an earlier uv.lock or build recipe)"
        where[group] = str(found.relative_to(REPO) if found.is_relative_to(REPO) else found) + stale
    return sizes, where


def lambda_like(python: str | None, functions: list[str], architecture: str, embedder: str) -> LambdaLike:
    """Each function's dependency layer folders, as built for `python`'s version (newest build)."""
    from infra import bundling

    python = python or bundling.runtime_python()
    if python is None:
        raise SystemExit(f"--as-lambda needs python{bundling.PYTHON_VERSION} here (or --python)")
    version = bundling.python_version(python)
    if version is None:
        raise SystemExit(f"{python} does not run")
    newest: dict[str, Path] = {}
    for folder in sorted(
        (p for d in LAYER_BUILD_DIRS if d.is_dir() for p in d.glob(f"*-{architecture}-*")),
        key=lambda p: p.stat().st_mtime,
    ):
        meta = folder / ".citegate-layer.json"
        if meta.exists() and json.loads(json.loads(meta.read_text())["key"]).get("python") == version:
            newest[folder.name.rsplit(f"-{architecture}-", 1)[0]] = folder
    extras = function_layers()
    folders = {}
    for function in functions:
        groups = bundling.groups_for(extras.get(function, []), embedder)
        missing = [g for g in groups if g not in newest]
        if missing:
            raise SystemExit(f"no layer build of {missing} for Python {version}: run infra.bundling first")
        folders[function] = [str(newest[g] / "python") for g in groups]
    return LambdaLike(python, version, folders)


def shared_layer_size() -> int:
    from infra import bundling

    with tempfile.TemporaryDirectory(prefix="citegate-shared-") as tmp:
        return folder_size(bundling.build_shared_layer(Path(tmp)) / "python", skip=())


def function_layers() -> dict[str, Any]:
    """Function -> its extra dependency layers (FUNCTION_SPECS), read in a child process because
    importing the CDK constructs starts jsii (a few seconds, and not this process's business)."""
    code = (
        "import json; from infra.constructs.endpoint_function import FUNCTION_SPECS as s; "
        "from infra.constructs.streaming import stream_spec, streaming_functions as f; "
        "out = {k: list(v.layers) for k, v in s.items()}; "
        "out['__stream__'] = {n: list(stream_spec(n).layers) for n in f()}; "
        "print(json.dumps(out))"
    )
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1])
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def sizes_report(functions: list[str], architecture: str, embedder: str) -> dict[str, Any]:
    from infra import bundling

    layers, where = dependency_layer_sizes(architecture, embedder)
    layers["shared"] = shared_layer_size()
    where["shared"] = "layers/citegate (built by infra.bundling.build_shared_layer into a temp folder)"
    extras = function_layers()
    streams: dict[str, list[str]] = extras.pop("__stream__", {})
    per_function: dict[str, dict[str, Any]] = {}
    # Each function, and each streaming entry (the route's folder under the Lambda Web Adapter).
    entries = [(f, f, extras.get(f, [])) for f in functions]
    entries += [(f"{f} (stream)", f, e) for f, e in streams.items() if f in functions]
    for label, function, function_extras in entries:
        groups = ["shared", *bundling.groups_for(function_extras, embedder)]
        code = folder_size(FUNCTIONS / function)
        missing = [g for g in groups if g not in layers]
        total = None
        if not missing:
            total = code + sum(layers[g] for g in groups)
            total += bundling.adapter_allowance(groups)  # the web adapter's layer (not built here)
        stale = any("STALE" in where.get(g, "") for g in groups)
        per_function[label] = {"code_bytes": code, "layers": groups, "total_bytes": total, "stale": stale}
    return {
        "architecture": architecture,
        "embedder": embedder,
        "limit_bytes": bundling.LAMBDA_UNZIPPED_LIMIT,
        "layers": layers,
        "layer_source": where,
        "functions": per_function,
    }


# ----------------------------------------------------------------------------- report


def fmt_mb(size: int | None) -> str:
    return "n/a" if size is None else f"{size / MB:.1f} MB"


def print_timings(timings: list[HandlerTiming], load: tuple[float, ...]) -> None:
    print(f"\nImport time per handler (median ms; bar {BAR_MS:.0f} ms); load average {load}")
    print("CPU: the process's CPU time less a bare interpreter's (steadier than wall time under load)")
    print(
        "| function | median ms | CPU ms | runs | bar | heaviest direct imports (cumulative ms) "
        "| packages (self ms) |"
    )
    print("|---|---:|---:|---|---|---|---|")
    for t in timings:
        if t.error or t.median_ms is None or t.cpu_ms is None:
            print(f"| {t.function} | error | | | | {t.error} | |")
            continue
        ok = "ok" if t.median_ms <= BAR_MS else f"+{t.median_ms - BAR_MS:.0f}"
        direct = ", ".join(f"{m} {ms:.0f}" for m, ms in t.top_imports)
        packages = ", ".join(f"{p} {ms:.0f}" for p, ms in t.top_packages)
        runs = "/".join(f"{r:.0f}" for r in t.runs_ms)
        figures = f"{t.median_ms:.0f} | {t.cpu_ms:.0f} | {runs} | {ok}"
        print(f"| {t.function} | {figures} | {direct} | {packages} |")


def print_sizes(sizes: dict[str, Any]) -> None:
    print(f"\nLayers, unzipped ({sizes['architecture']}, embedder {sizes['embedder']}):")
    for group in sorted(sizes["layer_source"]):
        print(f"  {group:16s} {fmt_mb(sizes['layers'].get(group)):>10s}  {sizes['layer_source'][group]}")
    if any(g not in sizes["layers"] or "STALE" in sizes["layer_source"][g] for g in sizes["layer_source"]):
        print(
            "  (to build the missing or stale ones: `make synth`, or "
            "`uv run --frozen --group infra python -m infra.bundling --build-dir .cache/layer-build`)"
        )
    limit = sizes["limit_bytes"]
    print(f"\nDeployment packages: function code + its layers, unzipped (limit {fmt_mb(limit)})")
    print("| function | code | layers | total | share of limit |")
    print("|---|---:|---|---:|---:|")
    for function, entry in sizes["functions"].items():
        total = entry["total_bytes"]
        share = "n/a" if total is None else f"{100 * total / limit:.0f}%"
        code_kb = f"{entry['code_bytes'] / 1000:.1f} kB"
        shown = ("~" if entry["stale"] and total is not None else "") + fmt_mb(total)
        print(f"| {function} | {code_kb} | {' + '.join(entry['layers'])} | {shown} | {share} |")
    if any(entry["stale"] for entry in sizes["functions"].values()):
        print("~: includes a stale layer build (see above)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="timed imports per handler (after a warm-up)")
    parser.add_argument("--only", nargs="*", default=None, help="these functions only")
    parser.add_argument("--top", type=int, default=4, help="imports and packages listed per handler")
    parser.add_argument("--no-sizes", action="store_true", help="import times only")
    parser.add_argument("--architecture", default="x86_64", choices=("x86_64", "arm64"))
    parser.add_argument("--embedder", default="use")
    parser.add_argument("--tree", type=Path, default=REPO, help="measure another checkout's handlers")
    parser.add_argument("--out", type=Path, default=REPO / "bench-results" / "cold_start.json")
    parser.add_argument(
        "--as-lambda", action="store_true", help="the runtime's Python with only the built layers"
    )
    parser.add_argument("--python", default=None, help="with --as-lambda: this interpreter")
    args = parser.parse_args(argv)

    tree = args.tree.resolve()
    functions = sorted(p.parent.name for p in (tree / "functions").glob("*/handler.py"))
    if args.only:
        unknown = set(args.only) - set(functions)
        if unknown:
            parser.error(f"no handler for {sorted(unknown)}")
        functions = [f for f in functions if f in args.only]

    as_lambda = (
        lambda_like(args.python, functions, args.architecture, args.embedder) if args.as_lambda else None
    )
    load_before = os.getloadavg()
    bare_cpu = bare_interpreter_cpu_ms(args.runs, as_lambda)
    timings = []
    for function in functions:
        timing = time_handler(function, args.runs, args.top, bare_cpu, tree, as_lambda)
        timings.append(timing)
        shown = timing.error or f"{timing.median_ms:.0f} ms (CPU {timing.cpu_ms:.0f} ms)"
        print(f"  {function:32s} {shown}", file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    load = tuple(round(max(a, b), 2) for a, b in zip(load_before, load_after, strict=True))
    print_timings(timings, load)
    # Sizes are this checkout's (the layer build reads this uv.lock and layers/citegate).
    measure_sizes = not args.no_sizes and tree == REPO
    sizes = sizes_report(functions, args.architecture, args.embedder) if measure_sizes else None
    if sizes is not None:
        print_sizes(sizes)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                **stamp(),
                "bar_ms": BAR_MS,
                "runs": args.runs,
                "python": as_lambda.version if as_lambda else sys.version.split()[0],
                "as_lambda": as_lambda is not None,
                "load_average": load,
                "command": (
                    "cd functions/<name> && PYTHONPATH=<its layers>:layers python -S -X importtime "
                    "-c 'import handler'"
                    if as_lambda
                    else "cd functions/<name> && python -X importtime -c 'import handler'"
                ),
                "handlers": [asdict(t) for t in timings],
                "sizes": sizes,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nsaved {args.out.relative_to(REPO) if args.out.is_relative_to(REPO) else args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
