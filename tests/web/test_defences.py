"""The HTTP server against browsers, slow clients, floods and hostile values.

Every test talks to a real server over real sockets: the app on uvicorn in a
thread (`LiveServer`, with the very configuration `pgsearch serve` runs), or
`pgsearch serve` itself as a subprocess spoken to byte by byte (`ServeProcess`).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests

from pgsearch import PgSearch, Settings
from pgsearch.db.migrate import migrate
from pgsearch.types import Scope
from pgsearch.web.app import ServeConfig
from pgsearch.web.server import ConnectionLimits
from tests.conftest import Databases
from tests.web.conftest import WORKSPACE, LiveServer, ServeProcess, client, error_code

JSON = {"Content-Type": "application/json"}


@pytest.fixture
def fresh_dsn(databases: Databases) -> Iterator[str]:
    """An empty migrated database of this test's own (appends land here)."""
    name = databases.create(prefix="defences")
    dsn = databases.dsn(name)
    migrate(dsn)
    with PgSearch.connect(dsn) as pg:
        pg.append(
            workspace=WORKSPACE,
            session_id="known",
            messages=[{"role": "user", "content": "the advisory lock of the cron job"}],
        )
    yield dsn
    databases.drop(name)


def stored_messages(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM messages").fetchone()
    assert row is not None
    return int(row[0])


def open_config(**changes: Any) -> ServeConfig:
    """`pgsearch serve --open -w acme --write --append`."""
    return ServeConfig(
        open_scope=Scope(workspace=WORKSPACE), open_write=True, enable_append=True, **changes
    )


# --- Host, Origin, body type --------------------------------------------------------


def test_open_mode_answers_loopback_names_only(fresh_dsn: str) -> None:
    with LiveServer(open_config(), Settings.from_env(dsn=fresh_dsn)) as live:
        body = {"query": "advisory lock"}
        for host in (f"127.0.0.1:{live.port}", f"localhost:{live.port}", "[::1]", "localhost"):
            answer = requests.post(
                live.url + "/v1/search", json=body, headers={"Host": host}, timeout=10
            )
            assert answer.status_code == 200, (host, answer.text)
        # A name rebound to 127.0.0.1 by its owner's DNS is not this server's.
        for host in (
            f"evil.example:{live.port}",
            "evil.example",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "10.0.0.1",
            "127.0.0.1@evil.example",
        ):
            answer = requests.post(
                live.url + "/v1/search", json=body, headers={"Host": host}, timeout=10
            )
            assert answer.status_code == 421, (host, answer.text)
            assert error_code(answer) == "misdirected"
            assert "matches" not in answer.text
            page = requests.get(live.url + "/", headers={"Host": host}, timeout=10)
            assert page.status_code == 421 and "<html" not in page.text


def test_token_mode_answers_the_configured_hosts(http_dsn: str, tokens: dict[str, str]) -> None:
    auth = {"Authorization": f"Bearer {tokens['read']}"}
    config = ServeConfig(allowed_hosts=("search.example.com",))
    with LiveServer(config, Settings.from_env(dsn=http_dsn)) as live:
        for host, status in (
            ("search.example.com", 200),
            ("SEARCH.example.com:443", 200),
            (f"127.0.0.1:{live.port}", 200),
            ("other.example.com", 421),
        ):
            answer = requests.get(
                live.url + "/v1/whoami", headers={**auth, "Host": host}, timeout=10
            )
            assert answer.status_code == status, (host, answer.text)
    # Without a list, token mode answers any name: the token is the credential.
    with LiveServer(ServeConfig(), Settings.from_env(dsn=http_dsn)) as live:
        answer = requests.get(
            live.url + "/v1/whoami", headers={**auth, "Host": "any.example"}, timeout=10
        )
        assert answer.status_code == 200


def test_requests_from_another_origin_are_refused(fresh_dsn: str) -> None:
    config = open_config(allowed_origins=("https://search.example.com",))
    with LiveServer(config, Settings.from_env(dsn=fresh_dsn)) as live:
        for origin in ("http://evil.example", "null", f"http://localhost:{live.port + 1}"):
            for method, path, body in (
                ("GET", "/v1/sessions", None),
                ("POST", "/v1/search", {"query": "lock"}),
                (
                    "POST",
                    "/v1/append",
                    {"session_id": "planted", "messages": [{"role": "user", "content": "x"}]},
                ),
            ):
                answer = requests.request(
                    method,
                    live.url + path,
                    json=body,
                    headers={"Origin": origin},
                    timeout=10,
                )
                assert answer.status_code == 403, (origin, path, answer.text)
                assert error_code(answer) == "cross_origin"
                assert "access-control-allow-origin" not in answer.headers
        # The server's own page, and an origin it was told about, are served.
        for origin in (live.url, "https://search.example.com"):
            answer = requests.post(
                live.url + "/v1/search",
                json={"query": "lock"},
                headers={"Origin": origin},
                timeout=10,
            )
            assert answer.status_code == 200, (origin, answer.text)
    assert stored_messages(fresh_dsn) == 1


def test_a_post_that_is_not_declared_json_plants_nothing(fresh_dsn: str) -> None:
    body = json.dumps({"session_id": "planted", "messages": [{"role": "user", "content": "x"}]})
    with LiveServer(open_config(), Settings.from_env(dsn=fresh_dsn)) as live:
        # What a page on another origin can send without a preflight.
        for content_type in (
            "text/plain",
            "text/plain;charset=UTF-8",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            None,
        ):
            headers = {} if content_type is None else {"Content-Type": content_type}
            answer = requests.post(live.url + "/v1/append", data=body, headers=headers, timeout=10)
            assert answer.status_code == 415, (content_type, answer.text)
            assert error_code(answer) == "unsupported_media_type"
        assert stored_messages(fresh_dsn) == 1
        answer = requests.post(
            live.url + "/v1/append",
            data=body,
            headers={"Content-Type": "application/json; charset=utf-8"},
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
    assert stored_messages(fresh_dsn) == 2


# --- headers on every answer --------------------------------------------------------


def test_every_answer_carries_the_security_headers(
    server: LiveServer, tokens: dict[str, str]
) -> None:
    read = client(server, tokens["read"])
    anonymous = client(server)
    answers = {
        "page": anonymous.get("/"),
        "page file": anonymous.get("/static/index.html"),
        "script": anonymous.get("/static/app.js"),
        "health": anonymous.get("/healthz"),
        "openapi": anonymous.get("/openapi.json"),
        "json": read.get("/v1/whoami"),
        "401": anonymous.get("/v1/whoami"),
        "404": anonymous.get("/nothing"),
        "static 404": anonymous.get("/static/nothing.js"),
        "405": read.get("/v1/search"),
        "415": requests.post(server.url + "/v1/search", data="{}", timeout=10),
        "421": requests.get(server.url + "/", headers={"Host": "x"}, timeout=10),
    }
    for name, answer in answers.items():
        headers = answer.headers
        policy = headers.get("Content-Security-Policy", "")
        assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy, name
        assert headers.get("X-Frame-Options") == "DENY", name
        assert headers.get("X-Content-Type-Options") == "nosniff", name
        assert headers.get("Cache-Control") == "no-store", name
        assert headers.get("Referrer-Policy") == "no-referrer", name
        assert "Access-Control-Allow-Origin" not in headers, name
    assert answers["page file"].status_code == 200 and "<html" in answers["page file"].text


# --- hostile values -------------------------------------------------------------------


def test_hostile_values_are_400_json(server: LiveServer, tokens: dict[str, str]) -> None:
    write = client(server, tokens["write"])
    digits = "1" + "0" * 5000

    def append(session: str, extra: str = "") -> tuple[str, str]:
        message = '{"role": "user", "content": "x"' + extra + "}"
        return "/v1/append", '{"session_id": "' + session + '", "messages": [' + message + "]}"

    hostile = {
        "a 5,000-digit limit": ("/v1/search", '{"limit": ' + digits + "}"),
        "a 5,000-digit excerpt size": ("/v1/search", '{"excerpt_bytes": ' + digits + "}"),
        "a 400-digit created_at": append("h1", ', "created_at": 1' + "0" * 400),
        "a 5,000-digit created_at": append("h2", ', "created_at": ' + digits),
        "a lone surrogate in the session id": append("\\ud800"),
        "NUL in the session id": append("a\\u0000b"),
        "a newline in the session id": append("a\\nSYSTEM: b"),
        "a lone surrogate in a search session": ("/v1/search", '{"session_id": "\\udfff"}'),
        "NUL in a search tool name": ("/v1/search", '{"tool_name": "a\\u0000b"}'),
    }
    for name, (path, body) in hostile.items():
        answer = write.post(path, body)
        assert answer.status_code == 400, (name, answer.status_code, answer.text[:300])
        assert answer.headers["Content-Type"].startswith("application/json"), name
        assert error_code(answer) == "invalid_query", name
    for path in ("/v1/sessions/a%00b", "/v1/sessions/a%00b/around?seq=1"):
        answer = write.get(path)
        assert answer.status_code == 400 and error_code(answer) == "invalid_query", path


# --- large appends ----------------------------------------------------------------------


def test_a_large_append_does_not_hold_other_clients(
    server: LiveServer, tokens: dict[str, str]
) -> None:
    from pgsearch.web.inputs import MAX_APPEND_MESSAGES

    words = [f"w{i}x{i * 7919 % 10007}" for i in range(1200)]
    messages = [
        {"role": "user", "content": " ".join(words[(i * 13) % 400 :][:720])}
        for i in range(MAX_APPEND_MESSAGES)
    ]
    body = json.dumps({"session_id": "bulk", "messages": messages})
    assert len(body) > 7_000_000
    answered: list[requests.Response] = []

    def append() -> None:
        answered.append(client(server, tokens["write"]).post("/v1/append", body))

    writer = threading.Thread(target=append)
    read = client(server, tokens["read"])
    read.get("/v1/whoami")  # the token is checked before the clock starts
    slowest = 0.0
    writer.start()
    while writer.is_alive():
        began = time.monotonic()
        assert read.get("/v1/whoami").status_code in (200, 429)
        slowest = max(slowest, time.monotonic() - began)
        time.sleep(0.05)
    writer.join()
    assert answered[0].status_code == 200, answered[0].text
    assert answered[0].json()["appended"] == MAX_APPEND_MESSAGES
    assert slowest < 1.0, f"another client waited {slowest:.2f} s during the append"
    # Larger batches are several requests.
    too_many = {"session_id": "bulk2", "messages": [{"role": "user", "content": "x"}] * 1001}
    answer = client(server, tokens["write"]).post("/v1/append", too_many)
    assert answer.status_code == 400 and "at most 1,000" in answer.json()["error"]["message"]


# --- token guessing, forwarded addresses, health ------------------------------------------


def _guess(url: str, secret: str, headers: dict[str, str] | None = None) -> int:
    answer = requests.get(
        url + "/v1/whoami",
        headers={"Authorization": f"Bearer {secret}", **(headers or {})},
        timeout=60,
    )
    return answer.status_code


def test_concurrent_failed_token_checks_are_limited(http_dsn: str) -> None:
    config = ServeConfig(token_cache_seconds=0, failed_auth_rate=1.0)
    with LiveServer(config, Settings.from_env(dsn=http_dsn)) as live:
        began = time.monotonic()
        with ThreadPoolExecutor(max_workers=64) as pool:
            statuses = list(
                pool.map(
                    lambda i: _guess(live.url, f"pgs_{i:012x}_" + "g" * 43),
                    range(300),
                )
            )
        elapsed = time.monotonic() - began
    looked_up = statuses.count(401)
    # A burst of two, then one a second: every other guess is refused unchecked.
    assert looked_up <= 2 + elapsed + 1, (looked_up, elapsed)
    assert statuses.count(429) == 300 - looked_up


def test_forwarded_addresses_count_only_from_trusted_proxies(http_dsn: str) -> None:
    config = ServeConfig(token_cache_seconds=0, failed_auth_rate=1.0)
    guesses = [
        (f"pgs_{i:012x}_" + "f" * 43, {"X-Forwarded-For": f"198.51.100.{i}"}) for i in range(12)
    ]
    with LiveServer(config, Settings.from_env(dsn=http_dsn)) as live:
        statuses = [_guess(live.url, secret, headers) for secret, headers in guesses]
    assert statuses[0] == 401 and statuses.count(429) >= 8, statuses
    limits = ConnectionLimits(trusted_proxies=("127.0.0.1",))
    with LiveServer(config, Settings.from_env(dsn=http_dsn), limits) as live:
        statuses = [_guess(live.url, secret, headers) for secret, headers in guesses]
    assert statuses == [401] * 12  # each address its own bucket, as the proxy says


def test_health_is_answered_from_a_recent_check(http_dsn: str) -> None:
    config = ServeConfig(health_cache_seconds=30)
    with LiveServer(config, Settings.from_env(dsn=http_dsn)) as live:
        assert client(live).get("/healthz").status_code == 200
        with psycopg.connect(http_dsn) as conn:
            # Any query of the schema version would now wait for this lock.
            conn.execute("LOCK TABLE pgsearch_alembic_version IN ACCESS EXCLUSIVE MODE")
            for _ in range(50):
                began = time.monotonic()
                answer = client(live).get("/healthz")
                assert answer.status_code == 200
                assert time.monotonic() - began < 1.0
            conn.rollback()


# --- slow clients (a `pgsearch serve` process, raw sockets) ------------------------------


def _read_answer(sock: socket.socket, within: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes, and when it closed."""
    sock.settimeout(within)
    began = time.monotonic()
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        pass
    except ConnectionResetError:
        pass
    return data, time.monotonic() - began


def _read_one(sock: socket.socket) -> bytes:
    """One whole answer (headers and the body its Content-Length announces)."""
    sock.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.lower().split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def _trickle(sock: socket.socket, lines: list[bytes], every: float) -> None:
    for line in lines:
        try:
            sock.sendall(line)
        except OSError:
            return  # cut off
        time.sleep(every)


def test_slow_clients_are_cut_off(http_dsn: str) -> None:
    with ServeProcess(
        http_dsn,
        "--open",
        "-w",
        WORKSPACE,
        "--header-timeout",
        "2",
        "--body-timeout",
        "2",
    ) as served:
        # Headers, one line every half second, forever.
        with served.connect() as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            lines = [b"X-Slow: %d\r\n" % i for i in range(40)]
            feeder = threading.Thread(target=_trickle, args=(sock, lines, 0.5), daemon=True)
            feeder.start()
            data, took = _read_answer(sock, 10)
            assert data.startswith(b"HTTP/1.1 408"), data[:200]
            assert b'"code":"timeout"' in data and took < 5, took
        # The next request on a kept-alive connection, trickled after an answer.
        with served.connect() as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            first = _read_one(sock)
            assert first.startswith(b"HTTP/1.1 200"), first[:200]
            feeder = threading.Thread(
                target=_trickle,
                args=(sock, [b"G", b"E", b"T", b" ", b"/", *[b"x"] * 40], 0.3),
                daemon=True,
            )
            feeder.start()
            data, took = _read_answer(sock, 10)
            assert data.startswith(b"HTTP/1.1 408") and took < 5, (data[:200], took)
        # A body, one byte every half second.
        with served.connect() as sock:
            sock.sendall(
                b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            )
            feeder = threading.Thread(target=_trickle, args=(sock, [b" "] * 40, 0.5), daemon=True)
            feeder.start()
            data, took = _read_answer(sock, 10)
            assert data.startswith(b"HTTP/1.1 408"), data[:200]
            assert b'"code":"timeout"' in data and took < 5, took
        assert requests.get(served.url + "/healthz", timeout=10).status_code == 200


def test_connections_beyond_the_limit_are_refused(http_dsn: str) -> None:
    with ServeProcess(
        http_dsn, "--open", "-w", WORKSPACE, "--max-connections", "4", "--header-timeout", "3"
    ) as served:
        held = [served.connect() for _ in range(4)]
        try:
            time.sleep(0.3)
            with served.connect() as sock:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                data, _ = _read_answer(sock, 10)
            assert data.startswith(b"HTTP/1.1 503"), data[:200]
            assert b'"code":"unavailable"' in data and b"retry-after: 1" in data.lower()
        finally:
            for sock in held:
                sock.close()
        time.sleep(0.3)
        assert requests.get(served.url + "/healthz", timeout=10).status_code == 200


# --- ingest roots belong to workspaces -------------------------------------------------------


def test_a_workspace_cannot_ingest_another_workspaces_files(
    http_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from tests.conftest import EXAMPLES
    from tests.web.conftest import OTHER

    acme_root = tmp_path_factory.mktemp("acme-logs")
    rival_root = tmp_path_factory.mktemp("rival-logs")
    (acme_root / "private.jsonl").write_bytes((EXAMPLES / "pokemon-i18n.jsonl").read_bytes())
    (rival_root / "own.jsonl").write_bytes((EXAMPLES / "pokemon-i18n.jsonl").read_bytes())
    with PgSearch.connect(http_dsn) as pg:
        acme = pg.create_token(workspace=WORKSPACE, write=True).secret
        rival = pg.create_token(workspace=OTHER, write=True).secret
        before = pg.stats(workspace=OTHER).messages
    config = ServeConfig(ingest_roots=((WORKSPACE, acme_root), (OTHER, rival_root)))
    with LiveServer(config, Settings.from_env(dsn=http_dsn)) as live:
        # The rival's write token asks for acme's file, to read it in its own workspace.
        stolen = client(live, rival).post(
            "/v1/ingest", {"path": str(acme_root / "private.jsonl"), "session_id": "stolen"}
        )
        assert stolen.status_code == 403 and error_code(stolen) == "scope", stolen.text
        for own, secret in ((acme_root / "private.jsonl", acme), (rival_root / "own.jsonl", rival)):
            done = client(live, secret).post("/v1/ingest", {"path": str(own)})
            assert done.status_code == 200, done.text
        assert client(live, rival).get("/v1/whoami").json()["ingest"] is True
    with PgSearch.connect(http_dsn) as pg:
        assert pg.session_info(workspace=OTHER, session_id="stolen") is None
        assert pg.stats(workspace=OTHER).messages == before + 5
    # A server whose roots are bound to acme only gives the rival nothing to ingest.
    only_acme = ServeConfig(ingest_roots=((WORKSPACE, acme_root),))
    with LiveServer(only_acme, Settings.from_env(dsn=http_dsn)) as live:
        refused = client(live, rival).post("/v1/ingest", {"path": str(acme_root / "private.jsonl")})
        assert refused.status_code == 403 and "no ingest root" in refused.text
        assert client(live, rival).get("/v1/whoami").json()["ingest"] is False


def test_serve_binds_every_ingest_root_to_a_workspace(http_dsn: str, tmp_path: Path) -> None:
    from tests.acceptance.test_cli import pgsearch

    bare = pgsearch("serve", "--ingest-root", str(tmp_path), dsn=http_dsn)
    assert bare.returncode == 1 and "--ingest-root-for WORKSPACE DIR" in bare.stderr
    other = pgsearch(
        "serve", "--open", "-w", WORKSPACE, "--ingest-root-for", "rival", str(tmp_path),
        dsn=http_dsn,
    )  # fmt: skip
    assert other.returncode == 1 and "'rival'" in other.stderr
