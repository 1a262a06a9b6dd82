from __future__ import annotations

import random
import string

import pytest

from citegate.knowledge.search import analysis
from citegate.knowledge.search.analysis import (
    analyze,
    flag_terms,
    index_terms,
    query_terms,
    query_text,
    tokenize,
)


def test_english_is_lowercased_split_on_non_word_characters_and_keeps_numbers() -> None:
    assert (
        analyze("Hello, World! Version 3.14 of max_length (beta)...")
        == "hello world version 3 14 of max_length beta 3.14 max length"  # identifiers after the words
    )


def test_punctuation_only_and_empty_text_give_nothing() -> None:
    assert analyze("") == ""
    assert analyze(" ...!? -- ,,, ") == ""
    assert analyze("。，、！？") == ""
    assert query_terms("?!") == []
    assert query_terms("") == []


def test_chinese_is_segmented_with_jieba() -> None:
    tokens = analyze("长城是中国古代的军事防御工程").split()
    assert {"长城", "中国", "古代", "军事", "防御", "工程"} <= set(tokens)
    assert "长城是中国古代的军事防御工程" not in tokens


def test_chinese_search_mode_emits_sub_words_of_long_words() -> None:
    tokens = analyze("中华人民共和国成立于1949年").split()
    assert {"中华人民共和国", "人民", "共和国", "1949"} <= set(tokens)


def test_mixed_scripts_and_full_width_characters() -> None:
    tokens = analyze("使用Python3编程，ＡＢＣ１２３ café").split()
    assert "python3" in tokens
    assert "abc123" in tokens  # NFKC folds full-width letters and digits
    assert "café" in tokens
    assert "编程" in tokens


def test_ascii_fast_path_matches_the_regex() -> None:
    rng = random.Random(7)
    for _ in range(500):
        text = "".join(rng.choice(string.printable) for _ in range(rng.randint(0, 60)))
        assert tokenize(text) == analysis._WORD.findall(text.lower()), text


def test_stemming_is_applied_to_index_and_query_alike() -> None:
    assert index_terms("The runner RUNS quickly") == ["the", "runner", "run", "quick"]
    assert query_terms("running") == ["run"]
    assert set(query_terms("runs")) <= set(index_terms("she runs"))


def test_query_terms_are_deduplicated_in_order() -> None:
    assert query_terms("Runs running RUN ran runs") == ["run", "ran"]
    assert query_terms("长城 长城 长城") == ["长城"]


def test_stopwords_dropped_only_when_something_else_is_left() -> None:
    assert query_terms("the runner of the year") == ["runner", "year"]
    assert query_terms("the of") == ["the", "of"]
    assert query_terms("长城的历史") == ["长城", "历史"]
    # The index keeps every token.
    assert "the" in index_terms("the runner")


@pytest.mark.parametrize(
    "text",
    [
        "Configuring the server: timeouts & retries",
        "长城是中国古代的军事防御工程",
        "Use `max_length=512` in v2.0",
    ],
)
def test_every_query_term_of_a_text_is_an_index_term_of_it(text: str) -> None:
    assert set(query_terms(text)) <= set(index_terms(text))


def test_query_syntax_is_just_text() -> None:
    assert query_terms('title:foo AND (kb_id:"other" OR *)') == ["titl", "foo", "kb_id", "other", "kb", "id"]


def test_very_long_tokens_are_dropped() -> None:
    assert index_terms("a" * 200 + " short") == ["short"]


def test_query_text_applies_the_query_rules_to_whole_words() -> None:
    # what OpenSearch is sent: stopword words and words whose terms came before are dropped
    assert query_text("The runner runs, RUNNING fast!") == "runner runs, fast!"
    assert query_text("the of") == "the of"  # nothing else left: kept, like query_terms
    assert query_text("?! ...") == "" and query_text("") == ""
    # words that stay are verbatim: the engine's own tokenizer sees "v2.0" and Chinese as written
    assert query_text("max_length=512 in v2.0") == "max_length=512 v2.0"
    assert query_text("长城的历史 and the Great Wall 长城 的") == "长城的历史 Great Wall 长城"


@pytest.mark.parametrize(
    "text", ["Runs running RUN ran runs", "the runner of the year", "v2.0 of max_length"]
)
def test_query_text_has_the_terms_of_query_terms(text: str) -> None:
    assert query_terms(query_text(text)) == query_terms(text)


def test_identifiers_are_indexed_whole_and_by_their_parts() -> None:
    """Technical documentation names things: `os.path.join`, `work_mem`, `--no-verify`,
    `getElementById`. Each is searchable exactly (its whole form) and by its parts."""
    terms = set(index_terms("Use os.path.join(); set work_mem; git commit --no-verify; getElementById"))
    assert {"os.path.join", "os", "path", "join"} <= terms
    assert {"work_mem", "work", "mem"} <= terms
    assert {"no-verifi", "verifi"} <= terms
    assert {"getelementbyid", "get", "element", "id"} <= terms
    # Words without an identifier's shape give nothing more; a sentence's final period is no joiner.
    assert analyze("PostgreSQL ends here. Next one") == "postgresql ends here next one"


def test_command_line_options_keep_their_dashes_and_their_case() -> None:
    """`-s` is an option, not the letter s; `-S` is another option; manuals write an option and its
    negation as `--[no-]verify`. Hyphenated words, numbers, ranges and list bullets are no options."""
    assert flag_terms("git shortlog -s, --summary; git log -S<string>") == ["-s", "--summary", "-^s"]
    assert flag_terms("-n, --[no-]verify") == ["-n", "--verify", "--no-verify"]
    assert flag_terms("usage: git commit [-v] [--no-color] --force-with-lease=<ref>") == [
        "-v",
        "--no-color",
        "--force-with-lease",
    ]
    assert flag_terms("pre-commit e-mail -1 2-3 a/-x\n- a bullet | --- |") == []
    assert "-^o" in query_terms("What does running python with the -O flag do?")
    assert "--no-verifi" in set(index_terms("-n, --[no-]verify")) & set(query_terms("git commit --no-verify"))


def test_a_query_naming_an_identifier_asks_for_its_whole_form() -> None:
    assert "os.path.join" in query_terms("What does os.path.join do?")
    assert {"work_mem", "work", "mem"} <= set(query_terms("default of work_mem"))
    assert set(query_terms("work mem")) <= set(index_terms("work_mem"))
