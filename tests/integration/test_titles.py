"""Every session is named: its own title, else its first user prompt (shown, not searched)."""

from __future__ import annotations

from pgsearch import PgSearch, SessionQueryRequest


def test_a_session_without_a_title_is_named_by_its_first_prompt(pg: PgSearch) -> None:
    pg.append(
        workspace="w",
        session_id="plain",
        messages=[
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "please push the fix for the flaky login test"},
            {"role": "assistant", "content": "Pushed the fix for the flaky login test."},
        ],
    )
    pg.append(
        workspace="w",
        session_id="titled",
        messages=[{"role": "user", "content": "flaky builds again", "title": "CI triage"}],
    )
    expected = {"plain": "please push the fix for the flaky login test", "titled": "CI triage"}
    assert {s.session_id: s.title for s in pg.sessions(workspace="w")} == expected
    info = pg.session_info(workspace="w", session_id="plain")
    assert info is not None and info.title == expected["plain"]
    # Shown, not searched: a word of the prompt finds the prompt, never a "title" hit.
    result = pg.provider(workspace="w").search(SessionQueryRequest(query="flaky"))
    assert {m.session_id: m.kind for m in result.matches} == {
        "plain": "user_text",
        "titled": "user_text",
    }
