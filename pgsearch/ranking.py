"""BM25 re-ranking and result ordering (pure; unit-tested without a database).

Scores are Okapi BM25 with k1 = 1.2, b = 0.75 and the Lucene IDF
``ln(1 + (N - df + 0.5) / (df + 0.5))`` (never negative), computed with the
workspace's own N, average length and document frequencies. Each query word is a
*group* of vocabulary terms (the word itself, same-stem forms, prefix and typo
expansions); a document scores, per group, its best term times that term's match
weight, with the group's largest document frequency for all its terms, so an exact
match always outranks a typo match of the same word.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

K1 = 1.2
B = 0.75

# Match weights: how much a query word's expansion counts next to the word itself.
EXACT = 1.0
#: Same stem (`painted` for `paint`): the same word in another form.
STEM = 0.85
#: One edit away: usually the intended word, but not certainly.
FUZZY_1 = 0.7
#: Two edits away (words of 9+ characters only).
FUZZY_2 = 0.5
#: A longer word starting with a short query word (`conf` → `config`).
PREFIX = 0.6

#: A message in a session whose title matches the whole query is boosted x2, whose
#: summary does x3 (partial matches proportionally less; see `search`).
TITLE_BOOST = 2.0
SUMMARY_BOOST = 3.0
#: A message containing a quoted phrase (or a CJK run) in order is boosted.
PHRASE_BOOST = 1.5
#: BM25 is multiplied by the IDF-weighted share of the query a document covers, to
#: this power (Lucene's classic coordination factor is the plain share, power 1).
COVERAGE_EXPONENT = 1.0
#: Hits scoring below this share of the top score are dropped.
RELATIVE_FLOOR = 0.15


def idf(n: int, df: int) -> float:
    """Lucene's BM25 IDF; never negative, even for a term in every document."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def term_score(tf: int, df: int, n: int, length: int, avg_length: float) -> float:
    if tf <= 0:
        return 0.0
    norm = K1 * (1.0 - B + B * (length / avg_length if avg_length > 0 else 1.0))
    return idf(n, df) * (tf * (K1 + 1.0)) / (tf + norm)


@dataclass(frozen=True, slots=True)
class Expansion:
    """A vocabulary term standing for one query word (group)."""

    group: int
    term: str
    weight: float
    df: int
    sf: int = 0


@dataclass(frozen=True, slots=True)
class Corpus:
    """The statistics BM25 needs for one workspace (or its session fields)."""

    n: int
    total_length: int

    @property
    def avg_length(self) -> float:
        return self.total_length / self.n if self.n else 0.0


def score_document(
    tfs: dict[str, int],
    length: int,
    groups: Sequence[Sequence[Expansion]],
    corpus: Corpus,
    *,
    use_sf: bool = False,
    coverage_exponent: float = COVERAGE_EXPONENT,
) -> tuple[float, set[str]]:
    """BM25 of one document (per group, the best expansion present) times its query
    coverage; and the terms hit.

    Coverage is the share of the query's groups the document holds, each weighted by
    its IDF (and its chunk share): holding the two rare words of a question beats
    holding one of them many times.
    """
    total = 0.0
    matched: set[str] = set()
    n = max(corpus.n, 1)
    importance = 0.0
    covered = 0.0
    for group in groups:
        best = 0.0
        best_term = None
        # One frequency for the whole group, the largest (as Lucene's blended fuzzy
        # rewrite does): a rare typo or word form must not outscore the word itself
        # through a higher IDF.
        df = max((exp.sf if use_sf else exp.df for exp in group), default=1)
        for exp in group:
            tf = tfs.get(exp.term, 0)
            if not tf:
                continue
            score = exp.weight * term_score(tf, max(df, 1), n, length, corpus.avg_length)
            if score > best:
                best, best_term = score, exp.term
        weight = idf(n, max(df, 1)) * max((exp.weight for exp in group), default=0.0)
        importance += weight
        if best_term is not None:
            total += best
            covered += weight
            matched.add(best_term)
    if coverage_exponent and importance > 0:
        total *= (covered / importance) ** coverage_exponent
    return total, matched


@dataclass(frozen=True, slots=True)
class Ranked:
    """A scored hit; ``order_key`` sorts best first, then newest first, then by id."""

    session_id: str
    seq: int
    kind: str
    score: float
    created_at: datetime
    matched: frozenset[str]

    @property
    def order_key(self) -> tuple[float, float, str, int]:
        return (-round(self.score, 9), -self.created_at.timestamp(), self.session_id, self.seq)


def rank(
    hits: Iterable[Ranked], *, per_session: bool, floor: float = RELATIVE_FLOOR
) -> list[Ranked]:
    """Best first, newest first on ties; drop hits under `floor` x top; one per session."""
    ordered = sorted(hits, key=lambda h: h.order_key)
    if not ordered:
        return []
    top = ordered[0].score
    if top > 0:
        ordered = [h for h in ordered if h.score >= floor * top]
    if per_session:
        seen: set[str] = set()
        best: list[Ranked] = []
        for h in ordered:
            if h.session_id not in seen:
                seen.add(h.session_id)
                best.append(h)
        ordered = best
    return ordered


def page_after(
    ranked: Sequence[Ranked], after: tuple[float, float, str, int] | None, limit: int
) -> tuple[list[Ranked], bool]:
    """The `limit` hits after position `after` in the order, and whether more follow."""
    start = 0
    if after is not None:
        start = len(ranked)
        for i, h in enumerate(ranked):
            if h.order_key > after:
                start = i
                break
    window = list(ranked[start : start + limit])
    return window, start + limit < len(ranked)
