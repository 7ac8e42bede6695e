"""Scoring the rows a plan read (`pgsearch.scoring`), without a database: titles and
summaries, candidate messages, sessions found only by a field, rare words and evidence."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from pgsearch import ranking
from pgsearch.plan import alone_fields, choose_expansions
from pgsearch.rows import CandidateRow, FieldRow, StoredMessage
from pgsearch.scoring import (
    Evidence,
    field_hits,
    orphan_hits,
    own_scores,
    rare_terms,
    score_candidates,
    with_evidence,
)
from tests.unit.test_plan import T0, known, parse, row, stats


def test_a_summary_holding_the_query_boosts_more_than_a_title() -> None:
    query = parse("kubernetes ingress")
    groups = tuple(
        choose_expansions(
            query, known(query, {"kubernetes": 5, "ingress": 5}), max_expansions=8
        ).values()
    )
    rows = [
        FieldRow(
            session_id="titled",
            field_len=4,
            tfs={"kubernetes": 1, "ingress": 1},
            in_title=frozenset({"kubernetes", "ingress"}),
        ),
        FieldRow(
            session_id="summarised",
            field_len=4,
            tfs={"kubernetes": 1, "ingress": 1},
            in_summary=frozenset({"kubernetes", "ingress"}),
        ),
        FieldRow(
            session_id="half",
            field_len=4,
            tfs={"kubernetes": 1},
            in_title=frozenset({"kubernetes"}),
        ),
        FieldRow(session_id="none", field_len=4, tfs={}),
    ]
    hits = field_hits(rows, groups, stats(1_000, n_fields=100))
    assert set(hits) == {"titled", "summarised", "half"}
    assert hits["titled"].matched_in == "title"
    assert hits["titled"].boost == pytest.approx(ranking.TITLE_BOOST)
    assert hits["summarised"].matched_in == "summary"
    assert hits["summarised"].boost == pytest.approx(ranking.SUMMARY_BOOST)
    assert 1 < hits["half"].boost < ranking.TITLE_BOOST
    assert hits["titled"].terms == {"kubernetes", "ingress"}


def candidate(sid: str, seq: int, tfs: dict[str, int], **kw: object) -> CandidateRow:
    values: dict[str, object] = {
        "kind": "user_text",
        "role": "user",
        "created_at": T0 + timedelta(minutes=seq),
        "length": 10,
        "phrase_hit": False,
    }
    values.update(kw)
    return CandidateRow(session_id=sid, seq=seq, tfs=tfs, **values)  # type: ignore[arg-type]


def first_entry(sid: str, content: str) -> StoredMessage:
    """A session's first entry, said by the user (where a title-only hit is shown)."""
    return StoredMessage(
        session_id=sid,
        seq=0,
        entry_id=None,
        kind="user_text",
        role="user",
        turn=0,
        tool_name=None,
        created_at=T0,
        content=content,
        arguments="",
    )


def test_candidates_score_bm25_times_role_phrase_and_title_factors() -> None:
    query = parse("flamingo report")
    groups = tuple(
        choose_expansions(
            query, known(query, {"flamingo": 3, "report": 40}), max_expansions=8
        ).values()
    )
    corpus = stats(1_000)
    tfs = {"flamingo": 1, "report": 1}
    rows = [
        candidate("u", 0, tfs),
        candidate("a", 0, tfs, kind="assistant_text", role="assistant"),
        candidate("p", 0, tfs, phrase_hit=True),
        candidate("zero", 0, {"other": 3}),
    ]
    base, _ = ranking.score_document(tfs, 10, groups, ranking.Corpus(1_000, 20_000))
    scored = {h.session_id: h for h in score_candidates(rows, groups, corpus, {}, {})}
    assert set(scored) == {"u", "a", "p"}
    assert scored["u"].score == pytest.approx(base * ranking.USER_WEIGHT)
    assert scored["a"].score == pytest.approx(base * ranking.ASSISTANT_WEIGHT)
    assert scored["p"].score == pytest.approx(base * ranking.USER_WEIGHT * ranking.PHRASE_BOOST)
    assert scored["u"].matched == {"flamingo", "report"}


def test_a_session_found_only_by_its_title_points_at_its_anchor_entry() -> None:
    query = parse("kubernetes")
    groups = tuple(
        choose_expansions(query, known(query, {"kubernetes": 2}), max_expansions=8).values()
    )
    hits = field_hits(
        [
            FieldRow(
                session_id="titled",
                field_len=3,
                tfs={"kubernetes": 1},
                in_title=frozenset({"kubernetes"}),
            ),
            FieldRow(
                session_id="also",
                field_len=3,
                tfs={"kubernetes": 1},
                in_title=frozenset({"kubernetes"}),
            ),
        ],
        groups,
        stats(100, n_fields=10),
    )
    rows = [candidate("also", 4, {"kubernetes": 2})]
    orphans = orphan_hits(rows, hits)
    assert list(orphans) == ["titled"]
    anchor = first_entry("titled", "hello there")
    scored = score_candidates(rows, groups, stats(100), hits, {"titled": anchor})
    by_session = {h.session_id: h for h in scored}
    titled = by_session["titled"]
    assert (titled.seq, titled.kind, titled.matched_in) == (0, "user_text", "title")
    assert titled.score == pytest.approx(hits["titled"].boost * hits["titled"].score)
    assert by_session["also"].matched_in is None
    assert math.isclose(
        by_session["also"].score,
        ranking.score_document({"kubernetes": 2}, 10, groups, ranking.Corpus(100, 2_000))[0]
        * ranking.USER_WEIGHT
        * hits["also"].boost,
    )
    # A title hit whose session has no entry left is dropped, not invented.
    assert [h.session_id for h in score_candidates(rows, groups, stats(100), hits, {})] == ["also"]


def test_kind_filters_decide_whether_a_title_or_summary_match_is_a_hit() -> None:

    assert alone_fields(("user_text", "assistant_text", "tool_input", "tool_error")) == (
        "title",
        "summary",
    )
    assert alone_fields(("summary",)) == ("summary",)
    assert alone_fields(("user_text",)) == ()
    query = parse("kubernetes ingress")
    groups = tuple(
        choose_expansions(
            query, known(query, {"kubernetes": 2, "ingress": 2}), max_expansions=8
        ).values()
    )
    rows = [
        FieldRow(
            session_id="titled",
            field_len=3,
            tfs={"kubernetes": 1, "ingress": 1},
            in_title=frozenset({"kubernetes", "ingress"}),
        ),
        FieldRow(
            session_id="both",
            field_len=6,
            tfs={"kubernetes": 2, "ingress": 1},
            in_title=frozenset({"kubernetes", "ingress"}),
            in_summary=frozenset({"kubernetes"}),
        ),
    ]
    every = field_hits(rows, groups, stats(100, n_fields=10))
    assert {sid: h.matched_in for sid, h in every.items()} == {"titled": "title", "both": "title"}
    summaries = field_hits(rows, groups, stats(100, n_fields=10), alone=("summary",))
    assert {sid: h.matched_in for sid, h in summaries.items()} == {
        "titled": None,
        "both": "summary",
    }
    assert summaries["titled"].boost == every["titled"].boost  # still boosts its messages
    assert list(orphan_hits([], summaries)) == ["both"]
    none = field_hits(rows, groups, stats(100, n_fields=10), alone=())
    assert orphan_hits([], none) == {}
    anchor = StoredMessage(
        session_id="titled",
        seq=0,
        entry_id=None,
        kind="user_text",
        role="user",
        turn=0,
        tool_name=None,
        created_at=T0,
        content="hello",
        arguments="",
    )
    assert score_candidates([], groups, stats(100), none, {"titled": anchor}) == []


def test_typing_a_session_title_brings_that_session_first() -> None:
    query = parse("nightly backup rotation")
    dfs = {"nightly": 30, "backup": 60, "rotation": 25}
    groups = tuple(choose_expansions(query, known(query, dfs), max_expansions=8).values())
    titles = [
        FieldRow(
            session_id="named",
            field_len=3,
            tfs=dict.fromkeys(dfs, 1),
            in_title=frozenset(dfs),
        ),
        FieldRow(
            session_id="partly",
            field_len=4,
            tfs={"backup": 1},
            in_title=frozenset({"backup"}),
        ),
    ]
    hits = field_hits(titles, groups, stats(1_000, n_fields=50))
    assert hits["named"].whole_title and not hits["partly"].whole_title
    rows = [
        # Another session's message holding every word, twice, and said by the user.
        candidate("chatty", 2, {"nightly": 2, "backup": 2, "rotation": 2}),
        candidate("named", 9, {"backup": 1}, role="assistant", kind="assistant_text"),
    ]
    scored = score_candidates(rows, groups, stats(1_000, n_fields=50), hits, {})
    ranked = ranking.rank(scored, per_session=True)
    assert [h.session_id for h in ranked] == ["named", "chatty"]


def test_rare_terms_are_exact_words_in_few_messages() -> None:
    query = parse("xmlsec1 signature failed")
    rows = [
        row(query, "xmlsec1", "xmlsec1", 1),
        row(query, "signature", "signature", 3),
        row(query, "signature", "signatures", 2, how="stem"),
        row(query, "failed", "failed", 900),
    ]
    groups = choose_expansions(query, rows, max_expansions=8).values()
    assert rare_terms(groups) == {"xmlsec1", "signature", "signatures"}


def test_neighbouring_turns_and_the_speaker_add_evidence() -> None:
    query = parse("caroline adoption")
    dfs = {"caroline": 60, "adoption": 4}
    groups = tuple(choose_expansions(query, known(query, dfs), max_expansions=8).values())
    rows = [
        candidate("s1", 3, {"adoption": 1}, speaker="Caroline"),
        candidate("s1", 4, {"caroline": 1}, role="assistant", kind="assistant_text"),
        candidate("s2", 8, {"adoption": 1}, speaker="Melanie"),
    ]
    plain = {
        (h.session_id, h.seq): h.score for h in score_candidates(rows, groups, stats(1_000), {}, {})
    }
    assert plain[("s1", 3)] == pytest.approx(plain[("s2", 8)])
    evidence = Evidence(context=0.3, speaker=1.0)
    scored = {
        (h.session_id, h.seq): h.score
        for h in score_candidates(rows, groups, stats(1_000), {}, {}, evidence)
    }
    assert scored[("s1", 3)] > scored[("s2", 8)]
    assert scored[("s1", 4)] > plain[("s1", 4)]


def test_two_reads_scored_apart_then_added_score_as_one_read_of_both() -> None:
    """A bounded search scores its first read on its own, then only the candidates the
    second read adds: with evidence, a title named in full and a session shown only
    by its title, the hits are those of scoring both reads at once, value for value
    and in the same order."""
    query = parse("nightly backup rotation")
    dfs = {"nightly": 30, "backup": 60, "rotation": 25}
    groups = tuple(choose_expansions(query, known(query, dfs), max_expansions=8).values())
    corpus = stats(1_000, n_fields=50)
    hits = field_hits(
        [
            FieldRow(
                session_id="named", field_len=3, tfs=dict.fromkeys(dfs, 1), in_title=frozenset(dfs)
            ),
            FieldRow(
                session_id="orphan",
                field_len=4,
                tfs={"backup": 1},
                in_title=frozenset({"backup"}),
            ),
        ],
        groups,
        corpus,
    )
    first = [
        candidate("a", 1, {"nightly": 1, "backup": 1}),
        candidate("a", 2, {"rotation": 2}, role="assistant", kind="assistant_text"),
        candidate("named", 5, {"backup": 1}),
        candidate("b", 3, {"unrelated": 1}),  # scores nothing: no hit, its session seen
    ]
    second = [
        candidate("a", 3, {"backup": 3}),  # next to a's second: context both ways
        candidate("b", 4, {"nightly": 1, "rotation": 1}),
        candidate("c", 0, {"backup": 1}, phrase_hit=True),
    ]
    anchor = first_entry("orphan", "rotation notes")
    full = Evidence(context=0.3, session=0.2, speaker=0.0)
    alone = Evidence(context=0.0, session=0.0, speaker=0.0)
    for evidence, anchors in ((full, {"orphan": anchor}), (alone, {}), (full, {})):
        added = own_scores(first, groups, corpus, hits, full) + own_scores(
            second, groups, corpus, hits, full
        )
        together = score_candidates(first + second, groups, corpus, hits, anchors, evidence)
        assert with_evidence(added, hits, anchors, evidence) == together
        assert added.sessions == {"a", "b", "c", "named"}
    # Reused, the first read's own scores are not changed by what is added to them.
    own = own_scores(first, groups, corpus, hits, full)
    before = list(own.hits)
    with_evidence(own + own_scores(second, groups, corpus, hits, full), hits, {}, full)
    with_evidence(own, hits, {"orphan": anchor}, full)
    assert own.hits == before
