"""Impact-ordered postings: bounded candidate work for frequent words.

For each term found in at least `MIN_DF` messages of a workspace, ``term_lists``
keeps the keys of its `MAX_POSTINGS` messages with the largest BM25 term impact
``tf / (tf + k1 (1 - b + b len / avgdl))``, best first, in chunks of `CHUNK`;
``term_list_heads`` keeps each chunk's largest impact and ``theta``, the largest
impact among the postings left out. The lists are rebuilt whole per workspace, in
one transaction (`pgsearch.db.store.build_lists`): after a bulk load, by
``pgsearch maintain``, and by a search path that finds them behind. Messages stored
since (``ingest_seq`` above the workspace's watermark, its *tail*) are read directly,
at most `TAIL_MAX` of them; a workspace further behind is searched as before.

A search whose plan caps its candidates (`plan.CandidatePlan`: ``all_words_newest``,
``any_unit_by_coverage``) reads instead the first chunks of each listed term, every
match of its other terms (rare by construction), and the tail, scores them all with
the same `ranking.Scorer`, and certifies the result: no message left unread can
score above the k-th best read (`unseen_bound`). The bound uses the statistics at
query time; the lists' order dates from their build, which the bound absorbs
(a drifted average length only loosens it), so drift can cost work, never order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from pgsearch import ranking
from pgsearch.ranking import Ranked, Scorer

if TYPE_CHECKING:
    from pgsearch.plan import CandidatePlan

#: Terms found in at least this many messages of a workspace get a list (a rarer
#: term's messages are all read: at most this many, plus the tail).
MIN_DF = 256
#: Postings kept per list (the best by impact).
MAX_POSTINGS = 2048
#: Keys per ``term_lists`` row.
CHUNK = 128
#: Most messages stored since a build that a search reads directly; further behind,
#: the workspace is searched without its lists until they are rebuilt.
TAIL_MAX = 2000
#: Ingest rebuilds a workspace's lists once this many messages were stored since
#: their build (`Store.keep_lists_current`), well before searches stop using them.
REBUILD_BEHIND = TAIL_MAX // 2

#: Chunks of each listed term read first, and in all after the one further step a
#: search takes when the first read cannot certify its result.
FIRST_CHUNKS = 2
MORE_CHUNKS = 8
#: Hits of a session whose scores make its evidence (`ranking.SESSION_EVIDENCE_HITS`).
SESSION_HITS = ranking.SESSION_EVIDENCE_HITS
#: Certificates leave this relative margin (sums of floats in another order).
EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class ListHead:
    """A listed term: its df when built, each chunk's largest impact, and the
    largest impact among the postings the list leaves out."""

    term: str
    df: int
    chunk_max: tuple[float, ...]
    theta: float

    def after(self, chunks: int) -> float:
        """The largest impact of a posting not among the first `chunks` chunks."""
        return self.chunk_max[chunks] if chunks < len(self.chunk_max) else self.theta


@dataclass(frozen=True, kw_only=True)
class ListsState:
    """A workspace's lists as a search reads them (`pgsearch.db.reads.list_heads`)."""

    built_at: datetime
    watermark: int
    #: The average message length the lists were ordered under.
    avg_len: float
    #: Messages stored since (counted up to ``TAIL_MAX + 1``).
    behind: int
    speakers: tuple[str, ...]
    #: The heads of the query's listed terms (as written and same-stem).
    heads: Mapping[str, ListHead]


@dataclass(frozen=True, kw_only=True)
class BoundedPlan:
    """How a capped plan's candidates are read instead: the first chunks of the
    listed terms' lists, every match of the other terms, and the tail."""

    state: ListsState
    #: The plan's terms that have a list, and the others (read whole).
    listed: tuple[str, ...]
    rare: tuple[str, ...]
    #: The sets of groups a hit holds all of, one of them (the plan's hit units, as
    #: indexes into ``plan.groups``).
    must: tuple[tuple[int, ...], ...]


BOUNDED_STRATEGIES = ("all_words_newest", "any_unit_by_coverage")


def lists_due(*, built: bool, behind: int, rebuild_behind: int, build_new: bool = True) -> bool:
    """Whether a workspace's term lists are to be (re)built, `behind` messages stored
    since their build (or in all, when never built): lists built before once that
    reaches `rebuild_behind`; none yet, with `build_new`, once a term can be frequent
    enough to list (`MIN_DF`)."""
    if built:
        return behind >= rebuild_behind
    return build_new and behind >= MIN_DF


def bounded_plan(
    plan: CandidatePlan, state: ListsState | None, *, rare_limit: int
) -> BoundedPlan | None:
    """The bounded read for `plan`, or None to read as the plan says: the plan does
    not cap its candidates, the workspace has no lists or they are too far behind,
    or the terms without a list could match more than `rare_limit` messages."""
    if state is None or plan.strategy not in BOUNDED_STRATEGIES or state.behind > TAIL_MAX:
        return None
    listed = tuple(t for t in plan.terms if t in state.heads)
    if not listed:
        return None
    rare_df: dict[str, int] = {}
    for group in plan.groups:
        for e in group:
            if e.term not in state.heads:
                rare_df[e.term] = max(rare_df.get(e.term, 0), e.df)
    if sum(rare_df.values()) > rare_limit:
        return None
    index = {g[0].group: i for i, g in enumerate(plan.groups)}
    must = tuple(tuple(index[g[0].group] for g in unit) for unit in plan.hit_units)
    return BoundedPlan(state=state, listed=listed, rare=tuple(sorted(rare_df)), must=must)


def unseen_bound(
    scorer: Scorer,
    plan: CandidatePlan,
    bounded: BoundedPlan,
    chunks: int,
    *,
    speakers: frozenset[str],
) -> float:
    """The most a message of the plan's hit set that was not read can score before
    its neighbours' and session's evidence, once the first `chunks` chunks of every
    list, every match of the unlisted terms, the tail and every match in a session
    whose title or summary matched are read: each listed term at most the impact of
    the first posting left unread, under today's average length (a longer average
    makes the same posting weigh more, by at most its ratio to the lists' own), times
    the largest role weight and the phrase boost."""
    state = bounded.state
    drift = max(1.0, scorer.avg_length / state.avg_len) if state.avg_len > 0 else math.inf
    impacts = [
        {
            e.term: min(1.0, state.heads[e.term].after(chunks) * drift)
            for e in group
            if e.term in state.heads
        }
        for group in plan.groups
    ]
    base = scorer.upper_bound(impacts, must=bounded.must, speakers=speakers)
    factor = max(ranking.USER_WEIGHT, ranking.TOOL_CALL_WEIGHT, ranking.ASSISTANT_WEIGHT)
    if any(len(p) > 1 for p in plan.phrases):
        factor *= ranking.PHRASE_BOOST
    return base * factor


def kth_score(hits: Sequence[Ranked], k: int, *, per_session: bool) -> float | None:
    """The score of the k-th best hit (of the k-th session's best, per session), or
    None when there are fewer."""
    seen: set[str] = set()
    n = 0
    for h in sorted(hits, key=lambda h: h.order_key):
        if per_session:
            if h.session_id in seen:
                continue
            seen.add(h.session_id)
        n += 1
        if n == k:
            return h.score
    return None


def before(
    hits: Sequence[Ranked], after: tuple[float, float, str, int] | None, *, per_session: bool
) -> int:
    """How many hits (sessions, per session) come at or before position `after` (a
    later page's cursor): the page after them needs that many more exact."""
    if after is None:
        return 0
    ahead = [h for h in hits if h.order_key <= after]
    return len({h.session_id for h in ahead}) if per_session else len(ahead)


def certified(hits: Sequence[Ranked], k: int, bound: float, *, per_session: bool) -> bool:
    """Whether the top `k` of `hits` is the top `k` of the whole hit set: the k-th
    beats `bound`, the most any hit not read can score (with a margin for rounding);
    with fewer than `k` hits, only when nothing unread can match."""
    if bound <= 0:
        return True
    kth = kth_score(hits, k, per_session=per_session)
    return kth is not None and kth > bound * (1 + EPSILON) + EPSILON


def leading_sessions(hits: Sequence[Ranked], n: int, *, per_session: bool) -> set[str]:
    """The sessions of the best `n` hits (of the best `n` sessions, per session)."""
    out: set[str] = set()
    count = 0
    for h in sorted(hits, key=lambda h: h.order_key):
        if per_session and h.session_id in out:
            continue
        out.add(h.session_id)
        count += 1
        if count >= n:
            break
    return out


def evidence_reach(bound: float, *, context: float, session: float) -> float:
    """The most a hit of a session nothing was read of can score with its evidence,
    its own score being at most `bound`."""
    own = bound * (1 + context)
    return own + session * SESSION_HITS * own


def certified_with_evidence(
    stage1: Sequence[Ranked],
    final: Sequence[Ranked],
    full: set[str],
    k: int,
    bound: float,
    *,
    context: float,
    session: float,
    per_session: bool,
) -> bool:
    """Whether the top `k` of `final` (scores with neighbouring turns' and session
    evidence, `ranking.add_context` then `ranking.add_session`) is the whole hit
    set's: every hit of the `full` sessions was read, so their final scores are
    exact, and the k-th of them beats the most any hit of another session can reach.

    Outside `full`, a read hit's stage-1 score is known and an unread one's is at
    most `bound`; a neighbour may be either, so a hit's score with context is at most
    its own plus `context` times the best its session may hold, and the session's
    evidence at most the sum of its three best such bounds.
    """
    if bound <= 0:
        return True  # every hit was read: every score is exact
    exact = [h for h in final if h.session_id in full]
    kth = kth_score(exact, k, per_session=per_session)
    if kth is None:
        return False
    by_session: dict[str, list[float]] = {}
    for h in stage1:
        if h.session_id not in full:
            by_session.setdefault(h.session_id, []).append(h.score)
    reach = 0.0
    for scores in [*by_session.values(), []]:
        best = max([*scores, bound])
        own = [x + context * best for x in scores]
        unread = bound + context * best if bound > 0 else 0.0
        tops = sorted([*own, unread, unread, unread], reverse=True)[:SESSION_HITS]
        reach = max(reach, max([*own, unread]) + session * sum(tops))
    return kth > reach * (1 + EPSILON) + EPSILON
