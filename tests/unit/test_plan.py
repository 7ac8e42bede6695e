"""The candidate plan without a database: which strategy, drivers, expansions, scores."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pgsearch import ranking
from pgsearch.errors import InvalidQuery
from pgsearch.plan import (
    STOP_MIN_DF,
    TRUSTED_DF,
    WALK_MARGIN,
    CandidatePlan,
    Filters,
    ParsedQuery,
    SearchTrace,
    choose_expansions,
    fuzzy_targets,
    match_share,
    newest_walk,
    parse_query,
    plan_candidates,
    plan_fields,
    read_limits,
    unit_indexes,
    vocabulary_lookup,
)
from pgsearch.rows import How, SearchStats, VocabRow
from pgsearch.settings import Settings

SETTINGS = Settings()
T0 = datetime(2026, 2, 1, tzinfo=UTC)


def parse(query: str) -> ParsedQuery:
    return parse_query(query, max_terms=SETTINGS.max_query_terms)


def stats(n: int = 10_000, *, n_fields: int = 0) -> SearchStats:
    return SearchStats(
        n_indexed=n, total_len=n * 20, in_scope=n, n_fields=n_fields, fields_len=n_fields * 5
    )


def row(
    query: ParsedQuery, word: str, term: str, df: int, how: How = "exact", sf: int = 0
) -> VocabRow:
    return VocabRow(word_index=query.texts.index(word), term=term, df=df, sf=sf, how=how)


def known(query: ParsedQuery, dfs: dict[str, int]) -> list[VocabRow]:
    """Each listed word found as written with that document frequency."""
    return [row(query, word, word, df) for word, df in dfs.items()]


def plan_for(
    text: str, dfs: dict[str, int], n: int = 10_000, config: Settings = SETTINGS
) -> CandidatePlan:
    query = parse(text)
    groups = choose_expansions(query, known(query, dfs), max_expansions=config.max_expansions)
    return plan_candidates(query, groups, stats(n), config)


def driver_words(plan: CandidatePlan) -> list[list[str]]:
    return [plan.unit_words(u) for u in plan.drivers]


# --- strategy choice ---------------------------------------------------------------


def test_only_stop_like_words_read_newest_first_under_the_stop_cap() -> None:
    plan = plan_for("the and", {"the": 9_000, "and": 8_000})
    assert plan.strategy == "all_words_newest"
    assert plan.cap == SETTINGS.stop_candidate_cap < SETTINGS.candidate_cap
    assert plan.stop_like == ("the", "and")
    assert driver_words(plan) == [["the", "and"]]


def test_stop_like_words_that_fit_the_stop_cap_are_read_whole() -> None:
    plan = plan_for("the and", {"the": 900, "and": 200}, n=1_000)
    assert plan.strategy == "all_words"
    assert plan.cap == SETTINGS.stop_candidate_cap


def test_one_word_reads_every_match_or_the_newest_beyond_the_cap() -> None:
    rare = plan_for("zanzibar", {"zanzibar": 12})
    assert (rare.strategy, rare.cap, rare.stop_like) == ("all_words", SETTINGS.candidate_cap, ())
    common = plan_for("deploy", {"deploy": 3_000}, n=1_000_000)
    assert common.strategy == "all_words_newest"
    assert common.cap == SETTINGS.candidate_cap


def test_a_chunk_is_one_unit_read_as_all_its_words() -> None:
    plan = plan_for("resolve_dirs(config)", {"resolve": 40, "dirs": 30, "config": 900})
    assert plan.strategy == "all_words"
    assert driver_words(plan) == [["resolve", "dirs", "config"]]
    assert plan.phrases == (("resolve", "dirs", "config"),)


def test_selective_units_drive_and_stop_like_ones_only_score() -> None:
    plan = plan_for("zanzibar the cluster", {"zanzibar": 5, "the": 9_000, "cluster": 80})
    assert plan.strategy == "any_unit"
    assert driver_words(plan) == [["zanzibar"], ["cluster"]]
    assert plan.stop_like == ("the",)
    assert plan.words == ("zanzibar", "the", "cluster")
    assert "the" in plan.terms


def test_a_unit_with_an_unknown_word_never_drives() -> None:
    plan = plan_for(
        "resolve_dirs(config) zanzibar cron",
        {"resolve": 40, "config": 60, "zanzibar": 5, "cron": 70},  # "dirs" is unknown
    )
    assert plan.strategy == "any_unit"
    assert driver_words(plan) == [["zanzibar"], ["cron"]]
    # Its known words still score the candidates.
    assert {"resolve", "config"} <= set(plan.words)


def test_drivers_stop_at_the_scan_limit_rarest_first() -> None:
    config = SETTINGS.with_(candidate_scan_limit=20_000)
    dfs = {"alpha": 5_000, "bravo": 100, "charlie": 16_000, "delta": 300}
    plan = plan_for("alpha bravo charlie delta", dfs, n=1_000_000, config=config)
    # Rarest first: 100 + 300 + 5,000 fit; adding 16,000 would pass 20,000.
    assert driver_words(plan) == [["bravo"], ["delta"], ["alpha"]]
    assert plan.driver_df == 5_400 <= config.candidate_scan_limit


def test_units_past_the_scan_limit_are_left_out_but_still_hit_units() -> None:
    config = SETTINGS.with_(candidate_scan_limit=20_000)
    dfs = {"alpha": 5_000, "bravo": 100, "charlie": 16_000, "delta": 300, "the": 900_000}
    plan = plan_for("alpha bravo charlie delta the", dfs, n=1_000_000, config=config)
    assert [plan.unit_words(u) for u in plan.left_out] == [["charlie"]]
    # Every selective unit makes a hit; the stop-like word never does on its own.
    assert [plan.unit_words(u) for u in plan.hit_units] == [
        ["bravo"],
        ["delta"],
        ["alpha"],
        ["charlie"],
    ]
    whole = plan_for("alpha bravo", {"alpha": 5_000, "bravo": 100}, n=1_000_000, config=config)
    assert whole.left_out == () and whole.hit_units == whole.drivers
    one = plan_for("the and", {"the": 9_000, "and": 8_000})
    assert [one.unit_words(u) for u in one.hit_units] == [["the", "and"]]


def test_a_result_is_approximate_only_when_a_limit_cut_a_read() -> None:
    config = SETTINGS.with_(candidate_scan_limit=20_000)
    plan = plan_for("alpha bravo", {"alpha": 5_000, "bravo": 100}, n=1_000_000, config=config)
    query = parse("alpha bravo")
    groups = choose_expansions(
        query, known(query, {"alpha": 5_000, "bravo": 100}), max_expansions=8
    )
    fields = plan_fields(Filters(workspace="w", kinds=("user",)), groups, stats(n_fields=9), config)
    assert fields is not None
    exact = read_limits(plan, fields, candidates_read=plan.cap - 1, fields_read=fields.cap - 1)
    assert exact == ()
    assert read_limits(plan, None, candidates_read=plan.cap - 1, fields_read=10**6) == ()
    full = read_limits(plan, fields, candidates_read=plan.cap, fields_read=0, spread=True)
    assert len(full) == 2 and "best-covering" in full[0] and "per session" in full[1]
    titles = read_limits(plan, fields, candidates_read=0, fields_read=fields.cap)
    assert len(titles) == 1 and titles[0].startswith("titles/summaries")
    cut = plan_for(
        "alpha bravo charlie delta",
        {"alpha": 5_000, "bravo": 100, "charlie": 16_000, "delta": 300},
        n=1_000_000,
        config=config,
    )
    assert read_limits(cut, None, candidates_read=0, fields_read=0) == (
        "units left out by the scan limit: (charlie)",
    )
    trace = SearchTrace(mode="ranked", plan=cut, approximate=("x",))
    assert "result: approximate (x)" in trace.describe()
    assert trace.to_json()["approximate"] is True
    assert trace.to_json()["left_out"] == [["charlie"]]
    assert "result: exact" in SearchTrace(mode="ranked", plan=plan).describe()


def test_the_rarest_unit_drives_even_beyond_the_scan_limit() -> None:
    config = SETTINGS.with_(candidate_scan_limit=1_000)
    plan = plan_for("alpha bravo", {"alpha": 30_000, "bravo": 25_000}, n=1_000_000, config=config)
    assert driver_words(plan) == [["bravo"]]
    assert plan.driver_df > config.candidate_scan_limit


def test_coverage_order_when_the_drivers_could_exceed_the_cap() -> None:
    dfs = {"alpha": 700, "bravo": 600, "the": 90_000}
    plan = plan_for("alpha bravo the", dfs, n=1_000_000)
    assert plan.driver_df == 1_300 > plan.cap == SETTINGS.candidate_cap
    assert plan.strategy == "any_unit_by_coverage"
    # Every unit is weighted by its IDF, the stop-like one too (it breaks ties).
    weights = {tuple(plan.unit_words(u)): w for u, w in plan.coverage}
    assert weights[("alpha",)] == pytest.approx(ranking.idf(1_000_000, 700))
    assert weights[("bravo",)] > weights[("alpha",)] > weights[("the",)] > 0
    # Under the cap the same units are read whole, with no coverage order.
    small = plan_for("alpha bravo the", {"alpha": 70, "bravo": 60, "the": 90_000}, n=1_000_000)
    assert (small.strategy, small.coverage) == ("any_unit", ())


def test_stop_like_needs_a_minimum_frequency_in_small_workspaces() -> None:
    # 40 of 200 messages is 20 %, but below STOP_MIN_DF: still selective.
    plan = plan_for("alpha bravo", {"alpha": 40, "bravo": 3}, n=200)
    assert 40 < STOP_MIN_DF and plan.stop_like == ()
    assert driver_words(plan) == [["bravo"], ["alpha"]]


@settings(deadline=None, max_examples=300)
@given(
    dfs=st.lists(st.integers(1, 60_000), min_size=1, max_size=8),
    scan_limit=st.integers(100, 50_000),
    cap=st.integers(10, 5_000),
)
def test_driver_df_stays_within_the_scan_limit_except_a_single_driver(
    dfs: list[int], scan_limit: int, cap: int
) -> None:
    words = [f"w{'x' * i}" for i in range(len(dfs))]
    config = SETTINGS.with_(candidate_scan_limit=scan_limit, candidate_cap=cap)
    plan = plan_for(" ".join(words), dict(zip(words, dfs, strict=True)), 1_000_000, config)
    assert len(plan.drivers) == 1 or plan.driver_df <= scan_limit
    # Drivers are read rarest first, and never include a stop-like unit.
    driven = [d for u in plan.drivers for d in [min(sum(e.df for e in g) for g in u)]]
    if plan.strategy.startswith("any_unit"):
        assert driven == sorted(driven)
        assert all(d < plan.stop_df for d in driven)


# --- expansion choice --------------------------------------------------------------


def test_typos_get_fuzzy_lookup_only_when_untrusted() -> None:
    query = parse("databse database datab cat abc123de 東京タワー")
    lookup = vocabulary_lookup(query)
    exact = [
        row(query, "database", "database", 10),
        row(query, "datab", "datab", 1, sf=1),  # found, but fewer than TRUSTED_DF times
    ]
    targets = [query.texts[i] for i in fuzzy_targets(lookup, exact)]
    # A short word, a word with digits and CJK never get typo expansions.
    assert targets == ["databse", "datab"]
    trusted = [row(query, "datab", "datab", TRUSTED_DF)]
    assert "datab" not in [query.texts[i] for i in fuzzy_targets(lookup, trusted)]


def test_prefix_lookup_for_short_words_only() -> None:
    query = parse("cfg conf config 2024 東京")
    lookup = vocabulary_lookup(query)
    assert dict(zip(lookup.words, lookup.prefix, strict=True)) == {
        "cfg": True,
        "conf": True,
        "config": False,
        "2024": False,
        "東京": False,
    }
    assert lookup.stems[lookup.words.index("config")] == "config"


def test_a_trusted_word_keeps_only_its_own_forms() -> None:
    query = parse("conf")
    rows = [
        row(query, "conf", "conf", TRUSTED_DF),
        row(query, "conf", "config", 400, how="prefix"),
        row(query, "conf", "cone", 9, how="fuzzy"),
    ]
    groups = choose_expansions(query, rows, max_expansions=8)
    assert [e.term for e in groups["conf"]] == ["conf"]
    rows[0] = row(query, "conf", "conf", TRUSTED_DF - 1)
    groups = choose_expansions(query, rows, max_expansions=8)
    assert [(e.term, e.how) for e in groups["conf"]] == [
        ("conf", "exact"),
        ("config", "prefix"),
        ("cone", "fuzzy"),
    ]


def test_the_vocabulary_statement_and_the_engine_read_one_set_of_thresholds() -> None:
    # The server chooses expansions with the lookup's thresholds as parameters; the
    # engine's own choice takes the same ones, so that the two can agree.
    from pgsearch.db import reads

    query = parse("conf databse")
    lookup = vocabulary_lookup(query, realword_df=40)
    statement = reads.direct_search(
        Filters(workspace="w", kinds=("user_text",)),
        lookup,
        unit_indexes(query),
        query.phrases,
        titles=False,
        max_expansions=8,
        typo_distance="levenshtein",
        realword_ratio=2.0,
        cap=10,
        stop_cap=5,
        stop_ratio=0.1,
        stop_min_df=STOP_MIN_DF,
    )
    params = statement.params or {}
    assert params["trusted"] == lookup.trusted_df == TRUSTED_DF
    assert params["below"] == lookup.typo_below == 40
    rows = [
        row(query, "conf", "conf", TRUSTED_DF),
        row(query, "conf", "config", 400, how="prefix"),
    ]
    assert [e.term for e in choose_expansions(query, rows, max_expansions=8)["conf"]] == ["conf"]
    more = choose_expansions(query, rows, max_expansions=8, trusted_df=TRUSTED_DF + 1)
    assert [e.term for e in more["conf"]] == ["conf", "config"]


def test_typo_expansions_are_rechecked_nearest_and_most_frequent_first() -> None:
    query = parse("databse")
    rows = [
        row(query, "databse", "database", 50, how="fuzzy"),  # one edit
        row(query, "databse", "databases", 500, how="fuzzy"),  # two edits: too far at 7
        row(query, "databse", "datbse", 80, how="fuzzy"),  # one edit, more frequent
        row(query, "databse", "databsx", 2, how="fuzzy"),  # one edit, rarest
    ]
    groups = choose_expansions(query, rows, max_expansions=2)
    kept = [(e.term, e.distance, e.weight) for e in groups["databse"]]
    assert kept == [("datbse", 1, ranking.FUZZY_1), ("database", 1, ranking.FUZZY_1)]
    long_query = parse("configuraton")  # 12 letters: two edits allowed
    far = [row(long_query, "configuraton", "configurations", 7, how="fuzzy")]
    group = choose_expansions(long_query, far, max_expansions=8)["configuraton"]
    assert [(e.term, e.distance, e.weight) for e in group] == [
        ("configurations", 2, ranking.FUZZY_2)
    ]


def test_words_without_rows_have_no_group_and_stems_join_theirs() -> None:
    query = parse("paint zzzz")
    rows = [row(query, "paint", "paint", 4), row(query, "paint", "painted", 6, how="stem")]
    groups = choose_expansions(query, rows, max_expansions=8)
    assert list(groups) == ["paint"]
    assert [(e.term, e.weight) for e in groups["paint"]] == [
        ("paint", ranking.EXACT),
        ("painted", ranking.STEM),
    ]


def test_words_typed_as_one_chunk_share_one_weight() -> None:
    query = parse('resolve_dirs(config) "red house" cron')
    rows = known(query, {"resolve": 1, "dirs": 1, "config": 1, "red": 1, "house": 1, "cron": 1})
    groups = choose_expansions(query, rows, max_expansions=8)
    weights = {word: group[0].weight for word, group in groups.items()}
    third = pytest.approx(1 / 3)
    assert weights == {
        "red": 1.0,  # quoted words keep their weight: the phrase boost rewards them
        "house": 1.0,
        "resolve": third,
        "dirs": third,
        "config": third,
        "cron": 1.0,
    }


def test_too_many_distinct_words_is_a_clear_error() -> None:
    with pytest.raises(InvalidQuery, match="33 distinct words; the limit is 32"):
        parse(" ".join(f"w{i}" for i in range(33)) + " w0")


# --- titles and summaries ----------------------------------------------------------


def test_titles_are_not_matched_under_entry_filters_or_common_words() -> None:
    query = parse("kubernetes the")
    groups = choose_expansions(
        query,
        [row(query, "kubernetes", "kubernetes", 3, sf=2), row(query, "the", "the", 900, sf=90)],
        max_expansions=8,
    )
    workspace = Filters(workspace="w", kinds=("user_text",))
    fields = plan_fields(workspace, groups, stats(1_000, n_fields=1_000), SETTINGS)
    assert fields is not None
    assert [[e.term for e in g] for g in fields.selective] == [["kubernetes"]]
    assert fields.terms == ("kubernetes", "the")
    for narrowed in (
        Filters(workspace="w", kinds=("user_text",), roles=("user",)),
        Filters(workspace="w", kinds=("user_text",), tool_name="bash"),
        Filters(workspace="w", kinds=("user_text",), since=T0),
    ):
        assert plan_fields(narrowed, groups, stats(1_000, n_fields=1_000), SETTINGS) is None
    assert plan_fields(workspace, groups, stats(1_000, n_fields=0), SETTINGS) is None
    pinned = Filters(workspace="w", kinds=("user_text",), session_id="s1")
    pinned_plan = plan_fields(pinned, groups, stats(1_000, n_fields=1_000), SETTINGS)
    assert pinned_plan is not None and pinned_plan.session_id == "s1"


# --- the trace ---------------------------------------------------------------------


def test_the_trace_shows_strategy_drivers_expansions_and_stop_like_words() -> None:
    query = parse("databse the cluster")
    rows = [
        row(query, "databse", "database", 20, how="fuzzy"),
        row(query, "the", "the", 9_000),
        row(query, "cluster", "cluster", 80),
    ]
    groups = choose_expansions(query, rows, max_expansions=8)
    plan = plan_candidates(query, groups, stats(), SETTINGS)
    text = SearchTrace(mode="ranked", plan=plan).describe()
    assert text.splitlines()[0] == "plan: any_unit, at most 1000 candidates"
    assert "drivers: (databse) | (cluster) (df at most 100)" in text
    assert "database (fuzzy, 1 edit, df 20" in text
    assert "stop-like (df >= 500): the" in text
    data = SearchTrace(mode="ranked", plan=plan).to_json()
    assert data["strategy"] == "any_unit"
    assert data["drivers"] == [["databse"], ["cluster"]]
    assert data["expansions"]["databse"][0]["distance"] == 1
    assert "browse" in SearchTrace(mode="browse").describe()


def test_a_japanese_sentence_counts_its_cjk_runs_as_phrases() -> None:
    sentence = (
        "昨日の会議で決まった新しいデータベースの移行手順を確認してから本番環境に反映してください"
    )
    assert len(sentence) >= 37
    query = parse(sentence)  # 44 characters, 43 pairs: one run, one phrase
    assert query.searched_words == 1
    assert len(query.texts) == len(set(sentence[i : i + 2] for i in range(len(sentence) - 1)))
    mixed = parse("東京タワー、写真 deploy 大阪城")
    assert mixed.searched_words == 4  # three runs and one word


def test_query_limits_count_work_not_characters() -> None:
    config = Settings(max_query_terms=4)
    parse_query("東京タワーの写真を送ってください a b c", max_terms=4)
    with pytest.raises(InvalidQuery, match=r"5 distinct words \(a run of CJK characters"):
        parse_query("東京 大阪 京都 奈良 神戸", max_terms=config.max_query_terms)
    run = "".join(chr(0x4E00 + i) for i in range(33))  # 32 distinct pairs: the limit
    parse_query(run, max_terms=4)
    with pytest.raises(InvalidQuery, match=r"33 distinct terms to look up .* the limit is 32"):
        parse_query(run + "丁", max_terms=4)


# --- typos in dense vocabularies, evidence and titles --------------------------------


def test_a_transposition_is_one_edit_with_osa() -> None:
    query = parse("gruop")
    rows = [row(query, "gruop", "group", 50, how="fuzzy")]
    assert "gruop" not in choose_expansions(query, rows, max_expansions=8)
    osa = choose_expansions(query, rows, max_expansions=8, typo_distance="osa")
    (expansion,) = osa["gruop"]
    assert (expansion.term, expansion.distance, expansion.weight) == ("group", 1, ranking.FUZZY_1)


def test_a_recurring_misspelling_still_reaches_the_common_word() -> None:
    # "recieve" is itself written in 4 messages; "receive" in 400.
    query = parse("recieve invoice")
    rows = [
        row(query, "recieve", "recieve", 4),
        row(query, "recieve", "receive", 400, how="fuzzy"),
        row(query, "recieve", "relieve", 6, how="fuzzy"),
        row(query, "invoice", "invoice", 30),
    ]
    plain = choose_expansions(query, rows, max_expansions=8)
    assert [e.term for e in plain["recieve"]] == ["recieve"]
    groups = choose_expansions(
        query, rows, max_expansions=8, typo_distance="osa", realword_ratio=10.0
    )
    by_term = {e.term: e for e in groups["recieve"]}
    # The common spelling joins as a typo expansion; the rarer neighbour does not.
    assert set(by_term) == {"recieve", "receive"}
    assert by_term["recieve"].weight == ranking.EXACT
    assert by_term["receive"].weight == ranking.FUZZY_1


def test_neighbours_are_read_for_words_below_the_realword_df() -> None:
    query = parse("recieve configuration")
    lookup = vocabulary_lookup(query, realword_df=20)
    exact = [row(query, "recieve", "recieve", 4), row(query, "configuration", "configuration", 90)]
    assert fuzzy_targets(lookup, exact) == (0,)
    assert fuzzy_targets(vocabulary_lookup(query), exact) == ()


@given(
    cap=st.integers(1, 1000),
    n=st.integers(1, 10_000_000),
    dfs=st.lists(st.integers(0, 10_000_000), min_size=1, max_size=4),
    scope=st.floats(0.01, 1.0),
)
# A walk rounded up by a fraction of an entry, at a scope share of 1/64.
@example(cap=1, n=1348, dfs=[449], scope=0.015625)
@example(cap=1, n=1348, dfs=[448], scope=0.015625)
def test_a_newest_first_read_walks_only_when_shorter_than_the_matches(
    cap: int, n: int, dfs: list[int], scope: float
) -> None:
    """`newest_walk` walks when what the walk is expected to read (margin included,
    entries of other kinds passed too) is less than the matches it expects, so that
    with every kind in scope a read costs at most about sqrt(margin cap n)."""
    walk = newest_walk(cap, dfs, n, scope)
    share = match_share(dfs, n)
    expected = share * n
    # The walk is rounded up to a whole entry, which a scope share below 1 magnifies
    # into up to ``1 / scope`` entries read.
    if walk:
        assert walk / scope < expected
        assert walk >= WALK_MARGIN * cap / share - 1
        assert min(walk / scope, expected) <= ((WALK_MARGIN * cap + 1) * n / scope) ** 0.5 + 1
    else:
        assert share == 0 or (WALK_MARGIN * cap / share + 1) / scope >= expected - 1
    assert newest_walk(cap, dfs, n, scope) <= newest_walk(cap, dfs, n) or not walk


@given(
    n=st.integers(1, 10_000_000),
    dfs=st.lists(st.integers(0, 10_000_000), min_size=1, max_size=4),
)
def test_the_share_of_several_words_lies_between_independent_and_nested(
    n: int, dfs: list[int]
) -> None:
    """`match_share` is a word's own share for one word, and for several lies between
    the product of their shares and the smallest of them."""
    shares = [min(df, n) / n for df in dfs]
    product = 1.0
    for s in shares:
        product *= s
    share = match_share(dfs, n)
    assert product * (1 - 1e-9) <= share <= min(shares) * (1 + 1e-9)
    if len(dfs) == 1:
        assert share == pytest.approx(shares[0])


def test_two_frequent_words_walk_where_independence_would_read_every_match() -> None:
    # `the` and `and` in the largest workspace of the 1M benchmark corpus: in 33 %
    # and 25 % of its 89,862 entries, together in 15,563 (17 %) where independence
    # says 8 %. Their newest 250 in scope were the newest 1,243 entries; the index
    # read reads all 15,563 matches.
    n, dfs, scope = 89_862, [30_046, 22_248], 0.72
    independent = WALK_MARGIN * 250 / (30_046 / n * 22_248 / n)
    assert independent / scope > 30_046 / n * 22_248 / n * n  # would read the index
    walk = newest_walk(250, dfs, n, scope)
    assert 1_243 * scope <= walk < 15_563 * scope


def test_a_common_word_walks_and_a_middling_one_reads_the_index() -> None:
    assert newest_walk(250, [30_000], 125_000) == 2 * 250 * 125_000 // 30_000 + 1
    assert newest_walk(1000, [3_500], 125_000) == 0
    assert newest_walk(250, [0], 125_000) == 0
    # Tool errors alone, 4 % of the entries: a walk would pass 25 entries for each.
    assert newest_walk(250, [30_000], 125_000, 0.04) == 0


def test_the_trace_says_how_the_newest_matches_are_read() -> None:
    def one_word(word: str, df: int) -> CandidatePlan:
        query = parse(word)
        groups = choose_expansions(query, [row(query, word, word, df)], max_expansions=8)
        return plan_candidates(query, groups, stats(), SETTINGS)

    common = one_word("the", 9_000)
    assert common.newest_first and common.walk == newest_walk(250, [9_000], 10_000)
    text = SearchTrace(mode="ranked", plan=common).describe()
    assert f"newest matches: a walk of at most {common.walk} entries, then the index" in text
    assert SearchTrace(mode="ranked", plan=common).to_json()["walk"] == common.walk
    middling = one_word("cluster", 1_200)
    assert middling.newest_first and middling.walk == 0
    text = SearchTrace(mode="ranked", plan=middling).describe()
    assert "newest matches: from the index (a walk would read more)" in text


def test_the_spread_is_read_with_the_candidates_only_where_it_reads_every_match() -> None:
    """`queries.spread_with_candidates`: a newest-first plan that reads every match from
    the index (no walk, or a filter that never walks), whose words' dfs leave the
    spread's scan room to spare for messages stored after the statistics were read."""
    from pgsearch.db.queries import spread_with_candidates
    from pgsearch.plan import Filters

    everything = Filters(workspace="w", kinds=("user_text",))
    by_role = Filters(workspace="w", kinds=("user_text",), roles=("user",))
    middling = plan_for("cluster", {"cluster": 1_200})
    assert middling.newest_first and middling.walk == 0
    assert spread_with_candidates(everything, middling, scan=20_000)
    assert spread_with_candidates(everything, middling, scan=2_400)
    assert not spread_with_candidates(everything, middling, scan=2_399)
    walking = plan_for("the", {"the": 9_000})
    assert walking.walk > 0
    assert not spread_with_candidates(everything, walking, scan=20_000)
    # A role filter never walks: the index is read, and the spread with it.
    assert spread_with_candidates(by_role, walking, scan=20_000)
    # Every word must be held: the rarest word bounds the matches.
    both = plan_for("the and", {"the": 9_000, "and": 3_000})
    assert both.strategy == "all_words_newest"
    assert spread_with_candidates(by_role, both, scan=6_000)
    assert not spread_with_candidates(by_role, both, scan=5_999)
    rare = plan_for("cluster", {"cluster": 40})
    assert not rare.newest_first
    assert not spread_with_candidates(everything, rare, scan=20_000)


def test_a_best_covering_plan_reads_the_spread_with_its_candidates() -> None:
    """`queries.spread_with_candidates` for ``any_unit_by_coverage``: its read gives the
    spread when the scan covers every match, so it is sent unless a driving word alone
    is known to match more than the scan (a stop-like word scores but never drives)."""
    from pgsearch.db.queries import spread_ahead, spread_with_candidates
    from pgsearch.plan import Filters

    everything = Filters(workspace="w", kinds=("user_text",))
    plan = plan_for("alpha bravo the", {"alpha": 700, "bravo": 600, "the": 90_000}, n=1_000_000)
    assert plan.strategy == "any_unit_by_coverage"
    assert spread_with_candidates(everything, plan, scan=20_000)
    assert spread_with_candidates(everything, plan, scan=700)
    assert not spread_with_candidates(everything, plan, scan=699)
    assert not spread_ahead(everything, plan)


def test_the_spread_is_sent_ahead_with_the_candidates_of_a_plan_that_walks() -> None:
    """`queries.spread_ahead`: a walk is planned when many more match than the cap, so
    the spread is sent in the candidates' trip; not where the plan never walks."""
    from pgsearch.db.queries import spread_ahead
    from pgsearch.plan import Filters

    everything = Filters(workspace="w", kinds=("user_text",))
    walking = plan_for("the", {"the": 9_000})
    assert walking.walk > 0 and spread_ahead(everything, walking)
    for narrowed in (
        Filters(workspace="w", kinds=("user_text",), roles=("user",)),
        Filters(workspace="w", kinds=("user_text",), session_id="s"),
        Filters(workspace="w", kinds=("tool_input",), tool_name="bash"),
    ):
        assert not spread_ahead(narrowed, walking)
    middling = plan_for("cluster", {"cluster": 1_200})
    assert not spread_ahead(everything, middling)


def test_the_spread_walks_the_newest_sessions_only_for_words_dense_in_scope() -> None:
    """`queries.spread_walks`: the workspace's kinds alone, and matches dense among
    the entries a walk passes (every kind): a narrow kind or few matches scan them."""
    from pgsearch.db.queries import spread_walks

    kinds = ("user_text", "assistant_text", "tool_input", "tool_error")
    every = Filters(workspace="w", kinds=kinds)
    n = 100_000
    dense = plan_for("the", {"the": 30_000}, n=n)
    sparse = plan_for("deploy", {"deploy": 1_500}, n=n)
    whole = SearchStats(n_indexed=n, total_len=n * 20, in_scope=n, n_fields=0, fields_len=0,
                        n_messages=n)  # fmt: skip
    scan = SETTINGS.candidate_scan_limit
    assert spread_walks(every, dense, whole, scan=scan)
    assert not spread_walks(every, sparse, whole, scan=scan)
    # One kind of twenty in scope: its matches are one in twenty of those a walk passes.
    narrow = SearchStats(n_indexed=n, total_len=n * 20, in_scope=n // 20, n_fields=0,
                         fields_len=0, n_messages=n)  # fmt: skip
    assert not spread_walks(Filters(workspace="w", kinds=("tool_error",)), dense, narrow, scan=scan)
    # A role filter (or a session, tool or time) scans the matches as before.
    assert not spread_walks(Filters(workspace="w", kinds=kinds, roles=("user",)), dense, whole,
                            scan=scan)  # fmt: skip
