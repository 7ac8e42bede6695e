"""Searches read through the term lists give the exhaustive scorer's top ten, or say
they are approximate (property test), and the engine takes that path.

The lists are built with small parameters (a list for any term in 6 messages, 4 keys
a chunk, at most 40 kept) so that a few hundred entries exercise everything: chunks
read and left unread, truncated lists, terms read whole, a tail of entries stored
since the build, forgotten sessions whose keys stay in the lists, and statistics that
drifted since the build. The corpus, queries and comparison are those of
``test_oracle_property``.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgsearch import PgSearch, SessionQueryRequest, Settings, impact
from pgsearch.search import SearchEngine
from tests.integration.test_oracle_property import message, query, top, zipf_word

EXAMPLES = 12


@pytest.fixture
def small_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(impact, "MIN_DF", 6)
    monkeypatch.setattr(impact, "CHUNK", 4)
    monkeypatch.setattr(impact, "MAX_POSTINGS", 40)
    monkeypatch.setattr(impact, "FIRST_CHUNKS", 1)
    monkeypatch.setattr(impact, "MORE_CHUNKS", 6)
    monkeypatch.setattr(impact, "TAIL_MAX", 60)


def test_a_bounded_result_not_marked_approximate_is_the_exhaustive_ranking(
    dsn: str, small_lists: None
) -> None:
    outcomes: Counter[str] = Counter()
    base = Settings.from_env({}, dsn=dsn).with_(impact_lists=True)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        cap=st.sampled_from((10, 30)),
        speaker=st.sampled_from((0.0, base.speaker_weight)),
        seed=st.integers(0, 2**32 - 1),
    )
    def run(cap: int, speaker: float, seed: int) -> None:
        rng = random.Random(seed)
        config = base.with_(candidate_cap=cap, stop_candidate_cap=cap, speaker_weight=speaker)
        ws = f"w{uuid.uuid4().hex[:10]}"
        sessions: list[str] = []
        clock = 0.0
        with PgSearch.connect(settings=config) as pg:
            engine = pg._engine
            oracle = SearchEngine(pg.settings, exhaustive=True)

            def append(sid: str, count: int) -> None:
                nonlocal clock
                batch: list[dict[str, Any]] = []
                for _ in range(count):
                    clock += rng.choice((0.0, 1.0, 7.0))
                    batch.append(message(rng, clock))
                    if rng.random() < 0.2 and batch[-1]["role"] == "user":
                        batch[-1]["name"] = zipf_word(rng)  # a speaker named like a word
                if sid not in sessions:
                    sessions.append(sid)
                    if rng.random() < 1 / 3:
                        batch[0]["title"] = " ".join(zipf_word(rng) for _ in range(3))
                pg.append(workspace=ws, session_id=sid, messages=batch)

            for s in range(rng.randint(3, 6)):
                append(f"s{s}", rng.randint(30, 80))
            pg.maintain(workspace=ws)
            for _ in range(4):
                for _ in range(rng.randint(2, 4)):
                    text = query(rng)
                    role = ("user",) if rng.random() < 1 / 6 else ()
                    for per_session in (True, False):
                        request = SessionQueryRequest(
                            query=text, per_session=per_session, roles=role, limit=10
                        )
                        got = pg.provider(workspace=ws).explain(request)
                        pg._engine = oracle
                        try:
                            want = pg.provider(workspace=ws).search(request)
                        finally:
                            pg._engine = engine
                        bounded = got.trace is not None and got.trace.bounded is not None
                        key = "bounded" if bounded else "planned"
                        if got.approximate:
                            outcomes[f"{key} approximate"] += 1
                        else:
                            assert top(got) == top(want), (text, per_session, got.trace)
                            outcomes[f"{key} exact"] += 1
                            outcomes[f"{key} exact, some hits"] += bool(got.matches)
                # Between searches: appends (the tail), new and forgotten sessions, and
                # sometimes a rebuild.
                change = rng.choice(("append", "new", "forget", "rebuild"))
                if change == "forget" and len(sessions) > 2:
                    gone = sessions.pop(rng.randrange(len(sessions)))
                    pg.forget(workspace=ws, session_id=gone)
                elif change == "new":
                    append(f"n{rng.randrange(10**6)}", rng.randint(10, 30))
                elif change == "rebuild":
                    pg.maintain(workspace=ws)
                else:
                    append(rng.choice(sessions), rng.randint(5, 20))
            pg.forget(workspace=ws)

    run()
    print(f"bounded property: {dict(outcomes)}")
    assert outcomes["bounded exact, some hits"] >= 10, outcomes
    assert outcomes["bounded approximate"] >= 1, outcomes


def test_a_capped_plan_reads_through_the_lists(pg: PgSearch, dsn: str) -> None:
    """At the real sizes: a word in most messages of a workspace is read through its
    list, the result is certified and equals the exhaustive ranking; with the
    setting off the same search reads its capped candidates."""
    rng = random.Random(11)
    for s in range(40):
        batch = []
        for _ in range(30):
            words = [f"w{rng.randint(0, 3000)}" for _ in range(rng.randint(4, 30))]
            if rng.random() < 0.5:
                words += ["deploy"] * rng.choice((1, 1, 1, 2, 3))
            batch.append({"role": rng.choice(["user", "assistant"]), "content": " ".join(words)})
        pg.append(workspace="w", session_id=f"s{s}", messages=batch)
    pg.maintain(workspace="w")
    request = SessionQueryRequest(query="deploy", limit=10, per_session=False)
    with PgSearch.connect(dsn, settings=pg.settings.with_(impact_lists=True)) as on:
        got = on.provider(workspace="w").explain(request)
    assert got.trace is not None and got.trace.bounded is not None, got.trace
    assert not got.approximate, got.trace.describe()
    assert "certified" in got.trace.describe()
    assert any("term_lists" in s for s in got.explain)
    oracle = SearchEngine(pg.settings, exhaustive=True)
    engine, pg._engine = pg._engine, oracle
    try:
        want = pg.provider(workspace="w").search(request)
    finally:
        pg._engine = engine
    assert top(got) == top(want)
    capped = pg.provider(workspace="w").explain(request)  # the setting off: as planned
    assert capped.trace is not None and capped.trace.bounded is None
    assert capped.approximate  # some 600 matches, 250 newest read
