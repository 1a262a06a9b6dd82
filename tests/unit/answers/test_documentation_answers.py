"""Answers from the sentence that states the fact, in documentation as real manuals write it
(issue 27): a setting's default comes from the setting's own entry, "what does X do" from the
opening of X's own page, and a question about an identifier the passages never name is declined
with that identifier in the reason.

The passages are shaped like those of a real reference manual once parsed and chunked: a
configuration reference whose entries are sections headed by the setting, command pages titled
by the command.
"""

from __future__ import annotations

import re

from citegate.answers.base import Evidence
from citegate.answers.extractive import ExtractiveAnswerer, split_sentences
from citegate.answers.specific import hyphenated_names, mentions, specific_terms, unmentioned
from citegate.knowledge.citations import own_section
from citegate.knowledge.ingest.chunking import chunk_headings, starts_inside_fence

MARKER = re.compile(r"\s*\[\d+\]")

RESOURCE_PAGE = "20.4. Resource Consumption"

WORK_MEM = """### work_mem (integer)

Sets the base maximum amount of memory to be used by a query operation (such as a sort or hash
table) before writing to temporary disk files. If this value is specified without units, it is
taken as kilobytes. The default value is four megabytes (4MB)."""

HASH_MEM = """### hash_mem_multiplier (floating point)

Used to compute the maximum amount of memory that hash-based operations can use. The final limit
is determined by multiplying work_mem by hash_mem_multiplier. The default value is 2.0, which
makes hash-based operations use twice the usual work_mem base amount."""

TRUNCATE_DESCRIPTION = """## Description

TRUNCATE quickly removes all rows from a set of tables. It has the same effect as an unqualified
DELETE on each table, but since it does not actually scan the tables it is faster."""

TRUNCATE_NOTES = """## Notes

TRUNCATE will not fire any ON DELETE triggers that might exist for the tables. But it will fire
ON TRUNCATE triggers."""

DELETE_NOTES = """## Notes

TRUNCATE provides a faster mechanism to remove all rows from a table than DELETE does, and it
reclaims disk space immediately."""


def evidence(*passages: tuple[str, str, str]) -> list[Evidence]:
    """(title, heading, text) passages, numbered in retrieval order, the later ones scored lower."""
    return [
        Evidence(number=n, ref_id=f"r{n}", text=text, score=1.0 - 0.05 * n, title=title, heading=heading)
        for n, (title, heading, text) in enumerate(passages, start=1)
    ]


def test_a_settings_default_comes_from_its_own_entry_not_from_a_neighbour_that_mentions_it() -> None:
    draft = ExtractiveAnswerer().answer(
        "What is the default value of work_mem?",
        evidence(
            (RESOURCE_PAGE, "hash_mem_multiplier (floating point)", HASH_MEM),
            (RESOURCE_PAGE, "work_mem (integer)", WORK_MEM),
        ),
    )
    assert not draft.declined, draft.reason
    assert "four megabytes (4MB)" in draft.answer
    assert draft.used_refs == ("r2",)


def test_what_a_command_does_comes_from_the_opening_of_its_page_not_from_a_caveat() -> None:
    draft = ExtractiveAnswerer().answer(
        "What does TRUNCATE do?",
        evidence(
            ("TRUNCATE", "Notes", TRUNCATE_NOTES),
            ("DELETE", "Notes", DELETE_NOTES),
            ("TRUNCATE", "Description", TRUNCATE_DESCRIPTION),
        ),
    )
    assert not draft.declined, draft.reason
    first = MARKER.sub("", draft.answer).split(". ")[0]
    assert first.startswith("TRUNCATE quickly removes all rows from a set of tables")
    assert draft.used_refs[0] == "r3"


def test_an_identifier_no_passage_names_is_declined_with_it_in_the_reason() -> None:
    draft = ExtractiveAnswerer().answer(
        "What is the default value of io_combine_limit?",
        evidence(
            (RESOURCE_PAGE, "work_mem (integer)", WORK_MEM),
            (RESOURCE_PAGE, "hash_mem_multiplier (floating point)", HASH_MEM),
        ),
    )
    assert draft.declined and draft.answer == ""
    assert draft.reason is not None and "io_combine_limit" in draft.reason


def test_a_passage_without_the_identifier_asked_about_is_never_quoted() -> None:
    """Two identifiers asked about; only the passage holding both may answer."""
    draft = ExtractiveAnswerer().answer(
        "How is hash_mem_multiplier combined with work_mem?",
        evidence(
            (RESOURCE_PAGE, "work_mem (integer)", WORK_MEM),
            (RESOURCE_PAGE, "hash_mem_multiplier (floating point)", HASH_MEM),
        ),
    )
    assert not draft.declined, draft.reason
    assert draft.used_refs == ("r2",)


def test_the_specific_terms_of_a_question_are_its_identifiers_and_names() -> None:
    found = {t.text: t.identifier for t in specific_terms("Does `pg_stat_io` in Patroni use os.path.join()?")}
    assert found == {"pg_stat_io": True, "os.path.join": True, "Patroni": False}
    # The opening word and question words are no names; plain words are no identifiers.
    assert specific_terms("What is the tallest volcano on Mars?") == (
        specific_terms("What is the tallest volcano on Mars?")[0],
    )
    assert [t.text for t in specific_terms("How tall is it?")] == []
    assert [t.text for t in specific_terms("What does git commit --no-verify skip?")] == ["--no-verify"]


def test_hyphenated_names_are_checked_whole_or_written_apart() -> None:
    """`git-crypt` is a name of its own; an option already names its words (`--no-verify`); and
    "real-time computations" holds "time-computations", its words side by side."""
    names = hyphenated_names("How do I unlock a repo encrypted with git-crypt, not git --no-verify?")
    assert [t.text for t in names] == ["git-crypt"]
    assert mentions("Hooks are skipped; git-crypt filters run.", names[0])
    (apart,) = hyphenated_names("Who wrote on real time-computations?")
    assert mentions("Yamada's paper on real-time computations (1962)", apart)
    assert mentions("time computations", apart) and not mentions("time of the computations", apart)
    assert unmentioned([apart], ["a paper on computations in time"]) == [apart]


def test_a_code_block_is_never_quoted_as_the_answer() -> None:
    """A command's synopsis is code: the answer is the sentence that says what the command does."""
    page = """## Synopsis

```
REASSIGN OWNED BY { old_role | CURRENT_ROLE | CURRENT_USER } [, ...] TO new_role;
-- Here REASSIGN OWNED changes the owner of the objects of the old roles in this database.
```

REASSIGN OWNED instructs the system to change the ownership of database objects owned by any of
the old roles to the new role."""
    draft = ExtractiveAnswerer().answer(
        "What does REASSIGN OWNED do?", evidence(("REASSIGN OWNED", "Synopsis", page))
    )
    assert not draft.declined, draft.reason
    assert "```" not in draft.answer and "{ old_role" not in draft.answer
    assert "change the ownership of database objects" in draft.answer


# A child cut where the section before it ends with a code block: its text opens with the end of
# that block and its closing fence (Python's reference, "2.3.2. Soft Keywords").
STARTS_IN_CODE = """del        global     not        with
async      elif       if         or         yield
```

### 2.3.2. Soft Keywords {#soft-keywords}

Some identifiers are only reserved under specific contexts. These are known as soft keywords. The
identifiers match, case and _ can syntactically act as keywords in contexts related to the pattern
matching statement, but this distinction is done at the parser level, not when tokenizing."""


def test_a_passage_that_starts_inside_a_code_block_is_read_as_prose_after_the_block() -> None:
    assert starts_inside_fence(STARTS_IN_CODE)
    assert [h.text for h in chunk_headings(STARTS_IN_CODE)] == ["2.3.2. Soft Keywords"]
    assert own_section(STARTS_IN_CODE).startswith("Some identifiers are only reserved")
    # Read from its start, the closing fence would open a block: every sentence after it code.
    assert not starts_inside_fence("Run it:\n\n```\nmake test\n")
    draft = ExtractiveAnswerer().answer(
        "Which identifiers are soft keywords?",
        evidence(("2. Lexical analysis", "2.3.2. Soft Keywords", STARTS_IN_CODE)),
    )
    assert not draft.declined, draft.reason
    assert "match, case and _" in draft.answer
    assert "yield" not in draft.answer


def test_an_option_is_answered_from_its_own_entry_in_the_option_list() -> None:
    """A definition list writes each option as its term, then what it does: that entry answers
    "what does --x do", not a sentence elsewhere that mentions --x in passing."""
    creating = """The created pyvenv.cfg file also includes the include-system-site-packages key, set to
true if venv is run with the --system-site-packages option, false otherwise.

--clear  Delete the contents of the environment directory if it already exists, before creation.

--system-site-packages  Give the virtual environment access to the system site-packages dir."""
    draft = ExtractiveAnswerer().answer(
        "What does the --system-site-packages option of venv do?",
        evidence(("venv — Creation of virtual environments", "Creating virtual environments", creating)),
    )
    assert not draft.declined, draft.reason
    assert MARKER.sub("", draft.answer).startswith("--system-site-packages  Give the virtual environment")


def test_a_version_note_does_not_answer_what_holds_now_unless_versions_are_asked_about() -> None:
    entry = """### pickle.DEFAULT_PROTOCOL

An integer, the default protocol version used for pickling. Currently the default protocol is 4,
first introduced in Python 3.4 and incompatible with previous versions.

Changed in version 3.0: The default protocol is 3.

Changed in version 3.8: The default protocol is 4."""
    passages = evidence(("pickle — Python object serialization", "pickle.DEFAULT_PROTOCOL", entry))
    # "in Python 3.11" names the release the manual is about: no sentence has to repeat 3.11.
    now = ExtractiveAnswerer().answer("What is the default pickle protocol in Python 3.11?", passages)
    assert not now.declined, now.reason
    assert "Currently the default protocol is 4" in now.answer
    assert "Changed in version 3.0" not in now.answer
    history = ExtractiveAnswerer().answer(
        "In which version did the default pickle protocol change to 3?", passages
    )
    assert "Changed in version 3.0: The default protocol is 3." in history.answer


def test_a_question_about_the_default_is_answered_by_the_sentence_that_says_default() -> None:
    """ "When I don't pass one" asks for the default; its "don't" asks nothing negative."""
    compress = """### zlib.compress(data, /, level=-1, wbits=MAX_WBITS)

Compresses the bytes in data, returning a bytes object containing compressed data. level is an
integer from 0 to 9 or -1 controlling the level of compression; 1 is fastest and 9 is slowest.
The default value is -1 (Z_DEFAULT_COMPRESSION). Z_DEFAULT_COMPRESSION represents a default
compromise between speed and compression (currently equivalent to level 6)."""
    draft = ExtractiveAnswerer().answer(
        "Which compression level does zlib.compress use when I don't pass one?",
        evidence(("zlib — Compression compatible with gzip", "zlib.compress(data, /, level=-1)", compress)),
    )
    assert not draft.declined, draft.reason
    assert "The default value is -1 (Z_DEFAULT_COMPRESSION)." in draft.answer


def test_a_sentence_that_ends_in_a_colon_before_its_example_can_be_quoted() -> None:
    median = """### statistics.median(data)

Return the median (middle value) of numeric data, using the common "mean of middle two" method.

When the number of data points is even, the median is interpolated by taking the average of the two
middle values:

```python3
>>> median([1, 3, 5, 7])
4.0
```"""
    draft = ExtractiveAnswerer().answer(
        "How does statistics.median compute the median of an even number of values?",
        evidence(("statistics — Mathematical statistics functions", "statistics.median(data)", median)),
    )
    assert not draft.declined, draft.reason
    assert "taking the average of the two middle values:" in draft.answer
    assert ">>>" not in draft.answer


def test_a_parenthesised_default_after_an_option_is_quoted_with_it() -> None:
    options = """**-d**, **--httpd** The HTTP daemon command-line that will be executed.

**-p**, **--port** The port number to bind the httpd to.
(Default: 1234)"""
    draft = ExtractiveAnswerer().answer(
        "Which port does git instaweb bind the httpd to if I don't choose one?",
        evidence(("git-instaweb(1)", "OPTIONS", options)),
    )
    assert not draft.declined, draft.reason
    assert "The port number to bind the httpd to. (Default: 1234)" in draft.answer


def test_which_exit_code_asks_for_a_number_and_a_manual_section_is_none() -> None:
    """The sentence that states the code answers, not the one about "this code" that names none;
    "git-bisect(1)" names a manual page, not a number."""
    run = """If the script exits with this code, the current revision will be skipped (see git-bisect(1)
skip above). The special exit code 125 should be used when the current source code cannot be tested."""
    draft = ExtractiveAnswerer().answer(
        "Which exit code should my git bisect run script return for a commit that cannot be tested?",
        evidence(("git-bisect(1)", "Bisect run", run)),
    )
    assert not draft.declined, draft.reason
    assert MARKER.sub("", draft.answer).startswith("The special exit code 125")


NOTES_REF = """**core.notesRef** When showing commit messages, also show notes which are stored in the given
ref. See git-notes(1).

If the given ref does not exist, it is not an error but means that no notes should be printed. This
setting defaults to "refs/notes/commits" and can be overridden by the GIT_NOTES_REF environment
variable."""


def test_a_default_is_answered_by_the_sentence_that_states_it_not_by_a_pointer_elsewhere() -> None:
    """ "See git-notes(1)." states nothing; the condition before the default ("If the given ref does
    not exist, ...") negates nothing the question asks."""
    draft = ExtractiveAnswerer().answer(
        "Which ref does git notes use by default?", evidence(("git-config(1)", "Variables", NOTES_REF))
    )
    assert not draft.declined, draft.reason
    assert 'defaults to "refs/notes/commits"' in draft.answer
    assert "See git-notes(1)." not in draft.answer


def test_what_a_command_is_for_is_answered_from_the_opening_of_its_page() -> None:
    draft = ExtractiveAnswerer().answer(
        "What is TRUNCATE for?",
        evidence(
            ("TRUNCATE", "Notes", TRUNCATE_NOTES),
            ("TRUNCATE", "Description", TRUNCATE_DESCRIPTION),
        ),
    )
    assert not draft.declined, draft.reason
    assert "TRUNCATE quickly removes all rows from a set of tables." in draft.answer


def test_an_options_description_without_a_full_stop_is_quoted_from_under_its_heading() -> None:
    """Sphinx writes a command-line option as a heading and its description as a phrase with no
    sentence end; that phrase is the whole of the option's entry, so it may be quoted."""
    # A child chunk as the chunker cuts it: the end of the option before, then the option's entry.
    options = """Directory to start discovery (. default)

### -p, --pattern pattern {#cmdoption-unittest-discover-p}

Pattern to match test files (test*.py default)"""
    draft = ExtractiveAnswerer().answer(
        "Which file name pattern does unittest test discovery look for by default?",
        evidence(("unittest — Unit testing framework", "-p, --pattern pattern", options)),
    )
    assert not draft.declined, draft.reason
    assert "Pattern to match test files (test*.py default)" in draft.answer


def test_a_quoted_command_word_with_an_exclamation_mark_does_not_end_the_sentence() -> None:
    sentence = (
        'When the commit log message begins with "squash! …" or "fixup! …", automatically modify the '
        "todo list of rebase -i, so that the commit marked for squashing comes right after the commit "
        "to be modified."
    )
    assert split_sentences(f"{sentence} Another sentence follows!  It does.") == [
        sentence,
        "Another sentence follows!",
        "It does.",
    ]


def test_a_but_not_clause_does_not_deny_what_the_sentence_asserted_before_it() -> None:
    """The negation veto guards against a sentence that says the opposite of the question; "it runs
    when the loop ends, but not when the loop is broken" answers when the else clause runs."""
    loops = """## 4.4. break and continue Statements, and else Clauses on Loops

Loop statements may have an else clause; it is executed when the loop terminates through
exhaustion of the iterable (with for) or when the condition becomes false (with while), but not
when the loop is terminated by a break statement."""
    draft = ExtractiveAnswerer().answer(
        "When does the else clause of a for loop run?", evidence(("4. More Control Flow Tools", "", loops))
    )
    assert not draft.declined, draft.reason
    assert "exhaustion of the iterable" in draft.answer


def test_a_number_in_the_question_is_stated_by_its_word_in_the_sentence() -> None:
    queue = """### class queue.Queue(maxsize=0)

Constructor for a FIFO queue. maxsize is an integer that sets the upperbound limit on the number of
items that can be placed in the queue. Insertion will block once this size has been reached, until
queue items are consumed. If maxsize is less than or equal to zero, the queue size is infinite."""
    draft = ExtractiveAnswerer().answer(
        "What does maxsize=0 mean for a queue.Queue?",
        evidence(("queue — A synchronized queue class", "class queue.Queue(maxsize=0)", queue)),
    )
    assert not draft.declined, draft.reason
    assert "the queue size is infinite" in draft.answer


def test_an_entrys_first_sentence_is_quoted_with_the_entry_it_describes() -> None:
    """An API reference states which exception in its heading and what it is in the sentence under
    it: "Raised when ..." alone answers "which exception" with no exception at all."""
    frozen = """it is an error to specify more than one field whose type is KW_ONLY.

### exception dataclasses.FrozenInstanceError {#dataclasses.FrozenInstanceError}

Raised when an implicitly defined __setattr__() or __delattr__() is called on a dataclass which was
defined with frozen=True. It is a subclass of AttributeError."""
    draft = ExtractiveAnswerer().answer(
        "Which exception do I get when I assign to a field of a frozen dataclass?",
        evidence(("dataclasses — Data Classes", "exception dataclasses.FrozenInstanceError", frozen)),
    )
    assert not draft.declined, draft.reason
    assert MARKER.sub("", draft.answer).startswith(
        "**exception dataclasses.FrozenInstanceError** Raised when an implicitly defined __setattr__()"
    )


def test_an_entry_that_names_itself_in_its_first_sentence_is_quoted_as_it_is() -> None:
    entry = """Some text of the entry before this one, cut off by the chunker here.

### http.lowSpeedLimit, http.lowSpeedTime {#http-lowspeedlimit}

If the HTTP transfer speed is less than http.lowSpeedLimit for longer than http.lowSpeedTime
seconds, the transfer is aborted."""
    draft = ExtractiveAnswerer().answer(
        "What do http.lowSpeedLimit and http.lowSpeedTime do?",
        evidence(("git-config(1)", "http.lowSpeedLimit, http.lowSpeedTime", entry)),
    )
    assert not draft.declined, draft.reason
    assert MARKER.sub("", draft.answer).startswith("If the HTTP transfer speed is less than")


DECIMAL_PAGE = "decimal — Decimal fixed point and floating point arithmetic"


def test_an_entry_opens_with_the_identifier_in_its_case_not_with_a_word_spelled_alike() -> None:
    """`round()` is not the verb that opens decimal's "Round away from zero ..." entries."""
    rounding = """### decimal.ROUND_05UP {#decimal.ROUND_05UP}

Round away from zero if last digit after rounding towards zero would have been 0 or 5; otherwise
round towards zero."""
    half_even = """### decimal.ROUND_HALF_EVEN {#decimal.ROUND_HALF_EVEN}

Round to nearest with ties going to nearest even integer."""
    builtin = """### round(number, ndigits=None) {#round}

For the built-in types supporting round(), values are rounded to the closest multiple of 10 to the
power minus ndigits; if two multiples are equally close, rounding is done toward the even choice
(so, for example, both round(0.5) and round(-0.5) are 0, and round(1.5) is 2)."""
    draft = ExtractiveAnswerer().answer(
        "How does round() break a tie such as round(0.5)?",
        evidence(
            (DECIMAL_PAGE, "decimal.ROUND_05UP", rounding),
            ("Built-in Functions", "round(number, ndigits=None)", builtin),
            (DECIMAL_PAGE, "decimal.ROUND_HALF_EVEN", half_even),
        ),
    )
    assert not draft.declined, draft.reason
    assert MARKER.sub("", draft.answer).startswith("For the built-in types supporting round()")


CMDLINE_PAGE = "1. Command line and environment"


def test_the_entry_headed_by_the_option_asked_about_answers_in_words_of_its_own() -> None:
    """ "What does running python with the -O flag do?" shares no word with "Remove assert statements
    ...", the description under the heading `-O`; the manual's structure says it is the answer, and
    a mention of -O elsewhere ("a slight speed up when Python is run without -O") is not."""
    entry = """may be imposed to prevent the user from injecting malicious code.

New in version 3.4.

#### -O {#cmdoption-O}

Remove assert statements and any code conditional on the value of __debug__. Augment the filename
for compiled (bytecode) files by adding .opt-1 before the .pyc extension."""
    mention = """There is no resulting difference from Python code, apart from a slight speed up when
Python is run without -O."""
    lower = """#### -o {#cmdoption-o}

Write the output of the run to a file named by the flag's argument."""
    draft = ExtractiveAnswerer().answer(
        "What does running python with the -O flag do?",
        evidence(
            (CMDLINE_PAGE, "-O", entry),
            ("What's New in Python 2.3", "Other Changes and Fixes", mention),
            ("A tool", "-o", lower),
        ),
    )
    assert not draft.declined, draft.reason
    assert MARKER.sub("", draft.answer).startswith("**-O** Remove assert statements")
    assert draft.used_refs[0] == "r1"


def test_the_entry_of_the_function_asked_about_is_quoted_on_past_its_first_sentence() -> None:
    """The first sentence of `os.cpu_count()`'s entry says what it returns; the answer to "when it
    cannot tell" is its next sentence, in the same entry."""
    entry = """### os.cpu_count() {#os.cpu_count}

Return the number of CPUs in the system. Returns None if undetermined.

This number is not equivalent to the number of CPUs the current process can use."""
    draft = ExtractiveAnswerer().answer(
        "What does os.cpu_count() return when it cannot tell how many CPUs there are?",
        evidence(("os — Miscellaneous operating system interfaces", "os.cpu_count()", entry)),
    )
    assert not draft.declined, draft.reason
    assert "Returns None if undetermined." in draft.answer


def test_an_option_written_with_its_negation_is_the_entry_of_both() -> None:
    """Manuals write `--verify` and `--no-verify` as one entry, `--[no-]verify`."""
    options = """**-n**, **--[no-]verify**
By default, the pre-commit and commit-msg hooks are run. When any of --no-verify or -n is given,
these are bypassed."""
    mention = """The --no-verify option of some commands skips hooks; see each command for which."""
    draft = ExtractiveAnswerer().answer(
        "Which hooks does git commit --no-verify skip?",
        evidence(("githooks(5)", "Hooks", mention), ("git-commit(1)", "OPTIONS", options)),
    )
    assert not draft.declined, draft.reason
    assert "pre-commit and commit-msg hooks" in draft.answer
    assert draft.used_refs == ("r2",)
