"""Which files a folder ingest sends: the pages readers see, not the markup copied beside them."""

from __future__ import annotations

from pathlib import Path

import pytest

from citegate.knowledge.ingest.selection import (
    SKIPPED_EXCLUDED,
    SKIPPED_NOT_INCLUDED,
    SKIPPED_SOURCE_COPY,
    SelectionError,
    select_files,
)


def _tree(root: Path, names: list[str]) -> Path:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"content of {name}")
    return root


def _names(paths: list[tuple[Path, str]]) -> list[str]:
    return [name for _, name in paths]


def test_a_sphinx_build_is_ingested_without_its_sources_folder(tmp_path: Path) -> None:
    root = _tree(
        tmp_path / "html",
        [
            "index.html",
            "library/os.html",
            "_sources/index.rst.txt",
            "_sources/library/os.rst.txt",
            "_sources/library/gone.rst.txt",  # its page was not built: the only copy of its text
            "_static/pygments.css",
        ],
    )
    selection = select_files([root])
    assert _names(selection.files) == ["_sources/library/gone.rst.txt", "index.html", "library/os.html"]
    assert selection.skipped_for(SKIPPED_SOURCE_COPY) == 2


def test_an_asciidoc_site_keeps_the_page_and_drops_the_text_it_was_built_from(tmp_path: Path) -> None:
    root = _tree(tmp_path, ["git-commit.html", "git-commit.txt", "diff-options.txt", "README.md"])
    selection = select_files([root])
    # diff-options.txt has no page of its own, README.md is no copy of anything: both stay.
    assert _names(selection.files) == ["README.md", "diff-options.txt", "git-commit.html"]
    assert selection.skipped == [("git-commit.txt", SKIPPED_SOURCE_COPY)]


def test_all_files_keeps_the_source_copies(tmp_path: Path) -> None:
    root = _tree(tmp_path, ["a.html", "a.txt", "_sources/a.rst.txt"])
    assert len(select_files([root], keep_source_copies=True).files) == 3


def test_globs_choose_by_path_with_a_slash_and_by_name_without(tmp_path: Path) -> None:
    root = _tree(tmp_path, ["guide/a.md", "guide/b.md", "api/c.md", "api/d.html", "notes.txt"])
    included = select_files([root], include=["guide/*"])
    assert _names(included.files) == ["guide/a.md", "guide/b.md"]
    assert included.skipped_for(SKIPPED_NOT_INCLUDED) == 3

    excluded = select_files([root], exclude=["*.txt", "api/*.html"])
    assert _names(excluded.files) == ["api/c.md", "guide/a.md", "guide/b.md"]
    assert excluded.skipped_for(SKIPPED_EXCLUDED) == 2


def test_hidden_files_and_unreadable_types_are_never_sent(tmp_path: Path) -> None:
    root = _tree(tmp_path, [".git/config.md", ".cache/x.html", "image.png", "page.html"])
    assert _names(select_files([root]).files) == ["page.html"]


def test_a_file_named_directly_is_always_sent_and_a_missing_path_is_an_error(tmp_path: Path) -> None:
    root = _tree(tmp_path, ["a.html", "a.txt"])
    assert _names(select_files([root / "a.txt"]).files) == ["a.txt"]
    with pytest.raises(SelectionError, match="no such file or folder"):
        select_files([tmp_path / "missing"])
