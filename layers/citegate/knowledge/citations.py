"""Delayed citation binding: ref ids become displayable citations only when asked for.

A ref id resolves only inside the caller's scope (the knowledge base, and the projects, paths,
versions and files its policy grants); any other ref, known or not, is reported as missing, so
resolve_refs cannot be used to read outside the scope.

One rule makes a citation out of a chunk (`citation_for`), and every path that cites uses it:
`ask`, the Answer API, the agent tools and `resolve_refs` return the same citation for the same
ref. Its `heading` is the chunk's own section (the section its middle sits in, as the chunker
assigns it).

The snippet (`passage_snippet`) is the passage's own text in whole words and whole sentences: the
text of that section inside the chunk (`own_section`, heading lines left out), whitespace
collapsed, without the piece of a sentence a chunk can start with (children overlap, and may
start inside a sentence) or end with (cut at a word), so the passage's own first sentence leads.
It is a function of the chunk alone, so the same ref always shows the same snippet. Only pieces
that no answerer quotes are left out: a first unit that starts inside a sentence (lower case or a
continuation mark) and a last unit without a sentence end that is not a list item; so a sentence
the extractive answerer quotes from `own_section` is in the snippet. `ask` adds to each citation
the answer sentences bound to it (citegate.answers.validate.answer_sentences); `excerpt` shortens
a snippet for a narrow display around them, in whole sentences.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from citegate.knowledge.ingest.chunking import chunk_headings
from citegate.knowledge.schemas.retrieval import Citation, ResolveRefsResponse
from citegate.knowledge.search.base import ChunkRecord, SearchFilter, SearchUnavailable, chunks_in
from citegate.platform.errors import SearchUnavailableError
from citegate.platform.observability import logger

if TYPE_CHECKING:
    from citegate.knowledge.ports import HasIndex

SNIPPET_CHARS = 300
# A chunk's own section is shown whole up to this length (children are at most ~500 characters), so
# a sentence quoted from it is always inside the citation's snippet.
SECTION_SNIPPET_CHARS = 700

# A unit that starts inside a sentence (the extractive answerer's rule for a passage's first unit).
_STARTS_INSIDE = re.compile(r"[a-z,;:)\]，、；：）]")
# A sentence end: . ! ? before whitespace (or the end), and Chinese 。！？；, with closing quotes.
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s|$)|[。！？；]+[\"'”’」』）)\]]*")
_TERMINAL = re.compile(r"[.!?。！？；…][\"'”’」』）)\]]*$")
# A line that starts a unit of its own: a list item, a heading, a quote.
_UNIT_LINE = re.compile(r"[ \t]*(?:[-*•#>+]|\d{1,3}[.)]\s)")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*•+]|\d{1,3}[.)])\s+")
# A leading piece longer than this is kept: an answerer may cut a long unit into quotable pieces.
MAX_LEADING_PIECE = 200


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """`text` with whitespace collapsed, at most `limit` characters: whole sentences when one ends
    past half the limit, else whole words, with "…" where it was cut."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    ends = [m.end() for m in _SENTENCE_END.finditer(text, 0, limit + 1) if m.end() > limit // 2]
    if ends:
        return text[: ends[-1]] + " …"
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit].rstrip(" ,;:") + "…"


def _leading_piece(text: str) -> int:
    """Where the passage's own text starts: past a first piece that begins inside a sentence (it
    runs to the first sentence end, across wrapped lines, but not past a blank line, a list or
    heading line, or a line ending with a colon), if that is at most MAX_LEADING_PIECE characters;
    0 when the text starts a sentence."""
    if not _STARTS_INSIDE.match(text):
        return 0
    position = 0
    while True:
        sentence = _SENTENCE_END.search(text, position)
        line_end = text.find("\n", position)
        if sentence is not None and (line_end < 0 or sentence.end() <= line_end):
            end, stop = sentence.end(), True
        elif line_end >= 0:
            line = text[text.rfind("\n", 0, line_end) + 1 : line_end]
            new_unit = (
                re.match(r"[ \t]*\n", text[line_end + 1 :]) is not None
                or line.rstrip().endswith(":")
                or _UNIT_LINE.match(text, line_end + 1) is not None
            )
            end, stop = line_end, new_unit
        else:
            end, stop = len(text), True
        if end > MAX_LEADING_PIECE:
            return 0
        if stop:
            return end
        position = line_end + 1


def _trailing_piece(text: str) -> int:
    """Where the passage's own text ends: before a last piece without a sentence end (after the
    last sentence end or line break) unless that piece belongs to a list item; len(text) when
    the text ends a sentence."""
    if _TERMINAL.search(text):
        return len(text)
    boundary = max([0, text.rfind("\n") + 1, *(m.end() for m in _SENTENCE_END.finditer(text))])
    # The unit the last line belongs to: wrapped lines join the line above, unless that is blank
    # or ends with a colon, or the line itself starts a unit (a list item, a heading).
    lines = text.split("\n")
    first = len(lines) - 1
    while (
        first > 0
        and lines[first].strip()
        and not _UNIT_LINE.match(lines[first])
        and lines[first - 1].strip()
        and not lines[first - 1].rstrip().endswith(":")
    ):
        first -= 1
    if _LIST_ITEM.match(lines[first]):
        return len(text)  # a list item needs no sentence end
    return boundary


def passage_snippet(section: str, limit: int = SECTION_SNIPPET_CHARS) -> str:
    """The passage's own text in whole sentences (module docstring); the section whole when
    leaving the pieces out would leave nothing."""
    text = section.strip()
    start = _leading_piece(text)
    end = _trailing_piece(text)
    own = text[start:end].strip() if start < end else ""
    return snippet(own or text, limit)


def _sentences(text: str) -> list[str]:
    pieces, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        pieces.append(text[start : match.end()].strip())
        start = match.end()
    if text[start:].strip():
        pieces.append(text[start:].strip())
    return [p for p in pieces if p]


def excerpt(text: str, limit: int = 240, focus: Sequence[str] = ()) -> str:
    """A snippet shortened for a narrow display, in whole sentences: from the first sentence
    holding one of `focus` (the answer sentences bound to the citation) through the last such
    one, never cut, then the next sentences while the whole stays within `limit`; "…" marks what
    was left out. Without focus (or when none is found) it starts at the snippet's start."""
    sentences = _sentences(" ".join(text.split()))
    if not sentences:
        return ""
    wanted = [" ".join(f.split()) for f in focus if f.strip()]
    hits = [i for i, s in enumerate(sentences) if any(w in s or s in w for w in wanted)]
    first, last = (hits[0], hits[-1]) if hits else (0, 0)
    chosen = sentences[first : last + 1]
    for sentence in sentences[last + 1 :]:
        if len(" ".join([*chosen, sentence])) > limit:
            break
        chosen.append(sentence)
        last += 1
    shown = " ".join(chosen)
    return ("… " if first > 0 else "") + shown + (" …" if last < len(sentences) - 1 else "")


def own_section(text: str) -> str:
    """The part of a chunk's text in the chunk's own section, without heading lines.

    The chunker gives a child the section its midpoint falls in (headings read by the same
    `iter_headings`, so `#` lines in code fences are no headings); a child can start in the
    section before (overlap, merged small sections) or run into the next one. Only the part under
    the child's own heading is returned: the section the citation names.
    """
    headings = chunk_headings(text)
    if not headings:
        return text.strip()
    middle = len(text) // 2
    before = [h for h in headings if h.start <= middle]
    if before:
        line_end = text.find("\n", before[-1].start)
        start = len(text) if line_end < 0 else line_end + 1
        later = [h for h in headings if h.start > before[-1].start]
    else:
        start, later = 0, headings
    end = later[0].start if later else len(text)
    return text[start:end].strip()


def _without_headings(text: str) -> str:
    lines = text.splitlines()
    for heading in chunk_headings(text):
        row = text.count("\n", 0, heading.start)
        lines[row] = ""
    return "\n".join(lines).strip()


def _snippet_of(text: str) -> str:
    """The chunk's own section without heading lines; a chunk whose own section is empty shows the
    rest of its text, and one of headings only their titles (never `#` marks)."""
    shown = own_section(text) or _without_headings(text)
    if not shown:
        shown = " / ".join(h.text for h in chunk_headings(text)) or text
    return passage_snippet(shown)


def citation_for(chunk: ChunkRecord) -> Citation:
    return Citation(
        ref_id=chunk.ref_id,
        kb_id=chunk.kb_id,
        source_name=chunk.source_name,
        document_id=chunk.document_id,
        parent_id=chunk.parent_id,
        page_hint=chunk.page,
        snippet=_snippet_of(chunk.text),
        title=chunk.title,
        heading=chunk.heading,
        path=chunk.path,
        url=chunk.url,
        anchor=chunk.anchor,
        project=chunk.project,
        version=chunk.version,
    )


def resolve_refs(s: HasIndex, scope: SearchFilter, ref_ids: Sequence[str]) -> ResolveRefsResponse:
    wanted = list(dict.fromkeys(ref_ids))
    try:
        chunks = chunks_in(s.index, scope, wanted)
    except SearchUnavailable as error:
        logger.warning("search index unreachable", extra={"reason": str(error)})
        raise SearchUnavailableError("the search index is unreachable") from error
    citations = [citation_for(chunks[r]) for r in wanted if r in chunks]
    found = {c.ref_id for c in citations}
    return ResolveRefsResponse(citations=citations, missing=[r for r in wanted if r not in found])
