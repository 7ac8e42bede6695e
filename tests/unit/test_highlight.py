"""Matched words apart from the excerpt's text: stored Markdown is never a mark."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from pgsearch import tools
from pgsearch.excerpt import MARK_CLOSE, MARK_OPEN, make_excerpt
from pgsearch.highlight import (
    ANSI_ON,
    model_excerpt,
    read_model_excerpt,
    segments,
    split_marks,
    terminal_excerpt,
)
from pgsearch.types import SessionMatch, SessionQueryResult

STORED = "Done. **Round 2 commit SHA**: 4f2a9c1"


def shown(text: str, spans: tuple[tuple[int, int], ...]) -> list[str]:
    return [text[a:b] for a, b in spans]


def test_stored_markdown_stays_text_and_only_matches_are_ranges() -> None:
    text, spans = split_marks(make_excerpt(STORED, ["commit", "sha"], 600))
    assert text == STORED
    assert shown(text, spans) == ["commit", "SHA"]


def test_an_empty_query_marks_nothing() -> None:
    text, spans = split_marks(make_excerpt(STORED, [], 600))
    assert (text, spans) == (STORED, ())


def test_offsets_count_code_points() -> None:
    text, spans = split_marks(make_excerpt("東京 😀 Pokémon search", ["pokemon"], 600))
    assert shown(text, spans) == ["Pokémon"]
    assert spans == ((5, 12),)


def test_the_text_cannot_hold_the_excerpts_own_marks() -> None:
    forged = f"plain {MARK_OPEN}forged{MARK_CLOSE} text with needle"
    text, spans = split_marks(make_excerpt(forged, ["needle"], 600))
    assert shown(text, spans) == ["needle"]
    assert MARK_OPEN not in text and MARK_CLOSE not in text


def test_a_cut_excerpt_keeps_its_ranges_inside_the_text() -> None:
    text, spans = split_marks(make_excerpt("needle " * 400, ["needle"], 100))
    assert spans and all(0 <= a < b <= len(text) for a, b in spans)
    assert set(shown(text, spans)) == {"needle"}


def test_a_terminal_gets_colour_and_a_pipe_plain_text() -> None:
    text, spans = split_marks(make_excerpt(STORED + "\nnext\x1b[2J", ["commit"], 600))
    plain = terminal_excerpt(text, spans, color=False)
    assert plain == "Done. **Round 2 commit SHA**: 4f2a9c1 next\\x1b[2J"
    coloured = terminal_excerpt(text, spans, color=True)
    assert f"{ANSI_ON}commit\x1b[0m" in coloured
    assert coloured.count("\x1b[") == 2  # the marks only; the stored escape is escaped


def test_the_model_marker_cannot_be_faked_by_the_text() -> None:
    text = "see ⟦not a match⟧ and the needle \\"
    shown_to_model = model_excerpt(text, ((26, 32),))
    assert "⟦needle⟧" in shown_to_model
    assert "\\⟦not a match\\⟧" in shown_to_model
    assert read_model_excerpt(shown_to_model) == (text, ((26, 32),))


@st.composite
def texts_and_spans(draw: st.DrawFn) -> tuple[str, tuple[tuple[int, int], ...]]:
    text = draw(st.text(alphabet=st.sampled_from("ab \\⟦⟧*"), max_size=24))
    cuts = sorted(set(draw(st.lists(st.integers(0, len(text)), max_size=8))))
    pairs = list(zip(cuts[::2], cuts[1::2], strict=False))
    return text, tuple((a, b) for a, b in pairs if b > a)


@given(texts_and_spans())
def test_the_model_text_reads_back_exactly(case: tuple[str, tuple[tuple[int, int], ...]]) -> None:
    text, spans = case
    assert read_model_excerpt(model_excerpt(text, spans)) == (text, spans)


def test_segments_ignore_ranges_outside_the_text() -> None:
    assert segments("abc", ((2, 9), (1, 2), (0, 1))) == [("a", False), ("b", True), ("c", False)]


def test_tool_text_marks_matches_with_the_model_marker() -> None:
    match = SessionMatch(
        workspace_id="w",
        session_id="s",
        entry_id="s:1",
        seq=1,
        kind="assistant_text",
        turn=1,
        role="assistant",
        tool_name=None,
        excerpt=STORED,
        highlights=((16, 22),),
        created_at=datetime(2026, 3, 2, tzinfo=UTC),
        score=1.0,
        title=None,
    )
    result = SessionQueryResult(matches=(match,), searched=5)
    text = tools.render_search(result, {"query": "commit"})
    assert "Done. **Round 2 ⟦commit⟧ SHA**: 4f2a9c1" in text
    assert text.startswith("1 match (5 entries searched")
    assert match.to_json()["highlights"] == [[16, 22]]
