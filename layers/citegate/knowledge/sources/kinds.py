"""What a source holds now, kind by kind: its entries (a path, a cheap revision when the source
has one, and a way to read the bytes), listed without reading what the revision already tells.

A listing that cannot be finished raises SourceUnavailable: the sync then deletes nothing (a
source that did not answer is not a source whose files are gone).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import quote, urlparse

from citegate.knowledge.ingest.selection import ingestible, select_names
from citegate.knowledge.sources.model import Common, FolderSettings, GitSettings, S3Settings
from citegate.platform.errors import Forbidden, InvalidRequest

if TYPE_CHECKING:
    from citegate.platform.settings import Settings

GIT_TIMEOUT_SECONDS = 300


class SourceUnavailable(Exception):
    """The source could not be listed (whole): nothing is deleted on its account."""


@dataclass
class Entry:
    path: str  # POSIX, relative to the source's root
    read: Callable[[], bytes]  # the bytes; raises OSError/LookupError for this entry alone
    revision: str = ""  # what changes when the content does (a Git blob id, an ETag); "" if none
    url: str = ""  # the page's own address (websites)
    title: str = ""
    not_modified: bool = False  # the source said so (HTTP 304): `read` is not called
    size: int | None = None
    mime_type: str | None = None  # what the source says it is (a page's Content-Type)


@dataclass
class Listing:
    entries: Iterator[Entry]
    version: str = ""  # the metadata version the source gives (a Git ref)
    revision: str = ""  # what was listed (a Git commit), recorded on the run
    skipped: list[tuple[str, str]] = field(default_factory=list)


def page_url(settings: Common, path: str) -> str:
    """base_url + the path (its suffix dropped with strip_suffix): docs/a/b.md -> https://site/docs/a/b."""
    if not settings.base_url:
        return ""
    shown = str(PurePosixPath(path).with_suffix("")) if settings.strip_suffix else path
    return settings.base_url.rstrip("/") + "/" + quote(shown)


# -- folder --------------------------------------------------------------------------------------


def confined_folder(path: str, settings: Settings, field_name: str = "settings.path") -> Path:
    """A local folder a source may follow: the local runtime only, inside CITEGATE_LOCAL_INGEST_ROOT
    (as `file_path` ingestion is); symlinks are resolved before the check."""
    if not settings.local_runtime:
        raise Forbidden(
            "folder sources are only available on the local runtime", details={"field": field_name}
        )
    root = settings.local_ingest_root
    if root is None:
        raise Forbidden(
            "folder sources are disabled: set CITEGATE_LOCAL_INGEST_ROOT to the folder they may read",
            details={"field": field_name},
        )
    root = root.resolve()
    candidate = Path(path)
    folder = (candidate if candidate.is_absolute() else root / candidate).resolve()
    if not folder.is_relative_to(root):
        raise Forbidden(f"{field_name} must be inside {root}", details={"field": field_name})
    return folder


def folder_listing(settings: FolderSettings, config: Settings) -> Listing:
    folder = confined_folder(settings.path, config)
    if not folder.is_dir():
        raise SourceUnavailable(f"no such folder: {settings.path}")
    try:
        files = {
            file.relative_to(folder).as_posix(): file
            for file in folder.rglob("*")
            if ingestible(file.relative_to(folder).as_posix()) and file.is_file()
        }
    except OSError as error:
        raise SourceUnavailable(f"the folder cannot be listed: {error}") from error
    taken, skipped = select_names(
        sorted(files),
        include=settings.include,
        exclude=settings.exclude,
        keep_source_copies=settings.keep_source_copies,
    )

    def entries() -> Iterator[Entry]:
        for name in taken:
            file = files[name]
            # Resolved again: a link swapped in after listing must not lead out of the root.
            yield Entry(name, read=_confined_reader(file, folder), size=_size(file))

    return Listing(entries(), version=settings.version, skipped=skipped)


def _size(file: Path) -> int | None:
    try:
        return file.stat().st_size
    except OSError:
        return None


def _confined_reader(file: Path, root: Path) -> Callable[[], bytes]:
    def read() -> bytes:
        if not file.resolve().is_relative_to(root):
            raise LookupError(f"{file} leads outside the source's folder")
        return file.read_bytes()

    return read


# -- git -----------------------------------------------------------------------------------------


def _git_env(config: Settings) -> dict[str, str]:
    # ext:: and fd:: transports run commands: only these protocols are spoken (file only locally).
    allowed = "https:http:file" if config.local_runtime else "https"
    return {
        **os.environ,
        "GIT_ALLOW_PROTOCOL": allowed,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_ASKPASS": "true",
        "LC_ALL": "C",
    }


def check_git_url(url: str, config: Settings) -> None:
    """A clone URL a source may use: https anywhere; a local path or file:// only on the local
    runtime and inside CITEGATE_LOCAL_INGEST_ROOT."""
    parsed = urlparse(url)
    if parsed.scheme in ("https", "http"):
        if parsed.scheme == "http" and not config.local_runtime:
            raise InvalidRequest("settings.url must be https", details={"field": "settings.url"})
        return
    if parsed.scheme in ("", "file"):
        path = parsed.path if parsed.scheme == "file" else url
        confined_folder(path, config, "settings.url")
        return
    raise InvalidRequest(
        "settings.url must be an https:// clone URL (or, locally, a file:// URL or a path)",
        details={"field": "settings.url"},
    )


_git_locks: dict[str, threading.Lock] = {}
_git_locks_guard = threading.Lock()


def _git(repo: Path, *args: str, config: Settings, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args],
            input=stdin,
            capture_output=True,
            env=_git_env(config),
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SourceUnavailable(f"git {args[0]} failed: {error}") from error
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise SourceUnavailable(f"git {args[0]} failed: {message[-1] if message else done.returncode}")
    return done.stdout


def git_cache(config: Settings, url: str) -> Path:
    """Where a repository's objects are kept between syncs: one bare repository per clone URL."""
    return config.data_root / "sources" / "git" / hashlib.blake2b(url.encode(), digest_size=10).hexdigest()


def git_listing(settings: GitSettings, config: Settings) -> Listing:
    check_git_url(settings.url, config)
    url = settings.url
    if urlparse(url).scheme == "" and not url.startswith("/"):
        url = str(confined_folder(url, config, "settings.url"))
    repo = git_cache(config, settings.url)
    with _git_locks_guard:
        lock = _git_locks.setdefault(str(repo), threading.Lock())
    with lock:
        if not (repo / "HEAD").exists():
            repo.mkdir(parents=True, exist_ok=True)
            _git(repo, "init", "--quiet", "--bare", config=config)
        # Only the ref asked for, only its last commit: the files, not the history.
        _git(repo, "fetch", "--quiet", "--depth", "1", "--no-tags", "--", url, settings.ref, config=config)
        commit = _git(repo, "rev-parse", "FETCH_HEAD^{commit}", config=config).decode().strip()
        subdir = settings.subdir.strip("/")
        listed = _git(
            repo, "ls-tree", "-r", "-z", "--full-tree", commit, *([subdir] if subdir else []), config=config
        )
    blobs: dict[str, str] = {}
    for line in listed.split(b"\0"):
        if not line:
            continue
        meta, _, path_bytes = line.partition(b"\t")
        mode, kind, sha = meta.decode().split()
        if kind != "blob" or mode == "120000":  # submodules and symlinks are not files to read
            continue
        path = path_bytes.decode(errors="replace")
        relative = path[len(subdir) + 1 :] if subdir else path
        if ingestible(relative):
            blobs[relative] = sha
    taken, skipped = select_names(
        sorted(blobs),
        include=settings.include,
        exclude=settings.exclude,
        keep_source_copies=settings.keep_source_copies,
    )
    reader = _BlobReader(repo, config)

    def entries() -> Iterator[Entry]:
        try:
            for name in taken:
                sha = blobs[name]
                yield Entry(name, read=partial(reader.read, sha), revision=f"git:{sha}")
        finally:
            reader.close()

    version = settings.version or ("" if settings.ref == "HEAD" else settings.ref)
    return Listing(entries(), version=version, revision=commit, skipped=skipped)


class _BlobReader:
    """Blob contents through one `git cat-file --batch` process, started on the first read."""

    def __init__(self, repo: Path, config: Settings) -> None:
        self._repo, self._config = repo, config
        self._process: subprocess.Popen[bytes] | None = None

    def read(self, sha: str) -> bytes:
        if self._process is None:
            self._process = subprocess.Popen(
                ["git", "-C", str(self._repo), "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=_git_env(self._config),
            )
        stdin: IO[bytes] | None = self._process.stdin
        stdout: IO[bytes] | None = self._process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(sha.encode() + b"\n")
        stdin.flush()
        header = stdout.readline().split()
        if len(header) != 3:
            raise LookupError(f"git has no blob {sha}")
        data = stdout.read(int(header[2]))
        stdout.read(1)  # the newline after the contents
        return data

    def close(self) -> None:
        if self._process is not None:
            if self._process.stdin:
                self._process.stdin.close()
            self._process.wait(timeout=10)
            self._process = None


# -- s3 ------------------------------------------------------------------------------------------


def s3_listing(settings: S3Settings, s3: Any) -> Listing:
    prefix = settings.prefix.lstrip("/")
    objects: dict[str, dict[str, Any]] = {}
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=settings.bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                key = str(item["Key"])
                relative = key[len(prefix) :].lstrip("/")
                if relative and not key.endswith("/") and ingestible(relative):
                    objects[relative] = {
                        "key": key,
                        "etag": str(item.get("ETag", "")),
                        "size": item.get("Size"),
                    }
    except Exception as error:  # a missing bucket, no permission, S3 not answering
        raise SourceUnavailable(f"s3://{settings.bucket}/{prefix} cannot be listed: {error}") from error
    taken, skipped = select_names(
        sorted(objects),
        include=settings.include,
        exclude=settings.exclude,
        keep_source_copies=settings.keep_source_copies,
    )

    def read(key: str) -> bytes:
        try:
            return bytes(s3.get_object(Bucket=settings.bucket, Key=key)["Body"].read())
        except Exception as error:
            raise LookupError(f"s3://{settings.bucket}/{key} cannot be read: {error}") from error

    def entries() -> Iterator[Entry]:
        for name in taken:
            found = objects[name]
            yield Entry(
                name,
                read=partial(read, str(found["key"])),
                revision=f"s3:{found['etag']}",
                size=found["size"],
            )

    return Listing(entries(), version=settings.version, skipped=skipped)
