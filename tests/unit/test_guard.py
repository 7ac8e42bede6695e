"""The Host and Origin rules of `pgsearch serve`, as pure decisions."""

from __future__ import annotations

import pytest

from pgsearch.web.guard import RequestPolicy, host_name, is_loopback, json_media_type


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("127.0.0.1:8765", "127.0.0.1"),
        ("LocalHost", "localhost"),
        ("[::1]:80", "::1"),
        ("search.example.com", "search.example.com"),
        ("evil.example:99999", None),
        ("a@b", None),
        ("a/b", None),
        ("", None),
        ("[::1", None),
    ],
)
def test_host_names(value: str, name: str | None) -> None:
    assert host_name(value) == name


def test_loopback_names_are_only_this_machine() -> None:
    assert all(is_loopback(n) for n in ("localhost", "127.0.0.1", "127.9.9.9", "::1"))
    assert not any(
        is_loopback(n)
        for n in ("localhost.evil.example", "127.0.0.1.nip.io", "10.0.0.1", "0.0.0.0")
    )


def test_open_mode_refuses_rebound_names_and_foreign_origins() -> None:
    policy = RequestPolicy(loopback_only=True)
    assert policy.refusal("127.0.0.1:8765", None) is None
    assert policy.refusal("127.0.0.1:8765", "http://127.0.0.1:8765") is None
    assert policy.refusal(None, None) is None  # not a browser (HTTP/1.0)
    refused = policy.refusal("evil.example:8765", "http://evil.example:8765")
    assert refused is not None and refused[0] == "misdirected"
    refused = policy.refusal("127.0.0.1:8765", "http://evil.example")
    assert refused is not None and refused[0] == "cross_origin"
    refused = policy.refusal("127.0.0.1:8765", "null")
    assert refused is not None and refused[0] == "cross_origin"


def test_token_mode_host_list_and_extra_origins() -> None:
    policy = RequestPolicy(
        loopback_only=False,
        allowed_hosts=frozenset({"search.example.com"}),
        allowed_origins=frozenset({"https://app.example.com"}),
    )
    assert policy.refusal("search.example.com", "https://app.example.com") is None
    assert policy.refusal("localhost:8765", None) is None
    refused = policy.refusal("other.example.com", None)
    assert refused is not None and refused[0] == "misdirected"
    assert RequestPolicy(loopback_only=False).refusal("any.example", None) is None


def test_json_media_types() -> None:
    assert json_media_type("application/json")
    assert json_media_type("Application/JSON; charset=utf-8")
    for other in (None, "", "text/plain", "application/x-www-form-urlencoded", "application/jsonx"):
        assert not json_media_type(other)
