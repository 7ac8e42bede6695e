"""BM25 re-ranking, the relative floor, per-session best hits and cursor paging."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgsearch import ranking
from pgsearch.ranking import (
    EXACT,
    FUZZY_1,
    FUZZY_2,
    PREFIX,
    STEM,
    Corpus,
    Expansion,
    Ranked,
    idf,
    page_after,
    rank,
    score_document,
    term_score,
)

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def hit(session: str, seq: int, score: float, minutes: int = 0) -> Ranked:
    return Ranked(
        session_id=session,
        seq=seq,
        kind="user_text",
        score=score,
        created_at=T0 + timedelta(minutes=minutes),
        matched=frozenset(),
    )


def ids(hits: list[Ranked]) -> list[tuple[str, int]]:
    return [(h.session_id, h.seq) for h in hits]


# -- BM25 -------------------------------------------------------------------------------


def test_reference_parameters() -> None:
    assert (ranking.K1, ranking.B, ranking.RELATIVE_FLOOR) == (1.2, 0.75, 0.15)


@settings(deadline=None)
@given(st.integers(0, 10**9), st.data())
def test_lucene_idf_is_never_negative(n: int, data: st.DataObject) -> None:
    df = data.draw(st.integers(0, n))
    assert idf(n, df) >= 0.0


def test_idf_of_a_term_in_every_document_is_small_but_positive() -> None:
    assert 0.0 < idf(1000, 1000) < 0.001
    assert idf(1000, 1) > idf(1000, 10) > idf(1000, 100)


def test_idf_by_hand() -> None:
    # ln(1 + (N - df + 0.5) / (df + 0.5)) with N = 10, df = 2: ln(1 + 8.5 / 2.5)
    assert idf(10, 2) == pytest.approx(math.log(4.4))


def test_term_score_by_hand() -> None:
    # k1 = 1.2, b = 0.75, tf = 2, length 5, average length 10:
    # norm = 1.2 * (0.25 + 0.75 * 0.5) = 0.75; tf part = 2 * 2.2 / (2 + 0.75) = 1.6
    assert term_score(2, 2, 10, 5, 10.0) == pytest.approx(1.6 * math.log(4.4))
    assert term_score(0, 2, 10, 5, 10.0) == 0.0


def test_score_document_by_hand() -> None:
    corpus = Corpus(n=10, total_length=100)
    groups = [
        [Expansion(0, "cron", EXACT, df=2)],
        [Expansion(1, "lock", EXACT, df=5), Expansion(1, "locks", STEM, df=5)],
        [Expansion(2, "absent", EXACT, df=1)],
    ]
    tfs = {"cron": 2, "locks": 1, "other": 3}
    score, matched = score_document(tfs, 5, groups, corpus, coverage_exponent=0)
    cron = 1.6 * math.log(4.4)
    # tf = 1: 2.2 / (1 + 0.75); idf = ln(1 + 5.5 / 5.5)
    locks = STEM * (2.2 / 1.75) * math.log(2.0)
    assert score == pytest.approx(cron + locks)
    assert matched == {"cron", "locks"}
    # Coverage: the share of the query's IDF weight the document holds ("absent" is
    # missing; the lock group counts with its best weight, the exact one).
    weights = [math.log(4.4), math.log(2.0), math.log(1 + 9.5 / 1.5)]
    covered = (weights[0] + weights[1]) / sum(weights)
    with_coverage, _ = score_document(tfs, 5, groups, corpus)
    assert with_coverage == pytest.approx((cron + locks) * covered)


def test_covering_more_of_the_query_beats_repeating_one_word() -> None:
    corpus = Corpus(n=1000, total_length=10_000)
    groups = [[Expansion(0, "pebble", EXACT, df=20)], [Expansion(1, "limiter", EXACT, df=20)]]
    both, _ = score_document({"pebble": 1, "limiter": 1}, 10, groups, corpus)
    one, _ = score_document({"pebble": 6}, 10, groups, corpus)
    assert both > one


def test_longer_documents_score_lower_for_the_same_tf() -> None:
    assert term_score(1, 3, 100, 5, 20.0) > term_score(1, 3, 100, 40, 20.0)


def test_rarer_terms_score_higher() -> None:
    assert term_score(1, 1, 100, 10, 10.0) > term_score(1, 50, 100, 10, 10.0)


def test_session_field_scores_use_session_frequencies() -> None:
    corpus = Corpus(n=10, total_length=30)
    group = [[Expansion(0, "cron", EXACT, df=9, sf=1)]]
    by_df, _ = score_document({"cron": 1}, 3, group, corpus)
    by_sf, _ = score_document({"cron": 1}, 3, group, corpus, use_sf=True)
    assert by_sf > by_df


def test_match_weights_order() -> None:
    assert EXACT > STEM > FUZZY_1 > PREFIX > FUZZY_2 > 0


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(2, 10**6),
    tf=st.integers(1, 50),
    length=st.integers(1, 500),
    total=st.integers(1, 10**7),
    weight=st.sampled_from([STEM, FUZZY_1, FUZZY_2, PREFIX]),
    data=st.data(),
)
def test_exact_match_outranks_an_expansion_with_the_same_tf(
    n: int, tf: int, length: int, total: int, weight: float, data: st.DataObject
) -> None:
    # The word itself must win over its typo, word form or prefix expansion however
    # rare the expansion is (a rare misspelling is no better evidence than the word).
    length = max(length, tf)
    exact_df = data.draw(st.integers(1, n), label="exact_df")
    other_df = data.draw(st.integers(1, n), label="other_df")
    corpus = Corpus(n=n, total_length=max(total, n))
    group = [[Expansion(0, "database", EXACT, exact_df), Expansion(0, "databse", weight, other_df)]]
    exact, _ = score_document({"database": tf}, length, group, corpus)
    other, _ = score_document({"databse": tf}, length, group, corpus)
    assert exact > other


def test_a_rare_word_form_does_not_outrank_the_word_itself() -> None:
    corpus = Corpus(n=1000, total_length=10_000)
    group = [[Expansion(0, "paint", EXACT, df=200), Expansion(0, "painted", STEM, df=1)]]
    exact, _ = score_document({"paint": 1}, 10, group, corpus)
    form, _ = score_document({"painted": 1}, 10, group, corpus)
    assert exact > form


def test_a_document_with_both_forms_counts_the_best_once() -> None:
    corpus = Corpus(n=100, total_length=1000)
    group = [[Expansion(0, "paint", EXACT, df=5), Expansion(0, "painted", STEM, df=5)]]
    both, matched = score_document({"paint": 1, "painted": 1}, 10, group, corpus)
    exact, _ = score_document({"paint": 1}, 10, group, corpus)
    assert both == pytest.approx(exact)
    assert matched == {"paint"}


def test_empty_corpus_does_not_divide_by_zero() -> None:
    score, _ = score_document({"x": 1}, 1, [[Expansion(0, "x", EXACT, 0)]], Corpus(0, 0))
    assert score >= 0.0
    assert Corpus(0, 0).avg_length == 0.0


# -- ordering, floor, per-session --------------------------------------------------------


def test_relative_floor_drops_hits_below_15_percent_of_the_top() -> None:
    hits = [hit("a", 0, 10.0), hit("b", 0, 1.51), hit("c", 0, 1.49), hit("d", 0, 0.1)]
    assert ids(rank(hits, per_session=False)) == [("a", 0), ("b", 0)]


def test_floor_can_be_turned_off() -> None:
    hits = [hit("a", 0, 10.0), hit("b", 0, 0.1)]
    assert len(rank(hits, per_session=False, floor=0.0)) == 2


def test_all_zero_scores_are_kept() -> None:
    hits = [hit("a", 0, 0.0, 1), hit("b", 0, 0.0, 2)]
    assert ids(rank(hits, per_session=False)) == [("b", 0), ("a", 0)]


def test_rank_of_nothing_is_nothing() -> None:
    assert rank([], per_session=True) == []


def test_per_session_keeps_each_sessions_best_hit() -> None:
    hits = [
        hit("a", 0, 3.0),
        hit("a", 1, 9.0),
        hit("b", 5, 8.0),
        hit("b", 6, 8.5),
        hit("c", 2, 2.0),
    ]
    assert ids(rank(hits, per_session=True)) == [("a", 1), ("b", 6), ("c", 2)]
    assert len(rank(hits, per_session=False)) == 5


def test_ties_go_to_the_newest_then_the_later_seq_then_a_stable_order() -> None:
    hits = [
        hit("b", 1, 5.0, minutes=1),
        hit("a", 2, 5.0, minutes=1),
        hit("a", 1, 5.0, minutes=1),
        hit("z", 0, 5.0, minutes=9),
        hit("y", 0, 7.0, minutes=0),
    ]
    expected = [("y", 0), ("z", 0), ("a", 2), ("a", 1), ("b", 1)]
    for seed in range(5):
        shuffled = hits[:]
        random.Random(seed).shuffle(shuffled)
        assert ids(rank(shuffled, per_session=False)) == expected


def test_scores_equal_up_to_float_noise_are_ties() -> None:
    older = hit("a", 0, 0.1 + 0.2, minutes=0)
    newer = hit("b", 0, 0.3, minutes=5)
    assert ids(rank([older, newer], per_session=False)) == [("b", 0), ("a", 0)]


def _rank_by_sorting_all(
    hits: list[Ranked], *, per_session: bool, floor: float, keep: frozenset[str]
) -> list[Ranked]:
    """`rank` as it reads: every hit ordered, then the floor of the first one's
    score, then one per session."""
    ordered = sorted(hits, key=lambda h: h.order_key)
    if not ordered:
        return []
    top = ordered[0].score
    if top > 0:
        ordered = [h for h in ordered if h.score >= floor * top or (keep and h.matched & keep)]
    if per_session:
        seen: set[str] = set()
        ordered = [h for h in ordered if not (h.session_id in seen or seen.add(h.session_id))]
    return ordered


@settings(max_examples=300)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from("abcdef"),
            st.integers(0, 30),
            # Equal, equal to 9 places, and just apart: the top is the first in order.
            st.sampled_from([0.0, 0.5, 1.0, 2.0, 2.0000000001, 2.0000000006, 1.9999999996, 7.0]),
            st.integers(0, 5),
            st.booleans(),
        ),
        max_size=60,
    ),
    floor=st.sampled_from([0.0, 0.25, 0.5, 0.99]),
    per_session=st.booleans(),
)
def test_rank_drops_under_the_floor_first_and_gives_the_same_order(
    rows: list[tuple[str, int, float, int, bool]], floor: float, per_session: bool
) -> None:
    """`rank` drops the hits under the floor before it orders the rest: the same hits
    in the same order as ordering every hit first."""
    hits = [
        Ranked(s, seq, "user_text", score, T0 + timedelta(minutes=m), frozenset({"r"} if r else ()))
        for s, seq, score, m, r in rows
    ]
    keep = frozenset({"r"})
    assert rank(hits, per_session=per_session, floor=floor, keep=keep) == _rank_by_sorting_all(
        hits, per_session=per_session, floor=floor, keep=keep
    )


# -- paging ---------------------------------------------------------------------------------

HITS = st.lists(
    st.tuples(
        st.sampled_from("abcdef"),
        st.integers(0, 30),
        st.sampled_from([0.5, 1.0, 2.0, 2.0000000001, 3.5, 7.0]),
        st.integers(0, 5),
    ),
    max_size=60,
    unique_by=lambda t: (t[0], t[1]),
).map(lambda rows: [hit(s, seq, score, minutes) for s, seq, score, minutes in rows])


@settings(max_examples=200, deadline=None)
@given(HITS, st.integers(1, 7), st.booleans())
def test_paging_never_repeats_or_skips(hits: list[Ranked], limit: int, per_session: bool) -> None:
    ranked = rank(hits, per_session=per_session)
    seen: list[Ranked] = []
    after = None
    for _ in range(len(ranked) + 2):
        page, more = page_after(ranked, after, limit)
        assert len(page) <= limit
        seen.extend(page)
        if not more:
            break
        assert page
        after = page[-1].order_key
    assert ids(seen) == ids(ranked)


@settings(max_examples=200, deadline=None)
@given(HITS, HITS, st.integers(1, 7))
def test_a_hit_arriving_between_pages_never_repeats_a_seen_hit(
    hits: list[Ranked], arriving: list[Ranked], limit: int
) -> None:
    first, _ = page_after(rank(hits, per_session=False, floor=0.0), None, limit)
    if not first:
        return
    known = set(ids(hits))
    later = hits + [h for h in arriving if (h.session_id, h.seq) not in known]
    second, _ = page_after(rank(later, per_session=False, floor=0.0), first[-1].order_key, limit)
    assert not set(ids(first)) & set(ids(second))


def test_page_after_the_last_hit_is_empty() -> None:
    ranked = rank([hit("a", 0, 1.0), hit("b", 0, 2.0)], per_session=False)
    page, more = page_after(ranked, ranked[-1].order_key, 10)
    assert (page, more) == ([], False)


def test_more_is_false_on_an_exact_last_page() -> None:
    ranked = rank([hit("a", i, 1.0, i) for i in range(4)], per_session=False)
    page, more = page_after(ranked, None, 4)
    assert len(page) == 4
    assert not more


# -- evidence around a hit -------------------------------------------------------------


def test_a_neighbouring_turn_lends_a_share_of_its_score() -> None:
    # "when did you move?" (seq 4) is answered by "last spring, to the coast" (seq 5).
    question, answer, elsewhere = hit("s", 4, 10.0), hit("s", 5, 2.0), hit("t", 5, 2.0)
    out = {
        (h.session_id, h.seq): h.score
        for h in ranking.add_context([question, answer, elsewhere], 0.3)
    }
    assert out[("s", 5)] == pytest.approx(2.0 + 0.3 * 10.0)
    assert out[("s", 4)] == pytest.approx(10.0 + 0.3 * 2.0)
    # Another session's message at the same seq is no neighbour.
    assert out[("t", 5)] == pytest.approx(2.0)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "d"]),
            st.floats(min_value=1e-6, max_value=1e6, allow_nan=False),
        ),
        max_size=30,
    ),
    st.sampled_from([0.0, 0.15, 0.3, 1.0]),
)
def test_session_evidence_is_each_sessions_three_best_scores_summed_best_first(
    scored: list[tuple[str, float]], weight: float
) -> None:
    """Value for value (not approximately): the evidence of a session of one hit is that
    hit's score, and of more the sum of its three best, largest first; every other
    field of each hit is kept, in order."""
    hits = [hit(sid, seq, score, minutes=seq) for seq, (sid, score) in enumerate(scored)]
    out = ranking.add_session(hits, weight)
    by_session: dict[str, list[float]] = {}
    for h in hits:
        by_session.setdefault(h.session_id, []).append(h.score)
    for before, after in zip(hits, out, strict=True):
        best = sorted(by_session[before.session_id], reverse=True)[:3]
        evidence = 0.0
        for value in best:
            evidence += value
        assert after.score == before.score + weight * evidence
        assert type(after) is Ranked
        assert after._replace(score=before.score) == before


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),
            st.integers(min_value=0, max_value=12),
            st.floats(min_value=1e-6, max_value=1e6, allow_nan=False),
        ),
        max_size=30,
        unique_by=lambda t: (t[0], t[1]),
    ),
    st.sampled_from([0.0, 0.15, 0.3]),
    st.sampled_from([0.0, 0.3, 1.0]),
)
def test_evidence_in_one_pass_is_the_two_steps_value_for_value(
    scored: list[tuple[str, int, float]], context: float, session: float
) -> None:
    """`ranking.add_evidence` gives what `add_context` then `add_session` give (a weight
    of 0 leaving its step out): every hit, every field, every score bit for bit."""
    hits = [hit(sid, seq, score, minutes=i) for i, (sid, seq, score) in enumerate(scored)]
    expected = hits
    if context:
        expected = ranking.add_context(expected, context)
    if session:
        expected = ranking.add_session(expected, session)
    got = ranking.add_evidence(hits, context, session)
    assert got == list(expected)
    assert all(type(h) is Ranked for h in got)


def test_session_evidence_lifts_a_session_answering_in_several_turns() -> None:
    lucky = hit("lucky", 0, 5.0)
    steady = [hit("steady", i, 4.0) for i in range(4)]
    ranked = rank(ranking.add_session([lucky, *steady], 0.3), per_session=True)
    # Alone, the lucky single match (5.0) beats any one steady turn (4.0); with the
    # session's three best turns as evidence (4.0 + 0.3 x 12.0 against 5.0 + 0.3 x
    # 5.0), the steady session leads (its equal turns: the later seq first).
    assert ids(ranked) == [("steady", 3), ("lucky", 0)]
    assert ids(rank([lucky, *steady], per_session=True))[0] == ("lucky", 0)


def test_a_query_word_naming_the_speaker_counts_as_a_match() -> None:
    groups = [[Expansion(0, "marguerite", EXACT, 40)], [Expansion(1, "pottery", EXACT, 3)]]
    corpus = Corpus(1_000, 20_000)
    scorer = ranking.Scorer(groups, corpus, field_weight=1.0)
    said_by_her, _ = scorer.score(
        {"pottery": 1}, 20, fields=ranking.speaker_terms("user_text", "Marguerite")
    )
    said_by_other, _ = scorer.score(
        {"pottery": 1}, 20, fields=ranking.speaker_terms("user_text", "Tobias")
    )
    assert said_by_her > said_by_other > 0
    # A tool's name is no speaker.
    assert ranking.speaker_terms("tool_output", "grep") == frozenset()
    assert ranking.speaker_terms("assistant_text", "Jean-Luc") == {"jean", "luc"}


def test_typo_expansions_of_an_absent_word_keep_their_own_idf() -> None:
    # "chronogrph" is in no document; it may mean the rare "chronograph" (df 2) or the
    # common "chronographs" (df 300, two edits away).
    group = [
        Expansion(0, "chronograph", FUZZY_1, 2, how="fuzzy", distance=1),
        Expansion(0, "chronographs", FUZZY_2, 300, how="fuzzy", distance=2),
    ]
    corpus = Corpus(1_000, 20_000)
    blended = ranking.Scorer([group], corpus)
    own = ranking.Scorer([group], corpus, per_expansion_idf=True)
    rare_doc = {"chronograph": 1}
    assert blended.score(rare_doc, 20)[0] == pytest.approx(
        FUZZY_1 * term_score(1, 300, 1_000, 20, 20)
    )
    assert own.score(rare_doc, 20)[0] == pytest.approx(FUZZY_1 * term_score(1, 2, 1_000, 20, 20))
    # With the word itself in the vocabulary, the group keeps one IDF (its largest).
    with_exact = [Expansion(0, "chronogrph", EXACT, 1), *group]
    assert ranking.Scorer([with_exact], corpus, per_expansion_idf=True).score(rare_doc, 20)[
        0
    ] == pytest.approx(FUZZY_1 * term_score(1, 300, 1_000, 20, 20))


def test_a_rare_word_keeps_a_long_hit_above_the_relative_floor() -> None:
    top = hit("chat", 0, 10.0)
    long_error = Ranked(
        session_id="build",
        seq=7,
        kind="tool_error",
        score=1.0,
        created_at=T0,
        matched=frozenset({"xmlsec1"}),
    )
    assert ids(rank([top, long_error], per_session=False)) == [("chat", 0)]
    kept = rank([top, long_error], per_session=False, keep=frozenset({"xmlsec1"}))
    assert ids(kept) == [("chat", 0), ("build", 7)]


def test_sessions_named_in_full_by_title_come_first() -> None:
    hits = [hit("other", 0, 9.0), hit("named", 3, 1.0), hit("named", 4, 0.5), hit("x", 1, 2.0)]
    ranked = rank(ranking.sessions_first(hits, {"named"}), per_session=False)
    assert ids(ranked) == [("named", 3), ("named", 4), ("other", 0), ("x", 1)]
