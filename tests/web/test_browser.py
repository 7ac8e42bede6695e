"""The search page in a real browser: Debian's Chromium, driven by Playwright.

A person signs in with a token, types a query with a typo and sees the right hit,
opens its session, pages through it, filters, follows a deep link, uses the keys,
and reads it on a phone-sized screen; a screenshot is checked to show a rendered
page (not a blank or broken one). Playwright drives the system Chromium
(``/usr/bin/chromium``, or ``PGSEARCH_CHROMIUM``); no browser is downloaded.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from pgsearch import PgSearch
from tests.conftest import missing_part
from tests.web.conftest import CHROMIUM, LONG, LiveServer

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
    expect(page.locator(".result").first).to_be_visible()
    roles = page.locator(".result header span:nth-child(3)").all_inner_texts()
    assert roles and all(r.startswith("user") for r in roles), roles
    assert "role=user" in page.url
    assert errors == []


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
