"""One key per page: normalise a URL so the spellings of one page compare equal.

What it does, for http(s) URLs only: lower-case scheme and host, IDNA-encode the host, drop the
default port, drop the fragment, drop tracking parameters (utm_*, fbclid, gclid, ...), keep the
other query parameters in their order, drop an empty query, turn an empty path into '/', drop a
trailing slash from non-root paths, upper-case percent-escapes and decode the ones that encode
unreserved characters, percent-encode characters a URL may not carry raw (spaces, non-ASCII), and
resolve '.' and '..' segments. The result is idempotent: normalising it again changes nothing.

What it does not do: fetch anything, follow canonical links, sort query parameters (their order
can matter to a server), strip `www.`, or treat `#!/route` fragments as part of the page. The
fragment is never sent to the server and the fetcher runs no JavaScript, so every fragment —
anchors and single-page-app routes alike — names the same fetched document and is dropped.
Dropping the trailing slash assumes `/a/` and `/a` serve the same page, which holds for nearly
every site and is the point of a key. Non-http(s) input is returned stripped and otherwise as is.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote, urlsplit, urlunsplit

# Parameters that identify a click, campaign or visitor, never the page. utm_* is matched by
# prefix in _is_tracking; keys are compared lower-cased.
TRACKING_PARAMS: frozenset[str] = frozenset({
    "fbclid", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "msclkid", "twclid", "ttclid",
    "li_fat_id", "yclid", "igshid", "mc_cid", "mc_eid", "_ga", "_gl", "_hsenc", "_hsmi",
    "hsctatracking", "mkt_tok", "oly_anon_id", "oly_enc_id", "rb_clickid", "s_cid", "vero_conv",
    "vero_id", "wickedid", "ref_src", "ref_url", "spm", "scm", "_openstat", "__s",
})
_TRACKING_PREFIXES = ("utm_",)

_DEFAULT_PORTS = {"http": 80, "https": 443}
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
# Characters left as they are when re-quoting: reserved characters keep their meaning and '%'
# is kept so existing escapes are not escaped twice.
_PATH_SAFE = "/:@!$&'()*+,;=%"
_QUERY_PART_SAFE = "/?:@!$'()*+,;%"  # '&' and '=' are structure here: escaped if inside a part


def _is_tracking(key: str) -> bool:
    name = unquote(key).lower()
    return name in TRACKING_PARAMS or name.startswith(_TRACKING_PREFIXES)


def _normalize_escapes(text: str, safe: str) -> str:
    """%7e -> ~ (unreserved decoded), %2f -> %2F (others upper-cased), raw ' ' / 'é' escaped."""
    def fix(m: re.Match[str]) -> str:
        char = chr(int(m.group(1), 16))
        return char if char in _UNRESERVED else "%" + m.group(1).upper()

    return quote(_ESCAPE.sub(fix, text), safe=safe)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4, for an absolute path."""
    out: list[str] = []
    segments = path.split("/")
    for i, seg in enumerate(segments[1:], start=1):
        last = i == len(segments) - 1
        if seg == ".":
            if last:
                out.append("")
        elif seg == "..":
            if out:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(seg)
    return "/" + "/".join(out)


def _host(hostname: str) -> str:
    if ":" in hostname:  # IPv6 literal (urlsplit already removed the brackets)
        return f"[{hostname.lower()}]"
    host = hostname.rstrip(".").lower()
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:  # not a valid IDNA name: keep it lower-cased rather than guess
        return host


def normalize_url(url: str) -> str:
    """The URL that names a page: scheme and host lower-cased, IDNA host, default port dropped
    (http:80, https:443), fragment dropped, tracking parameters dropped (other query params kept
    in their order), empty query dropped, path '' -> '/', trailing slash dropped from non-root
    paths, percent-encoding case normalised (%2f -> %2F) and unreserved chars decoded, dot
    segments resolved. Non-http(s) URLs returned unchanged (stripped)."""
    text = url.strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:  # bad port or bracket: not something we can name safely
        return text
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return text

    userinfo, at, _ = parts.netloc.rpartition("@")
    netloc = (userinfo + at) + _host(parts.hostname)
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"

    path = _remove_dot_segments(_normalize_escapes(parts.path or "/", _PATH_SAFE))
    path = path.rstrip("/") or "/"

    kept = []
    for pair in parts.query.split("&"):
        if not pair:
            continue
        key, eq, value = pair.partition("=")
        if _is_tracking(key):
            continue
        kept.append(_normalize_escapes(key, _QUERY_PART_SAFE) + eq
                    + _normalize_escapes(value, _QUERY_PART_SAFE + "="))
    return urlunsplit((scheme, netloc, path, "&".join(kept), ""))
