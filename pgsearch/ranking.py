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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from operator import attrgetter
from typing import Literal, NamedTuple

from pgsearch import policy
from pgsearch.normalize import tokenize
from pgsearch.rows import How
from pgsearch.settings import RELATIVE_FLOOR

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

# Score factors: a candidate message's BM25 score is multiplied by each of these (see
# `message_score`, the one place they are applied).
#: The user states intent and facts; the assistant mostly restates them.
USER_WEIGHT = 1.5
#: A tool call records what was actually done, so it ranks between the two.
TOOL_CALL_WEIGHT = 1.3
ASSISTANT_WEIGHT = 1.0
#: A message in a session whose title matches the whole query is boosted x2, whose
#: summary does x3 (partial matches proportionally less; see `scoring.field_hits`).
TITLE_BOOST = 2.0
SUMMARY_BOOST = 3.0
#: A message containing a quoted phrase (or a CJK run) in order is boosted.
PHRASE_BOOST = 1.5
#: BM25 is multiplied by the IDF-weighted share of the query a document covers, to
#: this power (Lucene's classic coordination factor is the plain share, power 1).
COVERAGE_EXPONENT = 1.0


def idf(n: int, df: int) -> float:
    """Lucene's BM25 IDF; never negative, even for a term in every document.

    A search reads N (the statistics) and df (the vocabulary) in statements of their
    own, so a write committed between them can show a df above N: it counts as N (a
    term in every document), never as a negative weight that would score every match
    below zero."""
    df = min(df, n)
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
    #: How the term was found for the word, and its edit distance (typo expansions).
    how: How = "exact"
    distance: int = 0


@dataclass(frozen=True, slots=True)
class Corpus:
    """The statistics BM25 needs for one workspace (or its session fields)."""

    n: int
    total_length: int

    @property
    def avg_length(self) -> float:
        return self.total_length / self.n if self.n else 0.0


class Scorer:
    """BM25 of documents for one query: per group, the best expansion present, times
    the document's query coverage.

    Each group uses one document frequency, its largest (as Lucene's blended fuzzy
    rewrite does): a rare typo or word form must not outscore the word itself through
    a higher IDF. Coverage is the share of the query's groups a document holds, each
    weighted by its IDF (and its chunk share): holding the two rare words of a
    question beats holding one of them many times. Per-group constants are computed
    once here, so scoring a candidate is a few dictionary lookups per query word.
    """

    def __init__(
        self,
        groups: Sequence[Sequence[Expansion]],
        corpus: Corpus,
        *,
        use_sf: bool = False,
        coverage_exponent: float = COVERAGE_EXPONENT,
        per_expansion_idf: bool = False,
        field_weight: float = 0.0,
    ) -> None:
        n = max(corpus.n, 1)
        self.avg_length = corpus.avg_length
        self.coverage_exponent = coverage_exponent
        self.field_weight = field_weight
        # Per group: its IDF, its importance for coverage, and (term, weight) pairs.
        self.groups: list[tuple[float, float, list[tuple[str, float]]]] = []
        self.importance = 0.0
        for group in groups:
            if not group:
                continue
            df = max(max(exp.sf if use_sf else exp.df for exp in group), 1)
            group_idf = idf(n, df)
            importance = group_idf * max(exp.weight for exp in group)
            self.importance += importance
            pairs = [(e.term, e.weight) for e in group]
            if per_expansion_idf and not any(e.how == "exact" for e in group):
                # The word as typed is in no document: its typo expansions are
                # alternatives, each as informative as it is rare (the weight carries
                # the ratio of its own IDF to the group's).
                pairs = [
                    (e.term, e.weight * idf(n, max(e.sf if use_sf else e.df, 1)) / group_idf)
                    if e.how == "fuzzy" and group_idf > 0
                    else (e.term, e.weight)
                    for e in group
                ]
            self.groups.append((group_idf, importance, pairs))

    def score(
        self, tfs: dict[str, int], length: int, *, fields: frozenset[str] = frozenset()
    ) -> tuple[float, set[str]]:
        """The score of a document with term frequencies `tfs`, and the terms hit.

        A term in `fields` (the words of the message's speaker) matches as a one-word
        field of weight `field_weight`; a group scores the better of the two.
        """
        total = 0.0
        covered = 0.0
        matched: set[str] = set()
        ratio = length / self.avg_length if self.avg_length > 0 else 1.0
        norm = K1 * (1.0 - B + B * ratio)
        for group_idf, importance, expansions in self.groups:
            best = 0.0
            best_term = None
            for term, weight in expansions:
                tf = tfs.get(term)
                if not tf:
                    continue
                value = weight * group_idf * (tf * (K1 + 1.0)) / (tf + norm)
                if value > best:
                    best, best_term = value, term
            if fields:
                for term, weight in expansions:
                    if term in fields:
                        value = self.field_weight * weight * group_idf
                        if value > best:
                            best, best_term = value, term
            if best_term is not None:
                total += best
                covered += importance
                matched.add(best_term)
        if self.coverage_exponent and self.importance > 0:
            total *= (covered / self.importance) ** self.coverage_exponent
        return total, matched

    def upper_bound(
        self,
        impacts: Sequence[Mapping[str, float]],
        *,
        must: Sequence[Sequence[int]],
        speakers: frozenset[str] = frozenset(),
    ) -> float:
        """The most `score` can give a document known only by bounds: `impacts[i]`
        maps each term of group i the document may hold to the largest
        ``tf / (tf + norm)`` it can have there under this scorer's average length
        (a term absent from it is not held); `speakers` are the terms its speaker's
        name may hold (scored as `score` scores them); `must` lists the alternative
        sets of groups the document holds in its text all of (it is found by one of
        them), so that none satisfiable bounds it at 0.

        Mirrors `score`: per group the best expansion's ``weight * idf * (k1 + 1) *
        impact`` (or the speaker match), times the coverage of every group it may
        hold, each factor at its largest.
        """
        in_text = [bool(i) for i in impacts]
        if not any(all(in_text[g] for g in need) for need in must):
            return 0.0
        total = 0.0
        covered = 0.0
        for (group_idf, importance, expansions), bounds in zip(self.groups, impacts, strict=True):
            best = 0.0
            held = False
            for term, weight in expansions:
                bound = bounds.get(term)
                if bound is not None:
                    best = max(best, weight * group_idf * (K1 + 1.0) * min(bound, 1.0))
                    held = True
                if self.field_weight and term in speakers:
                    best = max(best, self.field_weight * weight * group_idf)
                    held = True
            if held:
                total += best
                covered += importance
        if self.coverage_exponent and self.importance > 0:
            total *= min(covered / self.importance, 1.0) ** self.coverage_exponent
        return total


def speaker_terms(kind: str, speaker: str | None) -> frozenset[str]:
    """The search terms of a user or assistant message's speaker name (else none)."""
    if not speaker or kind not in (policy.USER_TEXT, policy.ASSISTANT_TEXT):
        return frozenset()
    return _name_terms(speaker)


@lru_cache(maxsize=4096)
def _name_terms(name: str) -> frozenset[str]:
    """A name's terms (a workspace has few speakers, and every candidate asks)."""
    return frozenset(tokenize(name))


def add_context(hits: Sequence[Ranked], weight: float) -> list[Ranked]:
    """Each hit plus `weight` times the better score of the turns next to it in its
    session (the one it answers, the one answering it), from the scores as given."""
    return add_evidence(hits, weight, 0.0)


#: Hits of a session whose scores make its evidence (`add_session`).
SESSION_EVIDENCE_HITS = 3


def add_session(hits: Sequence[Ranked], weight: float) -> list[Ranked]:
    """Each hit plus `weight` times its session's evidence: the summed scores of the
    session's best `SESSION_EVIDENCE_HITS` hits (a session answering the query in
    several turns outranks one with a single lucky match)."""
    return add_evidence(hits, 0.0, weight)


def add_evidence(hits: Sequence[Ranked], context: float, session: float) -> list[Ranked]:
    """`add_session` of `add_context` (a weight of 0 leaves its step out) in one pass,
    each hit made once: first the neighbouring turns' share, then the session's
    evidence from those scores."""
    if context:
        by_key = {(h.session_id, h.seq): h.score for h in hits}
        get = by_key.get
        scores = []
        for h in hits:
            sid, seq, score = h.session_id, h.seq, h.score
            near = max(get((sid, seq - 1), 0.0), get((sid, seq + 1), 0.0))
            scores.append(score + context * near if near else score)
    else:
        scores = [h.score for h in hits]
    if session:
        by_session: dict[str, list[float]] = {}
        for h, score in zip(hits, scores, strict=True):
            by_session.setdefault(h.session_id, []).append(score)
        # A session of one hit (most, for a frequent word) has that hit's score as its
        # evidence: the sum below gives exactly that value.
        evidence = {
            sid: values[0]
            if len(values) == 1
            else sum(sorted(values, reverse=True)[:SESSION_EVIDENCE_HITS])
            for sid, values in by_session.items()
        }
        scores = [
            score + session * evidence[h.session_id] for h, score in zip(hits, scores, strict=True)
        ]
    return [
        _tuple_new(Ranked, (sid, seq, kind, score, at, matched, where))
        for (sid, seq, kind, _, at, matched, where), score in zip(hits, scores, strict=True)
    ]


def sessions_first(hits: Sequence[Ranked], sessions: set[str]) -> list[Ranked]:
    """The hits of `sessions` (those whose title the query names in full) moved above
    every other hit, keeping their own order: the top score is added to theirs."""
    top = max((h.score for h in hits), default=0.0)
    return [h.with_score(h.score + top) if h.session_id in sessions else h for h in hits]


def role_weight(kind: str, role: str) -> float:
    """Reference weights: a user's words outrank the same words from the assistant."""
    if role == "user":
        return USER_WEIGHT
    if kind == policy.TOOL_INPUT:
        return TOOL_CALL_WEIGHT
    return ASSISTANT_WEIGHT


def message_score(
    base: float, *, kind: str, role: str, phrase_hit: bool, field_boost: float | None
) -> float:
    """A candidate message's score: its BM25 `base` times each score factor, in order.

    A new factor goes here (its constant beside the others above), so that every
    candidate gets it and nothing else needs to change.
    """
    score = base * role_weight(kind, role)
    if phrase_hit:
        score *= PHRASE_BOOST
    if field_boost is not None:
        score *= field_boost
    return score


def score_document(
    tfs: dict[str, int],
    length: int,
    groups: Sequence[Sequence[Expansion]],
    corpus: Corpus,
    *,
    use_sf: bool = False,
    coverage_exponent: float = COVERAGE_EXPONENT,
) -> tuple[float, set[str]]:
    """The `Scorer` score of one document (see there)."""
    scorer = Scorer(groups, corpus, use_sf=use_sf, coverage_exponent=coverage_exponent)
    return scorer.score(tfs, length)


#: Makes a `Ranked` from its fields in order without the named tuple's own
#: constructor (a call of Python code): hits are rescored at each step of the evidence.
_tuple_new = tuple.__new__


class Ranked(NamedTuple):
    """A scored hit; ``order_key`` sorts best first, then newest first (the later seq
    of a session first on equal times), then by session id.

    A named tuple rather than a dataclass: a search makes several per candidate (each
    step of the evidence rescores every hit), and a tuple is made in a quarter of a
    frozen dataclass's time. Hits are ordered by `order_key`, never as tuples."""

    session_id: str
    seq: int
    kind: str
    score: float
    created_at: datetime
    matched: frozenset[str]
    #: Set when the session's title or summary, not the entry itself, matched: the
    #: entry is where the hit points, the excerpt comes from that field.
    matched_in: Literal["title", "summary"] | None = None

    def with_score(self, score: float) -> Ranked:
        """This hit with another score."""
        sid, seq, kind, _, at, matched, where = self
        return _tuple_new(Ranked, (sid, seq, kind, score, at, matched, where))

    @property
    def order_key(self) -> tuple[float, float, str, int]:
        return (-round(self.score, 9), -self.created_at.timestamp(), self.session_id, -self.seq)


#: `Ranked.order_key` as a sort key (no call of a lambda around the property's).
_ORDER_KEY = attrgetter("order_key")


def rank(
    hits: Iterable[Ranked],
    *,
    per_session: bool,
    floor: float = RELATIVE_FLOOR,
    keep: frozenset[str] = frozenset(),
) -> list[Ranked]:
    """Best first, newest first on ties; drop hits under `floor` x top, except those
    matching a term of `keep` (rare query words); one per session.

    ``top`` is the score of the first hit in that order. The hits under the floor
    are dropped before the others are ordered: a query of several words keeps a few
    of hundreds."""
    hits = list(hits)
    if not hits:
        return []
    highest = max(h.score for h in hits)
    # The first in order: of the highest score to 9 places, the first by the rest of
    # the order (only a score within 1e-9 of the highest can round alike).
    level = round(highest, 9)
    top = min(
        (h for h in hits if h.score >= highest - 2e-9 and round(h.score, 9) == level),
        key=_ORDER_KEY,
    ).score
    if top > 0:
        hits = [h for h in hits if h.score >= floor * top or (keep and h.matched & keep)]
    ordered = sorted(hits, key=_ORDER_KEY)
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
