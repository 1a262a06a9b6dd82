"""Spec 003's document manager and the offline planner's query variants."""

from __future__ import annotations

from citegate.agents.documents import DocumentManager
from citegate.agents.planner import Call, OfflinePlanner, feedback_terms, keywords
from citegate.knowledge.search.base import ChunkRecord, Hit


def hit(ref: str, score: float, text: str = "text", url: str = "") -> Hit:
    chunk = ChunkRecord(
        ref_id=ref,
        kb_id="kb",
        tenant_id="t",
        document_id="doc-" + ref[-1],
        parent_id="p",
        source_name="s.md",
        text=text,
        url=url,
    )
    return Hit(chunk, score)


def test_documents_are_deduplicated_by_chunk_sorted_and_numbered() -> None:
    documents = DocumentManager()
    assert documents.add([hit("r_a", 0.4), hit("r_b", 0.9)], 1) == 2
    assert documents.add([hit("r_a", 0.7), hit("r_c", 0.1)], 2) == 1
    ranked = documents.sorted()
    assert [(f.chunk_id, f.index, f.score) for f in ranked] == [
        ("r_b", 1, 0.9),
        ("r_a", 2, 0.7),
        ("r_c", 3, 0.1),
    ]
    assert ranked[1].rounds == [1, 2]


def test_references_carry_spec_003s_fields_with_a_100_character_preview() -> None:
    documents = DocumentManager()
    documents.add([hit("r_a", 0.5, "word " * 60, url="https://x/a"), hit("r_b", 0.2)], 1)
    first, second = DocumentManager.references(documents.sorted())
    assert set(first) == {"id", "source", "content_preview", "chunk_id", "doc_id", "score", "doc_url"}
    assert len(first["content_preview"]) == 100 and first["id"] == 1
    assert "doc_url" not in second, "doc_url is optional and left out when unknown"


def test_keywords_drop_question_words_and_keep_whole_chinese_words() -> None:
    assert keywords("What are the types of attacks on large models?") == [
        "types",
        "attacks",
        "large",
        "models",
    ]
    chinese = keywords("大模型攻击有哪些类型？")
    assert "攻击" in chinese and not {"有", "哪些", "类型"} & set(chinese)


def test_feedback_terms_recur_in_the_best_passages_and_are_new() -> None:
    hits = [
        hit("r_1", 0.9, "Prompt injection and data poisoning attack models."),
        hit("r_2", 0.8, "Data poisoning corrupts training data; prompt injection hides instructions."),
    ]
    terms = feedback_terms(["attacks", "models"], hits)
    assert {"prompt", "injection", "poisoning"} & set(terms)
    assert "attacks" not in terms


def test_the_offline_planner_runs_distinct_variants_within_its_bound() -> None:
    seen: list[str] = []

    def run(call: Call) -> Call:
        seen.append(call.query)
        call.hits = [
            hit("r_1", 0.9, "Olympus Mons volcano rises 22 km; the volcano is a shield volcano on Mars.")
        ]
        call.hits.append(hit("r_2", 0.5, "A shield volcano like Olympus Mons has gentle slopes."))
        return call

    calls = list(OfflinePlanner(max_rounds=3).calls("How high is Olympus Mons?", DocumentManager(), run))
    assert len(calls) == 3 and len(set(seen)) == 3
    assert seen[0] == "high olympus mons" and seen[1] == "How high is Olympus Mons?"
    assert "volcano" in seen[2] or "shield" in seen[2]
    assert (
        len(list(OfflinePlanner(max_rounds=2).calls("How high is Olympus Mons?", DocumentManager(), run)))
        == 2
    )
