"""Which addresses the page fetcher may reach: verdicts on IP addresses, and the allow-list.

Pure classification, no I/O: nothing here resolves a name or opens a socket (`literal_ip` uses
`socket.inet_aton` only to parse the legacy IPv4 spellings the way a resolver would).

* `forbidden_reason(ip)` says why an address must not be fetched (loopback, private, link-local,
  cloud metadata, CGNAT, multicast, reserved, IPv4 embedded in IPv6, ...) or None when it is public.
* `literal_ip(host)` reads a host as an IP address in any form a resolver accepts, else None.
* `AllowList` holds the host[:port] entries the operator lets through although they are not
  public (RESEARCHFLOW_FETCH_ALLOW_HOSTS), matched on the host as written.

What it does not do: judge URLs or connections — that is core.search.guard (`check_url`,
`GuardedBackend`), which resolves names and applies these verdicts to every address.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ALLOW_ENV = "RESEARCHFLOW_FETCH_ALLOW_HOSTS"
_NUMERIC_V4 = re.compile(r"[0-9a-fx.]+", re.IGNORECASE)
_HOSTNAME = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*")


# --- addresses ---------------------------------------------------------------------------------

def _nets(*cidrs: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(c) for c in cidrs)


# Checked in order, first match wins, so specific entries (metadata) sit before their ranges.
# Explicit networks rather than only `is_private`/`is_global`: those properties changed between
# Python releases, and reasons should be stable and readable.
_V4_RULES: tuple[tuple[tuple, str], ...] = (
    (_nets("0.0.0.0/32"), "unspecified address"),
    (_nets("0.0.0.0/8"), "'this network' address"),
    (_nets("127.0.0.0/8"), "loopback address"),
    (_nets("169.254.169.254/32"), "link-local address {ip} (cloud metadata)"),
    (_nets("100.100.100.200/32"), "shared address {ip} (cloud metadata)"),  # Alibaba Cloud
    (_nets("169.254.0.0/16"), "link-local address"),
    (_nets("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"), "private address"),
    (_nets("100.64.0.0/10"), "shared (CGNAT) address"),
    (_nets("192.0.0.0/24"), "IETF protocol address"),
    (_nets("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"), "documentation address"),
    (_nets("198.18.0.0/15"), "benchmarking address"),
    (_nets("224.0.0.0/4"), "multicast address"),
    (_nets("255.255.255.255/32"), "broadcast address"),
    (_nets("240.0.0.0/4"), "reserved address"),
)
_V6_RULES: tuple[tuple[tuple, str], ...] = (
    (_nets("::/128"), "unspecified address"),
    (_nets("::1/128"), "loopback address"),
    (_nets("fd00:ec2::254/128"), "private address {ip} (cloud metadata)"),  # AWS IMDS over IPv6
    (_nets("fe80::/10"), "link-local address"),
    (_nets("fec0::/10"), "site-local address"),
    (_nets("fc00::/7"), "private address"),
    (_nets("ff00::/8"), "multicast address"),
    (_nets("2001:db8::/32", "3fff::/20"), "documentation address"),
    (_nets("2001:2::/48"), "benchmarking address"),
    (_nets("100::/64"), "discard-only address"),
    (_nets("64:ff9b:1::/48"), "local-use NAT64 address"),
)
# IPv6 forms that carry an IPv4 address (see _embedded_v4). A 6to4 or Teredo address whose IPv4
# is public falls through to Python's own is_global verdict.
_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_COMPATIBLE = ipaddress.ip_network("::/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SIXTOFOUR = ipaddress.ip_network("2002::/16")
_TEREDO = ipaddress.ip_network("2001::/32")


def literal_ip(host: str) -> IPAddress | None:
    """`host` as an IP address if it is one in any form a resolver accepts — dotted, bracketed
    IPv6, or the legacy decimal/octal/hex IPv4 forms (`2130706433`, `0x7f.1`, `017700000001`,
    `127.1`) — else None. A trailing dot is ignored: `127.0.0.1.` must not slip past as a name."""
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    text = text.replace("%25", "%")  # zone id as it appears in a URL: fe80::1%25eth0
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1]
    if not text:
        return None
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    if _NUMERIC_V4.fullmatch(text):
        # inet_aton is the parser resolvers use, so it accepts exactly the forms they would.
        try:
            return ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            return None
    return None


def _match(ip: IPAddress, rules: tuple[tuple[tuple, str], ...]) -> str | None:
    for networks, label in rules:
        if any(ip in net for net in networks):
            return label.format(ip=ip) if "{ip}" in label else f"{label} {ip}"
    return None


def forbidden_reason(ip: str | ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why an address may not be fetched, or None when it is public.

    Accepts an address object or a string in any form `literal_ip` accepts; raises ValueError for
    a string that is not an IP address. IPv6 forms that embed an IPv4 address (mapped
    `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4, Teredo) are judged by
    the embedded address, because that is where the packets end up."""
    if isinstance(ip, str):
        parsed = literal_ip(ip)
        if parsed is None:
            raise ValueError(f"not an IP address: {ip!r}")
        ip = parsed
    if isinstance(ip, ipaddress.IPv4Address):
        reason = _match(ip, _V4_RULES)
        if reason is None and not ip.is_global:
            reason = f"non-public address {ip}"
        return reason

    ip = ipaddress.IPv6Address(ip.packed)  # drop any zone id, it does not change the verdict
    reason = _match(ip, _V6_RULES)
    if reason is not None:
        return reason
    embedded, kind = _embedded_v4(ip)
    if embedded is not None:
        inner = forbidden_reason(embedded)
        if inner is not None:
            return f"{inner} ({kind})"
        if kind in ("IPv4-mapped IPv6", "NAT64"):
            return None  # a public IPv4 reached over IPv6 (dual-stack socket, DNS64): fine
        if kind == "IPv4-compatible IPv6":
            return f"deprecated IPv4-compatible address {ip}"
    if ip.is_multicast:
        return f"multicast address {ip}"
    if ip.is_reserved:
        return f"reserved address {ip}"
    if not ip.is_global:
        return f"non-public address {ip}"
    return None


def _embedded_v4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address | None, str]:
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _MAPPED:
        return low32, "IPv4-mapped IPv6"
    if ip in _COMPATIBLE:  # :: and ::1 were matched by the rules already
        return low32, "IPv4-compatible IPv6"
    if ip in _NAT64:
        return low32, "NAT64"
    if ip in _SIXTOFOUR:
        return ip.sixtofour, "6to4"
    if ip in _TEREDO and ip.teredo is not None:
        return ip.teredo[1], "Teredo"
    return None, ""


# --- allow-list --------------------------------------------------------------------------------

def _canonical_host(host: str) -> str:
    """Lower-case, no brackets, no trailing dot; IP literals in their canonical spelling so
    `[0:0::1]`, `::1` and `2130706433` match the entries written as `::1` and `127.0.0.1`."""
    ip = literal_ip(host)
    if ip is not None:
        return str(ipaddress.ip_address(ip.packed))
    return host.strip().lower().rstrip(".")


@dataclass(frozen=True)
class AllowList:
    """Hosts the operator explicitly lets the fetcher reach although they are not public (an
    intranet wiki, a test server on 127.0.0.1). Matched on the host as written in the URL, before
    any resolution: allowing `wiki.corp` allows whatever that name resolves to."""

    entries: frozenset[tuple[str, int | None]] = frozenset()  # (host, port or None = any port)

    @classmethod
    def parse(cls, text: str | None) -> "AllowList":
        """`"127.0.0.1:8080, wiki.corp, [::1]:9000"` -> AllowList. Blank entries are ignored; a
        malformed one raises ValueError naming RESEARCHFLOW_FETCH_ALLOW_HOSTS."""
        entries = set()
        for raw in (text or "").split(","):
            item = raw.strip()
            if item:
                entries.add(_parse_entry(item))
        return cls(frozenset(entries))

    def allows(self, host: str, port: int | None) -> bool:
        if not self.entries or not host:
            return False
        key = _canonical_host(host)
        return (key, None) in self.entries or (port is not None and (key, port) in self.entries)


def _parse_entry(item: str) -> tuple[str, int | None]:
    def bad(why: str) -> ValueError:
        return ValueError(f"{ALLOW_ENV}: bad entry {item!r} ({why}; expected host, host:port, "
                          f"IPv6 or [IPv6]:port)")

    port_text: str | None = None
    if item.startswith("["):
        m = re.fullmatch(r"\[([^\]]+)\](?::(.*))?", item)
        if not m:
            raise bad("unclosed bracket")
        host, port_text = m.group(1), m.group(2)
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise bad("brackets must hold an IPv6 address") from None
    elif item.count(":") > 1:  # a bare IPv6 address, no port
        host = item
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise bad("not an IPv6 address") from None
    else:
        host, sep, port_text = item.partition(":")
        if not sep:
            port_text = None
        if literal_ip(host) is None and not _HOSTNAME.fullmatch(host.lower().rstrip(".")):
            raise bad("not a host name or IP address")

    port: int | None = None
    if port_text is not None:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise bad("port must be 1-65535")
        port = int(port_text)
    return _canonical_host(host), port
