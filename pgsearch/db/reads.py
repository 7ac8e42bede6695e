"""The named reads of a search: each a `Statement` whose rows are typed (`pgsearch.rows`).

The search engine (`pgsearch.search`) composes them into a unit of work, sending the
independent ones of a stage in one step (one network round trip); the drivers run
that unit sync or asyncio alike. Builders take the plan values of `pgsearch.plan`
and produce every parameter of their statement (`pgsearch.db.queries` holds the
SQL); nothing outside `db/` sees a positional result row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pgsearch.cursor import BrowsePosition
from pgsearch.db import queries as q
from pgsearch.db.queries import spread_walks
from pgsearch.db.work import Statement, Step, Work, fetch_named
from pgsearch.deadline import Deadline
from pgsearch.errors import StoreError
from pgsearch.impact import ListHead, ListsState
from pgsearch.plan import (
    CandidatePlan,
    FieldPlan,
    Filters,
    VocabularyLookup,
    allowed_edits,
)
from pgsearch.rows import CandidateRow, FieldRow, SearchStats, StoredMessage, VocabRow
from pgsearch.scoring import FieldHit

__all__ = [
    "DirectRead",
    "FirstTrip",
    "PlanRows",
    "bounded_candidates",
    "browse_page",
    "candidates",
    "count_in_scope",
    "coverage_and_spread",
    "cursor_key",
    "direct_search",
    "every_match",
    "first_trip",
    "in_scope",
    "list_heads",
    "lists_built_at",
    "lists_state",
    "newest_and_spread",
    "page_messages",
    "parse_tf",
    "plan_rows",
    "search_stats",
    "session_anchors",
    "session_fields",
    "session_spread",
    "split_direct",
    "spread_walks",
    "within",
]

T = TypeVar("T")


def parse_tf(text: str | None) -> dict[str, int]:
    """Term frequencies from a tsvector's text form (``'a':1A,4A 'b':2A``)."""
    counts: dict[str, int] = {}
    if text:
        for item in text.split(" "):
            term, _, positions = item.rpartition(":")
            counts[term[1:-1]] = positions.count(",") + 1
    return counts


def _search_stats(row: Sequence[Any]) -> SearchStats:
    n_indexed, total_len, in_scope, n_fields, fields_len, n_messages = (int(v) for v in row)
    return SearchStats(
        n_indexed=n_indexed,
        total_len=total_len,
        in_scope=in_scope,
        n_fields=n_fields,
        fields_len=fields_len,
        n_messages=n_messages,
    )


def search_stats(filters: Filters) -> Statement[SearchStats]:
    """The workspace's statistics (one row), with the entries of the requested kinds."""
    return Statement(
        "search statistics",
        q.SEARCH_STATS,
        {"ws": filters.workspace, "kinds": list(filters.kinds), "fields": q.FIELDS_STAT},
        _search_stats,
    )


def count_in_scope(filters: Filters) -> Statement[int]:
    """Entries the filters cover (one row), counted."""
    sql, params = q.count_sql(filters)
    return Statement("count in scope", sql, params, lambda r: int(r[0]))


def in_scope(filters: Filters) -> Statement[int]:
    """Entries the filters cover (one row): from the statistics when only kinds
    filter, else counted."""
    if not filters.only_kinds:
        return count_in_scope(filters)
    stats = search_stats(filters)
    return Statement(stats.name, stats.sql, stats.params, lambda r: _search_stats(r).in_scope)


def _cursor_key(row: Sequence[Any]) -> tuple[bytes | None, bool]:
    return (None if row[0] is None else str(row[0]).encode()), bool(row[1])


def cursor_key() -> Statement[tuple[bytes | None, bool]]:
    """The database's key for signing cursors (None: none stored), and whether row
    level security restricts this role's reads (`pgsearch.plan.Filters.keyed`)."""
    return Statement("cursor key", q.CURSOR_KEY, decode=_cursor_key)


#: Makes a named tuple from its fields in order without its constructor's call (a
#: search makes a candidate for each of up to a few thousand rows).
_tuple_new = tuple.__new__


def _candidate(row: Sequence[Any]) -> CandidateRow:
    sid, seq, kind, role, created_at, length, tfs, phrase_hit, speaker = row
    # Positional: the columns are `CandidateRow`'s fields in order.
    return _tuple_new(
        CandidateRow,
        (sid, seq, kind, role, created_at, length, parse_tf(tfs), bool(phrase_hit), speaker),
    )


def candidates(filters: Filters, plan: CandidatePlan) -> Statement[CandidateRow]:
    """The candidate messages of the plan, with the query terms' frequencies."""
    sql, params = q.candidates_sql(filters, plan)
    return Statement("candidates", sql, params, _candidate)


def every_match(filters: Filters, plan: CandidatePlan) -> Statement[CandidateRow]:
    """Every hit the plan's rules define within the filters (no cap, no scan limit)."""
    sql, params = q.every_match_sql(filters, plan)
    return Statement("every match", sql, params, _candidate)


def newest_and_spread(filters: Filters, plan: CandidatePlan) -> Statement[tuple[str, CandidateRow]]:
    """`candidates` (tagged ``c``) and `session_spread` (``s``) in one read of the
    matches, where `queries.spread_with_candidates` allows it."""
    sql, params = q.newest_and_spread_sql(filters, plan)
    return Statement(
        "candidates and per session", sql, params, lambda r: (str(r[0]), _candidate(r[1:]))
    )


def coverage_and_spread(
    filters: Filters, plan: CandidatePlan, *, scan: int
) -> Statement[tuple[str, CandidateRow | None]]:
    """`candidates` of a best-covering plan (tagged ``c``) and, when they fill the cap
    and `scan` covers every match, `session_spread` (``s``), in one read of the
    matches; a row tagged ``x`` (no candidate) when the spread was not read."""
    sql, params = q.coverage_and_spread_sql(filters, plan, scan=scan)
    return Statement(
        "candidates and per session",
        sql,
        params,
        lambda r: (str(r[0]), None if r[0] == "x" else _candidate(r[1:])),
    )


def session_spread(
    filters: Filters, plan: CandidatePlan, *, scan: int, walk: bool = False
) -> Statement[CandidateRow]:
    """One candidate per session (its newest match) among the first `scan` matches;
    with `walk`, read from the newest sessions' ends where that read is complete
    (`queries.session_spread_walk_sql`; `queries.spread_walks` says when)."""
    if walk:
        sql, params = q.session_spread_walk_sql(filters, plan, scan=scan)
        return Statement("candidates per session, walked", sql, params, _candidate)
    sql, params = q.session_spread_sql(filters, plan, scan=scan)
    return Statement("candidates per session", sql, params, _candidate)


def bounded_candidates(
    filters: Filters,
    plan: CandidatePlan,
    *,
    listed: Sequence[str],
    chunks: tuple[int, int],
    rare: Sequence[str] = (),
    tail: int = 0,
    watermark: int = 0,
    sessions: Sequence[str] = (),
) -> Statement[CandidateRow]:
    """Candidates of a capped plan read through the term lists (`pgsearch.impact`)."""
    sql, params = q.bounded_candidates_sql(
        filters,
        plan,
        listed=listed,
        chunks=chunks,
        rare=rare,
        tail=tail,
        watermark=watermark,
        sessions=sessions,
    )
    return Statement("bounded candidates", sql, params, _candidate)


def list_heads(workspace: str, terms: Sequence[str], *, limit: int) -> Statement[Any]:
    """The workspace's term list state and the heads of `terms` (raw rows, see
    `lists_state`)."""
    return Statement(
        "list heads",
        q.LIST_HEADS,
        {"ws": workspace, "terms": sorted(set(terms)), "limit": limit},
        lambda r: tuple(r),
    )


def lists_state(rows: Sequence[Sequence[Any]]) -> ListsState | None:
    """The `list_heads` rows as a `ListsState` (None: never built)."""
    if not rows:
        return None
    built_at, watermark, avg_len, speakers, behind = rows[0][:5]
    heads = {
        r[5]: ListHead(term=r[5], df=int(r[6]), chunk_max=tuple(r[7]), theta=float(r[8]))
        for r in rows
        if r[5] is not None
    }
    return ListsState(
        built_at=built_at,
        watermark=int(watermark),
        avg_len=float(avg_len),
        behind=int(behind),
        speakers=tuple(speakers or ()),
        heads=heads,
    )


def lists_built_at(workspace: str) -> Statement[Any]:
    """When the workspace's lists were built (to tell a rebuild during a search)."""
    return Statement("lists built", q.LISTS_BUILT_AT, {"ws": workspace}, lambda r: r[0])


def _field_row(row: Sequence[Any]) -> FieldRow:
    sid, field_len, entries = row
    # "term count weights": weight A marks title positions, B summary ones.
    tfs: dict[str, int] = {}
    in_title: set[str] = set()
    in_summary: set[str] = set()
    for item in entries or ():
        term, count, weights = item.split(" ")
        tfs[term] = int(count)
        if "A" in weights:
            in_title.add(term)
        if "B" in weights:
            in_summary.add(term)
    return FieldRow(
        session_id=sid,
        field_len=int(field_len),
        tfs=tfs,
        in_title=frozenset(in_title),
        in_summary=frozenset(in_summary),
    )


def session_fields(workspace: str, plan: FieldPlan, *, capped: bool = True) -> Statement[FieldRow]:
    """Sessions whose title or summary holds a selective word of the plan (at most
    the plan's cap of them, or all with `capped` false)."""
    params: dict[str, Any] = {
        "ws": workspace,
        "terms": list(plan.terms),
        "tsq": q.tsquery_or(plan.selective),
        "cap": plan.cap if capped else None,
    }
    if plan.session_id is None:
        return Statement("session fields", q.SESSION_FIELD_MATCHES, params, _field_row)
    params["session_id"] = plan.session_id
    return Statement("session fields", q.SESSION_FIELD_MATCHES_ONE, params, _field_row)


def _stored_message(row: Sequence[Any]) -> StoredMessage:
    sid, seq, entry_id, kind, role, turn, tool_name, created_at, content, arguments, *fields = row
    title, summary, parent, prompt_title = (*fields, None, None, None, None)[:4]
    return StoredMessage(
        session_id=sid,
        seq=seq,
        entry_id=entry_id,
        kind=kind,
        role=role,
        turn=turn,
        tool_name=tool_name,
        created_at=created_at,
        content=content,
        arguments=arguments,
        title=title,
        summary=summary,
        parent_session_id=parent,
        prompt_title=prompt_title,
    )


def session_anchors(workspace: str, hits: Mapping[str, FieldHit]) -> Statement[StoredMessage]:
    """The entry each title/summary-only hit points at (one per session)."""
    return Statement(
        "session anchors",
        q.SESSION_ANCHOR_ENTRY,
        {"ws": workspace, "sids": list(hits)},
        _stored_message,
    )


def page_messages(
    workspace: str, keys: Sequence[tuple[str, int]], *, chars: int
) -> Statement[StoredMessage]:
    """The stored entries of a page, with their session's title and summary, each
    text cut to its first `chars` characters."""
    return Statement(
        "page messages",
        q.FETCH_MESSAGES,
        {
            "ws": workspace,
            "sids": [k[0] for k in keys],
            "seqs": [k[1] for k in keys],
            "chars": chars,
        },
        _stored_message,
    )


def browse_page(
    filters: Filters,
    *,
    per_session: bool,
    after: BrowsePosition | None,
    limit: int,
    chars: int,
) -> Statement[StoredMessage]:
    """`browse`'s entries as `page_messages` reads them, newest first."""
    sql, params = q.browse_page_sql(
        filters, per_session=per_session, after=after, limit=limit, chars=chars
    )
    return Statement("browse page", sql, params, _stored_message)


def statement_timeout(ms: float) -> Statement[Any]:
    """The timeout of the statements after this one in the transaction: `ms`."""
    return Statement("deadline", q.STATEMENT_TIMEOUT, {"ms": str(max(math.ceil(ms), 1))})


def within(inner: Work[T], deadline: Deadline, context: str) -> Work[T]:
    """Run `inner` with every step bounded by what is left of `deadline`.

    Each step is sent with the time left as its statements' timeout (in the same
    round trip); a step due after the deadline fails at once with the error a
    timed-out statement gives (`StoreError`, "statement timed out").
    """
    try:
        step = next(inner)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    while True:
        left = deadline.remaining_ms()
        statements = step.statements
        if left != math.inf:
            if left <= 0:
                late = StoreError(
                    f"{context}: statement timed out (the request used all of its "
                    f"{deadline.budget_ms:,} ms)"
                )
                try:
                    step = inner.throw(late)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
                continue
            statements = (statement_timeout(left), *statements)
        try:
            results = yield Step(statements, step.final)
        except BaseException as exc:
            try:
                step = inner.throw(exc)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            continue
        if left != math.inf:
            results = results[1:]
        try:
            step = inner.send(results)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]


@dataclass(frozen=True, kw_only=True)
class DirectRead:
    """What `direct_search` read: the vocabulary rows of the query words, the
    expansions the server chose among them, and the direct plan's candidates and
    title/summary matches (see `pgsearch.plan.direct_candidates_hold`)."""

    vocabulary: list[VocabRow]
    #: (word index, term) of every expansion the server chose.
    chosen: frozenset[tuple[int, str]]
    candidates: list[CandidateRow]
    fields: list[FieldRow]


#: A row of `direct_search`, and for a vocabulary row whether the server chose it.
DirectRow = tuple[VocabRow | CandidateRow | FieldRow, bool]


def _direct_row(row: Sequence[Any]) -> DirectRow:
    tag, i, term, df, sf, how, chosen, *rest = row
    if tag == "v":
        return VocabRow(word_index=i - 1, term=term, df=df, sf=sf, how=how), bool(chosen)
    if tag == "c":
        return _candidate(rest[:9]), False
    return _field_row((rest[0], rest[9], rest[10])), False


def split_direct(rows: Sequence[DirectRow]) -> DirectRead:
    """The rows of `direct_search` by kind."""
    vocabulary: list[VocabRow] = []
    chosen: set[tuple[int, str]] = set()
    candidates: list[CandidateRow] = []
    fields: list[FieldRow] = []
    for row, picked in rows:
        if isinstance(row, VocabRow):
            vocabulary.append(row)
            if picked:
                chosen.add((row.word_index, row.term))
        elif isinstance(row, CandidateRow):
            candidates.append(row)
        else:
            fields.append(row)
    return DirectRead(
        vocabulary=vocabulary, chosen=frozenset(chosen), candidates=candidates, fields=fields
    )


def direct_search(
    filters: Filters,
    lookup: VocabularyLookup,
    units: Sequence[Sequence[int]],
    phrases: Sequence[Sequence[str]],
    *,
    titles: bool,
    max_expansions: int,
    typo_distance: str,
    realword_ratio: float,
    cap: int,
    stop_cap: int,
    stop_ratio: float,
    stop_min_df: int,
    candidates: bool = True,
) -> Statement[DirectRow]:
    """The vocabulary rows of the lookup's words (typo neighbours within twice their
    allowed distance only), the expansions the server chose as
    `pgsearch.plan.choose_expansions` does with the same arguments, and the direct
    plan's reads, in one statement (`pgsearch.db.queries.direct_search_sql`; rows
    by kind with `split_direct`): every message holding a complete unit when those
    are at most `cap`, and with `titles` the sessions whose title or summary holds a
    selective word. Without `candidates` (``expand words``), the vocabulary rows and
    the server's choice only."""
    sql, params = q.direct_search_sql(
        filters,
        words=lookup.words,
        stems=lookup.stems,
        prefix=lookup.prefix,
        shaped=lookup.fuzzy,
        allowed=[allowed_edits(w) for w in lookup.words],
        units=units,
        phrases=phrases,
        expansion={
            "prefix_limit": lookup.prefix_limit,
            "fuzzy_limit": lookup.fuzzy_limit,
            "trusted": lookup.trusted_df,
            "below": lookup.typo_below,
            "realword": realword_ratio,
            "max_expansions": max_expansions,
            "osa": typo_distance == "osa",
        },
        cap=cap,
        stop_cap=stop_cap,
        stop_ratio=stop_ratio,
        stop_min_df=stop_min_df,
        titles=titles,
        candidates=candidates,
    )
    name = "direct search" if candidates else "expand words"
    return Statement(name, sql, params, _direct_row)


@dataclass(frozen=True, kw_only=True)
class FirstTrip:
    """What a ranked search reads first, in one round trip (`first_trip`)."""

    stats: SearchStats
    #: Entries in scope: from the statistics when only kinds filter, else counted.
    searched: int
    #: The vocabulary rows of the query words, the server's choice of expansions and
    #: the direct plan's reads (those only when `direct_search` read them).
    direct: DirectRead


def first_trip(filters: Filters, direct: Statement[DirectRow]) -> Work[FirstTrip]:
    """The workspace's statistics, the count of the scope when more than kinds filter
    it, and `direct` (`direct_search`), in one round trip."""
    got = yield from fetch_named(
        {
            "stats": search_stats(filters),
            "count": None if filters.only_kinds else count_in_scope(filters),
            "direct": direct,
        }
    )
    stats: SearchStats = got["stats"][0]
    return FirstTrip(
        stats=stats,
        searched=got["count"][0] if "count" in got else stats.in_scope,
        direct=split_direct(got["direct"]),
    )


@dataclass(frozen=True, kw_only=True)
class PlanRows:
    """The rows a plan's hits are scored from: its candidate messages and the
    sessions whose title or summary holds a selective word."""

    candidates: list[CandidateRow]
    fields: list[FieldRow]
    #: The newest match of each session (`session_spread`), when it was read with the
    #: candidates; None: not read.
    spread: list[CandidateRow] | None = None


def plan_rows(
    filters: Filters,
    plan: CandidatePlan,
    field_plan: FieldPlan | None,
    *,
    held_candidates: list[CandidateRow] | None = None,
    held_fields: list[FieldRow] | None = None,
    exhaustive: bool = False,
    spread_scan: int = 0,
    spread_walk: bool = False,
) -> Work[PlanRows]:
    """The plan's rows: those already held (the direct read's, when they are the
    plan's own) and, in one round trip, the plan's statements for the others (none:
    no trip). With `exhaustive`, every match and every matching session, uncapped;
    with no `field_plan`, no sessions. With `spread_scan`, the per-session spread
    of that scan too, where it is read with the candidates
    (`queries.spread_with_candidates`) or the candidates are expected to fill the
    cap (`queries.spread_ahead`: it is sent in the same trip), walked with
    `spread_walk`."""
    if field_plan is None:
        held_fields = []
    # The spread goes in this trip only with candidates read here, capped.
    spreads = held_candidates is None and not exhaustive and spread_scan > 0
    both: Statement[Any] | None = None
    if spreads and q.spread_with_candidates(filters, plan, scan=spread_scan):
        both = (
            coverage_and_spread(filters, plan, scan=spread_scan)
            if plan.strategy == "any_unit_by_coverage"
            else newest_and_spread(filters, plan)
        )
    ahead = spreads and both is None and q.spread_ahead(filters, plan)
    got = yield from fetch_named(
        {
            "candidates": None
            if held_candidates is not None or both is not None
            else (every_match if exhaustive else candidates)(filters, plan),
            "both": both,
            "spread": session_spread(filters, plan, scan=spread_scan, walk=spread_walk)
            if ahead
            else None,
            "fields": None
            if held_fields is not None or field_plan is None
            else session_fields(filters.workspace, field_plan, capped=not exhaustive),
        }
    )
    if both is not None:
        tagged: list[tuple[str, CandidateRow | None]] = got["both"]
        return PlanRows(
            candidates=[row for tag, row in tagged if tag == "c" and row is not None],
            fields=got["fields"] if held_fields is None else held_fields,
            spread=None
            if any(tag == "x" for tag, _ in tagged)
            else [row for tag, row in tagged if tag == "s" and row is not None],
        )
    return PlanRows(
        candidates=got["candidates"] if held_candidates is None else held_candidates,
        fields=got["fields"] if held_fields is None else held_fields,
        spread=got["spread"] if ahead else None,
    )
