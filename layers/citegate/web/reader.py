"""From HTML to safe Markdown: selectors, main-content extraction (trafilatura), sanitising.

`cssselect` is not installed, so CSS selectors are translated to XPath here. The subset covers what
readers use to pick content or drop noise: tags, `*`, `#id`, `.class`, `[attr]`, `[attr=value]`,
`[attr^=|$=|*=|~=value]`, descendant and child combinators, and comma-separated groups.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import lxml.html
import trafilatura
from lxml import etree

from citegate.governance.calls import estimate_tokens
from citegate.web import WebError, WebReadFailed

# Elements that never carry readable content and may carry active content.
_DROP_TAGS = ("script", "style", "noscript", "iframe", "frame", "object", "embed", "template", "svg")
_BOILERPLATE_TAGS = ("nav", "footer", "header", "aside", "menu")
_UNSAFE_SCHEMES = re.compile(r"^\s*(javascript|vbscript|data|file):", re.IGNORECASE)

_COMPOUND = re.compile(
    r"""(?P<tag>\*|[A-Za-z][A-Za-z0-9-]*)?
        (?P<rest>(?:\#[\w-]+|\.[\w-]+|\[\s*[\w-]+\s*(?:[~^$*|]?=\s*(?:"[^"]*"|'[^']*'|[^\]\s]+)\s*)?\])*)$""",
    re.VERBOSE,
)
_PART = re.compile(
    r"""\#(?P<id>[\w-]+)|\.(?P<cls>[\w-]+)|
        \[\s*(?P<attr>[\w-]+)\s*(?:(?P<op>[~^$*|]?=)\s*(?P<val>"[^"]*"|'[^']*'|[^\]\s]+)\s*)?\]""",
    re.VERBOSE,
)


class SelectorError(ValueError):
    pass


def _literal(value: str) -> str:
    if '"' not in value:
        return f'"{value}"'
    if "'" not in value:
        return f"'{value}'"
    pieces = value.split('"')
    return "concat(" + ", '\"', ".join(f'"{p}"' for p in pieces) + ")"


def _word_in(attr: str, word: str) -> str:
    return f"contains(concat(' ', normalize-space(@{attr}), ' '), {_literal(' ' + word + ' ')})"


def _compound_xpath(compound: str) -> str:
    match = _COMPOUND.match(compound)
    if not match or not compound:
        raise SelectorError(f"unsupported selector part {compound!r}")
    tag = (match.group("tag") or "*").lower()
    conditions: list[str] = []
    for part in _PART.finditer(match.group("rest") or ""):
        if part.group("id"):
            conditions.append(f"@id={_literal(part.group('id'))}")
        elif part.group("cls"):
            conditions.append(_word_in("class", part.group("cls")))
        else:
            attr, op, value = part.group("attr"), part.group("op"), part.group("val")
            if op is None:
                conditions.append(f"@{attr}")
                continue
            value = value[1:-1] if value[:1] in "\"'" else value
            lit = _literal(value)
            conditions.append(
                {
                    "=": f"@{attr}={lit}",
                    "~=": _word_in(attr, value),
                    "^=": f"starts-with(@{attr}, {lit})",
                    "$=": f"substring(@{attr}, string-length(@{attr}) - {len(value) - 1}) = {lit}",
                    "*=": f"contains(@{attr}, {lit})",
                    "|=": f"(@{attr}={lit} or starts-with(@{attr}, {_literal(value + '-')}))",
                }[op]
            )
    return tag + "".join(f"[{c}]" for c in conditions)


def css_to_xpath(selector: str) -> str:
    """A small CSS-to-XPath translation (see the module docstring for the subset)."""
    groups = []
    for group in selector.split(","):
        tokens = re.findall(r"""\[[^\]]*\]|>|[^\s>\[]+(?:\[[^\]]*\][^\s>\[]*)*""", group.strip())
        if not tokens:
            raise SelectorError(f"empty selector in {selector!r}")
        path, axis = "descendant-or-self::", ""
        for token in tokens:
            if token == ">":
                if axis:
                    raise SelectorError(f"misplaced '>' in {selector!r}")
                axis = "/"
                continue
            path += (axis or ("" if path.endswith("::") else "//")) + _compound_xpath(token)
            axis = ""
        if axis:
            raise SelectorError(f"selector ends with '>': {selector!r}")
        groups.append(path)
    return " | ".join(groups)


def select(tree: lxml.html.HtmlElement, selector: str) -> list[lxml.html.HtmlElement]:
    try:
        xpath = css_to_xpath(selector)
        return list(tree.xpath(xpath))
    except (SelectorError, etree.XPathError) as error:
        raise InvalidSelector(f"invalid CSS selector {selector!r}: {error}") from error


class InvalidSelector(WebError):
    """A selector this reader cannot apply: the request is wrong, whatever the page."""

    kind, status, code = "invalid_selector", 400, "INVALID_REQUEST"


@dataclass
class Extracted:
    title: str | None
    content: str
    word_count: int
    token_count: int


def _clean_tree(tree: lxml.html.HtmlElement) -> None:
    """Drop active content before extraction: scripts and friends, event handlers, script links."""
    for element in list(tree.iter(*_DROP_TAGS)):
        element.drop_tree()
    for element in tree.iter():
        if not isinstance(element.tag, str):
            continue
        for name in list(element.attrib):
            if name.lower().startswith("on") or name.lower() in ("style", "srcdoc", "formaction"):
                del element.attrib[name]
        for name in ("href", "src", "action", "xlink:href"):
            value = element.get(name)
            if value is not None and _UNSAFE_SCHEMES.match(value):
                del element.attrib[name]


def _title(tree: lxml.html.HtmlElement) -> str | None:
    for xpath in ('//meta[@property="og:title"]/@content', "//title/text()", "//h1//text()"):
        found = [t.strip() for t in tree.xpath(xpath) if t and t.strip()]
        if found:
            return re.sub(r"\s+", " ", found[0])[:500]
    return None


_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_MD_LINK = re.compile(r"(!?)\[([^\]]*)\]\(\s*([^)\s]*)([^)]*)\)")


def sanitize_markdown(text: str) -> str:
    """No HTML tags (so no scripts or event handlers) and no script/data links in the Markdown."""

    def link(match: re.Match[str]) -> str:
        bang, label, target, rest = match.groups()
        if _UNSAFE_SCHEMES.match(target):
            return label
        return f"{bang}[{label}]({target}{rest})"

    text = re.sub(r"<(script|style)[^>]*>.*?</\1\s*>", "", text, flags=re.IGNORECASE | re.DOTALL)
    text = _TAG.sub("", text)
    text = _MD_LINK.sub(link, text)
    text = re.sub(r"(?i)\b(javascript|vbscript):", "", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def word_count(text: str) -> int:
    """Latin words plus CJK characters (each CJK character is a word for counting purposes)."""
    cjk = len(re.findall(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]", text))
    latin = len(re.findall(r"[^\s\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+", text))
    return cjk + latin


def extract(
    html: str, *, url: str, css_selector: str | None = None, exclude_selector: str | None = None
) -> Extracted:
    if not html.strip():
        raise WebReadFailed("the page is empty")
    try:
        tree = lxml.html.document_fromstring(html)
    except (etree.ParserError, ValueError) as error:
        raise WebReadFailed(f"the page could not be parsed: {error}") from error
    title = _title(tree)
    _clean_tree(tree)
    if exclude_selector:
        for element in select(tree, exclude_selector):
            if element.getparent() is not None:
                element.drop_tree()
    if css_selector:
        kept = select(tree, css_selector)
        if not kept:
            raise WebReadFailed(f"nothing on the page matches the CSS selector {css_selector!r}")
        # Only the matching nodes (outermost ones, so nested matches are not repeated) remain.
        outer = [e for e in kept if not any(a in kept for a in e.iterancestors())]
        body = lxml.html.Element("body")
        for element in outer:
            element.tail = None
            body.append(element)
        # The caller chose these nodes: hide what trafilatura reads as boilerplate (footer, nav,
        # "menu" classes) so its cleaning does not throw the chosen content away.
        for element in body.iter():
            if isinstance(element.tag, str):
                if element.tag in _BOILERPLATE_TAGS:
                    element.tag = "div"
                for name in ("class", "id", "role"):
                    element.attrib.pop(name, None)
        document = lxml.html.Element("html")
        document.append(body)
        tree = document
    markdown = trafilatura.extract(
        tree,
        url=url,
        output_format="markdown",
        include_links=True,
        include_formatting=True,
        include_tables=True,
        include_comments=False,
        # The caller already chose the content: keep all of it rather than guess the main part.
        favor_recall=bool(css_selector),
    )
    if not markdown and css_selector:
        markdown = "\n\n".join(t.strip() for t in tree.itertext() if t.strip())
    if not markdown:
        raise WebReadFailed("no readable content was found on the page")
    content = sanitize_markdown(markdown)
    if title and not content.lstrip().startswith("#"):
        content = f"# {sanitize_markdown(title)}\n\n{content}"
    return Extracted(
        title=sanitize_markdown(title) if title else None,
        content=content,
        word_count=word_count(content),
        token_count=estimate_tokens(content),
    )


def extract_text(text: str) -> Extracted:
    content = sanitize_markdown(text)
    first = next((line.strip("# ").strip() for line in content.splitlines() if line.strip()), None)
    return Extracted(
        title=first[:200] if first else None,
        content=content,
        word_count=word_count(content),
        token_count=estimate_tokens(content),
    )
