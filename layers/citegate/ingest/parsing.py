"""Turn uploaded bytes (Markdown, plain text, HTML, PDF; English or Chinese) into a ParsedDocument.

The output text is Markdown-like whatever the source: headings are `#` lines and paragraphs are
separated by blank lines, so chunking can treat every format alike. PDFs also record which
characters came from which page, so citations can name the page.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import logging
import math
import re
from collections import Counter
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any, Literal

from citegate.ingest.chunking import iter_headings
from citegate.ingest.documents import PageSpan, ParsedDocument

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
# Markdown and plain text


def _parse_markdown(data: bytes, charset: str | None, source_name: str, title: str | None) -> ParsedDocument:
    text = _normalise(_decode(data, charset))
    _require_text(text)
    if not title:
        title = next((h.text for h in iter_headings(text) if h.level == 1), None)
    return ParsedDocument(text=text, title=title or _stem(source_name), mime_type=MARKDOWN)


def _parse_plain(data: bytes, charset: str | None, source_name: str, title: str | None) -> ParsedDocument:
    text = _normalise(_decode(data, charset))
    _require_text(text)
    return ParsedDocument(text=text, title=title or _stem(source_name), mime_type=PLAIN)


# --------------------------------------------------------------------------------------------------
# HTML


class _HtmlText(HTMLParser):
    """Collects <title>, the first <h1> and a plain Markdown-ish rendering of the visible body.

    The rendering is the fallback for pages too small or too odd for trafilatura's main-content
    extraction. It drops scripts, styles and page furniture (navigation, footers, forms).
    """

    _SKIP = frozenset(
        [
            "script",
            "style",
            "noscript",
            "template",
            "svg",
            "math",
            "iframe",
            "object",
            "canvas",
            "head",
            "nav",
            "footer",
            "aside",
            "form",
            "button",
            "select",
            "textarea",
        ]
    )
    _BLOCK = frozenset(
        [
            "p",
            "div",
            "section",
            "article",
            "main",
            "header",
            "ul",
            "ol",
            "li",
            "table",
            "thead",
            "tbody",
            "tr",
            "blockquote",
            "pre",
            "br",
            "hr",
            "dl",
            "dt",
            "dd",
            "figure",
            "figcaption",
            "details",
            "summary",
            "body",
            "address",
        ]
    )
    _HEADINGS = frozenset(["h1", "h2", "h3", "h4", "h5", "h6"])
    _VOID = frozenset(
        ["br", "hr", "img", "meta", "link", "input", "area", "base", "col", "embed", "source", "track", "wbr"]
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title = ""
        self.first_h1 = ""
        self.blocks: list[str] = []
        self._skip = 0
        self._in_title = False
        self._title_parts: list[str] = []
        self._heading = 0
        self._pre = 0
        self._parts: list[str] = []
        self._prefix = ""

    def _flush(self) -> None:
        raw = "".join(self._parts)
        self._parts = []
        text = raw.strip("\n") if self._pre else " ".join(raw.split())
        if text.strip():
            if self._heading:
                if self._heading == 1 and not self.first_h1:
                    self.first_h1 = text
                text = "#" * self._heading + " " + text
            self.blocks.append(self._prefix + text)
        self._prefix = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in self._VOID:
            if tag in ("br", "hr") and not self._skip:
                self._flush()
            return
        if tag in self._SKIP:
            self._skip += 1
            return
        if self._skip:
            return
        if tag in self._HEADINGS or tag in self._BLOCK:
            self._flush()
        if tag in self._HEADINGS:
            self._heading = int(tag[1])
        elif tag == "li":
            self._prefix = "- "
        elif tag == "pre":
            self._pre += 1
        elif tag in ("td", "th"):
            self._parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
            self.title = self.title or " ".join("".join(self._title_parts).split())
        if tag in self._SKIP:
            self._skip = max(0, self._skip - 1)
            return
        if self._skip:
            return
        if tag in self._HEADINGS or tag in self._BLOCK:
            self._flush()
        if tag in self._HEADINGS:
            self._heading = 0
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self._title_parts.append(data)
        elif not self._skip:
            self._parts.append(data)

    def close(self) -> None:
        super().close()
        self._flush()


_HTML_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([A-Za-z0-9_:.-]+)", re.IGNORECASE)
_HEADING_LINE = re.compile(r"^#{1,6} ", re.MULTILINE)
_EXTRA_BLANK_LINES = re.compile(r"\n{3,}")


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
    except Exception as exc:  # trafilatura/lxml failures on odd markup: use the fallback instead
        log.warning("trafilatura failed, using the plain HTML text: %s", exc)
        return ""
    return _tidy(extracted or "")


def _parse_html(data: bytes, charset: str | None, source_name: str, title: str | None) -> ParsedDocument:
    if charset is None:
        meta = _HTML_META_CHARSET.search(data[:4096])
        charset = meta.group(1).decode("ascii") if meta else None
    html = _normalise(_decode(data, charset))

    scan = _HtmlText()
    scan.feed(html)
    scan.close()
    fallback = _tidy("\n\n".join(scan.blocks))

    text = _trafilatura_markdown(html)
    # Trafilatura drops headings (and sometimes everything) on small pages; the plain rendering is
    # then better, as long as it is not mostly page furniture that trafilatura rightly left out.
    if not text or (
        not _HEADING_LINE.search(text)
        and _HEADING_LINE.search(fallback)
        and len(fallback) <= 2 * len(text) + 200
    ):
        text = fallback
    _require_text(text)
    return ParsedDocument(
        text=text, title=title or scan.title or scan.first_h1 or _stem(source_name), mime_type=HTML
    )


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
