"""SSRF guard for the page fetcher: refuse URLs and connections that reach non-public addresses.

A research run fetches URLs that came from search results and from the pages themselves, so an
attacker chooses them. Without a guard, `http://169.254.169.254/latest/meta-data/` or
`http://localhost:6379/` would be read and its text quoted into a report.

What it does (the verdict on each address, and the allow-list, come from core.search.addresses):

* `check_url(url, allow)` refuses a URL early, with a readable reason, unless it is http(s) and
  every address its host resolves to is public, or host[:port] is on the allow-list. Call it on
  every redirect hop.
* `GuardedBackend` / `guarded_transport` enforce the same rule at connect time: the host is
  resolved again, each address is judged, and the socket is opened to an address that was judged,
  so a DNS answer that changes between `check_url` and the connect (rebinding) cannot reach a
  private address. TLS still uses the URL's hostname for SNI and certificate checks (httpcore
  passes the request origin's host to `start_tls`, not the address we connected to).
* `refusal_of(exc)` tells a refusal from a network error after httpx has wrapped it.
* `refused_unasked(url, allow)` is the part of `check_url` that needs no resolver: the reason a
  URL is refused whatever DNS says (not http(s), no host, a forbidden IP literal, a `localhost`
  name), or None. Search results it refuses are never offered to choose from.

`AllowList`, `forbidden_reason` and `literal_ip` are importable from here as well.

What it does not do: proxies (the guarded transport never uses one, whatever HTTP_PROXY says),
unix sockets, async transports, or any policy about *which public* sites may be read.
"""

from __future__ import annotations

import socket
import ssl
import time
from typing import Callable, Iterable

import httpcore
import httpx

from core.signals.errors import PicklableError
from core.search.addresses import AllowList, forbidden_reason, literal_ip

Resolver = Callable[[str, int], list[str]]

_DEFAULT_PORTS = {"http": 80, "https": 443}


class UnsafeURL(PicklableError):
    """`url` may not be fetched. `reason` is short and safe to log."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{reason}: {url}")
        self.url = url
        self.reason = reason


class RefusedConnection(httpcore.ConnectError):
    """Raised by GuardedBackend instead of connecting. httpx maps it (like any
    httpcore.ConnectError) to `httpx.ConnectError("refused: <reason>")` raised *from* it, so the
    caller finds it as `__cause__`; use `refusal_of(exc)` rather than walking the chain by hand."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"refused: {reason}")
        self.reason = reason


def refusal_of(exc: BaseException) -> str | None:
    """The guard's reason if `exc` is, or was caused by, a RefusedConnection; None for any other
    error (a real network failure)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, RefusedConnection):
            return current.reason
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


# --- URLs --------------------------------------------------------------------------------------

def _default_resolve(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in infos))  # unique, resolver's order


def _addresses(host: str, port: int, resolve: Resolver | None) -> list[str]:
    """Literal IPs judged as written (no resolver involved); names resolved. [] = no answer."""
    ip = literal_ip(host)
    if ip is not None:
        return [str(ip)]
    try:
        return list(dict.fromkeys((resolve or _default_resolve)(host, port)))
    except (OSError, UnicodeError):
        return []


def _first_reason(addresses: Iterable[str]) -> str | None:
    for address in addresses:
        try:
            reason = forbidden_reason(address)
        except ValueError:
            reason = f"resolver returned a non-address {address!r}"
        if reason is not None:
            return reason
    return None


def check_url(url: str, allow: AllowList, *, resolve: Resolver | None = None) -> None:
    """Raise UnsafeURL unless `url` is http(s) with a host, and every address its host resolves
    to is public — or host[:port] is on the allow-list. Call on every redirect hop.

    The URL is parsed by httpx, the same parser the request will use, so the host judged here is
    the host httpx connects to (urllib and httpx disagree on inputs like `http://a\\@b/`).
    `resolve(host, port)` defaults to getaddrinfo; a name with no addresses is refused as
    "host does not resolve". This is the early, readable check; the connect-time check in
    GuardedBackend is what makes rebinding harmless."""
    try:
        parsed = httpx.URL(url.strip())
    except (httpx.InvalidURL, TypeError, ValueError):
        raise UnsafeURL(url, "invalid URL") from None
    scheme = parsed.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise UnsafeURL(url, f"unsupported URL scheme ({scheme or 'none'})")
    host = parsed.raw_host.decode("ascii")
    if not host:
        raise UnsafeURL(url, "URL has no host")
    port = parsed.port or _DEFAULT_PORTS[scheme]
    if allow.allows(host, port):
        return
    addresses = _addresses(host, port, resolve)
    if not addresses:
        raise UnsafeURL(url, "host does not resolve")
    reason = _first_reason(addresses)
    if reason is not None:
        raise UnsafeURL(url, reason)


def refused_unasked(url: str, allow: AllowList) -> str | None:
    """Why `url` is refused before any request or name lookup, or None when only resolving
    its host (or fetching it) can tell. `localhost` and `*.localhost` always mean loopback
    (RFC 6761), so they are judged like the literal."""
    try:
        parsed = httpx.URL(url.strip())
    except (httpx.InvalidURL, TypeError, ValueError):
        return "invalid URL"
    scheme = parsed.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        return f"unsupported URL scheme ({scheme or 'none'})"
    host = parsed.raw_host.decode("ascii")
    if not host:
        return "URL has no host"
    if allow.allows(host, parsed.port or _DEFAULT_PORTS[scheme]):
        return None
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return "loopback address (localhost)"
    ip = literal_ip(host)
    return _first_reason([str(ip)]) if ip is not None else None


# --- connect-time enforcement ------------------------------------------------------------------

class GuardedBackend(httpcore.NetworkBackend):
    """httpcore network backend that re-resolves the host at connect time, refuses a forbidden
    address (unless host[:port] is allowed) and connects to the address it checked — so a DNS
    answer that changes between check_url and connect (rebinding) cannot reach a private address.

    A refusal raises RefusedConnection (an httpcore.ConnectError). A name that does not resolve
    raises a plain httpcore.ConnectError: that is a network failure, not a refusal. When every
    address is public the addresses are tried in the resolver's order within one overall timeout,
    as socket.create_connection would."""

    def __init__(self, allow: AllowList, *, resolve: Resolver | None = None,
                 inner: httpcore.NetworkBackend | None = None) -> None:
        self._allow = allow
        self._resolve = resolve
        self._inner = inner if inner is not None else httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
                    ) -> httpcore.NetworkStream:
        addresses = _addresses(host, port, self._resolve)
        if not addresses:
            raise httpcore.ConnectError(f"cannot resolve {host}")
        if not self._allow.allows(host, port):
            reason = _first_reason(addresses)
            if reason is not None:
                raise RefusedConnection(reason)
        deadline = None if timeout is None else time.monotonic() + timeout
        last: httpcore.ConnectError | None = None
        for address in addresses:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                return self._inner.connect_tcp(address, port, timeout=remaining,
                                               local_address=local_address,
                                               socket_options=socket_options)
            except httpcore.ConnectError as exc:  # this address is down; try the next one
                last = exc
        assert last is not None
        raise last

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
                            ) -> httpcore.NetworkStream:
        raise RefusedConnection("unix socket")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def guarded_transport(allow: AllowList, *, resolve: Resolver | None = None,
                      verify: ssl.SSLContext | bool = True, trust_env: bool = True,
                      http1: bool = True, http2: bool = False,
                      limits: httpx.Limits = httpx.Limits(max_connections=100,
                                                          max_keepalive_connections=20),
                      retries: int = 0, local_address: str | None = None,
                      socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
                      ) -> httpx.HTTPTransport:
    """An httpx transport whose connections go through GuardedBackend.

    Takes httpx.HTTPTransport's keyword arguments except `proxy` and `uds`, which would route
    around the guard, and the deprecated `cert` (put a client certificate in `verify`'s
    context). `trust_env` only decides whether SSL_CERT_FILE/SSL_CERT_DIR are honoured;
    proxies are never used. (An httpx.Client given `transport=` ignores HTTP_PROXY & co. itself;
    do not also pass it `proxy=` or `mounts=`, those get transports of their own.)"""
    ssl_context = httpx.create_ssl_context(verify=verify, trust_env=trust_env)
    transport = httpx.HTTPTransport(verify=ssl_context, http1=http1, http2=http2, limits=limits,
                                    retries=retries, local_address=local_address,
                                    socket_options=socket_options)
    # HTTPTransport takes no network_backend, so swap the pool it built for an identical one
    # that has ours. `_pool` is what handle_request uses; fail loudly if httpx reshapes this.
    if not isinstance(getattr(transport, "_pool", None), httpcore.ConnectionPool):
        raise RuntimeError("httpx.HTTPTransport internals changed: no httpcore.ConnectionPool "
                           "at ._pool; the SSRF guard cannot be installed")
    transport._pool = httpcore.ConnectionPool(
        ssl_context=ssl_context,
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        http1=http1,
        http2=http2,
        retries=retries,
        local_address=local_address,
        socket_options=socket_options,
        network_backend=GuardedBackend(allow, resolve=resolve),
    )
    return transport
