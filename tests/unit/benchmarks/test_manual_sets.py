"""The labelled sets on real manuals and how their questions are scored (benchmarks/manuals).

Offline and fast: the sets' format, counts and dev/test split for every manual folder present; the
scoring of one question on hand-made responses shaped like the API's (docs/api.md); the pinned
manifest, the .deb reader used when dpkg-deb is missing, and the parsing of `citegate ingest`'s
output.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from benchmarks.manuals import fetch, report, scoring, service
from benchmarks.manuals.sets import (
    COUNTS,
    SETS,
    Question,
    load_split,
    present,
    problems,
    read_questions,
    split_ids,
)

MANUALS = present()


def test_the_held_out_postgresql_set_is_present() -> None:
    """Issue 27's bars are measured on PostgreSQL's manual: its set must travel with the project."""
    assert "postgresql" in MANUALS


@pytest.mark.parametrize("manual", MANUALS)
def test_each_set_keeps_the_shared_format(manual: str) -> None:
    """Fields, id numbering, answer lengths, pages, the split files and a README: nothing departs."""
    assert problems(manual) == []


@pytest.mark.parametrize("manual", MANUALS)
def test_each_set_has_60_answerable_30_unanswerable_10_off_topic_with_unique_ids(manual: str) -> None:
    questions = read_questions(SETS / manual / "queries.jsonl")
    assert {kind: sum(q.kind == kind for q in questions) for kind in COUNTS} == COUNTS
    assert len({q.id for q in questions}) == len(questions) == 100
    assert all(q.id.startswith(f"{manual}-{q.kind}-") for q in questions)


@pytest.mark.parametrize("manual", MANUALS)
def test_dev_and_test_follow_the_project_split_rule(manual: str) -> None:
    """Sorted ids, alternately dev and test: the two halves are disjoint and cover the set."""
    everything = sorted(q.id for q in read_questions(SETS / manual / "queries.jsonl"))
    dev = [q.id for q in load_split(manual, "dev")]
    test = [q.id for q in load_split(manual, "test")]
    assert sorted(dev) == everything[0::2]
    assert sorted(test) == everything[1::2]
    assert not set(dev) & set(test)


def test_the_split_rule_sorts_ids_as_plain_strings() -> None:
    ids = ["m-b-002", "m-a-010", "m-a-002", "m-b-001"]
    assert split_ids(ids) == {"dev": ["m-a-002", "m-b-001"], "test": ["m-a-010", "m-b-002"]}


def test_a_broken_set_is_reported(tmp_path: Path) -> None:
    """The checker finds what a hand-edited set gets wrong: counts, a missing split, an odd answer."""
    folder = tmp_path / "git"
    folder.mkdir()
    row = {
        "id": "git-answerable-001",
        "text": "What does git commit do?",
        "kind": "answerable",
        "pages": ["git-commit.html"],
        "answers": ["x"],
        "note": "",
    }
    (folder / "queries.jsonl").write_text(json.dumps(row) + "\n")
    found = problems("git", tmp_path)
    assert any(p.startswith("counts ") for p in found)
    assert any("answer 'x'" in p for p in found)
    assert any("empty text or note" in p for p in found)
    assert "no dev.jsonl" in found and "no README.md" in found


# --- scoring one question --------------------------------------------------------------------------

SHARED_BUFFERS = Question(
    id="postgresql-answerable-001",
    text="How much memory does PostgreSQL use for shared_buffers out of the box?",
    kind="answerable",
    pages=("runtime-config-resource.html",),
    answers=("128MB", "128 megabytes"),
    note="shared_buffers: The default is typically 128 megabytes (128MB)",
)
IO_COMBINE = Question(
    id="postgresql-unanswerable-001",
    text="What is the default value of io_combine_limit?",
    kind="unanswerable",
    pages=(),
    answers=(),
    note="absent: io_combine_limit",
)


def _citation(page: str, snippet: str = "…") -> dict[str, Any]:
    """A citation as /ask returns it (docs/api.md, resolve_refs' shape)."""
    return {
        "ref_id": "r_1",
        "kb_id": "postgresql",
        "source_name": page,
        "path": page,
        "heading": "20.4.1. Memory",
        "anchor": "GUC-SHARED-BUFFERS",
        "snippet": snippet,
    }


def _answer(text: str, *pages: str, confidence: str = "medium") -> dict[str, Any]:
    return {
        "answer": text,
        "used_refs": ["r_1"] * len(pages),
        "citations": [_citation(p) for p in pages],
        "no_answer": False,
        "no_answer_reason": None,
        "stats": {"confidence": confidence},
    }


DECLINED = {
    "answer": "I could not find an answer in the documents.",
    "used_refs": [],
    "citations": [],
    "no_answer": True,
    "no_answer_reason": "no passage holds io_combine_limit",
    "stats": {},
}


def test_a_right_answer_states_the_fact_and_cites_its_page() -> None:
    """Markers, case and line breaks do not matter; the answer string and the page do."""
    ask = _answer(
        "The default is typically 128\nMegabytes [1], but might be less.", "runtime-config-resource.html"
    )
    outcome = scoring.judge(SHARED_BUFFERS, ["config-setting.html", "runtime-config-resource.html"], ask)
    assert outcome.retrieved_expected and outcome.answer_text_found and outcome.cited_expected
    assert outcome.right and outcome.verdict == "right"
    assert outcome.cited[0]["page"] == "runtime-config-resource.html"


def test_the_fact_cited_from_another_page_is_not_right() -> None:
    ask = _answer("shared_buffers = 128MB [1]", "config-setting.html")
    outcome = scoring.judge(SHARED_BUFFERS, ["config-setting.html"], ask)
    assert outcome.answer_text_found and not outcome.cited_expected
    assert not outcome.right and not outcome.retrieved_expected
    assert outcome.verdict == "answer text, but no expected page cited"


def test_the_right_page_with_the_wrong_sentence_is_not_right() -> None:
    """Issue 27's failure: a sentence of the right page that mentions the setting, not its default."""
    ask = _answer(
        "On Windows, the useful range for shared_buffers is smaller [1].", "runtime-config-resource.html"
    )
    outcome = scoring.judge(SHARED_BUFFERS, ["runtime-config-resource.html"], ask)
    assert outcome.cited_expected and not outcome.answer_text_found and not outcome.right
    assert outcome.verdict == "expected page cited, answer text missing"


def test_a_citation_with_an_anchor_still_names_its_page() -> None:
    """`page.html#anchor` is the page: the section a citation links to does not change it."""
    cited = _citation("runtime-config-resource.html#GUC-SHARED-BUFFERS")
    cited["source_name"] = "runtime-config-resource.html#GUC-SHARED-BUFFERS"
    ask = {**_answer("128MB [1]"), "citations": [cited]}
    assert scoring.judge(SHARED_BUFFERS, [], ask).right


def test_a_decline_is_never_right_and_counts_as_declined() -> None:
    answerable = scoring.judge(SHARED_BUFFERS, ["runtime-config-resource.html"], DECLINED)
    assert answerable.declined and not answerable.right and answerable.verdict == "declined"
    assert answerable.retrieved_expected  # retrieval is scored apart from the answer
    unanswerable = scoring.judge(IO_COMBINE, ["runtime-config-resource.html"], DECLINED)
    assert unanswerable.declined and unanswerable.verdict == "declined"


def test_an_answered_unanswerable_question_is_not_declined() -> None:
    ask = _answer("Shell resource limits can be set with ulimit [1].", "kernel-resources.html")
    ask["stats"]["confidence"] = {"level": "low", "score": 0.46}  # the level with the scores behind it
    outcome = scoring.judge(IO_COMBINE, [], ask)
    assert not outcome.declined and outcome.verdict == "answered" and outcome.confidence == "low"


def test_a_failed_ask_is_neither_an_answer_nor_a_decline() -> None:
    outcome = scoring.judge(IO_COMBINE, [], {"error": "HTTP 503 model_unavailable"})
    assert not outcome.declined and outcome.verdict == "error"
    assert outcome.extra["error"] == "HTTP 503 model_unavailable"


def test_a_split_summary_counts_each_measure_over_its_own_kind() -> None:
    off_topic = Question("postgresql-off_topic-001", "How long to boil an egg?", "off_topic", (), (), "n/a")
    outcomes = [
        scoring.judge(
            SHARED_BUFFERS,
            ["runtime-config-resource.html"],
            _answer("128MB [1]", "runtime-config-resource.html"),
            ask_ms=100,
        ),
        scoring.judge(SHARED_BUFFERS, ["x.html"], _answer("128MB [1]", "x.html"), ask_ms=300),
        scoring.judge(IO_COMBINE, [], DECLINED, ask_ms=50),
        scoring.judge(off_topic, [], _answer("Ten minutes [1].", "x.html"), ask_ms=20),
    ]
    summary = scoring.summarise(outcomes)
    assert summary["counts"] == {
        "retrieval": 1,
        "right": 1,
        "cited_expected": 1,
        "answered_answerable": 2,
        "declined_in_domain": 1,
        "declined_off_topic": 0,
    }
    assert summary["shares"]["right"] == 0.5 and summary["shares"]["declined_off_topic"] == 0.0
    assert summary["ask_ms"] == {"p50": 50, "p95": 300}


def test_a_stored_outcome_rejudged_under_corrected_labels_moves_only_by_the_labels() -> None:
    """A label audit adds a page that also states the fact: the same stored answer becomes right,
    and re-judging under unchanged labels reproduces the stored verdict exactly."""
    from dataclasses import replace

    from benchmarks.manuals import rescore

    ask = _answer("shared_buffers = 128MB [1]", "config-setting.html")
    stored = scoring.judge(SHARED_BUFFERS, ["config-setting.html"], ask, ask_ms=80, retrieve_ms=30).to_json()
    assert rescore.rejudge(SHARED_BUFFERS, stored) == stored
    audited = replace(SHARED_BUFFERS, pages=(*SHARED_BUFFERS.pages, "config-setting.html"))
    again = rescore.rejudge(audited, stored)
    assert again["right"] and again["retrieved_expected"] and again["verdict"] == "right"
    assert (again["answer"], again["cited"]) == (stored["answer"], stored["cited"])
    with pytest.raises(ValueError, match="not postgresql-unanswerable-001"):
        rescore.rejudge(IO_COMBINE, stored)


# --- the manuals: pinned packages, the .deb reader, the ingest command's output --------------------


def test_every_manual_is_pinned_by_package_version_and_sha256() -> None:
    manuals = fetch.load_manifest()
    assert set(manuals) == {"python", "git", "postgresql"}
    for manual in manuals.values():
        assert len(manual.sha256) == 64 and int(manual.sha256, 16) >= 0
        assert manual.pool_path.startswith("pool/main/") and manual.deb_name.endswith("_all.deb")
        assert manual.html_root.startswith("usr/share/doc/") and manual.version and manual.licence


def _ar(members: dict[str, bytes]) -> bytes:
    """An ar archive as dpkg-deb writes a .deb."""
    out = io.BytesIO()
    out.write(b"!<arch>\n")
    for name, data in members.items():
        header = f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n".encode()
        out.write(header + data + (b"\n" if len(data) % 2 else b""))
    return out.getvalue()


def _deb(files: dict[str, bytes]) -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:xz") as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
    return _ar({"debian-binary": b"2.0\n", "control.tar.xz": b"", "data.tar.xz": data.getvalue()})


def test_a_deb_is_read_without_dpkg(tmp_path: Path) -> None:
    """The pure-Python reader unpacks data.tar.xz (odd-sized members included) like dpkg-deb -x."""
    deb = tmp_path / "doc_1.0_all.deb"
    deb.write_bytes(
        _deb({"usr/share/doc/x/html/index.html": b"<h1>Manual</h1>", "usr/share/doc/x/a": b"odd"})
    )
    fetch.extract_pure_python(deb, tmp_path / "tree")
    assert (tmp_path / "tree/usr/share/doc/x/html/index.html").read_bytes() == b"<h1>Manual</h1>"
    assert (tmp_path / "tree/usr/share/doc/x/a").read_bytes() == b"odd"


def test_a_download_that_is_not_the_pinned_file_is_refused(tmp_path: Path, monkeypatch: Any) -> None:
    """Whatever apt or the mirror hands over, the sha256 decides; a cached match is reused as is."""
    manual = fetch.Manual(
        name="x",
        package="x-doc",
        version="1.0",
        pool_path="pool/main/x/x/x-doc_1.0_all.deb",
        size=3,
        sha256=hashlib.sha256(b"deb").hexdigest(),
        html_root="usr/share/doc/x",
        licence="test",
    )

    def tampered(_: fetch.Manual, into: Path) -> Path:
        (into / "x-doc_1.0_all.deb").write_bytes(b"not the deb")
        return into / "x-doc_1.0_all.deb"

    monkeypatch.setattr(fetch, "_apt_download", tampered)
    with pytest.raises(fetch.FetchError, match="refusing"):
        fetch.fetch_deb(manual, tmp_path)
    (tmp_path / manual.deb_name).write_bytes(b"deb")
    assert fetch.fetch_deb(manual, tmp_path) == tmp_path / manual.deb_name


def test_the_ingest_commands_summary_and_failures_are_read() -> None:
    stdout = "ingested 612, skipped 0 (unchanged), failed 555 of 1167 file(s) into postgresql; 12001 chunks\n"
    stderr = (
        "\r[#####-----] 10/1167 files, 40 chunks sql-abort.html\n"
        "  FAILED acronyms.html: all 8 environments of ingest_embed stayed busy for 30s\n"
        "  FAILED admin.html: all 8 environments of ingest_embed stayed busy for 30s\n"
    )
    counts, failures = service.parse_ingest_output(stdout, stderr)
    assert counts == {"ingested": 612, "skipped": 0, "failed": 555, "files": 1167, "chunks": 12001}
    assert failures[0] == ("acronyms.html", "all 8 environments of ingest_embed stayed busy for 30s")
    assert service.failure_reasons(failures) == {"all N environments of ingest_embed stayed busy for Ns": 2}


def test_the_report_puts_test_first_with_the_bars_beside_it() -> None:
    outcome = scoring.judge(
        SHARED_BUFFERS, [], _answer("128MB [1]", "runtime-config-resource.html"), ask_ms=80
    )
    first = {
        "files": 1167,
        "ingested": 1167,
        "skipped": 0,
        "failed": 0,
        "chunks": 23000,
        "wall_s": 540.0,
        "chunks_per_s": 42.6,
        "exit_code": 0,
        "failures": [],
        "failure_reasons": {},
    }
    split = {"summary": scoring.summarise([outcome]), "questions": [outcome.to_json()]}
    result = {
        "package": "postgresql-doc-15",
        "version": "15.18-0+deb12u1",
        "ingest": {"first": first, "runs": [first], "runs_to_complete": 1, "kb_chunks": 23000},
        "splits": {"test": split, "dev": split},
    }
    text = report.render({"manuals": {"postgresql": result}})
    assert text.index("## Test") < text.index("## Dev")
    assert "| postgresql (held out) | 1,167 | 0 | 540 | 23,000 | 42.6 | 0/1 (0%) | 1/1 (100%) |" in text
    assert "| **bar** (issue 27) |" in text
    assert "retrieval 0% (bar 90%, short by 90%)" in text
