"""normalize_url: one key per page, whatever spelling of its URL a search result or link used."""

from __future__ import annotations

import pytest

from core.search.urls import TRACKING_PARAMS, normalize_url


@pytest.mark.parametrize("url, expected", [
    # scheme and host case, default ports
    ("HTTP://Example.COM/Path", "http://example.com/Path"),
    ("http://example.com:80/a", "http://example.com/a"),
    ("https://example.com:443/a", "https://example.com/a"),
    ("http://example.com:443/a", "http://example.com:443/a"),
    ("https://example.com:8443/a", "https://example.com:8443/a"),
    # IDNA host, trailing dot, IPv6 literal
    ("https://Bücher.Example/x", "https://xn--bcher-kva.example/x"),
    ("https://example.com./x", "https://example.com/x"),
    ("http://[2001:DB8::1]:8080/x", "http://[2001:db8::1]:8080/x"),
    # fragment, empty query, empty path, trailing slash
    ("https://example.com/a#section-2", "https://example.com/a"),
    ("https://example.com/app#!/route/7", "https://example.com/app"),
    ("https://example.com/a?", "https://example.com/a"),
    ("https://example.com", "https://example.com/"),
    ("https://example.com/?#top", "https://example.com/"),
    ("https://example.com/a/b/", "https://example.com/a/b"),
    ("https://example.com/a//", "https://example.com/a"),
    ("https://example.com/", "https://example.com/"),
    # percent-encoding and dot segments
    ("https://example.com/a%2fb", "https://example.com/a%2Fb"),
    ("https://example.com/%7Euser/%41%62c", "https://example.com/~user/Abc"),
    ("https://example.com/caf\u00e9 menu", "https://example.com/caf%C3%A9%20menu"),
    ("https://example.com/a/./b/../c", "https://example.com/a/c"),
    ("https://example.com/a/b/..", "https://example.com/a"),
    ("https://example.com/../../a", "https://example.com/a"),
    ("https://example.com/a/%2E%2E/b", "https://example.com/b"),
    ("https://example.com/100%", "https://example.com/100%"),
    # query: tracking dropped, the rest kept in order, escapes normalised
    ("https://example.com/p?b=2&utm_source=x&a=1", "https://example.com/p?b=2&a=1"),
    ("https://example.com/p?UTM_Campaign=x&id=7&FBCLID=1", "https://example.com/p?id=7"),
    ("https://example.com/p?gclid=1&msclkid=2&_ga=3&mc_cid=4", "https://example.com/p"),
    ("https://example.com/s?q=a%2fb+c&x=%7e", "https://example.com/s?q=a%2Fb+c&x=~"),
    ("https://example.com/s?q=x=y&&flag", "https://example.com/s?q=x=y&flag"),
    ("https://example.com/s?z=1&a=2", "https://example.com/s?z=1&a=2"),
    # userinfo is part of the authority and kept
    ("http://user@Example.com/", "http://user@example.com/"),
])
def test_normalize_url_rules(url, expected):
    assert normalize_url(url) == expected


@pytest.mark.parametrize("url", [
    "ftp://Example.com/File.TXT", "mailto:Someone@Example.com", "javascript:alert(1)",
    "data:text/html,<b>Hi</b>", "example.com/no-scheme", "http:///no-host",
    "http://example.com:99999/bad-port",
])
def test_non_http_or_unparseable_urls_are_returned_stripped(url):
    assert normalize_url(f"  {url}\n") == url


def test_variants_of_one_article_share_one_key():
    variants = [
        "https://news.example.com/2024/05/story",
        "https://news.example.com/2024/05/story/",
        "HTTPS://News.Example.com:443/2024/05/story?utm_source=twitter&utm_medium=social",
        "https://news.example.com/2024/05/story?fbclid=IwAR0abc#comments",
        "https://news.example.com/2024/05/./story?utm_campaign=may&gclid=xyz&igshid=q",
        "https://news.example.com/2024/06/../05/story?mc_eid=1&_gl=2&ref_src=twsrc",
    ]
    assert {normalize_url(v) for v in variants} == {"https://news.example.com/2024/05/story"}


def test_meaningful_parameters_keep_pages_apart():
    assert normalize_url("https://example.com/item?id=1") != normalize_url(
        "https://example.com/item?id=2")
    assert normalize_url("https://example.com/a?x=1&y=2") != normalize_url(
        "https://example.com/a?y=2&x=1")


@pytest.mark.parametrize("url", [
    "HTTP://Bücher.Example:80/a/./b/../c/?utm_source=x&q=caf\u00e9%7e%2f&z#frag",
    "https://example.com/100%/x%zz?a=%%41",
    "https://[2001:DB8::1]:443/a//b/%2e/",
    "https://example.com/s?q=a%3Db%26c&k=&=v",
])
def test_normalize_url_is_idempotent(url):
    once = normalize_url(url)
    assert normalize_url(once) == once


def test_tracking_params_are_lower_case_names():
    assert {"fbclid", "gclid", "dclid", "msclkid", "mc_cid", "mc_eid", "igshid", "yclid",
            "_ga", "_gl", "ref_src", "spm"} <= TRACKING_PARAMS
    assert all(name == name.lower() for name in TRACKING_PARAMS)
