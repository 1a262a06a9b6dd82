"""Which files of a folder `citegate ingest` sends: the readable ones, minus source copies.

Documentation builds ship the pages readers see beside the markup they were built from: Sphinx
copies every page's reStructuredText into `_sources/` (`_sources/library/os.rst.txt` for
`library/os.html`), and asciidoc sites keep `git-commit.txt` beside `git-commit.html`. Ingested
together, each fact is indexed twice: the copies take half the evidence slots of a question and
answers cite a markup file instead of the page a reader opens. So a text file is skipped when the
page rendered from it is in the same selection; `keep_source_copies` keeps them.

`include` and `exclude` are glob patterns (fnmatch: `*` also crosses folders). A pattern with a
`/` matches the path relative to the folder given; one without matches the file name anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

__all__ = ["INGEST_SUFFIXES", "Selection", "SelectionError", "select_files", "select_names"]

INGEST_SUFFIXES = frozenset({".md", ".markdown", ".txt", ".text", ".pdf", ".html", ".htm"})
_PAGE_SUFFIXES = (".html", ".htm")
# Markup a page is built from, as a folder ingest meets it (only suffixes it would read count).
_SOURCE_SUFFIXES = frozenset({".txt", ".text", ".md", ".markdown"})
_SPHINX_SOURCES = "_sources"

SKIPPED_SOURCE_COPY = "source copy of a rendered page"
SKIPPED_EXCLUDED = "excluded"
SKIPPED_NOT_INCLUDED = "not included"


class SelectionError(ValueError):
    """A path that is neither a file nor a folder."""


@dataclass
class Selection:
    files: list[tuple[Path, str]] = field(default_factory=list)  # (file, source name)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (source name, why)

    def skipped_for(self, reason: str) -> int:
        return sum(1 for _, why in self.skipped if why == reason)


def _matches(name: str, patterns: Iterable[str]) -> bool:
    base = PurePosixPath(name).name
    return any(fnmatchcase(name if "/" in p else base, p.strip("/") if "/" in p else p) for p in patterns)


def _rendered_page_stems(name: str) -> list[str]:
    """The names (without suffix) a page rendered from the source file `name` would have."""
    path = PurePosixPath(name)
    stems = [str(path.with_suffix(""))]
    parts = path.parts
    if _SPHINX_SOURCES in parts:
        # _sources/<page>.rst.txt (Sphinx >= 1.5) or _sources/<page>.txt: the page is <page>.html
        # under the folder that holds _sources.
        at = parts.index(_SPHINX_SOURCES)
        inner = PurePosixPath(*parts[:at], *parts[at + 1 :]).with_suffix("")
        stems.append(str(inner.with_suffix("")) if inner.suffix else str(inner))
        stems.append(str(inner))
    return stems


def _is_source_copy(name: str, pages: frozenset[str]) -> bool:
    if PurePosixPath(name).suffix.lower() not in _SOURCE_SUFFIXES:
        return False
    return any(stem in pages for stem in _rendered_page_stems(name))


def _folder(root: Path) -> list[tuple[Path, str]]:
    found = []
    for file in sorted(root.rglob("*")):
        relative = file.relative_to(root)
        hidden = any(part.startswith(".") for part in relative.parts)
        if file.is_file() and not hidden and file.suffix.lower() in INGEST_SUFFIXES:
            found.append((file, relative.as_posix()))
    return found


def ingestible(name: str) -> bool:
    """A name a folder ingest reads: a readable suffix, no hidden part (.git/, .DS_Store)."""
    path = PurePosixPath(name)
    return path.suffix.lower() in INGEST_SUFFIXES and not any(p.startswith(".") for p in path.parts)


def select_names(
    names: Sequence[str],
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    keep_source_copies: bool = False,
) -> tuple[list[str], list[tuple[str, str]]]:
    """`select_files` on names alone (relative POSIX paths): (taken, [(name, why skipped)]).
    Sources (citegate.knowledge.sources) list a Git tree or an S3 prefix this way, unread."""
    taken: list[str] = []
    skipped: list[tuple[str, str]] = []
    candidates = []
    for name in names:
        if include and not _matches(name, include):
            skipped.append((name, SKIPPED_NOT_INCLUDED))
        elif exclude and _matches(name, exclude):
            skipped.append((name, SKIPPED_EXCLUDED))
        else:
            candidates.append(name)
    pages = frozenset(
        str(PurePosixPath(name).with_suffix(""))
        for name in candidates
        if PurePosixPath(name).suffix.lower() in _PAGE_SUFFIXES
    )
    for name in candidates:
        if not keep_source_copies and _is_source_copy(name, pages):
            skipped.append((name, SKIPPED_SOURCE_COPY))
        else:
            taken.append(name)
    return taken, skipped


def select_files(
    paths: Sequence[str | Path],
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    keep_source_copies: bool = False,
) -> Selection:
    """The files to ingest from `paths` (folders recursively, source names relative to the folder
    given; a file named directly is always taken, under its own name)."""
    selection = Selection()
    for given in paths:
        root = Path(given)
        if root.is_file():
            selection.files.append((root, root.name))
            continue
        if not root.is_dir():
            raise SelectionError(f"no such file or folder: {given}")
        files = dict((name, file) for file, name in _folder(root))
        taken, skipped = select_names(
            list(files), include=include, exclude=exclude, keep_source_copies=keep_source_copies
        )
        selection.skipped.extend(skipped)
        selection.files.extend((files[name], name) for name in taken)
    return selection
