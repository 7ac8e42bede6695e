"""`pgsearch token` and `pgsearch serve` as a user runs them (subprocesses)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import psycopg
import pytest
import requests

from tests.acceptance.test_cli import ok, pgsearch
from tests.web.conftest import WORKSPACE, ServeProcess


def test_token_create_list_revoke(dsn: str) -> None:
    made = json.loads(
        ok(
            pgsearch(
                "token", "create", "-w", "acme", "--session", "s1", "--write", "--json", dsn=dsn
            )
        )
    )
    assert made["token"].startswith("pgs_") and made["write"] is True
    assert made["session_id"] == "s1" and made["workspace_id"] == "acme"
    plain = pgsearch("token", "create", "-w", "acme", "--rate", "5", "--label", "ci", dsn=dsn)
    secret = ok(plain).strip()
    assert secret.startswith("pgs_") and "shown only now" in plain.stderr
    listed = json.loads(ok(pgsearch("token", "list", "-w", "acme", "--json", dsn=dsn)))
    assert [t["token_id"] for t in listed] == [made["token_id"], secret.split("_")[1]]
    assert listed[1]["rate_per_second"] == 5 and listed[1]["label"] == "ci"
    assert "token" not in listed[0]  # secrets are never listed
    text = ok(pgsearch("token", "list", dsn=dsn))
    assert made["token_id"] in text and secret not in text and made["token"] not in text
    # Revoked by id, or by the whole token.
    assert "revoked" in ok(pgsearch("token", "revoke", made["token_id"], dsn=dsn))
    assert "revoked" in ok(pgsearch("token", "revoke", secret, dsn=dsn))
    again = pgsearch("token", "revoke", made["token_id"], dsn=dsn)
    assert again.returncode == 1 and "no live token" in again.stderr
    bad = pgsearch("token", "revoke", "'; DROP TABLE api_tokens; --", dsn=dsn)
    assert bad.returncode == 1 and "12 hex digits" in bad.stderr
    listed = json.loads(ok(pgsearch("token", "list", "--json", dsn=dsn)))
    assert all(t["revoked_at"] for t in listed)


def test_token_create_refuses_bad_scopes(dsn: str) -> None:
    for args, message in (
        (["-w", "bad\u202eid"], "workspace"),
        (["-w", "acme", "--session", "x" * 300], "session_id"),
        (["-w", "acme", "--rate", "0"], "rate"),
    ):
        result = pgsearch("token", "create", *args, dsn=dsn)
        assert result.returncode != 0, args
        assert message in result.stderr, result.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM api_tokens").fetchone() == (0,)


@pytest.fixture
def open_server(http_dsn: str) -> Iterator[str]:
    with ServeProcess(http_dsn, "--open", "-w", WORKSPACE) as served:
        yield served.url


def test_open_mode_serves_one_workspace_without_a_token(open_server: str) -> None:
    who = requests.get(open_server + "/v1/whoami", timeout=10).json()
    assert who["workspace_id"] == WORKSPACE and who["token_id"] is None and who["write"] is False
    sessions = requests.get(open_server + "/v1/sessions", timeout=10).json()["sessions"]
    assert "cron-refactor" in {s["session_id"] for s in sessions}
    other = requests.get(open_server + "/v1/sessions?workspace_id=rival", timeout=10)
    assert other.status_code == 403 and other.json()["error"]["code"] == "scope"
    # Writes are off unless asked for.
    body = {"session_id": "s", "messages": [{"role": "user", "content": "x"}]}
    assert requests.post(open_server + "/v1/append", json=body, timeout=10).status_code == 404


def test_open_mode_listens_on_loopback_only(dsn: str) -> None:
    result = pgsearch("serve", "--open", "-w", "acme", "--host", "0.0.0.0", dsn=dsn)
    assert result.returncode == 1 and "127.0.0.1 only" in result.stderr
    result = pgsearch("serve", "--open", dsn=dsn)
    assert result.returncode == 1 and "-w/--workspace" in result.stderr
    result = pgsearch("serve", "-w", "acme", dsn=dsn)
    assert result.returncode == 1 and "--open mode" in result.stderr
