"""Live servers for the HTTP tests: the real app on uvicorn, on a real database.

Each server runs in a thread of the test process on a port the system picks
(127.0.0.1 only), with its own event loop and its own `AsyncPgSearch`; requests
go over real sockets. The corpus is the bundled examples plus a long generated
session (so the session view has pages), in two workspaces.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
import uvicorn

from pgsearch import PgSearch, Settings
from pgsearch.db.migrate import migrate
from pgsearch.web.app import ServeConfig, create_app
from pgsearch.web.server import ConnectionLimits, uvicorn_config
from tests.conftest import EXAMPLES, Databases, left_out, required

#: The browser the page's tests drive (Debian's Chromium; no browser is downloaded).
CHROMIUM = os.environ.get("PGSEARCH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
BROWSER_TESTS = Path(__file__).resolve().parent / "test_browser.py"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without Chromium the browser tests are left out, with one line saying how to
    enable them (unless ``PGSEARCH_REQUIRE`` names chromium: then they fail)."""
    if Path(CHROMIUM).exists() or required("chromium"):
        return
    mine = [i for i in items if Path(str(i.path)).resolve() == BROWSER_TESTS]
    if not mine:
        return
    config.hook.pytest_deselected(items=mine)
    items[:] = [i for i in items if i not in mine]
    left_out(
        f"tests/web/test_browser.py left out ({len(mine)} tests): no Chromium at {CHROMIUM} "
        "(enable: apt-get install -y chromium, or PGSEARCH_CHROMIUM=<a Chromium binary>)"
    )


WORKSPACE = "acme"
OTHER = "rival"
LONG = "long-session"
T0 = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)


def long_session() -> list[dict[str, Any]]:
    """60 messages; a few of them about the retry budget, far apart."""
    out: list[dict[str, Any]] = []
    for i in range(60):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"step {i}: checking the deployment pipeline stage {i}"
        if i in (7, 33, 52):
            text = f"step {i}: the retry budget of the payment webhook was exhausted"
        out.append(
            {
                "role": role,
                "content": text,
                "created_at": (T0 + timedelta(minutes=i)).isoformat(),
                **({"title": "Webhook retries"} if i == 0 else {}),
            }
        )
    return out


class LiveServer:
    """The app served by uvicorn in a thread; `url` is its base URL."""

    def __init__(
        self, config: ServeConfig, settings: Settings, limits: ConnectionLimits | None = None
    ) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        # The configuration `pgsearch serve` runs (protocol, limits, proxy rules).
        self.server = uvicorn.Server(
            uvicorn_config(create_app(config, settings=settings), limits or ConnectionLimits())
        )
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.sock.close()


class Client:
    """A JSON client with one token (or none)."""

    def __init__(self, base: str, token: str | None) -> None:
        self.base = base
        self.http = requests.Session()
        if token:
            self.http.headers["Authorization"] = f"Bearer {token}"

    def get(self, path: str, **params: Any) -> requests.Response:
        return self.http.get(self.base + path, params=params, timeout=30)

    def post(self, path: str, body: Any) -> requests.Response:
        data = body if isinstance(body, bytes | str) else json.dumps(body)
        return self.http.post(
            self.base + path,
            data=data,
            headers={"Content-Type": "application/json"},
            timeout=30,
        )


def error_code(response: requests.Response) -> str:
    data = response.json()
    assert set(data) == {"error"} and set(data["error"]) == {"code", "message"}, data
    assert data["error"]["message"]
    return str(data["error"]["code"])


@pytest.fixture(scope="session")
def http_dsn(databases: Databases) -> Iterator[str]:
    """A database with the examples and a long session in two workspaces."""
    name = databases.create(prefix="http")
    dsn = databases.dsn(name)
    migrate(dsn)
    with PgSearch.connect(dsn) as pg:
        pg.ingest_paths([EXAMPLES], workspace=WORKSPACE)
        pg.ingest_paths([EXAMPLES / "deploy-keys.jsonl"], workspace=OTHER)
        pg.append(workspace=WORKSPACE, session_id=LONG, messages=long_session())
    yield dsn
    databases.drop(name)


@pytest.fixture(scope="session")
def tokens(http_dsn: str) -> dict[str, str]:
    """Secrets by role: read, write, pinned (one session), rival, slow (1 request/s)."""
    with PgSearch.connect(http_dsn) as pg:
        made = {
            "read": pg.create_token(workspace=WORKSPACE, label="read"),
            "write": pg.create_token(workspace=WORKSPACE, write=True),
            "pinned": pg.create_token(workspace=WORKSPACE, session_id="cron-refactor"),
            "pinned_write": pg.create_token(
                workspace=WORKSPACE, session_id="cron-refactor", write=True
            ),
            "rival": pg.create_token(workspace=OTHER),
            "slow": pg.create_token(workspace=WORKSPACE, rate=0.5),
        }
    return {k: v.secret for k, v in made.items()}


@pytest.fixture(scope="session")
def ingest_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ingest-root")


@pytest.fixture(scope="session")
def server(http_dsn: str, tokens: dict[str, str], ingest_root: Path) -> Iterator[LiveServer]:
    """Token mode with appends and ingests on; tokens are looked up on every request."""
    config = ServeConfig(
        enable_append=True, ingest_roots=((WORKSPACE, ingest_root),), token_cache_seconds=0
    )
    with LiveServer(config, Settings.from_env(dsn=http_dsn)) as live:
        yield live


@pytest.fixture(scope="session")
def plain_server(http_dsn: str, tokens: dict[str, str]) -> Iterator[LiveServer]:
    """Token mode as `pgsearch serve` starts by default (no appends, no ingests)."""
    with LiveServer(ServeConfig(), Settings.from_env(dsn=http_dsn)) as live:
        yield live


def client(live: LiveServer, token: str | None = None) -> Client:
    return Client(live.url, token)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServeProcess:
    """``python -m pgsearch serve ARGS`` as a user runs it, on a free port; `url` is
    its base URL once it answers."""

    def __init__(self, dsn: str, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PGSEARCH_")}
        # Its output goes to a file: a pipe nobody reads would stall a chatty server.
        self.log = tempfile.TemporaryFile(mode="w+", encoding="utf-8")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pgsearch",
                "--dsn",
                dsn,
                "serve",
                "--port",
                str(self.port),
                *args,
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def output(self) -> str:
        """What the server printed so far."""
        self.log.seek(0)
        return self.log.read()

    def __enter__(self) -> ServeProcess:
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(self.url + "/healthz", timeout=2)
                return self
            except requests.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    printed = self.output()
                    self.__exit__()
                    pytest.fail(f"pgsearch serve did not start:\n{printed}")
                time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()

    def connect(self) -> socket.socket:
        """A raw connection to the server."""
        return socket.create_connection(("127.0.0.1", self.port), timeout=30)
