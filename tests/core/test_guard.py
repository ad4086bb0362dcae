"""SSRF guard: `check_url` (schemes, names resolving to forbidden addresses, literal hosts, the
allow-list applied to URLs) and the guarded transport and TLS against real loopback servers (names
are resolved by fake resolvers, so nothing leaves the machine). The pure address rules it relies on
(`forbidden_reason`, `AllowList`) are tested in test_addresses.py."""

from __future__ import annotations

import datetime
import ssl

import httpcore
import httpx
import pytest

from core.search.addresses import AllowList
from core.search.guard import (GuardedBackend, RefusedConnection, UnsafeURL, check_url,
                               guarded_transport, refusal_of)
from tests.fakes.http import Reply, ScriptedServer


def _port(srv: ScriptedServer) -> int:
    return int(srv.url.rsplit(":", 1)[1])


def _resolver(table: dict[str, list[str]]):
    calls: list[tuple[str, int]] = []

    def resolve(host: str, port: int) -> list[str]:
        calls.append((host, port))
        return list(table.get(host, []))

    resolve.calls = calls  # type: ignore[attr-defined]
    return resolve


# --- check_url ------------------------------------------------------------------------------------

@pytest.mark.parametrize("url, scheme", [
    ("file:///etc/passwd", "file"), ("ftp://example.com/x", "ftp"),
    ("gopher://example.com:70/_x", "gopher"), ("data:text/html,<b>hi</b>", "data"),
    ("javascript:alert(1)", "javascript"), ("example.com/page", "none"),
])
def test_check_url_refuses_other_schemes(url, scheme):
    resolve = _resolver({"example.com": ["93.184.215.14"]})
    with pytest.raises(UnsafeURL) as info:
        check_url(url, AllowList(), resolve=resolve)
    assert info.value.reason == f"unsupported URL scheme ({scheme})"
    assert info.value.url == url
    assert resolve.calls == []


def test_check_url_passes_a_public_name_and_asks_for_the_right_port():
    resolve = _resolver({"example.com": ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"]})
    check_url("https://Example.com/a?b=1", AllowList(), resolve=resolve)
    check_url("http://example.com:8080/", AllowList(), resolve=resolve)
    assert resolve.calls == [("example.com", 443), ("example.com", 8080)]


def test_check_url_refuses_a_name_resolving_to_a_private_address():
    resolve = _resolver({"intranet.example": ["10.0.0.5"]})
    with pytest.raises(UnsafeURL) as info:
        check_url("http://intranet.example/", AllowList(), resolve=resolve)
    assert info.value.reason == "private address 10.0.0.5"


def test_check_url_refuses_when_any_address_is_private():
    resolve = _resolver({"mixed.example": ["93.184.215.14", "169.254.169.254"]})
    with pytest.raises(UnsafeURL) as info:
        check_url("https://mixed.example/", AllowList(), resolve=resolve)
    assert info.value.reason == "link-local address 169.254.169.254 (cloud metadata)"


def test_check_url_refuses_a_name_that_does_not_resolve():
    with pytest.raises(UnsafeURL) as info:
        check_url("http://nowhere.invalid/", AllowList(), resolve=_resolver({}))
    assert info.value.reason == "host does not resolve"


@pytest.mark.parametrize("url, reason", [
    ("http://127.0.0.1/", "loopback address 127.0.0.1"),
    ("http://[::1]:8080/", "loopback address ::1"),
    ("http://[::ffff:127.0.0.1]/", "loopback address 127.0.0.1"),
    ("http://2130706433/", "loopback address 127.0.0.1"),
    ("http://0x7f.1/", "loopback address 127.0.0.1"),
    ("http://169.254.169.254/latest/meta-data/", "(cloud metadata)"),
    ("http://[fd00:ec2::254]/", "(cloud metadata)"),
    ("http://100.100.100.200/latest/meta-data/", "(cloud metadata)"),
    ("http://0.0.0.0:6379/", "unspecified address 0.0.0.0"),
    ("http://[::]/", "unspecified address ::"),
    ("http://evil.example\\@127.0.0.1/", "loopback address 127.0.0.1"),  # parsed as httpx does
])
def test_check_url_judges_literal_hosts_without_resolving(url, reason):
    resolve = _resolver({})
    with pytest.raises(UnsafeURL) as info:
        check_url(url, AllowList(), resolve=resolve)
    assert reason in info.value.reason
    assert resolve.calls == []


def test_check_url_refuses_a_url_without_host():
    with pytest.raises(UnsafeURL, match="no host"):
        check_url("http:///etc/passwd", AllowList(), resolve=_resolver({}))


def test_allow_list_lets_listed_host_and_port_through_only():
    allow = AllowList.parse("127.0.0.1:8080, localhost")
    resolve = _resolver({"localhost": ["127.0.0.1"]})
    check_url("http://127.0.0.1:8080/x", allow, resolve=resolve)
    check_url("http://localhost:5000/", allow, resolve=resolve)
    check_url("http://LOCALHOST/", allow, resolve=resolve)
    with pytest.raises(UnsafeURL, match="loopback"):
        check_url("http://127.0.0.1:8081/x", allow, resolve=resolve)
    with pytest.raises(UnsafeURL, match="loopback"):
        check_url("http://127.0.0.1/x", allow, resolve=resolve)  # port 80, not 8080


# --- the transport --------------------------------------------------------------------------------

def test_allowed_loopback_server_is_reached():
    with ScriptedServer(default=Reply(200, "hello")) as srv:
        transport = guarded_transport(AllowList.parse(f"127.0.0.1:{_port(srv)}"))
        with httpx.Client(transport=transport) as client:
            resp = client.get(srv.url + "/page")
        assert resp.status_code == 200 and resp.text == "hello"
        assert [r.path for r in srv.requests] == ["/page"]


def test_loopback_is_refused_before_any_byte_is_sent():
    with ScriptedServer(default=Reply(200, "secret")) as srv:
        with httpx.Client(transport=guarded_transport(AllowList())) as client:
            with pytest.raises(httpx.ConnectError) as info:
                client.get(srv.url)
        assert refusal_of(info.value) == "loopback address 127.0.0.1"
        assert isinstance(info.value.__cause__, RefusedConnection)
        assert srv.requests == []


def test_allow_list_port_does_not_open_other_ports():
    with ScriptedServer(default=Reply(200, "a")) as allowed, \
            ScriptedServer(default=Reply(200, "b")) as other:
        transport = guarded_transport(AllowList.parse(f"127.0.0.1:{_port(allowed)}"))
        with httpx.Client(transport=transport) as client:
            assert client.get(allowed.url).text == "a"
            with pytest.raises(httpx.ConnectError) as info:
                client.get(other.url)
        assert refusal_of(info.value) == "loopback address 127.0.0.1"
        assert other.requests == []


def test_network_errors_are_not_refusals():
    with ScriptedServer() as srv:
        port = _port(srv)
    # the server is gone: a real connection failure on an allowed address
    transport = guarded_transport(AllowList.parse(f"127.0.0.1:{port}"))
    with httpx.Client(transport=transport) as client:
        with pytest.raises(httpx.ConnectError) as info:
            client.get(f"http://127.0.0.1:{port}/")
    assert refusal_of(info.value) is None


def test_dns_rebinding_is_refused_at_connect():
    """The guard sits under the connection pool, where the address is dialled: a name that
    passed the URL check and then resolves elsewhere is refused by the connection itself."""
    answers = iter([["93.184.215.14"], ["127.0.0.1"]])
    calls = []

    def rebinding(host: str, port: int) -> list[str]:
        calls.append((host, port))
        return next(answers)

    with ScriptedServer(default=Reply(200, "secret")) as srv:
        url = f"http://rebind.example:{_port(srv)}/admin"
        check_url(url, AllowList(), resolve=rebinding)  # first answer: public, passes
        with httpx.Client(transport=guarded_transport(AllowList(), resolve=rebinding)) as client:
            with pytest.raises(httpx.ConnectError) as info:
                client.get(url)
        assert refusal_of(info.value) == "loopback address 127.0.0.1"
        assert isinstance(info.value.__cause__, RefusedConnection)  # refused where it dials
        assert calls == [("rebind.example", _port(srv))] * 2
        assert srv.requests == []


def test_an_allowed_name_connects_to_its_address_and_keeps_its_host_header():
    with ScriptedServer(default=Reply(200, "wiki")) as srv:
        resolve = _resolver({"wiki.corp": ["127.0.0.1"]})
        transport = guarded_transport(AllowList.parse("wiki.corp"), resolve=resolve)
        with httpx.Client(transport=transport) as client:
            resp = client.get(f"http://wiki.corp:{_port(srv)}/home")
        assert resp.text == "wiki"
        assert srv.requests[0].headers["host"] == f"wiki.corp:{_port(srv)}"


def test_a_name_resolving_to_loopback_is_refused_at_connect():
    with ScriptedServer(default=Reply(200, "secret")) as srv:
        resolve = _resolver({"sneaky.example": ["93.184.215.14", "127.0.0.1"]})
        with httpx.Client(transport=guarded_transport(AllowList(), resolve=resolve)) as client:
            with pytest.raises(httpx.ConnectError) as info:
                client.get(f"http://sneaky.example:{_port(srv)}/")
        assert refusal_of(info.value) == "loopback address 127.0.0.1"
        assert srv.requests == []


@pytest.mark.parametrize("literal", ["2130706433", "0x7f.1", "127.1", "[::ffff:127.0.0.1]"])
def test_literal_spellings_of_loopback_are_refused_at_connect(literal):
    with ScriptedServer(default=Reply(200, "secret")) as srv:
        with httpx.Client(transport=guarded_transport(AllowList())) as client:
            with pytest.raises(httpx.ConnectError) as info:
                client.get(f"http://{literal}:{_port(srv)}/")
        assert "loopback address 127.0.0.1" in (refusal_of(info.value) or "")
        assert srv.requests == []


def test_proxy_settings_in_the_environment_do_not_bypass_the_guard(monkeypatch):
    with ScriptedServer(default=Reply(200, "target")) as target, \
            ScriptedServer(default=Reply(200, "via proxy")) as proxy:
        for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
            monkeypatch.setenv(var, proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        with httpx.Client(transport=guarded_transport(AllowList())) as client:
            with pytest.raises(httpx.ConnectError):
                client.get(target.url)
        allow = AllowList.parse(f"127.0.0.1:{_port(target)}")
        with httpx.Client(transport=guarded_transport(allow)) as client:
            assert client.get(target.url).text == "target"
        assert proxy.requests == []


def test_unix_sockets_are_refused():
    with pytest.raises(RefusedConnection):
        GuardedBackend(AllowList.parse("localhost")).connect_unix_socket("/var/run/docker.sock")


def test_connect_uses_each_checked_address_in_turn():
    seen = []

    class Inner(httpcore.NetworkBackend):
        def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
            seen.append(host)
            if host == "93.184.215.14":
                raise httpcore.ConnectError("unreachable")
            return "stream"  # type: ignore[return-value]

    resolve = _resolver({"two.example": ["93.184.215.14", "2606:4700::1111"]})
    backend = GuardedBackend(AllowList(), resolve=resolve, inner=Inner())
    assert backend.connect_tcp("two.example", 443, timeout=5) == "stream"
    assert seen == ["93.184.215.14", "2606:4700::1111"]


def test_unresolvable_name_at_connect_is_a_network_error_not_a_refusal():
    backend = GuardedBackend(AllowList(), resolve=_resolver({}))
    with pytest.raises(httpcore.ConnectError) as info:
        backend.connect_tcp("gone.example", 80)
    assert not isinstance(info.value, RefusedConnection)


# --- TLS: connecting to the checked IP still verifies the URL's hostname -------------------------

def _self_signed(tmp_path, name: str):
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


class _TLSServer:
    """ScriptedServer behind TLS, recording the SNI name each handshake carried."""

    def __init__(self, cert_path, key_path) -> None:
        self.sni: list[str | None] = []
        self.srv = ScriptedServer(default=Reply(200, "secure"))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert_path, key_path)
        ctx.sni_callback = lambda sock, name, _ctx: self.sni.append(name)
        httpd = self.srv._httpd
        httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)

    def __enter__(self) -> "_TLSServer":
        self.srv.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.srv.__exit__(*exc)


def test_tls_uses_the_url_hostname_for_sni_and_certificate(tmp_path):
    cert_path, key_path = _self_signed(tmp_path, "secure.example")
    trust = ssl.create_default_context(cafile=str(cert_path))
    resolve = _resolver({"secure.example": ["127.0.0.1"], "other.example": ["127.0.0.1"]})
    allow = AllowList.parse("secure.example, other.example")
    with _TLSServer(cert_path, key_path) as tls:
        port = _port(tls.srv)
        with httpx.Client(transport=guarded_transport(allow, resolve=resolve, verify=trust),
                          timeout=5) as client:
            resp = client.get(f"https://secure.example:{port}/")
            assert resp.text == "secure"
            assert tls.sni[0] == "secure.example"
            # the certificate is still checked against the URL's name, not the IP we dialled
            with pytest.raises(httpx.ConnectError) as info:
                client.get(f"https://other.example:{port}/")
        assert "certificate" in str(info.value).lower() or "hostname" in str(info.value).lower()
        assert refusal_of(info.value) is None
        assert len(tls.srv.requests) == 1

