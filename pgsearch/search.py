"""The search engine: one request's pipeline, from validation to a page of matches.

`SearchEngine.unit` makes one read transaction, a unit of work (`pgsearch.db.work`)
that either driver runs:

    validate -> parse -> read statistics -> expand the words against the vocabulary
    -> plan the candidates -> read them -> match session titles/summaries -> score
    -> rank and page -> materialise the page (excerpts from the indexed text only).

Every decision is a pure function of `pgsearch.plan` (its docstring has the rules
and a glossary), `pgsearch.scoring` or `pgsearch.ranking`; this module sequences
them and names the reads they call for (`pgsearch.db.reads`), sending the
independent ones of a stage together, in one round trip, and reading their rows back
by name (`reads.FirstTrip`, `reads.PlanRows`, `ListsRead`), never by position.
Every statement runs with sequential scans disabled locally (the driver's search
units), so each goes through an index.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from pgsearch import impact, policy
from pgsearch.cursor import (
    CursorCodec,
    browse_position,
    ranked_position,
    request_fingerprint,
)
from pgsearch.db import reads
from pgsearch.db.work import Statement, Unit, Work, explained, fetch, fetch2, fetch_named
from pgsearch.deadline import Deadline
from pgsearch.excerpt import READ_MARGIN_CHARS, clip, excerpt_around, make_excerpt
from pgsearch.highlight import split_marks
from pgsearch.plan import (
    STOP_MIN_DF,
    CandidatePlan,
    FieldPlan,
    Filters,
    Group,
    ParsedQuery,
    SearchTrace,
    VocabularyLookup,
    choose_expansions,
    direct_candidates_hold,
    direct_fields_hold,
    parse_query,
    plan_candidates,
    plan_fields,
    read_limits,
    unit_indexes,
    vocabulary_lookup,
)
from pgsearch.ranking import Corpus, Ranked, Scorer, page_after, rank, speaker_terms
from pgsearch.rows import CandidateRow, FieldRow, SearchStats, StoredMessage, VocabRow
from pgsearch.scoring import (
    Evidence,
    FieldHit,
    field_hits,
    orphan_hits,
    own_scores,
    rare_terms,
    score_candidates,
    with_evidence,
)
from pgsearch.settings import IndexPolicy, Settings
from pgsearch.types import (
    DEFAULT_EXCERPT_BYTES,
    MAX_EXCERPT_BYTES,
    MAX_LIMIT,
    MAX_RESULT_BYTES,
    Scope,
    SessionMatch,
    SessionQueryRequest,
    SessionQueryResult,
)
from pgsearch.validate import validate_request

log = logging.getLogger(__name__)

MIN_EXCERPT_BYTES = 40
MAX_TITLE_BYTES = 300


@dataclass(frozen=True, kw_only=True)
class Paging:
    """Which page of a result a request asks for, and how to name the next one."""

    limit: int
    excerpt_bytes: int
    codec: CursorCodec
    fingerprint: str
    #: The position decoded from the request's cursor (None: the first page).
    after: list[Any] | None
    #: The whole search's deadline (statements and excerpts).
    deadline: Deadline = field(default_factory=lambda: Deadline.start(0))

    def next_cursor(self, position: list[Any]) -> str:
        return self.codec.encode(self.fingerprint, position)


class SearchEngine:
    """Makes the unit of work that answers a `SessionQueryRequest` for a `Scope`.

    The unit runs on either driver (`PgSearch`'s threads, `AsyncPgSearch`'s event
    loop): the logic below exists once. An engine is shared by every thread and task
    of its facade; the only state it keeps is the database's cursor key, read once.
    """

    def __init__(
        self, settings: Settings, *, direct: bool = True, exhaustive: bool = False
    ) -> None:
        self.settings = settings
        #: Read the direct plan with the vocabulary (`pgsearch.plan.direct_candidates_hold`);
        #: off, every search reads its plan's statements after the vocabulary.
        self.direct = direct and not exhaustive
        #: Rank every hit the planner's rules define, with no cap and no scan limit
        #: (`pgsearch.plan.CandidatePlan.hit_units`: any selective unit, or every
        #: word), and every session whose title or summary holds a selective word:
        #: the reference ranking (slow on common words) that the capped reads are
        #: checked against, and that a result not marked ``approximate`` equals.
        self.exhaustive = exhaustive
        #: Capped plans read through the workspace's term lists (`pgsearch.impact`).
        self.uses_lists = settings.impact_lists and not exhaustive
        self._cursor_key: bytes | None = None
        #: Whether row level security restricts the role's reads (`Filters.keyed`).
        self._row_security = False

    def unit(
        self, scope: Scope, request: SessionQueryRequest, *, explain: bool = False
    ) -> Unit[SessionQueryResult]:
        """The search as one read transaction; a bad request is refused here, before
        any I/O (`InvalidQuery`, `ScopeError`).

        An empty query browses the newest entries in scope. With `explain`, the result
        also carries every statement with its server plan and a `SearchTrace` of what
        was planned.
        """
        filters = validate_request(scope, request, self.settings)
        query = parse_query(request.query, max_terms=self.settings.max_query_terms)
        return Unit(
            work=partial(self._work, scope, request, filters, query, explain),
            workspace=scope.workspace,
            write=False,
            search=True,
            context="searching",
        )

    def _work(
        self,
        scope: Scope,
        request: SessionQueryRequest,
        filters: Filters,
        query: ParsedQuery,
        explain: bool,
    ) -> Work[SessionQueryResult]:
        # One deadline for everything this search does, from here on.
        deadline = Deadline.start(self.settings.statement_timeout_ms)
        key = self._cursor_key
        if key is None:
            ((stored, self._row_security),) = yield from fetch(reads.cursor_key())
            key = self._cursor_key = stored or b"pgsearch"
        if self._row_security:
            filters = replace(filters, keyed=False)
        codec = CursorCodec(key)
        fingerprint = request_fingerprint(scope, request, filters.kinds)
        paging = Paging(
            limit=min(request.limit, MAX_LIMIT),
            excerpt_bytes=min(request.excerpt_bytes or DEFAULT_EXCERPT_BYTES, MAX_EXCERPT_BYTES),
            codec=codec,
            fingerprint=fingerprint,
            after=codec.decode(request.cursor, fingerprint) if request.cursor else None,
            deadline=deadline,
        )
        plans: list[str] | None = [] if explain else None
        # Within one session "the best hit of each session" would be a single hit:
        # a session scope (pinned or asked for) lists every hit.
        per_session = request.per_session and filters.session_id is None
        if not request.query.strip():
            inner = self._browse(filters, per_session, paging)
        elif not query.words:
            inner = self._no_words(filters)
        else:
            inner = self._ranked_search(filters, query, per_session, paging)
        bounded = reads.within(
            inner if plans is None else explained(inner, plans), deadline, "searching"
        )
        result, trace = yield from bounded
        if plans is None:
            return result
        done = tuple(plans)
        return replace(result, explain=done, trace=replace(trace, statements=done))

    def _ranked_search(
        self,
        filters: Filters,
        query: ParsedQuery,
        per_session: bool,
        paging: Paging,
    ) -> Work[tuple[SessionQueryResult, SearchTrace]]:
        """First trip -> expand -> plan -> the direct rows or the plan's reads (or a
        read through the term lists) -> titles and anchors -> score -> page."""
        settings = self.settings
        lookup = vocabulary_lookup(
            query, fuzzy_limit=settings.fuzzy_fetch, realword_df=settings.realword_df
        )
        # One trip: statistics, the scope's size, the words' vocabulary rows with
        # the typo neighbours of the words not found often enough as written, and the
        # reads of the direct plan (`pgsearch.plan.direct_candidates_hold`), which the
        # server makes with the expansions it chose from those rows (without the
        # direct reads, the vocabulary rows alone).
        titles = self.direct and not filters.narrows_entries
        first = yield from reads.first_trip(
            filters, self._direct_search(filters, query, lookup, titles=titles)
        )
        groups = self._expand(query, lookup, first.direct.vocabulary)
        if not groups:
            return SessionQueryResult(matches=(), searched=first.searched), SearchTrace(
                mode="unknown_words"
            )
        plan = plan_candidates(query, groups, first.stats, settings)
        field_plan = plan_fields(filters, groups, first.stats, settings)
        held = self._held(query, groups, plan, field_plan, first, titles=titles)
        bounded = yield from self._bounded_plan(filters, plan)
        if bounded is not None:
            return (
                yield from self._bounded_search(
                    filters, plan, field_plan, bounded, first, held.fields, per_session, paging
                )
            )
        # Whether a per-session spread read on its own walks the newest sessions.
        walk = per_session and reads.spread_walks(
            filters, plan, first.stats, scan=settings.candidate_scan_limit
        )
        # The plan's own reads, unless the direct ones are theirs: one trip.
        rows = yield from reads.plan_rows(
            filters,
            plan,
            field_plan,
            held_candidates=held.candidates,
            held_fields=held.fields,
            exhaustive=self.exhaustive,
            spread_scan=settings.candidate_scan_limit if per_session else 0,
            spread_walk=walk,
        )
        candidates = rows.candidates
        capped = not self.exhaustive and len(candidates) >= plan.cap
        limits: tuple[str, ...] = ()
        if not self.exhaustive:
            limits = read_limits(
                plan,
                field_plan,
                candidates_read=len(candidates),
                fields_read=len(rows.fields),
                spread=capped and per_session,
            )
        if capped and per_session:
            candidates = yield from self._spread(filters, plan, candidates, rows.spread, walk=walk)
        fields = _field_hits(plan, field_plan, first.stats, rows.fields)
        anchors = yield from _anchors(filters.workspace, orphan_hits(candidates, fields))
        ranked = self._rank(
            score_candidates(candidates, plan.groups, first.stats, fields, anchors, self._evidence),
            plan,
            per_session,
        )
        page, more = page_after(ranked, ranked_position(paging.after), paging.limit)
        result = SessionQueryResult(
            matches=tuple((yield from self._materialise(filters.workspace, page, paging))),
            searched=first.searched,
            next_cursor=paging.next_cursor(list(page[-1].order_key)) if more and page else None,
            candidates_capped=capped,
            approximate=bool(limits),
            notice=capped_notice(plan) if capped and not more else None,
        )
        trace = SearchTrace(mode="ranked", plan=plan, field_plan=field_plan, approximate=limits)
        return result, trace

    def _expand(
        self, query: ParsedQuery, lookup: VocabularyLookup, found: list[VocabRow]
    ) -> dict[str, Group]:
        """Each query word's expansions among the vocabulary rows read for `lookup`,
        by the rules the statement that read them applied (`choose_expansions`)."""
        settings = self.settings
        return choose_expansions(
            query,
            found,
            max_expansions=settings.max_expansions,
            typo_distance=settings.typo_distance,
            realword_ratio=self._realword_ratio,
            trusted_df=lookup.trusted_df,
        )

    @property
    def _realword_ratio(self) -> float:
        """How much more often a typo neighbour of a word found as written must be
        found to be read as meant (0: never; see `choose_expansions`)."""
        settings = self.settings
        return settings.realword_ratio if settings.realword_df else 0.0

    @property
    def _evidence(self) -> Evidence:
        return Evidence.from_settings(self.settings)

    def _direct_search(
        self, filters: Filters, query: ParsedQuery, lookup: VocabularyLookup, *, titles: bool
    ) -> Statement[reads.DirectRow]:
        """The statement reading the vocabulary with the direct plan's reads (only
        the vocabulary when the engine reads no direct plan; no titles unless
        `titles`)."""
        settings = self.settings
        return reads.direct_search(
            filters,
            lookup,
            unit_indexes(query),
            query.phrases,
            titles=titles,
            max_expansions=settings.max_expansions,
            typo_distance=settings.typo_distance,
            realword_ratio=self._realword_ratio,
            cap=settings.candidate_cap,
            stop_cap=settings.stop_candidate_cap,
            stop_ratio=settings.stop_df_ratio,
            stop_min_df=STOP_MIN_DF,
            candidates=self.direct,
        )

    def _held(
        self,
        query: ParsedQuery,
        groups: Mapping[str, Group],
        plan: CandidatePlan,
        field_plan: FieldPlan | None,
        first: reads.FirstTrip,
        *,
        titles: bool,
    ) -> Held:
        """The direct read's rows that are the plan's own (`direct_candidates_hold`,
        `direct_fields_hold`); the others the plan's statements read."""
        if not self.direct:
            return Held()
        read = first.direct
        settings = self.settings
        return Held(
            candidates=read.candidates
            if direct_candidates_hold(
                query, groups, plan, first.stats, settings, len(read.candidates), read.chosen
            )
            else None,
            fields=read.fields
            if titles and direct_fields_hold(groups, field_plan, len(read.fields), read.chosen)
            else None,
        )

    def _bounded_plan(
        self, filters: Filters, plan: CandidatePlan
    ) -> Work[impact.BoundedPlan | None]:
        """How a plan that caps its candidates reads through the term lists, if the
        state of the lists allows it (a trip only such searches take); else None."""
        if not (
            self.uses_lists and filters.only_kinds and plan.strategy in impact.BOUNDED_STRATEGIES
        ):
            return None
        heads = yield from fetch(
            reads.list_heads(filters.workspace, plan.terms, limit=impact.TAIL_MAX + 1)
        )
        state = reads.lists_state(heads)
        return impact.bounded_plan(plan, state, rare_limit=self.settings.candidate_cap)

    def _spread(
        self,
        filters: Filters,
        plan: CandidatePlan,
        candidates: list[CandidateRow],
        read: list[CandidateRow] | None = None,
        *,
        walk: bool = False,
    ) -> Work[list[CandidateRow]]:
        """`candidates` and one more per session among many more matches: the cap's
        messages may come from a few sessions, and the sessions shown must be the
        matching sessions, not those of the first cap messages. `read`: those rows,
        when they were read with the candidates (else a trip reads them, walked with
        `walk`)."""
        keys = {(c.session_id, c.seq) for c in candidates}
        spread = read
        if spread is None:
            spread = yield from fetch(
                reads.session_spread(
                    filters, plan, scan=self.settings.candidate_scan_limit, walk=walk
                )
            )
        return candidates + [c for c in spread if (c.session_id, c.seq) not in keys]

    def _rank(self, scored: list[Ranked], plan: CandidatePlan, per_session: bool) -> list[Ranked]:
        return rank(
            scored,
            per_session=per_session,
            floor=self.settings.relative_floor,
            keep=rare_terms(plan.groups),
        )

    def _bounded_search(
        self,
        filters: Filters,
        plan: CandidatePlan,
        field_plan: FieldPlan | None,
        bounded: impact.BoundedPlan,
        first: reads.FirstTrip,
        field_rows: list[FieldRow] | None,
        per_session: bool,
        paging: Paging,
    ) -> Work[tuple[SessionQueryResult, SearchTrace]]:
        """A capped plan read through the term lists (`pgsearch.impact`): the first
        chunks of each listed term, every match of the others and of the tail, then
        in one more trip every match in the sessions whose title or summary matched,
        with more chunks when the first read does not certify the top results."""
        stats = first.stats
        evidence = self._evidence
        chunks = impact.FIRST_CHUNKS
        read = yield from _lists_first(filters, plan, field_plan, bounded, field_rows)
        candidates = read.candidates
        fields = _field_hits(plan, field_plan, stats, read.fields)
        bound = _bound_of(plan, stats, bounded, evidence)
        after = ranked_position(paging.after)
        # The first read: do its scores already put the page's hits out of reach of
        # a hit not read, with its evidence at most? If not, more chunks are read
        # with the sessions below.
        # Each candidate is scored on its own once; the evidence is added to those
        # scores as each step needs it.
        stage1 = replace(evidence, context=0.0, session=0.0)
        own = own_scores(candidates, plan.groups, stats, fields, evidence)
        hits = with_evidence(own, fields, {}, stage1)
        k = paging.limit + impact.before(hits, after, per_session=per_session)
        more = _reads_more(hits, k, bound(chunks), evidence, bounded, chunks, per_session)
        # Every hit of the sessions the page may show is read (their neighbouring
        # turns' and session evidence is then exact), and of those whose title or
        # summary matched (their boost stays out of the bound); those with no
        # message read yet get an entry.
        full = impact.leading_sessions(
            with_evidence(own, fields, {}, evidence), k, per_session=per_session
        ) | set(fields)
        orphans = orphan_hits(candidates, fields)
        again = yield from _lists_more(filters, plan, bounded, chunks, more, full, orphans)
        # The first read's candidates are distinct: those of the second read not
        # among them follow them, in the order a read of both would score them.
        both = _distinct(candidates + again.candidates)
        own += own_scores(both[len(candidates) :], plan.groups, stats, fields, evidence)
        candidates = both
        if more:
            chunks = impact.MORE_CHUNKS
        scored = with_evidence(own, fields, again.anchors, evidence)
        unseen = bound(chunks)
        exact = impact.certified_with_evidence(
            with_evidence(own, fields, {}, stage1),
            scored,
            full,
            k,
            unseen,
            context=evidence.context,
            session=evidence.session,
            per_session=per_session,
        )
        rebuilt = read.rebuilt or again.rebuilt
        limits = _bounded_limits(rebuilt=rebuilt, exact=exact, k=k, chunks=chunks, bound=unseen)
        if field_plan is not None and len(read.fields) >= field_plan.cap:
            limits.append(f"titles/summaries: {field_plan.cap} read of more matches")
        page, more_hits = page_after(self._rank(scored, plan, per_session), after, paging.limit)
        result = SessionQueryResult(
            matches=tuple((yield from self._materialise(filters.workspace, page, paging))),
            searched=first.searched,
            next_cursor=(
                paging.next_cursor(list(page[-1].order_key)) if more_hits and page else None
            ),
            approximate=bool(limits),
        )
        trace = SearchTrace(
            mode="ranked",
            plan=plan,
            field_plan=field_plan,
            approximate=tuple(limits),
            bounded=_lists_text(bounded, chunks, len(candidates), exact=exact),
        )
        return result, trace

    def _browse(
        self, filters: Filters, per_session: bool, paging: Paging
    ) -> Work[tuple[SessionQueryResult, SearchTrace]]:
        # One round trip: the count in scope, and the page's entries with their text.
        searched, rows = yield from fetch2(
            reads.in_scope(filters),
            reads.browse_page(
                filters,
                per_session=per_session,
                after=browse_position(paging.after),
                limit=paging.limit + 1,
                chars=self.settings.max_indexed_chars + READ_MARGIN_CHARS,
            ),
            final=True,
        )
        more = len(rows) > paging.limit
        rows = rows[: paging.limit]
        page = [Ranked(r.session_id, r.seq, r.kind, 0.0, r.created_at, frozenset()) for r in rows]
        next_cursor = None
        if more and rows:
            last = rows[-1]
            next_cursor = paging.next_cursor(
                [last.created_at.isoformat(), last.session_id, last.seq]
            )
        result = SessionQueryResult(
            matches=tuple(
                materialise(
                    page,
                    {(m.session_id, m.seq): m for m in rows},
                    workspace=filters.workspace,
                    excerpt_bytes=paging.excerpt_bytes,
                    index_policy=self.settings.index_policy,
                    deadline=paging.deadline,
                )
            ),
            searched=searched[0],
            next_cursor=next_cursor,
        )
        return result, SearchTrace(mode="browse")

    def _no_words(self, filters: Filters) -> Work[tuple[SessionQueryResult, SearchTrace]]:
        searched = yield from fetch(reads.in_scope(filters), final=True)
        result = SessionQueryResult(
            matches=(), searched=searched[0], notice="the query has no searchable words"
        )
        return result, SearchTrace(mode="no_words")

    def _materialise(
        self, workspace: str, page: Sequence[Ranked], paging: Paging
    ) -> Work[list[SessionMatch]]:
        if not page:
            return []
        rows = yield from fetch(
            reads.page_messages(
                workspace,
                [(h.session_id, h.seq) for h in page],
                chars=self.settings.max_indexed_chars + READ_MARGIN_CHARS,
            ),
            final=True,
        )
        return materialise(
            page,
            {(m.session_id, m.seq): m for m in rows},
            workspace=workspace,
            excerpt_bytes=paging.excerpt_bytes,
            index_policy=self.settings.index_policy,
            deadline=paging.deadline,
        )


def _distinct(rows: Sequence[CandidateRow]) -> list[CandidateRow]:
    """Each candidate once (a bounded read may return one from several parts)."""
    seen: set[tuple[str, int]] = set()
    out = []
    for row in rows:
        key = (row.session_id, row.seq)
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


@dataclass(frozen=True, kw_only=True)
class ListsRead:
    """One trip through the term lists: the candidates read (each once), whether the
    lists were rebuilt since the search read their state, and what came with them."""

    candidates: list[CandidateRow]
    rebuilt: bool
    fields: list[FieldRow] = field(default_factory=list)
    anchors: dict[str, StoredMessage] = field(default_factory=dict)


def _lists_first(
    filters: Filters,
    plan: CandidatePlan,
    field_plan: FieldPlan | None,
    bounded: impact.BoundedPlan,
    field_rows: list[FieldRow] | None,
) -> Work[ListsRead]:
    """The first chunks of each listed term, every match of the unlisted terms and
    of the tail, when the lists were built, and the titles and summaries unless
    `field_rows` holds them already (none without a field plan): one trip."""
    ws = filters.workspace
    state = bounded.state
    got = yield from fetch_named(
        {
            "candidates": reads.bounded_candidates(
                filters,
                plan,
                listed=bounded.listed,
                chunks=(0, impact.FIRST_CHUNKS),
                rare=bounded.rare,
                tail=2 * impact.TAIL_MAX,
                watermark=state.watermark,
            ),
            "built": reads.lists_built_at(ws),
            "fields": None
            if field_rows is not None or field_plan is None
            else reads.session_fields(ws, field_plan),
        }
    )
    if field_rows is None:
        field_rows = got.get("fields", [])
    return ListsRead(
        candidates=_distinct(got["candidates"]),
        rebuilt=got["built"] != [state.built_at],
        fields=field_rows,
    )


def _lists_more(
    filters: Filters,
    plan: CandidatePlan,
    bounded: impact.BoundedPlan,
    chunks: int,
    more: bool,
    full: set[str],
    orphans: Mapping[str, FieldHit],
) -> Work[ListsRead]:
    """Every match in the `full` sessions; with `more`, the listed terms' chunks
    from `chunks` on and, again, when the lists were built; and the entries the
    `orphans` are shown at: one trip."""
    ws = filters.workspace
    got = yield from fetch_named(
        {
            "candidates": reads.bounded_candidates(
                filters,
                plan,
                listed=bounded.listed if more else (),
                chunks=(chunks, impact.MORE_CHUNKS),
                sessions=sorted(full),
            ),
            "built": reads.lists_built_at(ws) if more else None,
            "anchors": reads.session_anchors(ws, orphans) if orphans else None,
        }
    )
    return ListsRead(
        candidates=got["candidates"],
        rebuilt=more and got["built"] != [bounded.state.built_at],
        anchors={m.session_id: m for m in got.get("anchors", ())},
    )


@dataclass(frozen=True, kw_only=True)
class Held:
    """The direct read's rows that are the plan's own (None: the plan's own
    statement reads them)."""

    candidates: list[CandidateRow] | None = None
    fields: list[FieldRow] | None = None


def _field_hits(
    plan: CandidatePlan, field_plan: FieldPlan | None, stats: SearchStats, rows: list[FieldRow]
) -> dict[str, FieldHit]:
    """The sessions whose title or summary matched, scored (none without a field plan)."""
    if field_plan is None:
        return {}
    return field_hits(rows, plan.groups, stats, alone=field_plan.alone)


def _anchors(workspace: str, orphans: Mapping[str, FieldHit]) -> Work[dict[str, StoredMessage]]:
    """The entry each session found only by its title or summary is shown at, by
    session (none: no trip)."""
    if not orphans:
        return {}
    rows = yield from fetch(reads.session_anchors(workspace, orphans))
    return {m.session_id: m for m in rows}


def _bound_of(
    plan: CandidatePlan, stats: SearchStats, bounded: impact.BoundedPlan, evidence: Evidence
) -> Callable[[int], float]:
    """The most a hit not read can score before evidence once the first `chunks`
    chunks of every list are read (`impact.unseen_bound`), as a function of `chunks`."""
    scorer = Scorer(
        plan.groups,
        Corpus(stats.n_indexed, stats.total_len),
        per_expansion_idf=evidence.per_expansion_idf,
        field_weight=evidence.speaker,
    )
    speakers: frozenset[str] = frozenset()
    if evidence.speaker:
        speakers = frozenset(
            t for name in bounded.state.speakers for t in speaker_terms(policy.USER_TEXT, name)
        )
    return partial(impact.unseen_bound, scorer, plan, bounded, speakers=speakers)


def _bounded_limits(*, rebuilt: bool, exact: bool, k: int, chunks: int, bound: float) -> list[str]:
    """Why a read through the term lists may not be the exhaustive ranking."""
    limits: list[str] = []
    if rebuilt:
        limits.append("term lists: rebuilt while the search read them")
    if not exact:
        limits.append(
            f"term lists: the top {k} not certified after {chunks} chunks a term "
            f"(a message not read may score up to {bound:.4g} before evidence)"
        )
    return limits


def _reads_more(
    hits: list[Ranked],
    k: int,
    bound: float,
    evidence: Evidence,
    bounded: impact.BoundedPlan,
    chunks: int,
    per_session: bool,
) -> bool:
    """Whether a hit not read may still reach the top `k` of the first read's `hits`
    (scored before evidence), with its evidence at most, and a list holds more than
    the `chunks` read."""
    reach = impact.evidence_reach(bound, context=evidence.context, session=evidence.session)
    return not impact.certified(hits, k, reach, per_session=per_session) and any(
        len(bounded.state.heads[t].chunk_max) > chunks for t in bounded.listed
    )


def _lists_text(bounded: impact.BoundedPlan, chunks: int, candidates: int, *, exact: bool) -> str:
    """How a search read through the term lists, for `SearchTrace.bounded`."""
    return (
        f"term lists: {len(bounded.listed)} listed, {len(bounded.rare)} read whole, "
        f"{chunks} chunks a term, {candidates} candidates, "
        + ("certified" if exact else "not certified")
    )


def capped_notice(plan: CandidatePlan) -> str:
    """What a host shows when the last page of a capped search is reached."""
    which = "newest " if plan.newest_first else ""
    return (
        f"more entries match than the {plan.cap:,} {which}ones ranked, so this is not all "
        "of them: narrow the query (more words, a session, kind, role or time range) "
        "to see the others"
    )


def _shown_title(m: StoredMessage) -> str | None:
    """The title a hit's session is shown by (its own, else its first prompt's),
    scrubbed as an excerpt is and clipped."""
    title = m.shown_title
    return clip(policy.scrub_secrets(title), MAX_TITLE_BYTES) if title else None


def materialise(
    page: Sequence[Ranked],
    messages: Mapping[tuple[str, int], StoredMessage],
    *,
    workspace: str,
    excerpt_bytes: int,
    index_policy: IndexPolicy,
    deadline: Deadline | None = None,
) -> list[SessionMatch]:
    """The matches of a page: each hit's stored entry with an excerpt around its terms
    (from the title or summary for a hit on those); hits no longer stored are left out.

    Once `deadline` has passed, the remaining excerpts look for their match in the
    first block of text only (`make_excerpt`'s ``quick``)."""
    if not page:
        return []
    # The whole result stays under MAX_RESULT_BYTES whatever the page size asks.
    per_hit = (MAX_RESULT_BYTES - 200 * len(page)) // len(page) - MAX_TITLE_BYTES
    budget = max(min(excerpt_bytes, per_hit), MIN_EXCERPT_BYTES)
    matches: list[SessionMatch] = []
    for hit in page:
        m = messages.get((hit.session_id, hit.seq))
        if m is None:
            continue
        quick = deadline is not None and deadline.passed
        if hit.matched_in is not None:
            text = (m.summary if hit.matched_in == "summary" else m.title) or ""
            excerpt = make_excerpt(policy.scrub_secrets(text), hit.matched, budget, quick=quick)
        else:
            raw = policy.indexable_raw(
                m.kind,
                m.content,
                tool_names=policy.split_tool_names(m.tool_name),
                arguments=m.arguments,
                policy=index_policy,
            )
            excerpt = excerpt_around(
                raw, hit.matched, budget, clean=policy.scrub_secrets, quick=quick
            )
        text, highlights = split_marks(excerpt)
        matches.append(
            SessionMatch(
                workspace_id=workspace,
                session_id=m.session_id,
                entry_id=m.entry_id or f"{m.session_id}:{m.seq}",
                seq=m.seq,
                kind=hit.matched_in or m.kind,
                turn=m.turn,
                role=m.role,
                tool_name=m.tool_name,
                excerpt=text,
                highlights=highlights,
                created_at=m.created_at,
                score=hit.score,
                title=_shown_title(m),
                parent_session_id=m.parent_session_id,
            )
        )
    return matches
