"""Address rules of the SSRF guard (`core/search/addresses.py`), pure and without any network:
`forbidden_reason` names why an IP address (in any spelling a resolver accepts, IPv6 forms that
embed an IPv4 address included) must not be reached, or passes it as public; `AllowList` parses the
RESEARCHFLOW_FETCH_ALLOW_HOSTS setting and says which host and port pairs it lets through."""

from __future__ import annotations

import pytest

from core.search.addresses import AllowList, forbidden_reason


# --- forbidden_reason ----------------------------------------------------------------------------

@pytest.mark.parametrize("address, expected", [
    ("127.0.0.1", "loopback address 127.0.0.1"),
    ("127.8.9.10", "loopback address 127.8.9.10"),
    ("::1", "loopback address ::1"),
    ("[::1]", "loopback address ::1"),
    ("10.0.0.5", "private address 10.0.0.5"),
    ("172.16.3.4", "private address 172.16.3.4"),
    ("192.168.1.1", "private address 192.168.1.1"),
    ("fc00::1", "private address fc00::1"),
    ("fd12:3456::1", "private address fd12:3456::1"),
    ("169.254.169.254", "link-local address 169.254.169.254 (cloud metadata)"),
    ("169.254.1.1", "link-local address 169.254.1.1"),
    ("fe80::1", "link-local address fe80::1"),
    ("fe80::1%eth0", "link-local address fe80::1"),
    ("fd00:ec2::254", "private address fd00:ec2::254 (cloud metadata)"),
    ("100.100.100.200", "shared address 100.100.100.200 (cloud metadata)"),
    ("100.64.0.1", "shared (CGNAT) address 100.64.0.1"),
    ("198.18.0.1", "benchmarking address 198.18.0.1"),
    ("192.0.2.1", "documentation address 192.0.2.1"),
    ("203.0.113.9", "documentation address 203.0.113.9"),
    ("2001:db8::1", "documentation address 2001:db8::1"),
    ("224.0.0.1", "multicast address 224.0.0.1"),
    ("ff02::1", "multicast address ff02::1"),
    ("240.0.0.1", "reserved address 240.0.0.1"),
    ("255.255.255.255", "broadcast address 255.255.255.255"),
    ("0.0.0.0", "unspecified address 0.0.0.0"),
    ("::", "unspecified address ::"),
    ("[::]", "unspecified address ::"),
    ("0.1.2.3", "'this network' address 0.1.2.3"),
    ("fec0::1", "site-local address fec0::1"),
    # legacy IPv4 spellings that resolvers accept
    ("2130706433", "loopback address 127.0.0.1"),
    ("0x7f.1", "loopback address 127.0.0.1"),
    ("017700000001", "loopback address 127.0.0.1"),
    ("127.1", "loopback address 127.0.0.1"),
    ("0xa9.0xfe.0xa9.0xfe", "link-local address 169.254.169.254 (cloud metadata)"),
    ("127.0.0.1.", "loopback address 127.0.0.1"),
])
def test_forbidden_addresses_have_readable_reasons(address, expected):
    assert forbidden_reason(address) == expected


@pytest.mark.parametrize("address, embedded", [
    ("::ffff:10.0.0.1", "private address 10.0.0.1"),
    ("::ffff:127.0.0.1", "loopback address 127.0.0.1"),
    ("::ffff:169.254.169.254", "169.254.169.254 (cloud metadata)"),
    ("::127.0.0.1", "loopback address 127.0.0.1"),            # IPv4-compatible
    ("64:ff9b::10.0.0.1", "private address 10.0.0.1"),        # NAT64
    ("2002:a00:1::", "private address 10.0.0.1"),             # 6to4
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "private address 10.0.0.1"),  # Teredo
])
def test_ipv6_forms_are_judged_by_the_ipv4_they_embed(address, embedded):
    reason = forbidden_reason(address)
    assert reason is not None and embedded in reason


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "93.184.215.14", "2606:4700::1111",
                                     "2001:4860:4860::8888", "::ffff:8.8.8.8", "64:ff9b::8.8.8.8"])
def test_public_addresses_pass(address):
    assert forbidden_reason(address) is None


def test_a_non_address_is_an_error():
    with pytest.raises(ValueError):
        forbidden_reason("example.com")


# --- allow-list -----------------------------------------------------------------------------------

def test_allow_list_parses_hosts_ports_and_ipv6():
    allow = AllowList.parse(" 127.0.0.1:8080, Wiki.Corp ,, [::1]:9000, ::2 ,localhost")
    assert allow.entries == frozenset({("127.0.0.1", 8080), ("wiki.corp", None), ("::1", 9000),
                                       ("::2", None), ("localhost", None)})
    assert allow.allows("127.0.0.1", 8080)
    assert not allow.allows("127.0.0.1", 8081)
    assert not allow.allows("127.0.0.1", None)
    assert allow.allows("WIKI.corp", 1234) and allow.allows("wiki.corp.", 80)
    assert allow.allows("[::1]", 9000) and allow.allows("0:0::1", 9000)
    assert not allow.allows("::1", 9001)
    assert allow.allows("localhost", 5000)
    assert not allow.allows("127.0.0.2", 8080)
    assert allow.allows("2130706433", 8080)  # the same address, spelled as resolvers accept


@pytest.mark.parametrize("text", [None, "", " , ,"])
def test_empty_allow_list_allows_nothing(text):
    allow = AllowList.parse(text)
    assert allow.entries == frozenset()
    assert not allow.allows("127.0.0.1", 80)


@pytest.mark.parametrize("bad", ["127.0.0.1:http", "host:0", "host:70000", "[::1", "[nothost]:80",
                                 "bad host", "a/b", "http://wiki.corp", "1:2:3:zz"])
def test_allow_list_parse_errors_name_the_setting(bad):
    with pytest.raises(ValueError, match="RESEARCHFLOW_FETCH_ALLOW_HOSTS") as info:
        AllowList.parse(f"wiki.corp, {bad}")
    assert repr(bad) in str(info.value)
