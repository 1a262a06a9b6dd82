"""Turn uploaded bytes (Markdown, plain text, HTML, PDF; English or Chinese) into a ParsedDocument.

The output text is Markdown-like whatever the source: headings are `#` lines and paragraphs are
separated by blank lines, so chunking can treat every format alike. A heading may end with the id
its page gives it (`## Memory {#runtime-config-memory}`), which chunking makes the anchor its
citations link to. PDFs also record which characters came from which page, so citations can name
the page.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from html import unescape
from typing import Any, Literal

from citegate.knowledge.ingest.chunking import iter_headings
from citegate.knowledge.ingest.documents import PageSpan, ParsedDocument

__all__ = [
    "SUPPORTED_MIME_TYPES",
    "ParseError",
    "ParseErrorCode",
    "detect_mime_type",
    "parse_document",
]

log = logging.getLogger(__name__)

MARKDOWN = "text/markdown"
PLAIN = "text/plain"
HTML = "text/html"
PDF = "application/pdf"

SUPPORTED_MIME_TYPES: frozenset[str] = frozenset({MARKDOWN, PLAIN, HTML, PDF})

_MIME_ALIASES: dict[str, str] = {
    "text/x-markdown": MARKDOWN,
    "application/xhtml+xml": HTML,
}
# Types that say nothing about the content: fall through to the file name and the bytes.
_GENERIC_MIME_TYPES = frozenset(
    {"", "application/octet-stream", "binary/octet-stream", "application/unknown"}
)
_EXTENSIONS: dict[str, str] = {
    ".md": MARKDOWN,
    ".markdown": MARKDOWN,
    ".mdx": MARKDOWN,  # Docusaurus' Markdown with JSX: its imports and components are rewritten
    ".pdf": PDF,
    ".txt": PLAIN,
    ".text": PLAIN,
    ".html": HTML,
    ".htm": HTML,
    ".xhtml": HTML,
}

ParseErrorCode = Literal["unsupported_media_type", "empty_document", "corrupt_document", "invalid_encoding"]


class ParseError(Exception):
    """A document that cannot be ingested; `code` is stable for API clients, the message is for people."""

    def __init__(self, code: ParseErrorCode, message: str) -> None:
        super().__init__(message)
        self.code: ParseErrorCode = code
        self.message = message


# --------------------------------------------------------------------------------------------------
# Type detection


def _split_content_type(mime_type: str | None) -> tuple[str, str | None]:
    """`text/markdown; charset=UTF-8` -> ("text/markdown", "UTF-8")."""
    if not mime_type:
        return "", None
    base, _, params = mime_type.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip("\"'")
    return base.strip().lower(), charset


def _file_name(source_name: str) -> str:
    """Last path segment of a file name, S3 key or URL, without query or fragment."""
    name = source_name.split("?", 1)[0].split("#", 1)[0]
    return re.split(r"[/\\]", name)[-1]


def _extension(source_name: str) -> str:
    name = _file_name(source_name)
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def _stem(source_name: str) -> str:
    name = _file_name(source_name)
    dot = name.rfind(".")
    return (name[:dot] if dot > 0 else name).strip() or source_name.strip()


def _looks_like_text(data: bytes) -> bool:
    """No NULs and almost no control bytes in the head, and it decodes: text, not a binary format."""
    head = data[:8192]
    if b"\x00" in head:
        return False
    controls = sum(1 for byte in head if byte < 0x20 and byte not in b"\t\n\r\f\v\x1b")
    if controls > len(head) // 100:
        return False
    for encoding in ("utf-8", "gb18030"):
        try:
            # A multi-byte character may be cut at the end of the head; the decoder tolerates that.
            codecs.getincrementaldecoder(encoding)().decode(head, final=False)
        except UnicodeDecodeError:
            continue
        return True
    return False


def detect_mime_type(data: bytes, mime_type: str | None, source_name: str) -> str:
    """The canonical supported type of the upload: declared type, else file extension, else the bytes.

    Raises ParseError("unsupported_media_type") for anything else (images, Office files, binaries).
    """
    declared, _ = _split_content_type(mime_type)
    declared = _MIME_ALIASES.get(declared, declared)
    by_extension = _EXTENSIONS.get(_extension(source_name))
    if declared == PLAIN and by_extension == MARKDOWN:
        return MARKDOWN  # many clients label .md uploads text/plain; Markdown is the richer reading
    if declared in SUPPORTED_MIME_TYPES:
        return declared
    if declared not in _GENERIC_MIME_TYPES:
        raise ParseError("unsupported_media_type", f"the media type {declared!r} is not supported")

    if by_extension is not None:
        return by_extension

    head = data[:1024]
    if b"%PDF-" in head:  # the PDF spec allows junk before the header
        return PDF
    sniff = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if sniff.startswith((b"<!doctype html", b"<html")) or b"<html" in sniff[:512]:
        return HTML
    if _looks_like_text(data):
        return PLAIN
    raise ParseError(
        "unsupported_media_type",
        f"{_file_name(source_name) or 'the file'} is not Markdown, plain text, HTML or PDF",
    )


# --------------------------------------------------------------------------------------------------
# Text decoding

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE, whose BOM is its prefix
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# GB2312 and GBK are subsets of GB18030: decode declared Chinese charsets with the superset.
_CHARSET_ALIASES = {"gb2312": "gb18030", "gbk": "gb18030", "x-gbk": "gb18030", "cp936": "gb18030"}


def _decode(data: bytes, declared: str | None = None) -> str:
    """BOM, then UTF-8, then the declared charset, then GB18030 (Chinese files saved on Windows)."""
    candidates: list[str] = [codec for bom, codec in _BOMS if data.startswith(bom)][:1]
    candidates.append("utf-8")
    if declared:
        name = _CHARSET_ALIASES.get(declared.lower(), declared)
        with contextlib.suppress(LookupError):  # an unknown charset label is just ignored
            candidates.append(codecs.lookup(name).name)
    candidates.append("gb18030")
    for encoding in dict.fromkeys(candidates):
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        if _mostly_controls(text):
            break  # decoded, but to garbage: a binary file with a text name
        return text.removeprefix("\ufeff")
    raise ParseError("invalid_encoding", "the text is not valid UTF-8 or GB18030 (Chinese) text")


def _mostly_controls(text: str) -> bool:
    sample = text[:8192]
    controls = sum(1 for char in sample if char < " " and char not in "\t\n\r\f\v")
    return controls > max(8, len(sample) // 10)


def _normalise(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")


def _require_text(text: str) -> None:
    if not text.strip():
        raise ParseError("empty_document", "the document contains no text")


# --------------------------------------------------------------------------------------------------
# HTML
#
# Documentation pages are rendered from their element tree (lxml, which trafilatura brings): page
# furniture (navigation bars, "Prev / Up / Next", repeated tables of contents, sidebars, headerlink
# marks, search boxes, version switchers, footers) is dropped, and the structure the reader sees is
# kept as Markdown-like text:
#
# - headings keep their level and carry the element id a reader's link would use, Pandoc-style:
#   `## 20.4.1. Memory {#RUNTIME-CONFIG-RESOURCE-MEMORY}` (the heading's own id, else the id of the
#   section or div it opens, else an anchor inside it);
# - a definition-list term with its own id (a setting, an option, an API function) becomes a small
#   section of its own, `#### work_mem (integer) {#GUC-WORK-MEM}`, so its entry is chunked and cited
#   as that entry; other terms stay with their description as a `**term**` line;
# - a table row is one line that reads alone, with its column names:
#   `Name: smallint; Storage Size: 2 bytes; Description: small-range integer; Range: ...`;
# - code is fenced, admonitions are labelled paragraphs (`Note: ...`), tabs keep their labels.
#
# Trafilatura's main-content extraction is kept for pages that are not documentation: no main
# element, no documentation generator, and mostly links (news and blog pages with heavy chrome).

_HTML_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([A-Za-z0-9_:.-]+)", re.IGNORECASE)
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
_EXTRA_BLANK_LINES = re.compile(r"\n{3,}")
_BREAK = "\x00"  # a <br> in the inline text (decoded text has no NUL: _normalise drops them)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Never text a reader reads as the page's content.
_SKIP_TAGS = _words(
    """script style noscript template svg iframe object embed canvas head title meta link nav form
    button select option textarea input label dialog map area audio video source track img
    picture colgroup col"""
)
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
# Elements that start and end a paragraph. Anything not listed (span, code, a, em, custom
# elements...) is inline and flows into the paragraph around it.
_BLOCK_TAGS = _words(
    """p div section article main header footer aside address blockquote figure figcaption details
    summary center fieldset legend body html hgroup dd dt li tr td th caption tbody thead tfoot
    search"""
)
# Class words (a class split at -, _ and spaces) that mark page furniture, and substrings for
# hyphenated names and CSS-module names such as `breadcrumbsContainer_Z_bl`.
_FURNITURE_WORDS = _words(
    """nav navbar navigation navheader navfooter navlinks breadcrumb breadcrumbs sidebar
    sphinxsidebar sphinxsidebarwrapper related footer headerlink permalink pagination pager menu
    toolbar search searchbox switcher skip skiplink banner cookie cookies"""
)
_FURNITURE_SUBSTRINGS = (
    "breadcrumb",  # breadcrumbsContainer_Z_bl
    "hash-link",
    "header-anchor",
    "anchorjs",
    "skip-link",
    "edit-this-page",
    "last-updated",
    "prev-next",
)
_TOC_WORDS = frozenset({"toc", "tocs", "localtoc", "globaltoc"})
_TOC_SUBSTRINGS = ("tableofcontents", "table-of-contents", "toccollapsible")
# Exact ids of layout elements (never of a content section): footers, sidebars, tables of contents.
_FURNITURE_IDS = frozenset(
    {"footer", "sidebar", "navigation", "nav", "navbar", "breadcrumbs", "searchbox", "menu", "toc"}
)
_FURNITURE_ROLES = frozenset({"navigation", "search", "banner", "contentinfo", "menubar", "toolbar"})
# Ids of page wrappers: a heading just inside one does not take it as its anchor.
_LAYOUT_IDS = frozenset(
    {"header", "content", "main", "main-content", "page", "wrapper", "container", "top", "body", "layout"}
)
_ADMONITION_KINDS = {
    "note": "Note",
    "tip": "Tip",
    "hint": "Hint",
    "info": "Info",
    "important": "Important",
    "warning": "Warning",
    "caution": "Caution",
    "danger": "Danger",
    "attention": "Attention",
    "error": "Error",
    "seealso": "See also",
    "success": "Success",
    "question": "Question",
    "failure": "Failure",
    "bug": "Bug",
    "example": "Example",
    "abstract": "Abstract",
    "todo": "To do",
}
# Class words that make a box an admonition by themselves (others need the class "admonition").
_ADMONITION_WORDS = _words("note tip hint info important warning caution danger attention error seealso")
_ADMONITION_CONTAINERS = frozenset({"div", "aside", "section", "details", "blockquote"})
_TAB_SET_WORDS = frozenset({"tabs-container", "tabbed-set", "sd-tab-set", "tabset"})
_DOC_GENERATOR = re.compile(
    r"docbook|sphinx|docutils|asciidoc|docusaurus|mkdocs|hugo|jekyll|vuepress|vitepress|antora|"
    r"pandoc|gitbook|doxygen|javadoc|rustdoc|texinfo|makeinfo|mdbook|starlight|nextra",
    re.IGNORECASE,
)
_LANGUAGE_CLASS = re.compile(r"(?:^|\s)(?:language|lang|highlight)-([A-Za-z0-9_+#.-]+)")
_PLAIN_LANGUAGES = frozenset({"default", "none", "text", "plain", "notranslate", "nohighlight", "sourcecode"})
_TITLE_SEPARATORS = re.compile(r"\s+[—–|·»]\s+|\s+-\s+|\s+::\s+")
_SITE_SEGMENT = re.compile(r"\b(?:documentation|docs|manual|handbook|wiki)\b", re.IGNORECASE)
_HEADING_TRAILER = re.compile(r"(?:\s*[¶§#🔗]+)+$")
# A block a label cannot run into: a code fence, a list or a table.
_BLOCK_START = re.compile(r"`{3}|~{3}|[-*+] |\d+\. |\|")
# Lines of rendered prose that Markdown would read as a heading or a code fence.
_MARKDOWN_LOOKALIKE = re.compile(r"^( {0,3})(#{1,6}(?:[ \t]|$)|`{3,}|~{3,})", re.MULTILINE)
# Minimum of non-heading text a page must keep once its tables of contents are dropped; below it
# the page is a table of contents (an index page), which is then its content.
_MIN_BODY_TEXT = 200
_EMPTY_MAIN = 50
# Above this share of link text, a page without a main element or a documentation generator is a
# portal or news page, and trafilatura's boilerplate removal is the better reading.
_LINK_HEAVY = 0.4


class _Out:
    """One rendered block: a paragraph (or list, table, admonition), a code block or a heading."""

    __slots__ = ("anchor", "kind", "level", "text")

    def __init__(self, kind: str, text: str, level: int = 0, anchor: str = "") -> None:
        self.kind = kind  # "text", "code" or "heading"
        self.text = text
        self.level = level  # for headings: the raw level, normalised once the page is rendered
        self.anchor = anchor


def _classes(element: Any) -> str:
    return str(element.get("class") or "")


def _class_words(classes: str) -> set[str]:
    return set(re.split(r"[\s_-]+", classes.lower()))


_FURNITURE_CACHE: dict[str, str] = {}


def _class_kind(classes: str) -> str:
    """ "furniture", "toc" or "" for a class attribute (cached: sites repeat the same few)."""
    kind = _FURNITURE_CACHE.get(classes)
    if kind is None:
        lowered = classes.lower()
        words = _class_words(lowered)
        tokens = set(lowered.split())
        if words & _FURNITURE_WORDS or any(part in lowered for part in _FURNITURE_SUBSTRINGS):
            kind = "furniture"
        elif (
            words & _TOC_WORDS
            or any(part in lowered for part in _TOC_SUBSTRINGS)
            or ("contents" in tokens and tokens & {"topic", "local"})
        ):
            kind = "toc"
        else:
            kind = ""
        if len(_FURNITURE_CACHE) < 4096:
            _FURNITURE_CACHE[classes] = kind
    return kind


def _admonition_kind(element: Any) -> str | None:
    """The admonition kind ("note", ...) of a note/tip/warning box, "" for an untyped one, else None."""
    if element.tag not in _ADMONITION_CONTAINERS:
        return None
    classes = _classes(element).lower()
    if not classes:
        return None
    words = _class_words(classes)
    typed = "admonition" in classes
    for word in words:
        if word in _ADMONITION_WORDS or (typed and word in _ADMONITION_KINDS):
            return word
    if typed or "callout" in words or "alert" in words:
        return ""
    return None


def _fragment(href: str | None) -> str:
    if href and href.startswith("#") and len(href) > 1:
        return href[1:]
    return ""


def _usable_id(value: str | None) -> str:
    """An element id fit to be an anchor in `{#...}` (no spaces or braces) and not a page wrapper's."""
    if not value:
        return ""
    value = value.strip()
    if not value or value.lower() in _LAYOUT_IDS or value.startswith("__") or re.search(r"[\s{}]", value):
        return ""
    return value


class _HtmlRenderer:
    def __init__(self, root: Any, *, keep_toc: bool = False) -> None:
        self.root = root
        self.keep_toc = keep_toc
        self.out: list[_Out] = []
        self.top = self.out
        self.first_h1 = ""
        self.text_chars = 0
        self.link_chars = 0
        self._parts: list[str] = []
        self._flat = 0  # inside a list, table or admonition: headings become bold lines
        self._links = 0
        self._ids: list[str] = []  # ids of containers opened since the last text: a heading's anchor
        self._loose_ids: list[str] = []  # empty <a id>/<span id> targets since the last text
        self._current: _Out | None = None  # the heading of the section being rendered
        self._resume: _Out | None = None  # a section to repeat before the next text (after a term list)
        self._hidden: Any = None  # an admonition's title while its body is rendered

    # -- output ------------------------------------------------------------------------------------

    def render(self) -> list[_Out]:
        self._children(self.root)
        self._flush()
        return self.top

    def _emit(self, block: _Out) -> None:
        if block.kind != "heading":
            self._ids.clear()
            self._loose_ids.clear()
            if self._resume is not None and self.out is self.top:
                resumed, self._resume = self._resume, None
                self.out.append(_Out("heading", resumed.text, resumed.level, resumed.anchor))
                self._current = resumed
        self.out.append(block)

    def _inline(self, text: str) -> None:
        self._parts.append(text)
        self.text_chars += len(text)
        if self._links:
            self.link_chars += len(text)

    def _flush(self) -> None:
        if not self._parts:
            return
        raw = "".join(self._parts).replace("\u200b", "")
        self._parts = []
        lines = [" ".join(line.split()) for line in raw.split(_BREAK)]
        text = "\n".join(line for line in lines if line)
        if "#" in text or "`" in text or "~" in text:
            text = _MARKDOWN_LOOKALIKE.sub(r"\1\\\2", text)
        if text:
            self._emit(_Out("text", text))

    def _sub(self, element: Any, *, flat: bool = True) -> list[_Out]:
        """Render an element's content into a list of its own (list items, cells, admonitions)."""
        self._flush()
        saved_out, saved_resume = self.out, self._resume
        self.out, self._resume = [], None
        if flat:
            self._flat += 1
        try:
            self._children(element)
            self._flush()
            return self.out
        finally:
            if flat:
                self._flat -= 1
            self.out, self._resume = saved_out, saved_resume

    def _line(self, element: Any) -> str:
        """An element's text on one line (headings, terms, table cells)."""
        return " ".join(" ".join(_plain(block).split()) for block in self._sub(element) if block.text)

    # -- walking -----------------------------------------------------------------------------------

    def _children(self, element: Any) -> None:
        if element.text:
            self._inline(element.text)
        for child in element:
            self._node(child)
            if child.tail:
                self._inline(child.tail)

    def _skipped(self, element: Any, tag: str) -> bool:
        if tag in _SKIP_TAGS:
            return True
        if element.get("aria-hidden") == "true":
            return True
        role = element.get("role")
        if role in _FURNITURE_ROLES:
            return True
        if element.get("hidden") is not None and role != "tabpanel":
            return True
        if tag in ("footer", "aside") and _admonition_kind(element) is None:
            return True
        if tag == "header" and element is not self.root and not any(True for _ in element.iter("h1")):
            return True  # a site header (logo, menu); an article's header holds its h1
        classes = element.get("class")
        if classes and tag not in _HEADINGS:  # a heading is content whatever its styling
            kind = _class_kind(classes)
            if kind == "furniture" or (kind == "toc" and not self.keep_toc):
                return _admonition_kind(element) is None
        element_id = element.get("id")
        return bool(element_id and element_id.lower() in _FURNITURE_IDS and tag not in ("section", "article"))

    def _node(self, element: Any) -> None:
        tag = element.tag
        if not isinstance(tag, str):
            return  # comments and processing instructions
        tag = tag.lower()
        if element is self._hidden or self._skipped(element, tag):
            return
        if tag in _HEADINGS:
            self._heading(element, _HEADINGS[tag])
        elif tag == "pre":
            self._pre(element)
        elif tag in ("ul", "ol", "menu"):
            self._list(element, ordered=tag == "ol")
        elif tag == "dl":
            self._dl(element)
        elif tag == "table":
            self._table(element)
        elif tag == "br":
            self._inline(_BREAK)
        elif tag == "hr":
            self._flush()
        elif tag == "math":
            self._inline(element.get("alttext") or " ".join("".join(element.itertext()).split()))
        elif tag in _BLOCK_TAGS:
            if self._admonition(element) or self._tabs(element):
                return
            self._flush()
            element_id = _usable_id(element.get("id"))
            if element_id and element is not self.root:
                self._ids.append(element_id)
            self._children(element)
            self._flush()
            if element_id and element_id in self._ids:
                self._ids.remove(element_id)
        else:
            if tag == "a":
                self._links += 1
            if tag in ("a", "span") and len(element) == 0 and not (element.text or "").strip():
                target = _usable_id(element.get("id") or element.get("name"))
                if target and "indexterm" not in _classes(element):
                    self._loose_ids.append(target)
            self._children(element)
            if tag == "a":
                self._links -= 1

    # -- headings ----------------------------------------------------------------------------------

    def _anchor_inside(self, element: Any) -> str:
        for link in element.iter("a"):
            classes = _classes(link)
            if any(mark in classes for mark in ("headerlink", "anchor", "hash-link", "permalink")):
                fragment = _usable_id(_fragment(link.get("href")))
                if fragment:
                    return fragment
        for inner in element.iter("a", "span"):
            if inner is not element and "indexterm" not in _classes(inner):
                target = _usable_id(inner.get("id") or inner.get("name"))
                if target:
                    return target
        return ""

    def _heading(self, element: Any, level: int) -> None:
        anchor = (
            _usable_id(element.get("id"))
            or self._anchor_inside(element)
            or (self._ids[-1] if self._ids else "")
            or (self._loose_ids[-1] if self._loose_ids else "")
        )
        self._flush()
        text = _HEADING_TRAILER.sub("", self._line(element)).strip()
        if not text:
            return
        if self._flat:
            self._emit(_Out("text", f"**{text}**"))
            return
        if level == 1 and not self.first_h1:
            self.first_h1 = text
        heading = _Out("heading", text, level, anchor)
        self._emit(heading)
        self._ids.clear()
        self._loose_ids.clear()
        self._current, self._resume = heading, None

    # -- code --------------------------------------------------------------------------------------

    def _pre(self, element: Any) -> None:
        self._flush()
        code = "".join(element.itertext()).replace("\u200b", "")
        lines = [line.rstrip() for line in code.replace("\r\n", "\n").split("\n")]
        while lines and not lines[0].strip():
            lines.pop(0)
        while lines and not lines[-1].strip():
            lines.pop()
        if not lines:
            return
        language = ""
        node = element
        for _ in range(3):  # Sphinx puts `highlight-python3` two levels up
            match = _LANGUAGE_CLASS.search(_classes(node))
            if match and match.group(1).lower() not in _PLAIN_LANGUAGES:
                language = match.group(1)
                break
            node = node.getparent()
            if node is None:
                break
        body = "\n".join(lines)
        fence = "```"
        while fence in body:
            fence += "`"
        self._emit(_Out("code", f"{fence}{language}\n{body}\n{fence}"))

    # -- lists -------------------------------------------------------------------------------------

    def _list(self, element: Any, *, ordered: bool) -> None:
        self._flush()
        try:
            number = int(element.get("start") or 1)
        except ValueError:
            number = 1
        items: list[str] = []
        for child in element:
            if not isinstance(child.tag, str) or self._skipped(child, child.tag.lower()):
                continue
            blocks = self._sub(child)
            text = "\n".join(block.text for block in blocks if block.text)
            if not text:
                continue
            marker = f"{number}. " if ordered else "- "
            number += 1
            indent = " " * len(marker)
            first, *rest = text.split("\n")
            items.append(marker + first + "".join(f"\n{indent}{line}" for line in rest))
        if items:
            self._emit(_Out("text", "\n".join(items)))

    # -- definition lists --------------------------------------------------------------------------

    def _term_anchor(self, term: Any) -> str:
        return _usable_id(term.get("id")) or self._anchor_inside(term)

    def _dl(self, element: Any) -> None:
        self._flush()
        groups: list[tuple[list[Any], list[Any]]] = []
        for child in self._dl_items(element):
            tag = child.tag.lower()
            if tag == "dt":
                if not groups or groups[-1][1]:
                    groups.append(([], []))
                groups[-1][0].append(child)
            elif groups:
                groups[-1][1].append(child)
            else:
                groups.append(([], [child]))
        # The section the list is in (a list right after another one is still in the section
        # both follow, not in the other list's last entry).
        outer = self._resume or self._current
        entered = False
        for terms, descriptions in groups:
            anchor = next((a for a in map(self._term_anchor, terms) if a), "") if not self._flat else ""
            names = [name for name in (self._line(term) for term in terms) if name]
            if not descriptions:  # terms without a description (a contents or an index): one a line
                if names:
                    self._emit(_Out("text", "\n".join(names)))
                continue
            if anchor and names:
                # An entry with its own id (a setting, an option, a function): its own section.
                base = outer.level if outer is not None else 1  # raw levels: normalised at the end
                heading = _Out("heading", _HEADING_TRAILER.sub("", ", ".join(names)), base + 1, anchor)
                self._emit(heading)
                self._current, self._resume = heading, None
                entered = True
                for description in descriptions:
                    self._flush()
                    self._children(description)
                    self._flush()
                continue
            label = ", ".join(f"**{name}**" for name in names)
            texts = [block.text for description in descriptions for block in self._sub(description)]
            if label:
                texts = [label + ("\n" + texts[0] if texts else ""), *texts[1:]]
            if texts:
                self._emit(_Out("text", "\n\n".join(texts)))
        if entered and outer is not None:
            self._resume = outer  # text after the list is back in the enclosing section

    def _dl_items(self, element: Any) -> Iterator[Any]:
        """A list's dt and dd, looking through the <div> wrappers HTML allows around each pair."""
        for child in element:
            if not isinstance(child.tag, str):
                continue
            tag = child.tag.lower()
            if tag in ("dt", "dd"):
                yield child
            elif tag == "div" and not self._skipped(child, tag):
                yield from self._dl_items(child)

    # -- tables ------------------------------------------------------------------------------------

    def _rows(self, table: Any) -> Iterator[tuple[Any, bool]]:
        """The table's rows (not those of nested tables), each with whether it is in <thead>."""
        for child in table:
            if not isinstance(child.tag, str):
                continue
            tag = child.tag.lower()
            if tag == "tr":
                yield child, False
            elif tag in ("thead", "tbody", "tfoot"):
                for row in child:
                    if isinstance(row.tag, str) and row.tag.lower() == "tr":
                        yield row, tag == "thead"

    def _table(self, element: Any) -> None:
        self._flush()
        caption = ""
        grid: list[list[tuple[str, bool]]] = []
        header_rows = 0
        carried: dict[int, tuple[int, str, bool]] = {}  # column -> (rows left, text, is_th) from rowspan
        multi_block_rows: list[list[_Out]] = []
        for child in element:
            if isinstance(child.tag, str) and child.tag.lower() == "caption":
                caption = self._line(child)
        for row, in_head in self._rows(element):
            cells: list[tuple[str, bool]] = []
            blocks: list[_Out] = []
            column = 0
            for cell in row:
                if not isinstance(cell.tag, str) or cell.tag.lower() not in ("td", "th"):
                    continue
                column = _carry_rowspans(carried, cells, column)
                cell_blocks = self._sub(cell)
                blocks.extend(cell_blocks)
                text = " ".join(" ".join(_plain(block).split()) for block in cell_blocks)
                is_th = cell.tag.lower() == "th"
                span = _span(cell.get("colspan"))
                rowspan = _span(cell.get("rowspan"))
                for _ in range(span):
                    if rowspan > 1:
                        carried[column] = (rowspan - 1, text, is_th)
                    cells.append((text, is_th))
                    column += 1
            column = _carry_rowspans(carried, cells, column)  # rowspans past the row's own cells
            if not any(text for text, _ in cells):
                continue
            if (in_head or all(is_th for _, is_th in cells)) and header_rows == len(grid):
                header_rows += 1
            grid.append(cells)
            multi_block_rows.append(blocks)

        header = grid[:header_rows]
        body = grid[header_rows:]
        width = max((len(row) for row in grid), default=0)
        lines: list[str] = [caption] if caption else []
        if width <= 1:
            # One column (e.g. PostgreSQL's function tables): each row's paragraphs as they are.
            for blocks in multi_block_rows[header_rows:]:
                text = "\n".join(block.text for block in blocks if block.text)
                if text:
                    lines.append(text)
            if lines:
                self._emit(_Out("text", "\n\n".join(lines)))
            return
        names = [
            " ".join(dict.fromkeys(row[i][0] for row in header if i < len(row) and row[i][0]))
            for i in range(width)
        ]
        if len(set(names)) == 1 and names[0]:  # one header cell spanning every column: a title
            lines.append(names[0])
            names = [""] * width
        if not body:  # only header-like rows: a grid of th cells, e.g. a layout table
            body, names = header, [""] * width
        for row in body:
            values = [text for text, _ in row]
            if any(names):
                pairs = []
                for name, value in zip(names, values, strict=False):
                    if not value:
                        continue
                    value = value.rstrip(".") if value.endswith(".") and not value.endswith("..") else value
                    pairs.append(f"{name}: {value}" if name and name != value else value)
                line = "; ".join(pairs)
            elif width == 2 and all(values):
                line = f"{values[0].rstrip(':')}: {values[1]}"
            else:
                line = " | ".join(value for value in values if value)
            if line:
                lines.append(line if line[-1] in ".!?:;)" else line + ".")
        if lines:
            self._emit(_Out("text", "\n".join(lines)))

    # -- admonitions and tabs ----------------------------------------------------------------------

    def _admonition(self, element: Any) -> bool:
        kind = _admonition_kind(element)
        if kind is None:
            return False
        title_element = None
        for candidate in element.iter():
            if candidate is element or not isinstance(candidate.tag, str):
                continue
            classes = _classes(candidate).lower()
            if (
                "admonition-title" in classes
                or "title" in classes.split()
                or "admonitionheading" in classes
                or "alert-heading" in classes
                or candidate.tag == "summary"
            ):
                title_element = candidate
                break
            if candidate.tag in ("p", "pre", "ul", "ol", "dl") and "title" not in classes:
                break  # the title comes first; past the body's first block there is none
        label = self._line(title_element) if title_element is not None else _ADMONITION_KINDS.get(kind, "")
        label = label.strip().rstrip(":").strip()
        label = _ADMONITION_KINDS.get(label.lower().replace(" ", ""), label)  # Docusaurus writes "note"
        body = element
        for cell in element.iter("td"):  # AsciiDoc lays a note out as a table: icon | content
            if "content" in _classes(cell).split():
                body = cell
                break
        self._hidden = title_element
        try:
            blocks = self._sub(body)
        finally:
            self._hidden = None
        self._emit_labelled(label, blocks)
        return True

    def _emit_labelled(self, label: str, blocks: list[_Out]) -> None:
        texts = [block.text for block in blocks if block.text]
        if not texts:
            return
        if label:
            first = texts[0]
            texts[0] = f"{label}:\n{first}" if _BLOCK_START.match(first) else f"{label}: {first}"
        self._emit(_Out("text", "\n\n".join(texts)))

    def _tabs(self, element: Any) -> bool:
        words = set(_classes(element).lower().split())
        if not words & _TAB_SET_WORDS:
            return False
        labels = [
            self._line(tab)
            for tab in element.iter()
            if isinstance(tab.tag, str)
            and (tab.get("role") == "tab" or tab.tag == "label" or "sd-tab-label" in _classes(tab))
        ]
        panels = [
            panel
            for panel in element.iter()
            if isinstance(panel.tag, str)
            and (
                panel.get("role") == "tabpanel"
                or {"tabbed-block", "sd-tab-content"} & set(_classes(panel).split())
            )
        ]
        if not panels or len(labels) != len(panels):
            return False
        self._flush()
        for label, panel in zip(labels, panels, strict=True):
            self._emit_labelled(label, self._sub(panel))
        return True


def _plain(block: _Out) -> str:
    """A block's text without code fences (for one-line renderings: headings, terms, cells)."""
    if block.kind == "code":
        return block.text.split("\n", 1)[-1].rsplit("\n", 1)[0]
    return block.text


def _carry_rowspans(
    carried: dict[int, tuple[int, str, bool]], cells: list[tuple[str, bool]], column: int
) -> int:
    """Fill the columns from `column` on that a cell above still spans (rowspan); the next column."""
    while column in carried:
        left, text, is_th = carried[column]
        cells.append((text, is_th))
        if left - 1 <= 0:
            del carried[column]
        else:
            carried[column] = (left - 1, text, is_th)
        column += 1
    return column


def _span(value: str | None) -> int:
    try:
        return max(1, min(int(value or 1), 100))
    except ValueError:
        return 1


def _normalise_levels(blocks: list[_Out]) -> None:
    """Heading levels from 1: the page's title heading is level 1 even when its sections share its
    level (DocBook reference pages use h2 for the title and for every section)."""
    headings = [block for block in blocks if block.kind == "heading"]
    if not headings:
        return
    top = min(block.level for block in headings)
    first = headings[0]
    title = (first.text, first.anchor, first.level)  # repeated after a list of entries: same level
    shared = first.level == top and any(
        block.level == top and (block.text, block.anchor, block.level) != title for block in headings
    )
    for block in headings:
        if shared and (block.text, block.anchor, block.level) != title:
            block.level = block.level - top + 2
        else:
            block.level = block.level - top + 1
        block.level = max(1, min(block.level, 6))


def _assemble(blocks: list[_Out]) -> str:
    parts: list[str] = []
    for block in blocks:
        if block.kind == "heading":
            anchor = f" {{#{block.anchor}}}" if block.anchor else ""
            parts.append(f"{'#' * block.level} {block.text}{anchor}")
        else:
            parts.append(block.text)
    return "\n\n".join(parts)


def _clean_title(title: str) -> str:
    """`os.path — Common pathname manipulations — Python 3.11.2 documentation` -> without the site."""
    segments = [segment.strip() for segment in _TITLE_SEPARATORS.split(title) if segment.strip()]
    if len(segments) > 1:
        kept = [segment for segment in segments if not _SITE_SEGMENT.search(segment)]
        segments = kept or segments
    return " — ".join(segments)


def _page_title(html_title: str, heading: str) -> str:
    """The page's own heading when the <title> is that heading plus the site's name (or a shortened
    heading and the site's name), else the <title> without the site's name."""
    if heading:
        lowered = heading.lower()
        segments = [part.strip().lower() for part in _TITLE_SEPARATORS.split(html_title)]
        if (
            not html_title
            or lowered in html_title.lower()
            or any(len(s) >= 4 and s in lowered for s in segments)
        ):
            return heading
    return _clean_title(html_title) if html_title else ""


def _html_tree(html: str) -> Any:
    from lxml import etree  # lxml comes with trafilatura

    # huge_tree: libxml2 otherwise stops at 256 nested elements (unclosed <div>s or <font>s nest).
    parser = etree.HTMLParser(
        remove_comments=True, remove_pis=True, no_network=True, recover=True, huge_tree=True
    )
    try:
        root = etree.fromstring(_XML_DECLARATION.sub("", html, count=1), parser)
    except (etree.ParserError, ValueError):  # "Document is empty" and the like
        return None
    if root is not None:
        etree.strip_elements(root, "script", "style", "noscript", "template", with_tail=False)
    return root


def _text_length(element: Any) -> int:
    return sum(len(text.strip()) for text in element.itertext())


def _main_root(body: Any) -> Any:
    """The page's main content element: <main> or role=main, narrowed to its one <article>; else
    the one <article> of the page; else None (the whole body, furniture dropped, is rendered)."""
    mains = body.xpath(".//main | .//*[@role='main']")
    main = mains[0] if mains else None
    scope = main if main is not None else body
    articles = scope.xpath(".//article")
    if len(articles) == 1:
        article = articles[0]
        article_text = _text_length(article)
        if article_text >= 0.2 * _text_length(scope) or (main is not None and article_text >= 200):
            return article
    return main


def _render_html(html: str) -> tuple[list[_Out], str, str, float, bool]:
    """(blocks, page title, first heading, link density, documentation-like) of an HTML page."""
    root = _html_tree(html)
    if root is None:
        return [], "", "", 0.0, False
    title_element = root.find(".//title")
    html_title = " ".join("".join(title_element.itertext()).split()) if title_element is not None else ""
    if html_title.startswith("<") and html_title.endswith(">"):
        html_title = ""  # Sphinx's "<no title>"
    generator = " ".join(root.xpath(".//meta[@name='generator']/@content"))
    body = root.find(".//body")
    if body is None:
        body = root
    main = _main_root(body)
    documentation = main is not None or bool(_DOC_GENERATOR.search(generator))

    def render(element: Any, keep_toc: bool) -> tuple[list[_Out], _HtmlRenderer]:
        renderer = _HtmlRenderer(element, keep_toc=keep_toc)
        try:
            return renderer.render(), renderer
        except RecursionError:  # absurdly deep markup: its text, paragraph by paragraph
            text = "\n\n".join(" ".join(part.split()) for part in element.itertext() if part.strip())
            return [_Out("text", text)] if text else [], renderer

    blocks, renderer = render(main if main is not None else body, False)
    if main is not None and _body_text(blocks) < _EMPTY_MAIN:
        blocks, renderer = render(body, False)  # an empty <main>: a page its scripts fill in
    if _body_text(blocks) < _MIN_BODY_TEXT:
        with_toc, toc_renderer = render(main if main is not None else body, True)
        if _body_text(with_toc) > _body_text(blocks):
            blocks, renderer = with_toc, toc_renderer  # the page is a table of contents
    _normalise_levels(blocks)
    heading = renderer.first_h1 or next((b.text for b in blocks if b.kind == "heading"), "")
    density = renderer.link_chars / renderer.text_chars if renderer.text_chars else 0.0
    return blocks, _page_title(html_title, heading), heading, density, documentation


def _body_text(blocks: list[_Out]) -> int:
    return sum(len(block.text) for block in blocks if block.kind != "heading")


_INVISIBLE_ELEMENTS = re.compile(
    r"<(head|script|style|noscript|template)\b.*?</\1\s*>|<!--.*?-->", re.I | re.S
)
_BLOCK_END = re.compile(
    r"<(?:br|hr|/p|/div|/h[1-6]|/li|/tr|/dd|/dt|/section|/article|/pre|/blockquote)\b[^>]*>", re.I
)
_TAG = re.compile(r"<[^>]*>")


def _tag_stripped(html: str) -> str:
    """The page's visible text, paragraph by paragraph, without parsing it into a tree."""
    text = _BLOCK_END.sub("\n\n", _INVISIBLE_ELEMENTS.sub(" ", html))
    text = unescape(_TAG.sub(" ", text))
    return _tidy("\n".join(" ".join(line.split()) for line in text.split("\n")))


def _tidy(text: str) -> str:
    lines = (line.rstrip() for line in _normalise(text).split("\n"))
    return _EXTRA_BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


def _trafilatura_markdown(html: str) -> str:
    try:
        import trafilatura
    except ImportError:  # pragma: no cover - a declared dependency; degrade rather than fail
        return ""
    try:
        extracted = trafilatura.extract(
            html,
            output_format="markdown",
            include_links=False,
            include_images=False,
            include_comments=False,
            include_tables=True,
            include_formatting=True,  # needed for `#` headings in the Markdown output
            favor_recall=True,
        )
    except Exception as exc:  # trafilatura/lxml failures on odd markup: keep our own rendering
        log.warning("trafilatura failed, using the structured HTML text: %s", exc)
        return ""
    return _tidy(extracted or "")


def _parse_html(data: bytes, charset: str | None, source_name: str, title: str | None) -> ParsedDocument:
    if charset is None:
        meta = _HTML_META_CHARSET.search(data[:4096])
        charset = meta.group(1).decode("ascii") if meta else None
    html = _normalise(_decode(data, charset))

    blocks, page_title, heading, link_density, documentation = _render_html(html)
    text = _tidy(_assemble(blocks))
    if not text or (not documentation and link_density > _LINK_HEAVY):
        # Not a documentation page and mostly links: a portal or news page, where trafilatura's
        # boilerplate detection finds the article better than dropping marked-up furniture does.
        extracted = _trafilatura_markdown(html)
        if len(extracted) >= min(len(text), _MIN_BODY_TEXT):
            text = extracted
    if not text:
        text = _tag_stripped(html)  # markup no parser makes a tree of (nested past libxml2's limit)
    _require_text(text)
    return ParsedDocument(
        text=text, title=title or page_title or heading or _stem(source_name), mime_type=HTML
    )


# --------------------------------------------------------------------------------------------------
# Markdown and plain text
#
# Documentation sites' Markdown (Docusaurus, MkDocs) carries more than CommonMark: YAML front matter
# (its title is the document's title; the block is not text), admonitions (`:::note ... :::`,
# `!!! note "Title"` with an indented body) that become labelled paragraphs (`Note: ...`), tabs (MDX
# `<Tabs><TabItem label=...>`, MkDocs `=== "Label"`) whose content stays under its label, MDX
# imports and components that are code, not text, and heading ids (`{#id}`, `{/* #id */}`) that
# chunking reads as anchors. Markdown without any of these is returned unchanged.

_FRONT_MATTER = re.compile(
    r"\A(?:---|\+\+\+)[ \t]*\n(.*?)^(?:---|\.\.\.|\+\+\+)[ \t]*$\n?", re.DOTALL | re.MULTILINE
)
_FRONT_MATTER_KEY = re.compile(r"^[A-Za-z_][\w-]*[ \t]*[:=]")
_FRONT_MATTER_TITLE = re.compile(r"^title[ \t]*[:=][ \t]*(.*?)[ \t]*$", re.MULTILINE)
_MD_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_COLON_OPEN = re.compile(r"^ {0,3}(:{3,})[ \t]*([A-Za-z][\w-]*)[ \t]*(?:\[(.*)\]|\{[^}]*\}|(.*?))[ \t]*$")
_COLON_CLOSE = re.compile(r"^ {0,3}(:{3,})[ \t]*$")
_BANG_OPEN = re.compile(
    r'^([ \t]*)(?:!!!|\?\?\?\+?)[ \t]+([\w-]+)((?:[ \t]+[\w-]+)*)(?:[ \t]+"(.*)")?[ \t]*$'
)
_TAB_OPEN = re.compile(r'^([ \t]*)===\+?[ \t]+"(.*)"[ \t]*$')
_MDX_IMPORT = re.compile(r"""^import\s+(?:[\w*{}\s,]+\s+from\s+)?['"][^'"]+['"];?\s*$""")
_JSX_TAG = re.compile(r"^[ \t]*</?[A-Z][\w.]*(?=[\s/>]|$)")
_JSX_NAME = re.compile(r"</?([A-Z][\w.]*)")
_JSX_LABELS = re.compile(
    r"""\{\s*label\s*:\s*(['"])(.*?)\1\s*,\s*value\s*:\s*(['"])(.*?)\3|"""
    r"""\{\s*value\s*:\s*(['"])(.*?)\5\s*,\s*label\s*:\s*(['"])(.*?)\7"""
)
_JSX_ATTRIBUTE = re.compile(r"""\b(label|value)\s*=\s*(?:"([^"]*)"|'([^']*)'|\{\s*["']([^"']*)["']\s*\})""")
_MDX_HEADING_ID = re.compile(r"\{/\*\s*#([^\s*]+)\s*\*/\}")
_MDX_COMMENT = re.compile(r"\{/\*.*?\*/\}")
_NOT_A_PARAGRAPH = re.compile(r"^(?: {4}|\t| {0,3}(?:[#>|<]|[-*+][ \t]|\d+[.)][ \t]|`{3}|~{3}))")
_DETAILS_TAG = re.compile(r"^\s*</?(?:details|summary)\b[^>]*>\s*$", re.IGNORECASE)
_SUMMARY_LINE = re.compile(r"^\s*<summary\b[^>]*>(.*)</summary>\s*$", re.IGNORECASE)


def _front_matter(text: str) -> tuple[str, str | None]:
    """(the text without its front matter, the front matter's title)."""
    match = _FRONT_MATTER.match(text)
    if match is None:
        return text, None
    lines = [
        line for line in match.group(1).split("\n") if line.strip() and not line.lstrip().startswith("#")
    ]
    if lines and not _FRONT_MATTER_KEY.match(lines[0]):
        return text, None  # two thematic breaks, not front matter
    found = _FRONT_MATTER_TITLE.search(match.group(1))
    if found is None:
        return text[match.end() :], None
    value = found.group(1)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1].replace("''", "'") if value[0] == "'" else value[1:-1].replace('\\"', '"')
    elif value in ("|", ">", "|-", ">-"):  # a block scalar: the indented lines that follow
        folded: list[str] = []
        for line in match.group(1)[found.end() :].split("\n")[1:]:
            if line[:1].strip():
                break
            folded.append(line.strip())
        value = " ".join(folded)
    return text[match.end() :], " ".join(value.split()) or None


def _label(kind: str) -> str:
    return _ADMONITION_KINDS.get(kind.lower(), kind.replace("-", " ").replace("_", " ").capitalize())


def _jsx_tag(lines: list[str], start: int) -> tuple[str, int] | None:
    """The whole JSX tag starting on lines[start] (it may span lines) and the index after it."""
    depth = 0
    quote = ""
    parts: list[str] = []
    for index in range(start, min(len(lines), start + 50)):
        line = lines[index]
        for position, char in enumerate(line):
            if quote:
                quote = "" if char == quote else quote
            elif char in "\"'`":
                quote = char
            elif char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
            elif char == ">" and depth <= 0:
                parts.append(line[: position + 1])
                rest = line[position + 1 :]
                if rest.strip():
                    lines[index] = rest  # text after the tag on the same line stays
                    return "\n".join(parts), index
                return "\n".join(parts), index + 1
        parts.append(line)
    return None


def _markdown_blocks(lines: list[str]) -> list[str]:
    """Rewrite admonitions, tabs and MDX of documentation Markdown (see above), fences untouched."""
    out: list[str] = []
    pending: list[str | None] = [None]  # the label for the next content line
    colons: list[int] = []  # open `:::` admonitions
    tab_labels: dict[str, str] = {}
    fence: str | None = None
    mdx_fence: str | None = None  # an open ```mdx-code-block: its lines are MDX, not code

    def emit(line: str) -> None:
        label = pending[0]
        if label is not None and line.strip():
            pending[0] = None
            if label:
                if _NOT_A_PARAGRAPH.match(line):
                    out.append(f"{label}:")
                else:
                    line = f"{label}: {line.lstrip()}"
        out.append(line)

    def indented_body(index: int, indent: str) -> tuple[list[str], int]:
        width = len(indent.expandtabs(4)) + 4
        body: list[str] = []
        while index < len(lines):
            line = lines[index]
            if line.strip() and len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip()) < width:
                break
            body.append(line.expandtabs(4)[width:])
            index += 1
        while body and not body[-1].strip():
            body.pop()
            index -= 1
        return body, index

    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        fenced = _MD_FENCE.match(line)
        if fence is not None:
            out.append(line)
            if fenced and not fenced.group(3).strip():  # a closing fence has no info string
                marker = fenced.group(2)
                if marker[0] == fence[0] and len(marker) >= len(fence):
                    fence = None
            continue
        if fenced:
            marker, info = fenced.group(2), fenced.group(3).strip()
            if (
                mdx_fence is not None
                and marker[0] == mdx_fence[0]
                and len(marker) >= len(mdx_fence)
                and not info
            ):
                mdx_fence = None
                continue
            if info.startswith("mdx-code-block"):
                mdx_fence = marker
                continue
            emit(line)
            fence = marker
            continue
        if _MDX_IMPORT.match(line):
            continue
        opened = _COLON_OPEN.match(line)
        if opened:
            colons.append(len(opened.group(1)))
            title = opened.group(3) if opened.group(3) is not None else opened.group(4)
            title = _MDX_COMMENT.sub("", title or "").strip()
            pending[0] = title or _label(opened.group(2))
            out.append("")
            continue
        closed = _COLON_CLOSE.match(line)
        if closed and colons and len(closed.group(1)) >= colons[-1]:
            colons.pop()
            pending[0] = None
            out.append("")
            continue
        bang = _BANG_OPEN.match(line) or _TAB_OPEN.match(line)
        if bang:
            body, index = indented_body(index, bang.group(1))
            if bang.re is _TAB_OPEN:
                label = bang.group(2).strip()
            else:
                title = bang.group(4)
                label = _label(bang.group(2)) if title is None else title.strip().rstrip(":").strip()
            out.append("")
            pending[0] = label
            for inner in _markdown_blocks(body):
                emit(bang.group(1) + inner if inner else inner)
            pending[0] = None
            out.append("")
            continue
        if _JSX_TAG.match(line):
            tag = _jsx_tag(lines, index - 1)
            if tag is not None:
                source, index = tag
                name = _JSX_NAME.match(source.strip())
                component = name.group(1) if name else ""
                if component == "Tabs" and not source.lstrip().startswith("</"):
                    for match in _JSX_LABELS.finditer(source):
                        label, value = (
                            (match.group(2), match.group(4))
                            if match.group(2) is not None
                            else (
                                match.group(8),
                                match.group(6),
                            )
                        )
                        tab_labels[value] = label
                elif component == "TabItem" and not source.lstrip().startswith("</"):
                    attributes = {
                        m.group(1): m.group(2) or m.group(3) or m.group(4) or ""
                        for m in _JSX_ATTRIBUTE.finditer(source)
                    }
                    value = attributes.get("value", "")
                    pending[0] = attributes.get("label") or tab_labels.get(value) or value or None
                out.append("")
                continue
        summary = _SUMMARY_LINE.match(line)
        if summary or _DETAILS_TAG.match(line):  # a collapsible block: its summary is a paragraph
            line = summary.group(1).strip() if summary else ""
        if line.lstrip().startswith("#"):
            line = _MDX_HEADING_ID.sub(r"{#\1}", line)
        if "{/*" in line:
            line = _MDX_COMMENT.sub("", line)
            if not line.strip():
                continue
        emit(line)
    return out


def _markdown_text(text: str) -> tuple[str, str | None]:
    """(Markdown as chunking reads it, the front matter's title)."""
    body, title = _front_matter(text)
    lines = body.split("\n")
    rewritten = _markdown_blocks(lines)
    if rewritten == body.split("\n"):
        return body, title
    return _EXTRA_BLANK_LINES.sub("\n\n", "\n".join(rewritten)).strip("\n") + "\n", title


def _parse_markdown(data: bytes, charset: str | None, source_name: str, title: str | None) -> ParsedDocument:
    text, front_title = _markdown_text(_normalise(_decode(data, charset)))
    _require_text(text)
    if not title:
        title = front_title or next((h.text for h in iter_headings(text) if h.level == 1), None)
    return ParsedDocument(text=text, title=title or _stem(source_name), mime_type=MARKDOWN)


def _parse_plain(data: bytes, charset: str | None, source_name: str, title: str | None) -> ParsedDocument:
    text = _normalise(_decode(data, charset))
    _require_text(text)
    return ParsedDocument(text=text, title=title or _stem(source_name), mime_type=PLAIN)


# --------------------------------------------------------------------------------------------------
# PDF

_SENTENCE_END = tuple(".!?:;。！？；：…\"'”’)]）")
_HYPHENATED = re.compile(r"[A-Za-z]-$")
_LOWER_START = re.compile(r"^[a-z]")
_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\u3000-\u303f]")
_WHITESPACE = re.compile(r"\s+")
# Font size must exceed the body size by this factor for a short line to count as a heading.
_HEADING_SIZE_RATIO = 1.15
_MAX_HEADING_CHARS = 120


def _key(line: str) -> str:
    return _WHITESPACE.sub("", line)


def _scale(matrix: list[float]) -> float:
    return math.sqrt(abs(matrix[0] * matrix[3] - matrix[1] * matrix[2])) if len(matrix) >= 4 else 1.0


def _sized_lines(page: Any) -> tuple[str, list[tuple[str, float]]]:
    """Page text from pypdf, plus each text line with its dominant font size (to spot headings)."""
    lines: list[tuple[str, float]] = []
    parts: list[str] = []
    chars: Counter[float] = Counter()  # characters per font size on the current line

    def finish_line() -> None:
        if chars:
            size = max(chars.items(), key=lambda item: (item[1], item[0]))[0]
            lines.append(("".join(parts), size))
        parts.clear()
        chars.clear()

    def visit(text: str, cm: list[float], tm: list[float], _font: Any, font_size: float) -> None:
        size = round(float(font_size or 0) * _scale(tm) * _scale(cm) * 2) / 2
        pieces = text.split("\n")
        for number, piece in enumerate(pieces):
            if number:
                finish_line()
            if piece.strip():
                parts.append(piece)
                chars[size] += len(piece.strip())

    visitor: Callable[..., None] = visit
    text = page.extract_text(visitor_text=visitor) or ""
    finish_line()
    return text, lines


def _heading_levels(pages: list[list[tuple[str, float]]]) -> list[dict[str, int]]:
    """Per page, the lines set in a clearly larger font than the body text, mapped to a heading level."""
    body: Counter[float] = Counter()
    for lines in pages:
        for line, size in lines:
            body[size] += len(line)
    if not body:
        return [{} for _ in pages]
    body_size = body.most_common(1)[0][0]

    def is_heading(line: str, size: float) -> bool:
        stripped = line.strip()
        return (
            size >= body_size * _HEADING_SIZE_RATIO
            and len(stripped) <= _MAX_HEADING_CHARS
            and sum(char.isalpha() for char in stripped) >= 2
            and not stripped.endswith((".", ",", ";"))
        )

    sizes = sorted({size for lines in pages for line, size in lines if is_heading(line, size)}, reverse=True)
    level = {size: min(rank + 1, 3) for rank, size in enumerate(sizes)}
    return [{_key(line): level[size] for line, size in lines if is_heading(line, size)} for lines in pages]


def _ends_paragraph(line: str, typical: int | None) -> bool:
    """A line well short of the page's usual line width ends its paragraph (PDFs have no blank lines)."""
    if typical is None:
        return True
    if line.endswith("-"):
        return False
    return len(line) < 0.7 * typical or (line.endswith(_SENTENCE_END) and len(line) < 0.85 * typical)


def _clean_pdf_page(raw: str, headings: dict[str, int]) -> str:
    """Rejoin a page's hard-wrapped lines into paragraphs, undo end-of-line hyphenation, mark headings."""
    lines = [line.strip() for line in _normalise(raw).split("\n")]
    body_lengths = sorted(len(line) for line in lines if line and _key(line) not in headings)
    # With too few lines there is no reliable line width: keep every line as its own paragraph.
    typical = body_lengths[int(0.8 * (len(body_lengths) - 1))] if len(body_lengths) >= 4 else None

    paragraphs: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            paragraphs.append("".join(current))
            current.clear()

    for line in lines:
        if not line:
            flush()
            continue
        level = headings.get(_key(line))
        if level:
            flush()
            paragraphs.append("#" * level + " " + " ".join(line.split()))
            continue
        if current:
            previous = current[-1]
            if _HYPHENATED.search(previous) and _LOWER_START.match(line):
                current[-1] = previous[:-1]  # "infor-" + "mation" -> "information"
            elif not (previous.endswith("-") or (_CJK.match(previous[-1]) and _CJK.match(line[0]))):
                current.append(" ")  # Chinese lines join without a space, hyphenated compounds too
        current.append(line)
        if _ends_paragraph(line, typical):
            flush()
    flush()
    return "\n\n".join(paragraphs)


def _parse_pdf(data: bytes, source_name: str, title: str | None) -> ParsedDocument:
    try:
        from pypdf import PdfReader
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ParseError("unsupported_media_type", "PDF support is not installed") from exc

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except Exception as exc:  # e.g. an encryption scheme pypdf cannot handle
                raise ParseError(
                    "corrupt_document",
                    f"the PDF could not be read: it is encrypted and cannot be opened ({_reason(exc)})",
                ) from exc
            if not opened:
                raise ParseError(
                    "corrupt_document", "the PDF could not be read: it is protected by a password"
                )
        pages = list(reader.pages)
    except ParseError:
        raise
    except Exception as exc:
        raise ParseError("corrupt_document", f"the PDF could not be read: {_reason(exc)}") from exc
    if not pages:
        raise ParseError("empty_document", "the PDF has no pages")

    raw_pages: list[tuple[str, list[tuple[str, float]]]] = []
    failures: list[str] = []
    for number, page in enumerate(pages, start=1):
        try:
            raw_pages.append(_sized_lines(page))
        except Exception as exc:  # one damaged page should not lose the others
            log.warning("could not extract text from page %d of %s: %s", number, source_name, exc)
            failures.append(_reason(exc))
            raw_pages.append(("", []))
    if len(failures) == len(pages):
        raise ParseError("corrupt_document", f"the PDF could not be read: {failures[0]}")

    headings = _heading_levels([lines for _, lines in raw_pages])
    parts: list[str] = []
    spans: list[PageSpan] = []
    offset = 0
    for number, ((raw, _), page_headings) in enumerate(zip(raw_pages, headings, strict=True), start=1):
        cleaned = _clean_pdf_page(raw, page_headings)
        if not cleaned:
            continue  # blank or image-only page: no span, and no empty paragraph either
        if parts:
            parts.append("\n\n")
            offset += 2
        parts.append(cleaned)
        spans.append(PageSpan(start=offset, end=offset + len(cleaned), page=number))
        offset += len(cleaned)
    text = "".join(parts)
    if not text.strip():
        raise ParseError(
            "empty_document", "the PDF contains no extractable text (it may be scanned images without OCR)"
        )

    if not title:
        title = _pdf_title(reader) or next(
            (line.lstrip("#").strip() for line in text.split("\n") if line.strip()), ""
        )
    return ParsedDocument(text=text, title=title or _stem(source_name), mime_type=PDF, pages=tuple(spans))


def _pdf_title(reader: Any) -> str:
    try:
        metadata = reader.metadata
        value = metadata.title if metadata is not None else None
    except Exception:  # broken info dictionary: not worth failing the upload
        return ""
    value = " ".join(str(value or "").split())
    return "" if value.lower() in {"untitled", "(unspecified)"} else value


def _reason(exc: Exception) -> str:
    return str(exc).strip() or type(exc).__name__


# --------------------------------------------------------------------------------------------------


def parse_document(
    data: bytes, *, mime_type: str | None, source_name: str, title: str | None = None
) -> ParsedDocument:
    """Parse an uploaded document into Markdown-like text with a title (and page spans for PDFs).

    `title`, when given, wins over anything found in the document. Raises ParseError with code
    unsupported_media_type, empty_document, corrupt_document or invalid_encoding.
    """
    if not data.strip():
        raise ParseError("empty_document", "the document is empty")
    kind = detect_mime_type(data, mime_type, source_name)
    _, charset = _split_content_type(mime_type)
    title = title.strip() if title else None
    if kind == PDF:
        return _parse_pdf(data, source_name, title)
    if kind == HTML:
        return _parse_html(data, charset, source_name, title)
    if kind == MARKDOWN:
        return _parse_markdown(data, charset, source_name, title)
    return _parse_plain(data, charset, source_name, title)
