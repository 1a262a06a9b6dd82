"""Each manual the way the project installs anything: a pinned Debian package, checked, extracted.

`benchmarks/data/manuals/manifest.json` pins, per manual, the package, its version, the .deb's
sha256 and the HTML folder inside it. The .deb goes to `.cache/manuals/<file>` through
`apt-get download <package>=<version>` (deb.debian.org's pool URL of that exact file when apt
cannot), its sha256 is checked, and it is extracted with `dpkg-deb -x` (a pure-Python reader of
the ar archive and its data.tar.* when dpkg-deb is missing) into `.cache/manuals/<manual>/`,
which later runs reuse. `python -m benchmarks.manuals.fetch [manual ...]` does only this (CI).
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "benchmarks" / "data" / "manuals" / "manifest.json"
CACHE = ROOT / ".cache" / "manuals"
POOL = "https://deb.debian.org/debian/"
DONE = ".extracted"  # written last: a tree without it is half-extracted and is extracted again


class FetchError(Exception):
    """A manual could not be had: the message says which step failed and how to do it by hand."""


@dataclass(frozen=True)
class Manual:
    name: str
    package: str
    version: str
    pool_path: str
    size: int
    sha256: str
    html_root: str
    licence: str

    @property
    def deb_name(self) -> str:
        return self.pool_path.rsplit("/", 1)[-1]


def load_manifest(path: Path = MANIFEST) -> dict[str, Manual]:
    entries = json.loads(path.read_text(encoding="utf-8"))["manuals"]
    return {name: Manual(name=name, **entry) for name, entry in entries.items()}


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _apt_download(manual: Manual, into: Path) -> Path | None:
    """The .deb through apt (its sources, proxies and mirrors), or None when apt cannot."""
    if shutil.which("apt-get") is None:
        return None
    try:
        subprocess.run(
            ["apt-get", "download", "-q", f"{manual.package}={manual.version}"],
            cwd=into,
            check=True,
            capture_output=True,
            timeout=600,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    found = sorted(into.glob(f"{manual.package}_*.deb"))
    return found[0] if found else None


def _pool_download(manual: Manual, into: Path) -> Path:
    target = into / manual.deb_name
    url = POOL + manual.pool_path
    try:
        with urllib.request.urlopen(url, timeout=120) as response, target.open("wb") as out:
            shutil.copyfileobj(response, out)
    except OSError as error:
        raise FetchError(
            f"{manual.name}: neither `apt-get download {manual.package}={manual.version}` nor {url} "
            f"could be fetched ({error}); put {manual.deb_name} in {CACHE} by hand"
        ) from error
    return target


def fetch_deb(manual: Manual, cache: Path = CACHE) -> Path:
    """The checked .deb in `cache`, downloaded when it is not there (or not the pinned file)."""
    cache.mkdir(parents=True, exist_ok=True)
    deb = cache / manual.deb_name
    if deb.is_file() and sha256_of(deb) == manual.sha256:
        return deb
    with tempfile.TemporaryDirectory(dir=cache, prefix=".download-") as scratch:
        fetched = _apt_download(manual, Path(scratch)) or _pool_download(manual, Path(scratch))
        got = sha256_of(fetched)
        if got != manual.sha256:
            raise FetchError(
                f"{manual.name}: {fetched.name} has sha256 {got}, the manifest pins {manual.sha256} "
                f"({manual.package} {manual.version}); refusing to use it"
            )
        fetched.replace(deb)
    return deb


def _ar_members(data: bytes) -> dict[str, bytes]:
    """The members of a (System V / GNU) ar archive, the container of a .deb."""
    if not data.startswith(b"!<arch>\n"):
        raise FetchError("not an ar archive (a .deb starts with !<arch>)")
    members, offset = {}, 8
    while offset + 60 <= len(data):
        header = data[offset : offset + 60]
        name = header[:16].decode("ascii").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip())
        start = offset + 60
        members[name] = data[start : start + size]
        offset = start + size + (size % 2)  # members are 2-byte aligned
    return members


def extract_pure_python(deb: Path, into: Path) -> None:
    """`dpkg-deb -x` without dpkg: the data.tar.{xz,gz,bz2} member, unpacked safely."""
    members = _ar_members(deb.read_bytes())
    data_name = next((n for n in members if n.startswith("data.tar")), None)
    if data_name is None:
        raise FetchError(f"{deb.name}: no data.tar member")
    if data_name.endswith(".zst"):
        raise FetchError(f"{deb.name}: data.tar.zst needs dpkg-deb (Python's tarfile has no zstd)")
    with tarfile.open(fileobj=io.BytesIO(members[data_name]), mode="r:*") as archive:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4+: refuses absolute paths, .., devices
            archive.extractall(into, filter="data")
            return
        for member in archive.getmembers():
            if member.name.startswith("/") or ".." in Path(member.name).parts:
                raise FetchError(f"{deb.name}: unsafe path in data.tar: {member.name}")
        archive.extractall(into)  # every path checked above


def extract(deb: Path, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    if shutil.which("dpkg-deb"):
        try:
            subprocess.run(["dpkg-deb", "-x", str(deb), str(into)], check=True, capture_output=True)
            return
        except subprocess.CalledProcessError as error:
            raise FetchError(
                f"dpkg-deb -x {deb.name} failed: {error.stderr.decode(errors='replace')}"
            ) from error
    extract_pure_python(deb, into)


def html_root(manual: Manual, cache: Path = CACHE) -> Path:
    """The manual's HTML folder, extracted from the checked .deb (once; later runs reuse it)."""
    tree = cache / manual.name / f"{manual.package}_{manual.version.replace(':', '%3a')}"
    root = tree / manual.html_root
    if (tree / DONE).is_file() and root.is_dir():
        return root
    deb = fetch_deb(manual, cache)
    if tree.exists():
        shutil.rmtree(tree)
    extract(deb, tree)
    if not root.is_dir():
        raise FetchError(f"{deb.name} has no {manual.html_root}/ (the manifest's html_root)")
    (tree / DONE).write_text(manual.sha256 + "\n")
    return root


def main(argv: list[str] | None = None) -> int:
    """`python -m benchmarks.manuals.fetch [manual ...]`: fetch, check and extract (all by default)."""
    import sys

    manuals = load_manifest()
    names = (argv if argv is not None else sys.argv[1:]) or list(manuals)
    unknown = [n for n in names if n not in manuals]
    if unknown:
        known = ", ".join(manuals)
        print(f"unknown manual(s): {', '.join(unknown)} (the manifest has {known})", file=sys.stderr)
        return 2
    failed = 0
    for name in names:
        try:
            print(f"{name}: {html_root(manuals[name])}")
        except FetchError as error:
            print(f"{name}: {error}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
