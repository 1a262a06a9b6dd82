"""Parent/child chunking of a parsed document.

Parents are section-sized blocks (split at Markdown headings, then merged/split to 2000-4000
characters) that are shown as citation context; children are ~500-character pieces of one parent,
overlapping by ~100 characters, that are embedded and retrieved.

Offsets: every chunk satisfies ``doc.text[chunk.start:chunk.end] == chunk.text``, and its text has no
leading or trailing whitespace (the offsets are moved inwards past it). Sizes are in characters.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import NamedTuple

from citegate.knowledge.ingest.documents import ChildChunk, ChunkedDocument, ParentChunk, ParsedDocument

__all__ = [
    "DEFAULT_CHUNKING",
    "ChunkingConfig",
    "Heading",
    "chunk_document",
    "chunk_headings",
    "iter_headings",
    "slugify",
    "starts_inside_fence",
]


@dataclass(frozen=True)
class ChunkingConfig:
    """Chunk sizes in characters (a product decision: tokens differ per embedder, characters don't)."""

    child_size: int = 500
    child_overlap: int = 100
    min_parent_size: int = 2000
    max_parent_size: int = 4000

    def __post_init__(self) -> None:
        if self.child_size < 1:
            raise ValueError("child_size must be positive")
        if not 0 <= self.child_overlap < self.child_size:
            raise ValueError("child_overlap must be >= 0 and smaller than child_size")
        if not 1 <= self.min_parent_size <= self.max_parent_size:
            raise ValueError("min_parent_size must be positive and <= max_parent_size")


DEFAULT_CHUNKING = ChunkingConfig()

# A final parent shorter than min_parent_size * _TAIL_FRACTION is folded into its predecessor, which
# may then grow to max_parent_size * _TAIL_STRETCH: a tiny last parent is worse than a slightly long one.
_TAIL_FRACTION = 0.25
_TAIL_STRETCH = 1.25


# --------------------------------------------------------------------------------------------------
# Headings


class Heading(NamedTuple):
    """An ATX heading line: `start` is the offset of the line, `text` is without the `#` marks and
    without an explicit id; `anchor` is that id (`## Memory {#runtime-config-memory}`), else ""."""

    start: int
    level: int
    text: str
    anchor: str = ""


# One regex pass finds both heading lines and code-fence lines, so `#` comments in code are skipped.
_HEADING_OR_FENCE = re.compile(
    r"^ {0,3}(?:(?P<hashes>#{1,6})(?:[ \t]+(?P<text>[^\n]*))?|(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*))$",
    re.MULTILINE,
)
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
# An explicit heading id at the end of the line, as Pandoc, Docusaurus (`{#id}`) and MkDocs'
# attr_list (`{: #id }`, `{ #id .class }`) write it; HTML parsing writes element ids this way.
_HEADING_ID = re.compile(r"[ \t]*\{:?[ \t]*#([^\s{}]+)(?:[ \t]+[^{}]*)?\}[ \t]*$")


def iter_headings(text: str, *, inside_fence: bool = False) -> Iterator[Heading]:
    """Yield the Markdown ATX headings (`# ` to `###### `) of `text`, ignoring fenced code blocks.
    `inside_fence`: the text starts inside a block (a chunk cut from one, see starts_inside_fence)."""
    fence: str | None = "```" if inside_fence else None
    for match in _HEADING_OR_FENCE.finditer(text):
        hashes, title, marker, info = match.group("hashes", "text", "fence", "info")
        if fence is not None:
            # Inside a fence only a closing fence (same character, at least as long, no info) matters.
            closes = marker is not None and marker[0] == fence[0] and len(marker) >= len(fence)
            if closes and not info.strip():
                fence = None
            continue
        if marker is not None:
            if marker[0] != "`" or "`" not in info:  # a backtick "fence" with ` in it is inline code
                fence = marker
            continue
        anchor = ""
        if title and title.endswith("}") and (explicit := _HEADING_ID.search(title)):
            anchor, title = explicit.group(1), title[: explicit.start()]
        if title and title.endswith("#"):
            title = _CLOSING_HASHES.sub("", title)
        if title and (title := title.strip()):
            yield Heading(match.start(), len(hashes), title, anchor)


# A line of prose, where code has none: several words, then a sentence end (or a heading line).
_PROSE_LINE = re.compile(r"^ {0,3}#{1,6}[ \t]+\S|(?:\S+[ \t]+){3,}\S*[.!?:][\"'”’)\]]*[ \t]*$", re.MULTILINE)


def _fence_lines(text: str) -> list[re.Match[str]]:
    return [
        m
        for m in _HEADING_OR_FENCE.finditer(text)
        if m.group("fence") is not None and (m.group("fence")[0] != "`" or "`" not in m.group("info"))
    ]


def starts_inside_fence(text: str) -> bool:
    """Whether a chunk's text most likely begins inside a fenced code block.

    A child cut from a long code block, or one whose overlap reaches back into the code before its
    section, opens with code and a closing fence; read from its start, that fence would open a block
    and turn the prose after it into code (and its headings into none). With an odd number of fence
    lines, either the text starts inside a block or it ends inside one: the side before the first
    fence and the side after the last one tell which, as the one with fewer lines of prose is code.
    """
    fences = _fence_lines(text)
    if len(fences) % 2 == 0:
        return False
    head = text[: fences[0].start()]
    tail = text[fences[-1].end() :]
    return len(_PROSE_LINE.findall(head)) < len(_PROSE_LINE.findall(tail))


def chunk_headings(text: str) -> list[Heading]:
    """The headings of a chunk's text, which may start inside a code block (starts_inside_fence)."""
    return list(iter_headings(text, inside_fence=starts_inside_fence(text)))


_NOT_ASCII_SLUG = re.compile(r"[^a-z0-9 _-]")


def slugify(heading: str) -> str:
    """GitHub-style anchor: lowercase, drop punctuation, spaces to '-', keep letters of any script."""
    lowered = heading.strip().lower()
    if lowered.isascii():
        return _NOT_ASCII_SLUG.sub("", lowered).replace(" ", "-")
    out: list[str] = []
    for char in lowered:
        if char == " ":
            out.append("-")
        elif char in "-_" or unicodedata.category(char)[0] in "LNM":
            out.append(char)
    return "".join(out)


class _Section(NamedTuple):
    start: int
    heading: str
    heading_path: tuple[str, ...]
    anchor: str


def _sections(text: str) -> list[_Section]:
    """Sections start at each heading; text before the first heading is a heading-less section.

    A heading's anchor is its explicit id when it has one (the page's own element id: kept as it
    is, since that is what the page's links use), else its GitHub-style slug, made unique."""
    sections: list[_Section] = []
    stack: list[tuple[int, tuple[str, ...]]] = []  # (level, heading path down to that heading)
    headings = list(iter_headings(text))
    seen: dict[str, int] = {h.anchor: 0 for h in headings if h.anchor}  # slugs never take a real id
    for start, level, title, explicit in headings:
        if not sections and start > 0 and text[:start].strip():
            sections.append(_Section(0, "", (), ""))
        while stack and stack[-1][0] >= level:
            stack.pop()
        path = (*stack[-1][1], title) if stack else (title,)
        stack.append((level, path))
        sections.append(_Section(start, title, path, explicit or _unique(slugify(title), seen)))
    if not sections:
        sections.append(_Section(0, "", (), ""))
    return sections


def _unique(slug: str, seen: dict[str, int]) -> str:
    """Number repeated anchors like GitHub does: `setup`, `setup-1`, `setup-2`."""
    if not slug:
        return ""
    result = slug
    while result in seen:
        seen[slug] += 1
        result = f"{slug}-{seen[slug]}"
    seen[result] = 0
    return result


# --------------------------------------------------------------------------------------------------
# Cut points. Each pattern's match END is a place where a chunk may end; patterns are in order of
# preference: paragraph break, sentence end (English and Chinese), line break, word/clause boundary.

_PARAGRAPH = re.compile(r"\n[ \t]*\n")
_SENTENCE = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s)|[。！？；…]+[”’」』）)]*")
_LINE = re.compile(r"\n")
_SOFT = re.compile(r"[ \t]+|[，、,;；:：]")
_LEVELS: tuple[re.Pattern[str], ...] = (_PARAGRAPH, _SENTENCE, _LINE, _SOFT)
# Where the overlapping next child may start: right after a sentence end, else at a word or clause.
_START_LEVELS: tuple[re.Pattern[str], ...] = (_SENTENCE, _SOFT)
# How far before a window a match may begin and still end inside it (longest useful match).
_LOOKBEHIND = 64


_HEADING_START = re.compile(r" {0,3}#{1,6}[ \t]")
_MAX_HEADING_LINE = 300


def _orphans_heading(text: str, cut: int) -> bool:
    """True if the piece ending at `cut` would end with a heading line, cut off from its content."""
    end = cut
    while end > 0 and text[end - 1].isspace():
        end -= 1
    # Bounded look-back keeps this O(1) on huge single-line texts; longer lines are not headings.
    floor = max(0, end - _MAX_HEADING_LINE)
    line_start = text.rfind("\n", floor, end) + 1
    if line_start == 0 and floor > 0:
        return False
    return _HEADING_START.match(text, line_start, end) is not None


def _best_cut(text: str, lo: int, hi: int, ideal: int, levels: Sequence[re.Pattern[str]] = _LEVELS) -> int:
    """The cut in [lo, hi] of the most preferred kind, nearest to `ideal`; a hard cut if none exists."""
    for pattern in levels:
        cuts = [
            match.end()
            for match in pattern.finditer(text, max(0, lo - _LOOKBEHIND), min(len(text), hi + 1))
            if lo <= match.end() <= hi
        ]
        # Nearest first (earlier on a tie); the heading check runs only until one candidate passes.
        for cut in sorted(cuts, key=lambda cut: (abs(cut - ideal), cut)):
            if not _orphans_heading(text, cut):
                return cut
    return min(max(ideal, lo), hi)


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _even_cuts(text: str, start: int, end: int, limit: int) -> list[int]:
    """Cut points splitting [start, end) into pieces of at most `limit`, as even as boundaries allow.

    Re-planning after every cut (pieces left = ceil(rest / limit)) keeps pieces near rest / pieces and
    the window bounds keep the last piece from being a sliver.
    """
    cuts: list[int] = []
    pos = start
    while end - pos > limit:
        pieces = -(-(end - pos) // limit)
        target = (end - pos) / pieces
        slack = max(1, int(target / 2))
        lo = pos + slack
        hi = min(pos + limit, end - slack)
        cut = _best_cut(text, lo, hi, pos + round(target))
        cuts.append(cut)
        pos = cut
    return cuts


# --------------------------------------------------------------------------------------------------
# Parents


@dataclass
class _Block:
    start: int
    end: int
    section: _Section

    @property
    def size(self) -> int:
        return self.end - self.start


def _parent_blocks(text: str, sections: list[_Section], config: ChunkingConfig) -> list[_Block]:
    bounds = [s.start for s in sections[1:]] + [len(text)]

    # 1. Split oversized sections; every piece keeps its section's heading (continuations cite it too).
    pieces: list[_Block] = []
    for section, end in zip(sections, bounds, strict=True):
        start = section.start
        for cut in [*_even_cuts(text, start, end, config.max_parent_size), end]:
            pieces.append(_Block(start, cut, section))
            start = cut

    # 2. Merge forward: a block below the minimum absorbs what follows while it fits the maximum.
    low, high = config.min_parent_size, config.max_parent_size
    merged: list[_Block] = []
    for piece in pieces:
        last = merged[-1] if merged else None
        if last is not None and last.size < low and piece.end - last.start <= high:
            last.end = piece.end
        else:
            merged.append(_Block(piece.start, piece.end, piece.section))

    # 3. Merge backward: a block still below the minimum joins its predecessor if that fits.
    blocks: list[_Block] = []
    for block in merged:
        if blocks and block.size < low and block.end - blocks[-1].start <= high:
            blocks[-1].end = block.end
        else:
            blocks.append(block)

    # 4. A tiny tail (e.g. a closing line after a long section) rides along with the previous parent.
    if (
        len(blocks) > 1
        and blocks[-1].size < low * _TAIL_FRACTION
        and blocks[-1].end - blocks[-2].start <= high * _TAIL_STRETCH
    ):
        tail = blocks.pop()
        blocks[-1].end = tail.end
    return blocks


# --------------------------------------------------------------------------------------------------
# Children


def _overlap_start(text: str, lo: int, hi: int) -> int:
    """Where an overlapping child starts in [lo, hi]: right after a sentence end, else at a word or
    clause boundary (the earliest, for the most shared text), else `lo` (a language without spaces)."""
    for pattern in _START_LEVELS:
        match = pattern.search(text, lo, hi)
        if match is not None and lo <= match.end() <= hi:
            return match.end()
    return lo


def _child_spans(
    text: str, start: int, end: int, config: ChunkingConfig, lead_from: int | None = None
) -> Iterator[tuple[int, int]]:
    """Greedy windows of at most child_size inside [start, end), each overlapping the previous one.

    With `lead_from` (the start of the child before, in the previous section), the first window
    also starts up to child_overlap characters before `start`, so children overlap across section
    boundaries too. It reaches back at most as far as the section's own part of the window is long,
    so the window's middle, which names its section, stays in this section."""
    size, overlap = config.child_size, config.child_overlap
    pos, end = _trim(text, start, end)
    if pos >= end:
        return
    if lead_from is not None and overlap:
        reach = min(overlap, end - pos, size // 4)
        lo = max(lead_from + 1, pos - reach)
        # Never from inside the code block a section ends with: the child would open with code.
        if lo < pos and not _fence_lines(text[lo:pos]):
            # Between `reach` and half of it back (half of child_overlap when the reach is full).
            hi = max(lo, pos - min(overlap // 2, max(1, reach // 2)))
            pos = _trim(text, _overlap_start(text, lo, hi), end)[0]
    while pos < end:
        if end - pos <= size:
            yield pos, end
            return
        cut = _best_cut(text, pos + max(1, size // 2), pos + size, pos + size)
        piece = _trim(text, pos, cut)
        if piece[0] < piece[1]:
            yield piece
        nxt = cut
        if overlap:
            # Start the next child between `overlap` and `overlap/2` before the end of this one, so
            # the shared text is readable; measured from the piece's end without its whitespace.
            lo = max(pos + 1, piece[1] - overlap)
            nxt = _overlap_start(text, lo, max(lo, piece[1] - overlap // 2))
        pos = _trim(text, nxt, end)[0]


def _section_child_spans(
    text: str, start: int, end: int, sections: Sequence[_Section], config: ChunkingConfig
) -> Iterator[tuple[int, int]]:
    """Children of one parent, one section at a time: a child's own text (after the overlap it
    shares with the child before) is in one section, so the heading its citation names is the
    section of what it says. A section with no text of its own (a heading straight followed by a
    subheading) rides with the section after it."""
    bounds = [start] + [s.start for s in sections if start < s.start < end] + [end]
    piece_start = start
    previous: int | None = None  # start of the last child yielded in this parent
    for lo, hi in pairwise(bounds):
        body_start = text.find("\n", lo, hi)
        if hi < end and (body_start < 0 or not text[body_start:hi].strip()):
            continue  # only a heading line: joined to the next piece
        for span in _child_spans(text, piece_start, hi, config, previous):
            previous = span[0]
            yield span
        piece_start = hi


# --------------------------------------------------------------------------------------------------


def chunk_document(doc: ParsedDocument, config: ChunkingConfig = DEFAULT_CHUNKING) -> ChunkedDocument:
    """Split `doc` into parents (sections of min..max_parent_size) and overlapping children.

    Deterministic and linear in the document length. Edge cases where a parent is outside
    [min_parent_size, max_parent_size]: the document (or the only text between two large
    neighbours) is shorter than the minimum, or a tiny final piece was folded into the last parent,
    which may then reach max_parent_size * 1.25.
    """
    text = doc.text
    sections = _sections(text)
    section_starts = [section.start for section in sections]
    parents: list[ParentChunk] = []
    children: list[ChildChunk] = []
    for block in _parent_blocks(text, sections, config):
        start, end = _trim(text, block.start, block.end)
        if start == end:
            continue
        parent_index = len(parents)
        parents.append(
            ParentChunk(
                index=parent_index,
                text=text[start:end],
                start=start,
                end=end,
                heading=block.section.heading,
                heading_path=block.section.heading_path,
                anchor=block.section.anchor,
                page=doc.page_at(start),
            )
        )
        for child_start, child_end in _section_child_spans(text, start, end, sections, config):
            section = sections[bisect_right(section_starts, (child_start + child_end) // 2) - 1]
            children.append(
                ChildChunk(
                    index=len(children),
                    parent_index=parent_index,
                    text=text[child_start:child_end],
                    start=child_start,
                    end=child_end,
                    page=doc.page_at(child_start),
                    heading=section.heading,
                    heading_path=section.heading_path,
                    anchor=section.anchor,
                )
            )
    return ChunkedDocument(parents=tuple(parents), children=tuple(children))
