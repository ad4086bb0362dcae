"""Untrusted text made safe for where it is shown: a terminal, or markdown that must render as
written.

Topics, CSV cells, page text, quotes, provider error bodies and model output are untrusted.

- A terminal: `printable` removes control characters and escape sequences (C0 except newline
  and tab, DEL, C1, and whole ESC sequences: CSI, OSC, DCS...), so a page cannot retitle the
  window, clear the screen, plant a hyperlink or rewrite the line above.
- Markdown shown as text: `markdown_text` escapes what markdown would read as formatting, so a
  topic, a title or a quote renders as written in the HTML export (markdown-it), in
  `researchflow show` (rich, markdown-it too) and in Prefect's UI (marked, rendered by
  prefect-design's own components). Backslash escapes are read alike by all three, except
  inside a link's label, which Prefect shows as typed: untrusted text is never a link label
  (`markdown_link` labels a link with its host). Prefect also links bare `https://...`,
  `www....` and e-mail addresses: the `:` of `://`, the `.` after `www` and every `@` are
  escaped; `&` is escaped so `&lt;` stays five characters.
- Markdown from a model: `defang_markdown` keeps its markup, but turns raw HTML, images and
  links other than http(s), file and #anchors into text. Code spans and blocks are left alone:
  nothing in them is markup.

What it does not do: escape HTML (core.reports.export renders markdown with HTML off and escapes
what it writes itself).
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI: ESC [ parameters intermediates final
    r"|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC, DCS, SOS, PM, APC up to BEL/ST
    r"|\x1b[ -/]*[0-~]?"  # any other ESC sequence
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # CSI as one C1 character
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?")  # C1 string controls
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` without control characters or terminal escape sequences (newline and tab stay)."""
    if not text:
        return text
    return _CONTROL.sub("", _ESCAPE_SEQUENCE.sub("", text))


# Anywhere in a line: emphasis, code, links, HTML and entities, tables, strikethrough, the
# backslash itself; and what Prefect's renderer links by itself (`://`, `www.`, `@`).
_INLINE = re.compile(r"[\\`*_\[\]<>|~&@]|:(?=//)|(?<=www)\.", re.IGNORECASE)
# Only at the start of a line: headings, block quotes, list items, setext underlines.
_LINE_START = re.compile(r"^([#>+=-]|\d+(?=[.)]))")


def markdown_text(text: str, *, one_line: bool = True) -> str:
    """`text` as markdown that renders as written: `[x](javascript:y)` stays those characters.

    one_line collapses whitespace (newlines included), so the text cannot start a block of
    its own wherever it is put."""
    text = printable(text)
    if one_line:
        text = " ".join(text.split())
    escaped = _INLINE.sub(r"\\\g<0>", text)
    lines = escaped.split("\n")
    return "\n".join(_LINE_START.sub(_escape_start, line) for line in lines)


def _escape_start(match: re.Match[str]) -> str:
    found = match.group(0)
    return f"{found}\\" if found.isdigit() else f"\\{found}"


def linkable(url: str) -> bool:
    """Whether `url` may become a link: http(s) with a host, or a file URL."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return False
    scheme = parts.scheme.lower()
    return (scheme in ("http", "https") and bool(parts.netloc)) or (
        scheme == "file" and url.strip().lower().startswith("file://"))


_PLAIN_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*")
# Characters a markdown link destination may hold as they are; the rest is percent-encoded.
_URL_SAFE = ":/?#[]@!$&'*+,;=%~-._"


def markdown_link(url: str) -> str:
    """A link to `url` labelled with its host (a file URL: its file name), or the URL as text
    when it may not be a link (see `linkable`)."""
    if not linkable(url):
        return markdown_text(url)
    url = url.strip()
    parts = urlsplit(url)
    label = parts.hostname or ""
    if parts.scheme.lower() == "file":
        label = parts.path.rstrip("/").rsplit("/", 1)[-1]
    if not _PLAIN_LABEL.fullmatch(label):
        label = "file" if parts.scheme.lower() == "file" else "link"
    return f"[{label}]({quote(url, safe=_URL_SAFE)})"


# A fenced code block (to its closing fence or the end), or an inline code span.
_CODE = re.compile(r"(?ms)^[ \t]{0,3}(`{3,}|~{3,}).*?(?:^[ \t]{0,3}\1[ \t]*$|\Z)"
                   r"|(`+)(?!`).+?(?<!`)\2(?!`)")
_LINK_END = re.compile(r"\]\(\s*<?([^\s)>]*)")
_DEFINITION = re.compile(r"(?m)^([ \t]{0,3})\[([^\]\n]+)\]:[ \t]*<?(\S*?)>?(?=\s|$)")
_OTHER_SCHEME = re.compile(r"\b([a-z][a-z0-9+.-]*):(?=//)", re.IGNORECASE)
_EMAIL_AT = re.compile(r"(?<=[\w.+-])@(?=[\w-])")


def defang_markdown(markdown: str) -> str:
    """Model-written markdown keeping its markup, with raw HTML and autolinks (`<`), images,
    link reference definitions and links whose target is not http(s), file or #anchor made
    text; bare e-mail addresses and `scheme://` of other schemes are not linked by any
    renderer. Control characters are removed (see `printable`)."""
    markdown = printable(markdown)
    out: list[str] = []
    last = 0
    for code in _CODE.finditer(markdown):
        out.append(_defang_prose(markdown[last:code.start()]))
        out.append(code.group(0))
        last = code.end()
    out.append(_defang_prose(markdown[last:]))
    return "".join(out)


def _allowed_target(target: str) -> bool:
    return target.startswith("#") or linkable(target)


def _defang_prose(text: str) -> str:
    text = _DEFINITION.sub(lambda m: m.group(0) if _allowed_target(m.group(3))
                           else m.group(0).replace("[", "\\[", 1), text)
    text = _unescaped(text, "<", lambda i: "\\<")
    text = _unescaped(text, "![", lambda i: "\\![")
    text = _OTHER_SCHEME.sub(lambda m: m.group(0) if m.group(1).lower() in (
        "http", "https", "file") else f"{m.group(1)}\\:", text)
    text = _EMAIL_AT.sub(r"\\@", text)

    def link(i: int) -> str:
        target = _LINK_END.match(text, i)
        return "](" if target and _allowed_target(target.group(1)) else "\\]("

    return _unescaped(text, "](", link)


def _unescaped(text: str, token: str, replace) -> str:
    """`text` with each occurrence of `token` that no backslash escapes replaced by
    replace(index)."""
    out: list[str] = []
    last = 0
    start = text.find(token)
    while start != -1:
        before = start
        while before > 0 and text[before - 1] == "\\":
            before -= 1
        if (start - before) % 2 == 0:
            out += [text[last:start], replace(start)]
            last = start + len(token)
        start = text.find(token, start + len(token))
    out.append(text[last:])
    return "".join(out)
