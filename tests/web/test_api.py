"""The HTTP API's contract: every endpoint, every error code, and a scope that no
request can widen (crafted workspace ids, session ids, cursors)."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from pgsearch import PgSearch, SessionMatch, SessionQueryRequest
from pgsearch.db.store import HEAD_REVISION
from tests.conftest import EXAMPLES, Databases
from tests.helpers import check_example, doc_examples, marked
from tests.web.conftest import (
    LONG,
    OTHER,
    WORKSPACE,
    Client,
    LiveServer,
    client,
    error_code,
)


def test_health_names_the_schema_revision_without_a_token(server: LiveServer) -> None:
    response = client(server).get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "schema_revision": HEAD_REVISION}


def test_no_token_is_401_with_a_bearer_challenge(server: LiveServer) -> None:
    for path in ("/v1/sessions", "/v1/stats", "/v1/whoami", "/v1/sessions/x/messages"):
        response = client(server).get(path)
        assert response.status_code == 401, path
        assert error_code(response) == "unauthorized"
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert client(server).post("/v1/search", {"query": "cron"}).status_code == 401


def test_unknown_malformed_and_non_bearer_credentials_are_401(
    server: LiveServer, tokens: dict[str, str]
) -> None:
    good = tokens["read"]
    forged = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    for header in (
        f"Bearer {forged}",
        "Bearer pgs_nothing",
        "Bearer ",
        f"Basic {good}",
        good,
        f"Bearer {good}\x7f",
    ):
        c = client(server)
        c.http.headers["Authorization"] = header
        response = c.get("/v1/sessions")
        assert response.status_code == 401, header
        assert error_code(response) == "unauthorized"


def test_whoami_reports_the_scope_the_token_pins(
    server: LiveServer, tokens: dict[str, str]
) -> None:
    data = client(server, tokens["pinned"]).get("/v1/whoami").json()
    assert data["workspace_id"] == WORKSPACE
    assert data["session_id"] == "cron-refactor"
    assert data["write"] is False
    assert client(server, tokens["write"]).get("/v1/whoami").json()["write"] is True


def test_sessions_lists_the_workspace_most_recent_first(
    server: LiveServer, tokens: dict[str, str]
) -> None:
    data = client(server, tokens["read"]).get("/v1/sessions").json()
    ids = [s["session_id"] for s in data["sessions"]]
    assert set(ids) >= {"cron-refactor", "deploy-keys", "pokemon-i18n", LONG}
    assert data["workspace_id"] == WORKSPACE
    page = client(server, tokens["read"]).get("/v1/sessions", limit=2, offset=1).json()
    assert [s["session_id"] for s in page["sessions"]] == ids[1:3]
    assert page["next_offset"] == 3
    rival = client(server, tokens["rival"]).get("/v1/sessions").json()
    assert [s["session_id"] for s in rival["sessions"]] == ["deploy-keys"]


def test_a_session_token_lists_and_opens_its_session_only(
    server: LiveServer, tokens: dict[str, str]
) -> None:
    pinned = client(server, tokens["pinned"])
    listed = pinned.get("/v1/sessions").json()["sessions"]
    assert [s["session_id"] for s in listed] == ["cron-refactor"]
    assert pinned.get("/v1/sessions/cron-refactor").json()["message_count"] == 10
    for path in (
        "/v1/sessions/deploy-keys",
        "/v1/sessions/deploy-keys/messages",
        f"/v1/sessions/{LONG}/around?seq=1",
    ):
        response = pinned.get(path)
        assert response.status_code == 403, path
        assert error_code(response) == "scope"
    response = pinned.get("/v1/stats")
    assert response.status_code == 403 and error_code(response) == "scope"


def test_around_returns_the_window_with_the_anchor(
    server: LiveServer, tokens: dict[str, str]
) -> None:
    c = client(server, tokens["read"])
    window = c.get(f"/v1/sessions/{LONG}/around", seq=33, before=2, after=3).json()
    assert [m["seq"] for m in window["messages"]] == [31, 32, 33, 34, 35, 36]
    assert [m["seq"] for m in window["messages"] if m["anchor"]] == [33]
    assert "retry budget" in window["messages"][2]["content"]
    assert window["workspace_id"] == WORKSPACE and window["session_id"] == LONG


def test_around_errors(server: LiveServer, tokens: dict[str, str]) -> None:
    c = client(server, tokens["read"])
    cases = {
        f"/v1/sessions/{LONG}/around": "invalid_query",  # no seq
        f"/v1/sessions/{LONG}/around?seq=-1": "invalid_query",
        f"/v1/sessions/{LONG}/around?seq=abc": "invalid_query",
        f"/v1/sessions/{LONG}/around?seq=1&before=99": "invalid_query",
        f"/v1/sessions/{LONG}/around?seq=9999": "not_found",
        "/v1/sessions/no-such-session/around?seq=0": "not_found",
    }
    for path, code in cases.items():
        response = c.get(path)
        assert error_code(response) == code, path
        assert response.status_code == {"invalid_query": 400, "not_found": 404}[code]


def test_messages_page_through_a_session(server: LiveServer, tokens: dict[str, str]) -> None:
    c = client(server, tokens["read"])
    seen: list[int] = []
    start: int | None = 0
    while start is not None:
        page = c.get(f"/v1/sessions/{LONG}/messages", start_seq=start, limit=25).json()
        assert len(page["messages"]) <= 16  # the cap
        seen.extend(m["seq"] for m in page["messages"])
        start = page["next_seq"]
    assert seen == list(range(60))
    missing = c.get("/v1/sessions/nope/messages")
    assert missing.status_code == 404 and error_code(missing) == "not_found"


def test_session_ids_with_slashes_and_unicode_round_trip(
    server: LiveServer, tokens: dict[str, str]
) -> None:
    odd = "team/\u03b1 \u03b2?#%"
    with PgSearch.connect(server_dsn_of(server)) as pg:
        pg.append(
            workspace=WORKSPACE,
            session_id=odd,
            messages=[{"role": "user", "content": "an odd session name"}],
        )
    from urllib.parse import quote

    c = client(server, tokens["read"])
    page = c.get(f"/v1/sessions/{quote(odd, safe='')}/messages").json()
    assert page["session_id"] == odd
    assert page["messages"][0]["content"] == "an odd session name"


def server_dsn_of(live: LiveServer) -> str:
    api = live.server.config.app.state.api  # type: ignore[attr-defined]
    return str(api.db.settings.dsn)


def test_another_workspace_is_refused_however_it_is_named(
    server: LiveServer, tokens: dict[str, str]
) -> None:
    c = client(server, tokens["read"])
    for variant in (OTHER, "ACME", "acme ", "acme\u200b", ""):
        response = c.get("/v1/sessions", workspace_id=variant)
        assert response.status_code == 403, repr(variant)
        assert error_code(response) == "scope"
    assert c.get("/v1/sessions", workspace_id=WORKSPACE).status_code == 200
    # A rival token cannot open acme's sessions: they are not in its scope at all.
    rival = client(server, tokens["rival"])
    assert error_code(rival.get("/v1/sessions/cron-refactor/messages")) == "not_found"
    assert error_code(rival.get(f"/v1/sessions/{LONG}/around?seq=1")) == "not_found"


def test_stats_count_the_tokens_workspace(server: LiveServer, tokens: dict[str, str]) -> None:
    stats = client(server, tokens["read"]).get("/v1/stats").json()
    assert stats["workspace_id"] == WORKSPACE
    assert stats["sessions"] >= 4 and stats["messages"] >= 81
    rival = client(server, tokens["rival"]).get("/v1/stats").json()
    assert rival["workspace_id"] == OTHER and rival["sessions"] == 1


def test_append_needs_a_write_token_and_is_searchable_at_once(
    server: LiveServer, tokens: dict[str, str]
) -> None:
    body = {"session_id": "appended", "messages": [{"role": "user", "content": "zebra crossing"}]}
    read = client(server, tokens["read"]).post("/v1/append", body)
    assert read.status_code == 403 and error_code(read) == "scope"
    done = client(server, tokens["write"]).post("/v1/append", body)
    assert done.status_code == 200, done.text
    assert done.json() == {"session_id": "appended", "appended": 1}
    page = client(server, tokens["read"]).get("/v1/sessions/appended/messages").json()
    assert page["messages"][0]["content"] == "zebra crossing"


def test_an_append_sent_again_with_ids_is_stored_once(server: LiveServer, http_dsn: str) -> None:
    with PgSearch.connect(http_dsn) as pg:  # a workspace of its own: scores elsewhere stay
        c = client(server, pg.create_token(workspace="resending", write=True).secret)
    messages = [
        {"role": "user", "content": "resent question", "id": "q1"},
        {"role": "assistant", "content": "resent answer", "id": "a1"},
    ]
    body = {"session_id": "resent", "messages": messages}
    assert c.post("/v1/append", body).json() == {"session_id": "resent", "appended": 2}
    again = c.post("/v1/append", {"session_id": "resent", "messages": messages[1:]})
    assert again.json() == {"session_id": "resent", "appended": 0}
    page = c.get("/v1/sessions/resent/messages").json()
    assert [m["content"] for m in page["messages"]] == ["resent question", "resent answer"]
    twice = {"session_id": "resent", "messages": [messages[0], {**messages[0], "content": "x"}]}
    response = c.post("/v1/append", twice)
    assert response.status_code == 400 and "also message 0's" in response.text


def test_append_cannot_leave_the_tokens_scope(server: LiveServer, tokens: dict[str, str]) -> None:
    pinned = client(server, tokens["pinned_write"])
    other_session = {"session_id": "elsewhere", "messages": [{"role": "user", "content": "x"}]}
    response = pinned.post("/v1/append", other_session)
    assert response.status_code == 403 and error_code(response) == "scope"
    other_ws = {**other_session, "session_id": "cron-refactor", "workspace_id": OTHER}
    response = pinned.post("/v1/append", other_ws)
    assert response.status_code == 403 and error_code(response) == "scope"


def test_append_bad_bodies_are_400(server: LiveServer, tokens: dict[str, str]) -> None:
    c = client(server, tokens["write"])
    for body in (
        b"not json",
        b"[1, 2]",
        b"\xff\xfe",
        {"session_id": "s"},
        {"session_id": "s", "messages": []},
        {"session_id": "s", "messages": ["text"]},
        {"session_id": "s", "messages": [{"role": "user", "content": "x"}], "extra": 1},
        {"session_id": 5, "messages": [{"role": "user", "content": "x"}]},
        {"session_id": "s", "messages": [{"role": 7, "content": "x"}]},
    ):
        response = c.post("/v1/append", body)
        assert response.status_code == 400, (body, response.text)
        assert error_code(response) == "invalid_query"


def test_writes_are_off_unless_the_server_enables_them(
    plain_server: LiveServer, tokens: dict[str, str]
) -> None:
    c = client(plain_server, tokens["write"])
    body = {"session_id": "s", "messages": [{"role": "user", "content": "x"}]}
    for path, payload in (("/v1/append", body), ("/v1/ingest", {"path": "/tmp/x.jsonl"})):
        response = c.post(path, payload)
        assert response.status_code == 404 and error_code(response) == "not_found"
        assert "not enabled" in response.json()["error"]["message"]


def test_ingest_reads_files_under_the_root_only(
    server: LiveServer, tokens: dict[str, str], ingest_root: Path, tmp_path: Path
) -> None:
    inside = ingest_root / "pokemon.jsonl"
    inside.write_bytes((EXAMPLES / "pokemon-i18n.jsonl").read_bytes())
    c = client(server, tokens["write"])
    done = c.post("/v1/ingest", {"path": str(inside), "session_id": "ingested-over-http"})
    assert done.status_code == 200, done.text
    data = done.json()
    assert data["sessions"] == ["ingested-over-http"] and data["messages"] == 5
    assert data["workspace_id"] == WORKSPACE
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_bytes(inside.read_bytes())
    escaping = str(ingest_root / ".." / outside.parent.name / outside.name)
    for path in (str(outside), escaping, "/etc/passwd"):
        response = c.post("/v1/ingest", {"path": path})
        assert response.status_code == 403, path
        assert error_code(response) == "scope"
    read = client(server, tokens["read"]).post("/v1/ingest", {"path": str(inside)})
    assert read.status_code == 403 and error_code(read) == "scope"
    pinned = client(server, tokens["pinned_write"]).post("/v1/ingest", {"path": str(inside)})
    assert pinned.status_code == 403 and error_code(pinned) == "scope"


def test_each_token_has_its_own_request_rate(server: LiveServer, tokens: dict[str, str]) -> None:
    slow = client(server, tokens["slow"])  # 0.5 requests/s: a burst of 1
    first = slow.get("/v1/whoami")
    assert first.status_code == 200
    refused = slow.get("/v1/whoami")
    assert refused.status_code == 429 and error_code(refused) == "rate_limited"
    assert int(refused.headers["Retry-After"]) >= 1
    # Another token is not held up by this one.
    assert client(server, tokens["read"]).get("/v1/whoami").status_code == 200


def test_a_revoked_token_stops_working(server: LiveServer, http_dsn: str) -> None:
    with PgSearch.connect(http_dsn) as pg:
        made = pg.create_token(workspace=WORKSPACE)
        c = client(server, made.secret)
        assert c.get("/v1/whoami").status_code == 200
        revoked = pg.revoke_token(made.token.token_id)
        assert revoked is not None and revoked.revoked_at is not None
        assert pg.revoke_token(made.token.token_id) is None
    response = c.get("/v1/whoami")
    assert response.status_code == 401 and error_code(response) == "unauthorized"


def test_tokens_are_stored_only_as_hashes(http_dsn: str, tokens: dict[str, str]) -> None:
    import psycopg

    with psycopg.connect(http_dsn) as conn:
        rows = conn.execute("SELECT * FROM api_tokens").fetchall()
    text = repr(rows)
    assert rows
    for secret in tokens.values():
        assert secret not in text
        assert secret[len("pgs_") + 13 :] not in text  # the random part


def test_unknown_paths_and_methods_are_json_errors(
    server: LiveServer, tokens: dict[str, str]
) -> None:
    c = client(server, tokens["read"])
    missing = c.get("/v1/nothing-here")
    assert missing.status_code == 404 and error_code(missing) == "not_found"
    wrong = c.get("/v1/search")
    assert wrong.status_code == 405 and error_code(wrong) == "method_not_allowed"


def test_the_page_and_its_files_are_served_with_a_strict_policy(server: LiveServer) -> None:
    page = client(server).get("/")
    assert page.status_code == 200
    assert "text/html" in page.headers["Content-Type"]
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert '<input id="q"' in page.text
    for asset in ("/static/app.js", "/static/app.css"):
        assert client(server).get(asset).status_code == 200


def test_openapi_document_is_served(server: LiveServer) -> None:
    doc = client(server).get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    assert "/v1/search" in doc["paths"]


def test_rate_limit_buckets_refill_over_time() -> None:
    from pgsearch.web.limits import RateLimiter

    now = [0.0]
    limiter = RateLimiter(clock=lambda: now[0])
    assert [limiter.take("a", 2.0) for _ in range(4)] == [0.0] * 4  # burst: 2 s worth
    assert limiter.take("a", 2.0) == 0.5
    now[0] += 0.5
    assert limiter.take("a", 2.0) == 0.0
    assert limiter.take("b", 2.0) == 0.0


# --- search -----------------------------------------------------------------------


class HttpSessionQuery:
    """What a host in another language writes: `SessionQuery.search` as one HTTP call."""

    def __init__(self, base: str, token: str) -> None:
        self.c = client_for(base, token)

    def search(self, request: dict[str, object]) -> dict[str, object]:
        response = self.c.post("/v1/search", request)
        assert response.status_code == 200, response.text
        data: dict[str, object] = response.json()
        return data


def client_for(base: str, token: str) -> Client:
    return Client(base, token)


def test_search_over_http_equals_the_in_process_provider(
    server: LiveServer, tokens: dict[str, str], http_dsn: str
) -> None:
    remote = HttpSessionQuery(server.url, tokens["read"])
    with PgSearch.connect(http_dsn) as pg:
        local = pg.provider(workspace=WORKSPACE)
        for body in (
            {"query": "advisroy lock"},  # a typo
            {"query": "retry budget", "per_session": False, "limit": 5},
            {"query": "", "limit": 3},
            {"query": "pokemon", "kinds": ["user_text"], "excerpt_bytes": 80},
            {"query": "scheduler", "roles": ["assistant"], "since": "2026-03-01T00:00:00Z"},
        ):
            over_http = remote.search(body)
            request = search_request(body)
            assert over_http == local.search(request).to_json(), body
    first = remote.search({"query": "advisroy lock"})["matches"]
    assert isinstance(first, list) and first[0]["session_id"] == "cron-refactor"
    assert "**" in marked(first[0]) and "**" not in first[0]["excerpt"]
    assert set(first[0]) == {f.name for f in dataclasses.fields(SessionMatch)}


def search_request(body: dict[str, object]) -> SessionQueryRequest:
    from datetime import datetime

    fields = dict(body)
    for key in ("kinds", "roles"):
        if key in fields:
            fields[key] = tuple(fields[key])  # type: ignore[arg-type]
    if "since" in fields:
        fields["since"] = datetime.fromisoformat(str(fields["since"]))
    return SessionQueryRequest(**fields)  # type: ignore[arg-type]


def test_search_pages_with_the_cursor(server: LiveServer, tokens: dict[str, str]) -> None:
    c = client(server, tokens["read"])
    body = {"query": "deployment pipeline stage", "per_session": False, "limit": 5}
    first = c.post("/v1/search", body).json()
    assert len(first["matches"]) == 5 and first["next_cursor"]
    second = c.post("/v1/search", {**body, "cursor": first["next_cursor"]}).json()
    seen = {(m["session_id"], m["seq"]) for m in first["matches"]}
    assert seen.isdisjoint((m["session_id"], m["seq"]) for m in second["matches"])


def test_a_cursor_cannot_carry_a_search_into_another_scope(
    server: LiveServer, tokens: dict[str, str]
) -> None:
    body = {"query": "deploy", "per_session": False, "limit": 1}
    rival = client(server, tokens["rival"]).post("/v1/search", body).json()
    acme = client(server, tokens["read"])
    mine = acme.post("/v1/search", body).json()
    assert rival["next_cursor"] and mine["next_cursor"]
    borrowed = acme.post("/v1/search", {**body, "cursor": rival["next_cursor"]})
    assert borrowed.status_code == 400 and error_code(borrowed) == "invalid_query"
    forged = mine["next_cursor"][:-3] + (
        "AAA" if not mine["next_cursor"].endswith("AAA") else "BBB"
    )
    altered = acme.post("/v1/search", {**body, "cursor": forged})
    assert altered.status_code == 400 and error_code(altered) == "invalid_query"
    pinned = client(server, tokens["pinned"])
    widened = pinned.post("/v1/search", {**body, "cursor": mine["next_cursor"]})
    assert widened.status_code == 400 and error_code(widened) == "invalid_query"


def test_search_cannot_leave_the_tokens_scope(server: LiveServer, tokens: dict[str, str]) -> None:
    acme = client(server, tokens["read"])
    for body in ({"query": "deploy", "workspace_id": OTHER}, {"query": "x", "workspace_id": ""}):
        response = acme.post("/v1/search", body)
        assert response.status_code == 403 and error_code(response) == "scope"
    ok = acme.post("/v1/search", {"query": "deploy", "workspace_id": WORKSPACE})
    assert ok.status_code == 200
    pinned = client(server, tokens["pinned"])
    other = pinned.post("/v1/search", {"query": "deploy", "session_id": "deploy-keys"})
    assert other.status_code == 403 and error_code(other) == "scope"
    everything = pinned.post("/v1/search", {"query": "", "per_session": False, "limit": 50})
    assert {m["session_id"] for m in everything.json()["matches"]} == {"cron-refactor"}
    rival = client(server, tokens["rival"]).post("/v1/search", {"query": "advisory lock"}).json()
    assert all(m["workspace_id"] == OTHER for m in rival["matches"])
    assert not rival["matches"]


def test_search_input_errors(server: LiveServer, tokens: dict[str, str]) -> None:
    c = client(server, tokens["read"])
    for body in (
        b"{",
        b'"query"',
        {"query": 5},
        {"query": "x", "kinds": ["nonsense"]},
        {"query": "x", "roles": "user"},
        {"query": "x", "limit": 0},
        {"query": "x", "since": "yesterday"},
        {"query": "x", "unknown": True},
        {"query": "x", "per_session": "yes"},
        {"query": "x", "excerpt_bytes": -1},
        {"query": "x" * 100_000},
    ):
        response = c.post("/v1/search", body)
        assert response.status_code in (400, 413), (body, response.text)
        assert error_code(response) in ("invalid_query", "too_large")
    huge = c.post("/v1/search", b'{"query": "' + b"a" * 70_000 + b'"}')
    assert huge.status_code == 413 and error_code(huge) == "too_large"
    capped = c.post("/v1/search", {"query": "stage", "limit": 500}).json()
    assert capped["limit_capped"] == {"limit": 50}


def test_unknown_query_parameters_are_refused(server: LiveServer, tokens: dict[str, str]) -> None:
    c = client(server, tokens["read"])
    for path in (
        "/v1/sessions?limt=5",
        f"/v1/sessions/{LONG}/around?seq=1&befor=2",
        "/v1/stats?x=1",
    ):
        response = c.get(path)
        assert response.status_code == 400, path
        assert error_code(response) == "invalid_query"
        assert "unknown query parameter" in response.json()["error"]["message"]


def test_health_is_503_when_the_schema_is_not_current(dsn: str) -> None:
    import psycopg

    from pgsearch import Settings
    from pgsearch.web.app import ServeConfig

    with LiveServer(ServeConfig(health_cache_seconds=0.2), Settings.from_env(dsn=dsn)) as live:
        assert client(live).get("/healthz").status_code == 200
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("UPDATE pgsearch_alembic_version SET version_num = '0001'")
        time.sleep(0.3)  # the last answer is reused for health_cache_seconds
        response = client(live).get("/healthz")
        assert response.status_code == 503 and error_code(response) == "unavailable"
        assert "pgsearch migrate" in response.json()["error"]["message"]


def test_failed_token_checks_are_limited_per_client_address(
    http_dsn: str, tokens: dict[str, str]
) -> None:
    from pgsearch import Settings
    from pgsearch.web.app import FAILED_AUTH_RATE, ServeConfig

    assert FAILED_AUTH_RATE >= 10  # the default leaves room for honest mistakes
    # One failed check per second: a burst of two, then refusals.
    config = ServeConfig(token_cache_seconds=0, failed_auth_rate=1.0)
    with LiveServer(config, Settings.from_env(dsn=http_dsn)) as live:
        guesses = [
            client(live, f"pgs_{i:012x}_" + "g" * 43).get("/v1/whoami").status_code
            for i in range(6)
        ]
        assert guesses[0] == 401 and 429 in guesses, guesses
        limited = client(live, "pgs_000000000001_" + "h" * 43).get("/v1/whoami")
        assert limited.status_code == 429 and error_code(limited) == "rate_limited"
        assert int(limited.headers["Retry-After"]) >= 1


def test_a_database_that_went_away_is_503_unavailable(dsn: str, databases: Databases) -> None:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    from pgsearch import Settings
    from pgsearch.web.app import ServeConfig

    with PgSearch.connect(dsn) as pg:
        secret = pg.create_token(workspace=WORKSPACE).secret
    name = conninfo_to_dict(dsn)["dbname"]
    config = ServeConfig(token_cache_seconds=0)
    with LiveServer(config, Settings.from_env(dsn=dsn).with_(pool_timeout=3.0)) as live:
        c = client(live, secret)
        assert c.get("/v1/sessions").status_code == 200
        with psycopg.connect(databases.server_dsn, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
        for response in (c.get("/v1/sessions"), client(live).get("/healthz")):
            assert response.status_code == 503, response.text
            assert error_code(response) == "unavailable"


def test_the_http_docs_json_examples_are_a_real_runs_output(
    server: LiveServer, tokens: dict[str, str]
) -> None:
    doc = Path(__file__).resolve().parents[2] / "docs" / "http.md"
    for command in doc_examples(doc):
        method, path, body = command.split(" ", 2)
        assert method == "POST", command
        answer = client(server, tokens["read"]).post(path, json.loads(body))
        assert answer.status_code == 200, answer.text
        check_example(doc, command, answer.json(), volatile=("next_cursor", "searched", "score"))


def test_the_page_has_an_icon_without_a_token(server: LiveServer) -> None:
    answer = client(server).get("/favicon.ico")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("image/svg+xml")
    assert answer.content.startswith(b"<svg")


def test_log_file_paths_are_shown_only_to_tokens_that_may_see_them(
    server: LiveServer, tokens: dict[str, str]
) -> None:
    read = client(server, tokens["read"]).get("/v1/sessions").json()["sessions"]
    assert read and all(s["source"] is None for s in read)
    one = client(server, tokens["read"]).get("/v1/sessions/cron-refactor").json()
    assert one["source"] is None
    write = client(server, tokens["write"]).get("/v1/sessions").json()["sessions"]
    shown = [s["source"] for s in write if s["session_id"] == "cron-refactor"]
    assert shown == [str(EXAMPLES / "cron-refactor.jsonl")]
