"""The direct plan without a database: when the rows read with the vocabulary are the plan's.

`direct_candidates_hold` must never accept rows that differ from what the plan's own
candidate statement returns. The property test simulates both statements over small
random corpora (documents as sets of words, df counted from them) and checks that
whenever the direct rows are accepted they are exactly the plan's full match set.
"""

from __future__ import annotations

from hypothesis import event, given, settings
from hypothesis import strategies as st

from pgsearch.plan import (
    CandidatePlan,
    Filters,
    Group,
    ParsedQuery,
    Unit,
    choose_expansions,
    direct_candidates_hold,
    direct_fields_hold,
    group_df,
    is_direct,
    parse_query,
    plan_candidates,
    plan_fields,
    stop_df,
    unit_df,
    unit_indexes,
)
from pgsearch.rows import SearchStats, VocabRow
from pgsearch.settings import Settings

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")
SETTINGS_BIG = Settings()
SMALL = Settings().with_(candidate_cap=10, stop_candidate_cap=4, stop_df_ratio=0.3)


def _stats(n: int, n_fields: int = 0) -> SearchStats:
    return SearchStats(
        n_indexed=n, total_len=n * 5, in_scope=n, n_fields=n_fields, fields_len=n_fields * 3
    )


def _setup(
    text: str, dfs: dict[str, int], config: Settings, n: int
) -> tuple[ParsedQuery, dict[str, Group], CandidatePlan, SearchStats]:
    query = parse_query(text, max_terms=32)
    rows = [
        VocabRow(word_index=i, term=w, df=dfs[w], sf=0, how="exact")
        for i, w in enumerate(query.texts)
        if dfs.get(w)
    ]
    groups = choose_expansions(query, rows, max_expansions=config.max_expansions)
    stats = _stats(n)
    return query, groups, plan_candidates(query, groups, stats, config), stats


def test_one_selective_word_is_read_whole_with_the_vocabulary() -> None:
    query, groups, plan, stats = _setup("alpha", {"alpha": 40}, SETTINGS_BIG, 10_000)
    assert plan.strategy == "all_words"
    assert direct_candidates_hold(query, groups, plan, stats, SETTINGS_BIG, rows_read=40)


def test_the_newest_of_more_matches_than_the_cap_are_left_to_the_plan() -> None:
    query, groups, plan, stats = _setup("alpha", {"alpha": 4_000}, SETTINGS_BIG, 10_000)
    assert plan.strategy == "all_words_newest"
    assert not direct_candidates_hold(query, groups, plan, stats, SETTINGS_BIG, rows_read=0)


def test_selective_units_beyond_the_cap_are_not_read_directly() -> None:
    query, groups, plan, stats = _setup(
        "alpha bravo", {"alpha": 400, "bravo": 700}, SETTINGS_BIG, 100_000
    )
    assert plan.strategy == "any_unit_by_coverage"
    assert not direct_candidates_hold(query, groups, plan, stats, SETTINGS_BIG, rows_read=0)


def test_selective_units_are_read_as_the_drivers() -> None:
    query, groups, plan, stats = _setup(
        "alpha bravo", {"alpha": 30, "bravo": 20}, SETTINGS_BIG, 10_000
    )
    assert plan.strategy == "any_unit"
    assert direct_candidates_hold(query, groups, plan, stats, SETTINGS_BIG, rows_read=45)


def test_a_stop_like_unit_beside_others_is_not_read_directly() -> None:
    query, groups, plan, stats = _setup("alpha bravo", {"alpha": 30, "bravo": 900}, SMALL, 1_000)
    assert plan.stop_like == ("bravo",)
    assert not direct_candidates_hold(query, groups, plan, stats, SMALL, rows_read=3)


def test_stop_like_words_are_read_directly_only_when_every_match_fits() -> None:
    query, groups, plan, stats = _setup("alpha_bravo", {"alpha": 400, "bravo": 8}, SMALL, 1_000)
    assert plan.strategy == "all_words" and plan.cap == SMALL.candidate_cap
    assert direct_candidates_hold(query, groups, plan, stats, SMALL, rows_read=8)
    query, groups, plan, stats = _setup("alpha bravo", {"alpha": 400, "bravo": 300}, SMALL, 1_000)
    assert plan.cap == SMALL.stop_candidate_cap and plan.stop_like == ("alpha", "bravo")
    assert plan.strategy == "all_words_newest"
    assert not direct_candidates_hold(query, groups, plan, stats, SMALL, rows_read=0)
    query, groups, plan, stats = _setup("alpha bravo", {"alpha": 400, "bravo": 3}, SMALL, 1_000)
    assert plan.strategy == "any_unit"
    assert direct_candidates_hold(query, groups, plan, stats, SMALL, rows_read=3)


def test_prefix_and_typo_expansions_are_never_direct() -> None:
    query = parse_query("alp", max_terms=32)
    rows = [
        VocabRow(word_index=0, term="alp", df=1, sf=0, how="exact"),
        VocabRow(word_index=0, term="alpine", df=5, sf=0, how="prefix"),
    ]
    groups = choose_expansions(query, rows, max_expansions=4)
    assert not is_direct(groups)
    plan = plan_candidates(query, groups, _stats(1_000), SETTINGS_BIG)
    assert not direct_candidates_hold(query, groups, plan, _stats(1_000), SETTINGS_BIG, 6)
    field_plan = plan_fields(
        Filters(workspace="w", kinds=("user_text",)), groups, _stats(1_000, 50), SETTINGS_BIG
    )
    assert not direct_fields_hold(groups, field_plan, 0)


def test_prefix_and_typo_expansions_hold_when_the_server_chose_them() -> None:
    query = parse_query("alp", max_terms=32)
    rows = [
        VocabRow(word_index=0, term="alp", df=1, sf=0, how="exact"),
        VocabRow(word_index=0, term="alpine", df=5, sf=0, how="prefix"),
    ]
    groups = choose_expansions(query, rows, max_expansions=4)
    plan = plan_candidates(query, groups, _stats(1_000), SETTINGS_BIG)
    field_plan = plan_fields(
        Filters(workspace="w", kinds=("user_text",)), groups, _stats(1_000, 50), SETTINGS_BIG
    )
    same = {(0, "alp"), (0, "alpine")}
    assert direct_candidates_hold(query, groups, plan, _stats(1_000), SETTINGS_BIG, 6, same)
    assert direct_fields_hold(groups, field_plan, 0, same)
    # Any other choice (one term fewer, one more, another word's) is not the plan's.
    for other in ({(0, "alp")}, same | {(0, "alps")}, {(0, "alp"), (1, "alpine")}):
        assert not direct_candidates_hold(
            query, groups, plan, _stats(1_000), SETTINGS_BIG, 6, other
        )
        assert not direct_fields_hold(groups, field_plan, 0, other)


def test_title_rows_hold_within_the_cap_only() -> None:
    _, groups, _, _ = _setup("alpha", {"alpha": 40}, SETTINGS_BIG, 10_000)
    field_plan = plan_fields(
        Filters(workspace="w", kinds=("user_text",)), groups, _stats(10_000, 500), SETTINGS_BIG
    )
    assert field_plan is not None
    assert direct_fields_hold(groups, field_plan, field_plan.cap)
    assert not direct_fields_hold(groups, field_plan, field_plan.cap + 1)
    assert not direct_fields_hold(groups, None, 0)


def _matches(doc: frozenset[str], unit: Unit) -> bool:
    return all(any(e.term in doc for e in g) for g in unit)


def _direct_rows(
    docs: list[frozenset[str]],
    units: tuple[Unit, ...],
    all_groups: tuple[Group, ...],
    stats: SearchStats,
    config: Settings,
) -> list[int]:
    """What the direct candidate statement returns (`queries._DIRECT_UNITS`), in an
    arbitrary order (document order here); a document's index is its time."""
    threshold = stop_df(stats.n_indexed, config)
    selective = [u for u in units if unit_df(u) < threshold]
    if len(units) < 2 or not selective:
        cap = (
            config.candidate_cap
            if selective
            else min(config.candidate_cap, config.stop_candidate_cap)
        )
        limit = config.candidate_cap if min(map(group_df, all_groups)) <= cap else 0
        hits = [i for i, d in enumerate(docs) if _matches(d, all_groups)]
    else:
        limit = config.candidate_cap if sum(map(unit_df, selective)) <= config.candidate_cap else 0
        hits = [i for i, d in enumerate(docs) if any(_matches(d, u) for u in selective)]
    return hits[:limit]


def _plan_rows(docs: list[frozenset[str]], plan: CandidatePlan) -> list[int]:
    """The rows of the plan's own candidate statement (when they are determined)."""
    if plan.strategy in ("all_words", "all_words_newest"):
        hits = [i for i, d in enumerate(docs) if _matches(d, plan.drivers[0])]
    else:
        hits = [i for i, d in enumerate(docs) if any(_matches(d, u) for u in plan.drivers)]
    if plan.strategy == "all_words_newest":
        return sorted(hits, reverse=True)[: plan.cap]
    # Unordered with a LIMIT: only determined when every match fits.
    assert plan.strategy == "any_unit_by_coverage" or len(hits) <= plan.cap
    return sorted(hits, reverse=True)


@settings(max_examples=300, deadline=None)
@given(
    docs=st.lists(
        st.frozensets(st.sampled_from(WORDS), min_size=1, max_size=4), min_size=1, max_size=160
    ),
    tokens=st.lists(
        st.lists(st.sampled_from((*WORDS, "zulu")), min_size=1, max_size=2, unique=True),
        min_size=1,
        max_size=3,
    ),
)
def test_accepted_direct_rows_are_the_plans_whole_match_set(
    docs: list[frozenset[str]], tokens: list[list[str]]
) -> None:
    text = " ".join("_".join(t) for t in tokens)
    query = parse_query(text, max_terms=32)
    df = {w: sum(w in d for d in docs) for w in WORDS}
    rows = [
        VocabRow(word_index=i, term=w, df=df[w], sf=0, how="exact")
        for i, w in enumerate(query.texts)
        if df.get(w)
    ]
    groups = choose_expansions(query, rows, max_expansions=4)
    if not groups:
        return
    stats = _stats(len(docs))
    config = SMALL
    plan = plan_candidates(query, groups, stats, config)
    units = query.units(groups)
    assert [tuple(g[0].group for g in u) for u in units] == [
        u for u in unit_indexes(query) if all(query.texts[i] in groups for i in u)
    ]
    direct = _direct_rows(docs, units, tuple(groups.values()), stats, config)
    held = direct_candidates_hold(query, groups, plan, stats, config, len(direct))
    event(f"direct rows held: {held}")
    if held:
        assert sorted(direct) == sorted(_plan_rows(docs, plan))
