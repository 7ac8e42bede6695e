"""The search page in a real browser: Debian's Chromium, driven by Playwright.

A person signs in with a token, types a query with a typo and sees the right hit,
opens its session, pages through it, filters, follows a deep link, uses the keys,
and reads it on a phone-sized screen; a screenshot is checked to show a rendered
page (not a blank or broken one). Playwright drives the system Chromium
(``/usr/bin/chromium``, or ``PGSEARCH_CHROMIUM``); no browser is downloaded.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Route, expect, sync_playwright

from pgsearch import PgSearch
from tests.conftest import missing_part
from tests.web.conftest import CHROMIUM, LONG, T0, LiveServer

#: Where a test run leaves its screenshots (for a person to look at).
SHOTS = os.environ.get("PGSEARCH_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        missing_part(
            "chromium",
            f"no Chromium at {CHROMIUM}: apt-get install -y chromium, "
            "or PGSEARCH_CHROMIUM=<a Chromium binary>",
        )
    # Generous waits: CI runs this beside other suites on two cores.
    expect.set_options(timeout=15_000)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    context = browser.new_context(viewport={"width": 1200, "height": 900}, color_scheme="light")
    context.set_default_timeout(15_000)
    yield context
    context.close()


def sign_in(page: Page, url: str, token: str) -> None:
    page.goto(url + "/")
    expect(page.locator("#login")).to_be_visible()
    page.fill("#token", token)
    page.check("#remember")
    page.click("#login-form button[type=submit]")
    expect(page.locator("#search-view")).to_be_visible()


def shot(page: Page, name: str) -> bytes:
    png = page.screenshot(full_page=False)
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        (Path(SHOTS) / f"{name}.png").write_bytes(png)
    return png


def picture_stats(page: Page, png: bytes) -> dict[str, Any]:
    """Size, colours and inked share of a PNG, measured by the browser itself."""
    data = base64.b64encode(png).decode()
    stats: dict[str, Any] = page.evaluate(
        """async (data) => {
            const img = new Image();
            img.src = "data:image/png;base64," + data;
            await img.decode();
            const c = document.createElement("canvas");
            c.width = img.width; c.height = img.height;
            const g = c.getContext("2d");
            g.drawImage(img, 0, 0);
            const px = g.getImageData(0, 0, c.width, c.height).data;
            const colours = new Set();
            let inked = 0;
            for (let i = 0; i < px.length; i += 16) {
                colours.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
                if (px[i] + px[i + 1] + px[i + 2] < 600) inked++;
            }
            return {width: img.width, height: img.height, colours: colours.size,
                    inked: inked / (px.length / 16)};
        }""",
        data,
    )
    return stats


def test_typo_search_open_session_page_and_filter(
    context: BrowserContext, server: LiveServer, tokens: dict[str, str]
) -> None:
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    sign_in(page, server.url, tokens["read"])
    expect(page.locator("#scope")).to_contain_text("workspace acme")

    # A query with a typo finds the decision about the advisory lock.
    page.fill("#q", "advisry lock")
    page.press("#q", "Enter")
    first = page.locator(".result").first
    expect(first).to_contain_text("Cron refactor")
    expect(first.locator("mark")).to_have_text(["advisory", "lock"])
    expect(first.locator(".score")).to_contain_text("score")
    assert "q=advisry+lock" in page.url
    expect(page.locator("#status")).to_contain_text("entries searched")
    picture = picture_stats(page, shot(page, "results"))
    assert picture["width"] == 1200 and picture["height"] == 900
    assert picture["colours"] > 20, "the page looks blank"
    assert 0.005 < picture["inked"] < 0.6, picture

    # Open it: the window around the hit, the hit marked.
    first.click()
    expect(page.locator("#session-view")).to_be_visible()
    expect(page.locator("#session-title")).to_have_text("Cron refactor")
    anchor = page.locator(".message.anchor")
    expect(anchor).to_have_count(1)
    expect(anchor).to_contain_text("advisory lock")
    # A tool call reads as name(key=value, ...), not as JSON.
    expect(page.locator("#m3 pre")).to_have_text('grep(pattern="register_job", path="scheduler/")')
    # The words the search matched are marked in the session too.
    expect(anchor.locator("mark")).to_have_text(["advisory", "lock"])
    assert "sid=cron-refactor" in page.url
    expect(page.locator("#timeline")).to_be_visible()

    # Back to the results, then a long session to page through.
    page.click("#back")
    expect(page.locator(".result").first).to_be_visible()
    page.fill("#q", "retry budget")
    page.press("#q", "Enter")
    hit = page.locator(f'.result[data-session="{LONG}"]')
    expect(hit).to_have_count(1)
    hit.click()
    expect(page.locator(".message.anchor")).to_contain_text("retry budget")
    label = page.locator("#page-label")
    expect(label).to_contain_text("of 60")
    anchor_seq = int(page.locator(".message.anchor").get_attribute("data-seq") or -1)
    first_seq = page.locator(".message").first.get_attribute("data-seq")
    page.click("#prev-page")
    expect(page.locator(".message").first).not_to_have_attribute("data-seq", first_seq or "")
    earlier = int(page.locator(".message").first.get_attribute("data-seq") or -1)
    assert 0 <= earlier < anchor_seq
    assert "start=" in page.url
    before = label.inner_text()
    page.click("#next-page")
    expect(label).not_to_have_text(before)
    later = int(page.locator(".message").first.get_attribute("data-seq") or -1)
    assert later == earlier + 16
    # The timeline marks every hit of the query in this session; a click opens one.
    expect(page.locator("#timeline")).to_be_visible()
    expect(page.locator("#timeline-svg rect.hit")).to_have_count(3)
    shot(page, "session")
    page.locator("#timeline-svg rect.hit").filter(has_text="#7 ").dispatch_event("click")
    expect(page.locator(".message.anchor")).to_have_attribute("data-seq", "7")
    expect(page.locator("#timeline-svg rect.here")).to_have_count(1)

    # Every hit of one query over time: the histogram.
    page.goto(server.url + "/?q=retry+budget&all=1")
    expect(page.locator(".result")).to_have_count(3)
    expect(page.locator("#histogram")).to_be_visible()
    assert page.locator("#histogram-svg rect.bar").count() >= 2
    shot(page, "histogram")

    # Filter by role: every result is the user's.
    if not page.locator("#filters").evaluate("details => details.open"):
        page.click("#filters summary")
    page.uncheck("#f-all")
    page.fill("#q", "stage")
    page.select_option("#f-role", "user")
    # Unchecking "all" searched too; only the newest search's answer is shown.
    expect(page.locator("#results")).to_have_attribute("aria-busy", "false")
    expect(page.locator(".result").first).to_be_visible()
    roles = page.locator(".result header span:nth-child(3)").all_inner_texts()
    assert roles and all(r.startswith("user") for r in roles), roles
    assert "role=user" in page.url
    assert errors == []


def test_a_late_answer_to_an_earlier_search_never_replaces_a_later_one(
    context: BrowserContext, server: LiveServer, tokens: dict[str, str]
) -> None:
    """The server's answer to the first of two searches is held back until the second
    is shown; when it arrives, the page still shows the second search's results."""
    page = context.new_page()
    sign_in(page, server.url, tokens["read"])
    held: list[Route] = []

    def hold_the_first(route: Route) -> None:
        body = json.loads(route.request.post_data or "{}")
        if body.get("query") == "advisry lock" and not held:
            held.append(route)
        else:
            route.continue_()

    page.route("**/v1/search", hold_the_first)
    page.fill("#q", "advisry lock")
    page.press("#q", "Enter")
    expect(page.locator("#results")).to_have_attribute("aria-busy", "true")
    page.fill("#q", "retry budget")
    page.press("#q", "Enter")
    expect(page.locator("#results")).to_have_attribute("aria-busy", "false")
    later = page.locator(".result .excerpt").all_inner_texts()
    assert later and all("retry" in text.lower() for text in later), later
    assert len(held) == 1

    with page.expect_response("**/v1/search") as late:
        held[0].fulfill(response=held[0].fetch())
    assert late.value.ok
    # Let the page's handlers run on the late answer before looking.
    page.evaluate("() => new Promise((done) => setTimeout(done, 100))")
    assert page.locator(".result .excerpt").all_inner_texts() == later
    expect(page.locator("#results")).to_have_attribute("aria-busy", "false")
    assert "q=retry+budget" in page.url


def test_deep_links_keys_and_a_phone_screen(
    browser: Browser, server: LiveServer, tokens: dict[str, str]
) -> None:
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
    )
    context.set_default_timeout(15_000)
    try:
        page = context.new_page()
        sign_in(page, server.url, tokens["read"])
        # A link with the query in it shows the results straight away.
        page.goto(server.url + "/?q=pokemon&kind=user_text")
        expect(page.locator(".result mark").first).to_have_text("Pokémon")
        expect(page.locator("#f-kind")).to_have_value("user_text")
        width = page.evaluate("document.scrollingElement.scrollWidth")
        assert width <= 390, f"the page is {width}px wide on a 390px screen"
        picture = picture_stats(page, shot(page, "phone"))
        assert picture["colours"] > 10 and picture["inked"] > 0.005

        # Keys: / to search, j/k to move, Enter to open, n to page, Escape to go back.
        page.goto(server.url + "/?q=pipeline&all=1")  # the long session only
        expect(page.locator(".result.selected")).to_have_count(1)
        page.locator("body").click(position={"x": 5, "y": 5})
        page.keyboard.press("j")
        expect(page.locator(".result.selected")).to_have_attribute("data-index", "1")
        page.keyboard.press("k")
        expect(page.locator(".result.selected")).to_have_attribute("data-index", "0")
        page.keyboard.press("Enter")
        expect(page.locator("#session-view")).to_be_visible()
        expect(page.locator("#page-label")).to_contain_text("Messages")
        label = page.locator("#page-label").inner_text()
        # n pages on, p back (whichever way the session goes on from this hit).
        page.keyboard.press("n" if page.locator("#next-page").is_enabled() else "p")
        expect(page.locator("#page-label")).not_to_have_text(label)
        page.keyboard.press("Escape")
        expect(page.locator("#search-view")).to_be_visible()
        page.keyboard.press("/")
        assert page.evaluate("document.activeElement.id") == "q"
    finally:
        context.close()


def test_a_wrong_token_is_refused_and_the_page_says_why(
    context: BrowserContext, server: LiveServer
) -> None:
    page = context.new_page()
    page.goto(server.url + "/")
    page.fill("#token", "pgs_000000000000_" + "x" * 43)
    page.click("#login-form button[type=submit]")
    expect(page.locator("#login-error")).to_contain_text("unknown or was revoked")
    expect(page.locator("#search-view")).to_be_hidden()


def test_marks_come_from_the_ranges_and_browsing_is_not_searching(
    context: BrowserContext, server: LiveServer, http_dsn: str
) -> None:
    """Stored Markdown stays text: only the matched words are marked. An empty query
    lists the newest entries, with no scores and no chart of hits."""
    with PgSearch.connect(http_dsn) as pg:
        pg.append(
            workspace="md-notes",
            session_id="release",
            messages=[
                {"role": "user", "content": "which release was it?"},
                {"role": "assistant", "content": "Done. **Round 2 commit SHA**: 4f2a9c1"},
            ],
        )
        pg.append(
            workspace="md-notes",
            session_id="plans",
            messages=[{"role": "user", "content": "plan the **next** round"}],
        )
        token = pg.create_token(workspace="md-notes").secret
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    sign_in(page, server.url, token)
    page.fill("#q", "commit sha")
    page.press("#q", "Enter")
    hit = page.locator(".result", has_text="Round 2")
    expect(hit).to_have_count(1)
    expect(hit.locator(".excerpt")).to_have_text("Done. **Round 2 commit SHA**: 4f2a9c1")
    expect(hit.locator("mark")).to_have_text(["commit", "SHA"])
    expect(hit.locator(".score")).to_have_count(1)
    shot(page, "search-markdown")

    page.fill("#q", "")
    page.press("#q", "Enter")
    expect(page.locator("#status")).to_contain_text("Newest entries (2)")
    expect(page.locator(".result")).to_have_count(2)
    expect(page.locator(".result .score")).to_have_count(0)
    expect(page.locator(".result mark")).to_have_count(0)
    expect(page.locator("#histogram")).to_be_hidden()
    shot(page, "browse")
    assert errors == []


def test_hits_are_titled_by_their_sessions_first_prompt_when_they_have_no_title(
    context: BrowserContext, server: LiveServer, http_dsn: str
) -> None:
    """A session without a title of its own is named by its first prompt, cleaned
    and cut, in the results and in the session view; an agent's title is shown as
    it is."""

    def at(hours: int, minutes: int) -> str:
        return (T0 + timedelta(hours=hours, minutes=minutes)).isoformat()

    with PgSearch.connect(http_dsn) as pg:
        pg.append(
            workspace="login-work",
            session_id="flaky-login",
            messages=[
                {
                    "role": "user",
                    "created_at": at(1, 0),
                    "content": "please push the fix for the flaky login test",
                },
                {
                    "role": "assistant",
                    "created_at": at(1, 4),
                    "content": "Pushed: the login test now waits for the session cookie.",
                },
            ],
        )
        pg.append(
            workspace="login-work",
            session_id="login-timeouts",
            messages=[
                {
                    "role": "user",
                    "created_at": at(5, 10),
                    "content": "<system-reminder>be brief</system-reminder>",
                },
                {
                    "role": "user",
                    "created_at": at(5, 10),
                    "content": "## Why do **login** requests time out under load?\n"
                    "See `gateway.log` from last night's run, the p99 is above 30 s and "
                    "the pool is exhausted",
                },
                {
                    "role": "assistant",
                    "created_at": at(5, 13),
                    "content": "The login handler holds a pool connection while it hashes.",
                },
            ],
        )
        pg.append(
            workspace="login-work",
            session_id="sso",
            messages=[
                {
                    "role": "user",
                    "created_at": at(26, 2),
                    "content": "add single sign-on to the login page",
                },
                {
                    "role": "assistant",
                    "created_at": at(26, 9),
                    "content": "Added an OIDC login button.",
                    "title": "Single sign-on for the login page",
                },
            ],
        )
        token = pg.create_token(workspace="login-work").secret
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    sign_in(page, server.url, token)
    page.fill("#q", "login")
    page.press("#q", "Enter")
    expect(page.locator(".result")).to_have_count(3)
    titles = {
        str(r.get_attribute("data-session")): r.locator(".title").inner_text()
        for r in page.locator(".result").all()
    }
    assert titles == {
        "flaky-login": "please push the fix for the flaky login test",
        "login-timeouts": (
            "Why do login requests time out under load? See gateway.log from last night's…"
        ),
        "sso": "Single sign-on for the login page",
    }
    picture = picture_stats(page, shot(page, "search-titles"))
    assert picture["colours"] > 20 and 0.005 < picture["inked"] < 0.6, picture
    page.locator('.result[data-session="flaky-login"]').click()
    expect(page.locator("#session-title")).to_have_text(
        "please push the fix for the flaky login test"
    )
    assert errors == []


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


def test_messages_render_markdown_inert_with_code_blocks_and_long_output_folded(
    context: BrowserContext, server: LiveServer, http_dsn: str
) -> None:
    """A session's messages are Markdown made into page elements, never HTML: stored
    tags and script links stay text, fenced code is a code block, and a long tool
    output shows its first lines with the rest folded (open when a match is in it)."""
    with PgSearch.connect(http_dsn) as pg:
        pg.append(
            workspace="md-render",
            session_id="upgrade",
            messages=[
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
        )
        token = pg.create_token(workspace="md-render").secret
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    sign_in(page, server.url, token)
    page.fill("#q", "migration plan")
    page.press("#q", "Enter")
    hit = page.locator(".result", has_text="Plan for the")
    expect(hit).to_have_count(1)
    # The excerpt stays the stored text, marked from its ranges.
    expect(hit.locator(".excerpt")).to_contain_text("# Plan for the migration")
    hit.click()
    expect(page.locator("#session-view")).to_be_visible()

    user = page.locator(".message", has=page.locator(".tag", has_text="user_text"))
    expect(user.locator(".md h3")).to_have_text("Plan for the migration")
    expect(user.locator(".md strong")).to_have_text("migration")
    expect(user.locator(".md code")).to_have_text("alembic upgrade head")
    expect(user.locator(".md ul li")).to_have_text(["first step", "second step"])
    expect(user.locator(".md mark").first).to_have_text("Plan")
    # Stored HTML and a javascript: link stay text; only the https link is a link.
    expect(user).to_contain_text('<img src=x onerror="window.__pwned=1">')
    expect(user).to_contain_text("<script>window.__pwned=2</script>")
    expect(user).to_contain_text("[click me](javascript:window.__pwned=3)")
    assert page.locator("#messages img, #messages script, #messages b").count() == 0
    links = user.locator(".md a")
    expect(links).to_have_count(1)
    expect(links).to_have_text("the docs")
    expect(links).to_have_attribute("href", "https://example.org/docs")
    assert page.locator("#messages [onerror], #messages [href^='javascript']").count() == 0
    assert page.evaluate("window.__pwned") is None

    # A fenced block is a code block, its HTML text as it is.
    code = page.locator(".message .md pre code.language-python")
    expect(code).to_have_text('def upgrade():\n    op.add_column("t", "<b>x</b>")')
    expect(page.locator(".message", has_text="Here is the fix").locator(".md p")).to_have_text(
        ["Here is the fix:", "Done."]
    )

    # A long tool output: the first 12 lines, the other 28 folded until asked for.
    outputs = page.locator(".message", has=page.locator(".tag", has_text="tool_output"))
    expect(outputs).to_have_count(2)
    long = outputs.filter(has_text="file_0.py")
    fold = long.locator(".fold details")
    expect(fold.locator("summary")).to_have_text("28 more lines")
    expect(long.locator(".fold > pre")).to_have_text("\n".join(f"file_{n}.py" for n in range(12)))
    expect(long.get_by_text("file_39.py")).to_be_hidden()
    fold.scroll_into_view_if_needed()
    shot(page, "session-markdown")
    fold.locator("summary").click()
    expect(long.get_by_text("file_39.py")).to_be_visible()
    # A fold holding a matched word is open from the start.
    matched = outputs.filter(has_text="step 0")
    expect(matched.locator(".fold details")).to_have_attribute("open", "")
    expect(matched.locator(".fold details mark")).to_have_text("migration")
    assert errors == []
