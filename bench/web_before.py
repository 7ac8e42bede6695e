"""Screenshots of the search page as another checkout serves it, for docs/*-before.png.

    git worktree add --detach ../before <commit>
    python -m bench.web_before --checkout ../before --out docs

The browser tests (tests/web/test_browser.py) write the page's screenshots of this
checkout; this script takes the same views with the same data from the code of
``--checkout``, so the two can be set side by side. The other checkout's code runs
in processes of its own (``PYTHONPATH=<checkout>``, this interpreter's packages):
one migrates a new database and stores the tests' data, then ``pgsearch serve``
serves it; Chromium (``/usr/bin/chromium`` or ``PGSEARCH_CHROMIUM``, driven by
Playwright) signs in, runs the tests' steps and writes ``<out>/web-<view>-before.png``.
The database is made for the run and dropped after it. Nothing here runs in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import requests
from playwright.sync_api import Page, expect, sync_playwright
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "sessions"
CHROMIUM = os.environ.get("PGSEARCH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
SERVER = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"

# The data of tests/web/conftest.py and tests/web/test_browser.py.
T0 = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
LONG = "long-session"


def at(hours: int, minutes: int) -> str:
    return (T0 + timedelta(hours=hours, minutes=minutes)).isoformat()


def long_session() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(60):
        text = f"step {i}: checking the deployment pipeline stage {i}"
        if i in (7, 33, 52):
            text = f"step {i}: the retry budget of the payment webhook was exhausted"
        out.append(
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": text,
                "created_at": (T0 + timedelta(minutes=i)).isoformat(),
                **({"title": "Webhook retries"} if i == 0 else {}),
            }
        )
    return out


HOSTILE = (
    "# Plan for the migration\n"
    "Check the **migration** with `alembic upgrade head`:\n\n"
    "- first step\n"
    "- second step\n\n"
    '<img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script>\n'
    "[click me](javascript:window.__pwned=3) or [the docs](https://example.org/docs)"
)
CODE = (
    'Here is the fix:\n\n```python\ndef upgrade():\n    op.add_column("t", "<b>x</b>")\n```\nDone.'
)

#: (workspace, session id, messages) appended after the examples are ingested.
APPENDS: list[tuple[str, str, list[dict[str, Any]]]] = [
    ("acme", LONG, long_session()),
    (
        "md-notes",
        "release",
        [
            {"role": "user", "content": "which release was it?"},
            {"role": "assistant", "content": "Done. **Round 2 commit SHA**: 4f2a9c1"},
        ],
    ),
    ("md-notes", "plans", [{"role": "user", "content": "plan the **next** round"}]),
    (
        "md-render",
        "upgrade",
        [
            {"role": "user", "content": HOSTILE},
            {"role": "assistant", "content": CODE},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c1", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}},
                    {"id": "c2", "function": {"name": "bash", "arguments": '{"cmd": "mig"}'}},
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": "\n".join(f"file_{n}.py" for n in range(40)),
            },
            {
                "role": "tool",
                "tool_call_id": "c2",
                "content": "\n".join(
                    "migration applied" if n == 25 else f"step {n}" for n in range(30)
                ),
            },
        ],
    ),
]

#: Run by the other checkout's code: migrate, store the data, print a token per workspace.
LOADER = """
import json, sys
from pathlib import Path
from pgsearch import PgSearch
from pgsearch.db.migrate import migrate
job = json.load(sys.stdin)
migrate(job["dsn"])
examples = Path(job["examples"])
with PgSearch.connect(job["dsn"]) as pg:
    pg.ingest_paths([examples], workspace="acme")
    pg.ingest_paths([examples / "deploy-keys.jsonl"], workspace="rival")
    for workspace, session_id, messages in job["appends"]:
        pg.append(workspace=workspace, session_id=session_id, messages=messages)
    tokens = {w: pg.create_token(workspace=w).secret for w in ("acme", "md-notes", "md-render")}
print(json.dumps(tokens))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sign_in(page: Page, url: str, token: str) -> None:
    page.goto(url + "/")
    expect(page.locator("#login")).to_be_visible()
    page.fill("#token", token)
    page.check("#remember")
    page.click("#login-form button[type=submit]")
    expect(page.locator("#search-view")).to_be_visible()


def search_and_session(page: Page, url: str, shot: Callable[[str], None]) -> None:
    """test_typo_search_open_session_page_and_filter: the long session paged back and
    on, then every hit of "retry budget" with the histogram."""
    page.fill("#q", "retry budget")
    page.press("#q", "Enter")
    page.locator(f'.result[data-session="{LONG}"]').first.click()
    expect(page.locator(".message.anchor")).to_contain_text("retry budget")
    first_seq = page.locator(".message").first.get_attribute("data-seq")
    page.click("#prev-page")
    expect(page.locator(".message").first).not_to_have_attribute("data-seq", first_seq or "")
    before = page.locator("#page-label").inner_text()
    page.click("#next-page")
    expect(page.locator("#page-label")).not_to_have_text(before)
    expect(page.locator("#timeline-svg rect.hit")).to_have_count(3)
    shot("session")
    page.goto(url + "/?q=retry+budget&all=1")
    expect(page.locator(".result")).to_have_count(3)
    expect(page.locator("#histogram")).to_be_visible()
    shot("search")


def markdown_and_browse(page: Page, shot: Callable[[str], None]) -> None:
    """test_marks_come_from_the_ranges_and_browsing_is_not_searching."""
    page.fill("#q", "commit sha")
    page.press("#q", "Enter")
    expect(page.locator('.result[data-session="release"]')).to_have_count(1)
    shot("search-markdown")
    page.fill("#q", "")
    page.press("#q", "Enter")
    expect(page.locator(".result")).to_have_count(2)
    shot("browse")


def session_markdown(page: Page, shot: Callable[[str], None]) -> None:
    """test_messages_render_markdown_inert_with_code_blocks_and_long_output_folded:
    the session opened from "migration plan", at its tool call and long output."""
    page.fill("#q", "migration plan")
    page.press("#q", "Enter")
    page.locator('.result[data-session="upgrade"]').first.click()
    expect(page.locator("#session-view")).to_be_visible()
    call = page.locator(".message", has=page.locator(".tag", has_text="tool_input"))
    expect(call).to_have_count(1)
    # The tool call a little below the top, as the after view shows it.
    call.evaluate("el => { el.scrollIntoView({block: 'start'}); window.scrollBy(0, -90); }")
    shot("session-markdown")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, required=True, help="the other checkout")
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where PNGs go")
    parser.add_argument("--server", default=SERVER, help="PostgreSQL to make the database on")
    args = parser.parse_args()
    checkout = args.checkout.resolve()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGSEARCH_")}
    env["PYTHONPATH"] = str(checkout)

    name = f"pgsearch_shots_before_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.server, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0").format(
                sql.Identifier(name)
            )
        )
    dsn = psycopg.conninfo.make_conninfo(args.server, dbname=name)
    server: subprocess.Popen[str] | None = None
    log = tempfile.TemporaryFile(mode="w+", encoding="utf-8")
    try:
        job = {"dsn": dsn, "examples": str(EXAMPLES), "appends": APPENDS}
        loaded = subprocess.run(
            [sys.executable, "-c", LOADER],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            cwd=checkout,
            env=env,
            check=True,
        )
        tokens = json.loads(loaded.stdout.strip().splitlines()[-1])
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            [sys.executable, "-m", "pgsearch", "--dsn", dsn, "serve", "--port", str(port)],
            cwd=checkout,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(url + "/healthz", timeout=2)
                break
            except requests.ConnectionError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise SystemExit(f"pgsearch serve did not start:\n{log.read()}") from None
                time.sleep(0.1)

        args.out.mkdir(parents=True, exist_ok=True)
        expect.set_options(timeout=15_000)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            for workspace, steps in (
                ("acme", lambda page, shot: search_and_session(page, url, shot)),
                ("md-notes", markdown_and_browse),
                ("md-render", session_markdown),
            ):
                context = browser.new_context(
                    viewport={"width": 1200, "height": 900},
                    color_scheme="light",
                    timezone_id="UTC",
                    locale="en-US",
                )
                page = context.new_page()

                def shot(view: str, page: Page = page) -> None:
                    path = args.out / f"web-{view}-before.png"
                    path.write_bytes(page.screenshot(full_page=False))
                    print(path)

                sign_in(page, url, tokens[workspace])
                steps(page, shot)
                context.close()
            browser.close()
    finally:
        if server is not None and server.poll() is None:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        log.close()
        with psycopg.connect(args.server, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


if __name__ == "__main__":
    main()
