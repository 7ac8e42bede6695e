"""The bound of bounded searches never falls below a score it bounds (pure)."""

from __future__ import annotations

import random

from pgsearch import impact, ranking
from pgsearch.ranking import Corpus, Expansion, Scorer


def _groups(rng: random.Random) -> list[tuple[Expansion, ...]]:
    out = []
    for g in range(rng.randint(1, 4)):
        out.append(
            tuple(
                Expansion(g, f"t{g}{i}", rng.choice((1.0, 0.85, 0.7, 0.6)), rng.randint(1, 900))
                for i in range(rng.randint(1, 3))
            )
        )
    return out


def test_the_upper_bound_is_at_least_every_score_it_covers() -> None:
    rng = random.Random(5)
    for _ in range(3000):
        groups = _groups(rng)
        corpus = Corpus(1000, rng.randint(5_000, 40_000))
        speaker = rng.choice((0.0, 1.0))
        scorer = Scorer(groups, corpus, field_weight=speaker, per_expansion_idf=rng.random() < 0.5)
        # A document holding random terms, each below a per-term impact bound.
        tfs: dict[str, int] = {}
        length = rng.randint(1, 200)
        norm = ranking.K1 * (1 - ranking.B + ranking.B * length / corpus.avg_length)
        bounds: list[dict[str, float]] = []
        for group in groups:
            held: dict[str, float] = {}
            for e in group:
                if rng.random() < 0.5:
                    tfs[e.term] = rng.randint(1, 6)
                    held[e.term] = tfs[e.term] / (tfs[e.term] + norm) * (1 + rng.random())
                elif rng.random() < 0.3:
                    held[e.term] = rng.random()  # may hold it, does not
            bounds.append(held)
        names = frozenset(e.term for g in groups for e in g if rng.random() < 0.2)
        score, _ = scorer.score(tfs, length, fields=names if speaker else frozenset())
        bound = scorer.upper_bound(bounds, must=((),), speakers=names)
        assert bound >= score - 1e-12, (score, bound)


def test_a_hit_set_no_unread_message_can_satisfy_bounds_at_zero() -> None:
    groups = [(Expansion(0, "common", 1.0, 500),), (Expansion(1, "rare", 1.0, 3),)]
    scorer = Scorer(groups, Corpus(1000, 20_000))
    # Every message holding "rare" was read: an unread one cannot hold both words.
    assert scorer.upper_bound([{"common": 0.5}, {}], must=((0, 1),)) == 0.0
    assert scorer.upper_bound([{"common": 0.5}, {}], must=((0,),)) > 0.0


def test_a_head_bounds_what_follows_its_chunks() -> None:
    head = impact.ListHead(term="t", df=5000, chunk_max=(0.9, 0.7, 0.5), theta=0.4)
    assert [head.after(n) for n in range(5)] == [0.9, 0.7, 0.5, 0.4, 0.4]


def test_certified_needs_the_kth_hit_above_the_bound() -> None:
    from datetime import UTC, datetime

    at = datetime(2026, 1, 1, tzinfo=UTC)
    hits = [
        ranking.Ranked(f"s{i % 3}", i, "user_text", 10.0 - i, at, frozenset()) for i in range(6)
    ]
    assert impact.certified(hits, 3, 7.5, per_session=False)
    assert not impact.certified(hits, 3, 8.0, per_session=False)
    # One per session: the third session's best is 8.0.
    assert impact.certified(hits, 3, 7.9, per_session=True)
    assert not impact.certified(hits, 4, 0.1, per_session=True)  # only three sessions
    assert impact.certified(hits, 4, 0.0, per_session=True)  # nothing unread can match
