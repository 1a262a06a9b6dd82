"""The evaluation sets travel with the project: `make eval` and `make bench` need nothing beside a clone.

The three sets live in benchmarks/data (licences and provenance in its README); large files are
gzipped and read transparently. No project file may read the folder they were first copied from.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
from pathlib import Path

import pytest

from citegate.clients.evaluation.dataset import load_dataset, read_jsonl

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "benchmarks" / "data"
# Folders that are not the project's own files (environments, caches, build output, git).
SKIP = {".git", ".venv", ".cache", "cdk.out", "bench-results", "eval-results", "node_modules", "__pycache__"}
CODE = {".py", ".sh", ".toml", ".cfg", ".ini", ".json", ".yml", ".yaml", ".ts", ".js", ""}
# A path into the sibling folder the data came from, spelled as a string or as pathlib parts.
OUTSIDE = re.compile(r"\.\./shared\b|/work/shared\b|[\"']shared[\"']\s*/\s*[\"']data[\"']")


def _project_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return [
        ROOT / name for name in listed if not SKIP.intersection(Path(name).parts) and (ROOT / name).is_file()
    ]


def test_no_project_file_reads_outside_the_clone() -> None:
    """Code, Makefile and CI may only read data inside the repository (docs prose may name the origin)."""
    this = Path(__file__).resolve()
    offenders = []
    for path in _project_files():
        if path.resolve() == this or (path.suffix not in CODE and path.name != "Makefile"):
            continue
        if path.parts[-2:-1] == ("data",) and path.suffix in {".json", ".jsonl"}:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        offenders += [
            f"{path.relative_to(ROOT)}:{n}"
            for n, line in enumerate(text.splitlines(), 1)
            if OUTSIDE.search(line)
        ]
    assert offenders == []


def test_the_pattern_catches_what_it_must() -> None:
    for line in (
        'DATA = Path("/work/shared/data")',
        'ROOT.parent / "shared" / "data"',
        "cat ../shared/data/x",
    ):
        assert OUTSIDE.search(line), line
    assert not OUTSIDE.search('layers["shared"] = shared_layer_size()')


# (corpus passages, dev queries, test queries, unanswerable in dev, unanswerable in test), as in the README
COUNTS = {
    "scifact": (5183, 150, 150, 0, 0),
    "cmrc2018": (1104, 200, 200, 0, 0),
    "squad2_dev": (1204, 250, 250, 134, 116),
}


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_each_set_loads_from_the_clone_with_the_documented_counts(name: str) -> None:
    ds = load_dataset(DATA / name)
    passages, dev, test, dev_impossible, test_impossible = COUNTS[name]
    assert (len(ds.passages), len(ds.dev), len(ds.test)) == (passages, dev, test)
    assert sum(q.impossible for q in ds.dev) == dev_impossible
    assert sum(q.impossible for q in ds.test) == test_impossible
    # every answerable query has a gold passage that is in the corpus
    for q in ds.dev + ds.test:
        assert q.impossible or (q.gold and q.gold <= ds.passages.keys()), q.id


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_the_split_rule_holds(name: str) -> None:
    """Query ids sorted as strings, alternately dev (even index) and test (odd): test never tunes."""
    ids = sorted(str(r["id"]) for r in read_jsonl(DATA / name / "queries.jsonl"))
    assert [str(r["id"]) for r in read_jsonl(DATA / name / "dev.jsonl")] == ids[0::2]
    assert [str(r["id"]) for r in read_jsonl(DATA / name / "test.jsonl")] == ids[1::2]


def test_readme_states_licences_and_the_split_rule() -> None:
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    for needed in ("CC BY-NC 2.0", "CC BY-SA 4.0", "ODC-By", "dev", "test", "sha1(query_id)"):
        assert needed in readme, needed


def test_read_jsonl_reads_the_gzipped_twin(tmp_path: Path) -> None:
    rows = [{"id": "1", "title": "T", "text": "héllo"}, {"id": "2", "title": "", "text": "世界"}]
    with gzip.open(tmp_path / "corpus.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n\n")
    assert read_jsonl(tmp_path / "corpus.jsonl") == rows
    assert read_jsonl(tmp_path / "corpus.jsonl.gz") == rows
    # a plain file beside it wins: a user's uncompressed set is read as it is
    (tmp_path / "corpus.jsonl").write_text(json.dumps(rows[0]) + "\n", encoding="utf-8")
    assert read_jsonl(tmp_path / "corpus.jsonl") == rows[:1]
