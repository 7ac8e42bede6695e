"""The search engine: one request's pipeline, from validation to a page of matches.

`SearchEngine.search` runs, in one read transaction:

    validate -> parse -> read statistics -> expand the words against the vocabulary
    -> plan the candidates -> read them -> match session titles/summaries -> score
    -> rank and page -> materialise the page (excerpts from the indexed text only).

Every decision is a pure function of `pgsearch.plan` (its docstring has the rules
and a glossary) or `pgsearch.ranking`; this module sequences them and runs the
statements they call for (`_Reads`). Every statement runs with sequential scans
disabled locally (see `Connector`), so each goes through an index.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pgsearch import policy
from pgsearch.cursor import (
    BrowsePosition,
    CursorCodec,
    browse_position,
    ranked_position,
    request_fingerprint,
)
from pgsearch.db import queries
from pgsearch.db.store import Cursor, Store
from pgsearch.excerpt import clip, make_excerpt
from pgsearch.plan import (
    CandidatePlan,
    Evidence,
    FieldHit,
    FieldPlan,
    Filters,
    Group,
    ParsedQuery,
    SearchTrace,
    VocabularyLookup,
    choose_expansions,
    field_hits,
    fuzzy_targets,
    orphan_hits,
    parse_query,
    plan_candidates,
    plan_fields,
    rare_terms,
    score_candidates,
    vocabulary_lookup,
)
from pgsearch.ranking import Ranked, page_after, rank
from pgsearch.rows import BrowseRow, CandidateRow, FieldRow, SearchStats, StoredMessage, VocabRow
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

    def next_cursor(self, position: list[Any]) -> str:
        return self.codec.encode(self.fingerprint, position)


class SearchEngine:
    """Runs `SessionQueryRequest`s for a `Scope` through a `Store`."""

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings

    def search(
        self, scope: Scope, request: SessionQueryRequest, *, explain: bool = False
    ) -> SessionQueryResult:
        """A page of the matches for `request` within `scope`.

        An empty query browses the newest entries in scope. With `explain`, the result
        also carries every statement with its server plan and a `SearchTrace` of what
        was planned.
        """
        filters = validate_request(scope, request, self.settings)
        query = parse_query(request.query, max_terms=self.settings.max_query_terms)
        statements: list[str] | None = [] if explain else None
        with self.store.transaction(
            scope.workspace,
            search=True,
            timeout_ms=self.settings.statement_timeout_ms,
            context="searching",
        ) as cur:
            reads = _Reads(self.store, cur, statements)
            codec = reads.cursor_codec()
            fingerprint = request_fingerprint(scope, request, filters.kinds)
            paging = Paging(
                limit=min(request.limit, MAX_LIMIT),
                excerpt_bytes=min(
                    request.excerpt_bytes or DEFAULT_EXCERPT_BYTES, MAX_EXCERPT_BYTES
                ),
                codec=codec,
                fingerprint=fingerprint,
                after=codec.decode(request.cursor, fingerprint) if request.cursor else None,
            )
            if not request.query.strip():
                result = self._browse(reads, filters, request.per_session, paging)
                trace = SearchTrace(mode="browse")
            elif not query.words:
                result = SessionQueryResult(
                    matches=(),
                    searched=self._searched(reads, filters),
                    notice="the query has no searchable words",
                )
                trace = SearchTrace(mode="no_words")
            else:
                result, trace = self._ranked_search(
                    reads, filters, query, request.per_session, paging
                )
        if statements is None:
            return result
        done = tuple(statements)
        return replace(result, explain=done, trace=replace(trace, statements=done))

    def _ranked_search(
        self,
        reads: _Reads,
        filters: Filters,
        query: ParsedQuery,
        per_session: bool,
        paging: Paging,
    ) -> tuple[SessionQueryResult, SearchTrace]:
        settings = self.settings
        stats = reads.search_stats(filters)
        searched = stats.in_scope if filters.only_kinds else reads.count_in_scope(filters)
        lookup = vocabulary_lookup(
            query, fuzzy_limit=settings.fuzzy_fetch, realword_df=settings.realword_df
        )
        found = reads.expand(filters.workspace, lookup)
        groups = choose_expansions(
            query,
            found,
            max_expansions=settings.max_expansions,
            typo_distance=settings.typo_distance,
            realword_ratio=settings.realword_ratio if settings.realword_df else 0.0,
        )
        if not groups:
            return SessionQueryResult(matches=(), searched=searched), SearchTrace(
                mode="unknown_words"
            )
        plan = plan_candidates(query, groups, stats, settings)
        candidates = reads.candidates(filters, plan)
        field_plan = plan_fields(filters, groups, stats, settings)
        fields: dict[str, FieldHit] = {}
        if field_plan is not None:
            field_rows = reads.session_fields(filters.workspace, field_plan)
            fields = field_hits(field_rows, plan.groups, stats)
        orphans = orphan_hits(candidates, fields)
        anchors = reads.session_anchors(filters.workspace, orphans) if orphans else {}
        scored = score_candidates(
            candidates, plan.groups, stats, fields, anchors, Evidence.from_settings(settings)
        )
        ranked = rank(
            scored,
            per_session=per_session,
            floor=settings.relative_floor,
            keep=rare_terms(plan.groups),
        )
        page, more = page_after(ranked, ranked_position(paging.after), paging.limit)
        result = SessionQueryResult(
            matches=tuple(self._materialise(reads, filters.workspace, page, paging)),
            searched=searched,
            next_cursor=paging.next_cursor(list(page[-1].order_key)) if more and page else None,
            candidates_capped=len(candidates) >= plan.cap,
        )
        return result, SearchTrace(mode="ranked", plan=plan, field_plan=field_plan)

    def _browse(
        self, reads: _Reads, filters: Filters, per_session: bool, paging: Paging
    ) -> SessionQueryResult:
        searched = self._searched(reads, filters)
        rows = reads.browse(
            filters,
            per_session=per_session,
            after=browse_position(paging.after),
            limit=paging.limit + 1,
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
        return SessionQueryResult(
            matches=tuple(self._materialise(reads, filters.workspace, page, paging)),
            searched=searched,
            next_cursor=next_cursor,
        )

    def _searched(self, reads: _Reads, filters: Filters) -> int:
        """Entries in scope: from the statistics when only kinds filter, else counted."""
        if filters.only_kinds:
            return reads.search_stats(filters).in_scope
        return reads.count_in_scope(filters)

    def _materialise(
        self, reads: _Reads, workspace: str, page: Sequence[Ranked], paging: Paging
    ) -> list[SessionMatch]:
        if not page:
            return []
        return materialise(
            page,
            reads.messages(workspace, page),
            workspace=workspace,
            excerpt_bytes=paging.excerpt_bytes,
            index_policy=self.settings.index_policy,
        )


def materialise(
    page: Sequence[Ranked],
    messages: Mapping[tuple[str, int], StoredMessage],
    *,
    workspace: str,
    excerpt_bytes: int,
    index_policy: IndexPolicy,
) -> list[SessionMatch]:
    """The matches of a page: each hit's stored entry with an excerpt around its terms
    (from the title or summary for a hit on those); hits no longer stored are left out."""
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
        if hit.matched_in is not None:
            text = (m.summary if hit.matched_in == "summary" else m.title) or ""
            excerpt = make_excerpt(policy.scrub_secrets(text), hit.matched, budget)
        else:
            text = policy.indexable_text(
                m.kind,
                m.content,
                tool_names=policy.split_tool_names(m.tool_name),
                arguments=m.arguments,
                policy=index_policy,
            )
            excerpt = make_excerpt(text, hit.matched, budget)
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
                excerpt=excerpt,
                created_at=m.created_at,
                score=hit.score,
                title=clip(policy.scrub_secrets(m.title), MAX_TITLE_BYTES) if m.title else None,
                parent_session_id=m.parent_session_id,
            )
        )
    return matches


# --- the statements of a search ----------------------------------------------------------
# Today through `Store.run`; the store's named reads take `_Reads`' place one for one.


def parse_tf(text: str | None) -> dict[str, int]:
    """Term frequencies from a tsvector's text form (``'a':1A,4A 'b':2A``)."""
    counts: dict[str, int] = {}
    if text:
        for item in text.split(" "):
            term, _, positions = item.rpartition(":")
            counts[term[1:-1]] = positions.count(",") + 1
    return counts


def _quote(term: str) -> str:
    return "'" + term.replace("'", "''").replace("\\", "\\\\") + "'"


def tsquery_and(groups: Sequence[Group] | Sequence[Sequence[Any]]) -> str:
    """Every group (word) present: AND of ORs of its expansions."""
    return " & ".join("(" + " | ".join(_quote(e.term) for e in g) + ")" for g in groups)


def tsquery_or(groups: Sequence[Group] | Sequence[Sequence[Any]]) -> str:
    """Any expansion of any group present."""
    return " | ".join(_quote(e.term) for g in groups for e in g)


def tsquery_phrases(phrases: Sequence[Sequence[str]]) -> str | None:
    """Any phrase of two or more words present in order."""
    parts = ["(" + " <-> ".join(_quote(t) for t in p) + ")" for p in phrases if len(p) > 1]
    return " | ".join(parts) or None


def candidate_tsquery(plan: CandidatePlan) -> str:
    """The candidate statement's match: every word, or any driving unit."""
    if plan.strategy in ("all_words", "all_words_newest"):
        return tsquery_and(plan.drivers[0])
    return " | ".join(f"({tsquery_and(unit)})" for unit in plan.drivers)


def _stored_message(row: Sequence[Any]) -> StoredMessage:
    sid, seq, entry_id, kind, role, turn, tool_name, created_at, content, arguments, *fields = row
    title, summary, parent = (*fields, None, None, None)[:3]
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
    )


class _Reads:
    """The statements of one search transaction, each returning typed rows.

    `Store.run` records each statement and its server plan in `statements` when the
    search is explained.
    """

    def __init__(self, store: Store, cur: Cursor, statements: list[str] | None) -> None:
        self.store = store
        self.cur = cur
        self.statements = statements

    def _run(self, statement: Any, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        return self.store.run(self.cur, statement, params, explain=self.statements)

    def cursor_codec(self) -> CursorCodec:
        return CursorCodec(self.store.cursor_key(self.cur))

    def search_stats(self, filters: Filters) -> SearchStats:
        rows = self._run(
            queries.SEARCH_STATS, {"ws": filters.workspace, "kinds": list(filters.kinds)}
        )
        n_indexed, total_len, in_scope, n_fields, fields_len = (int(v) for v in rows[0])
        return SearchStats(
            n_indexed=n_indexed,
            total_len=total_len,
            in_scope=in_scope,
            n_fields=n_fields,
            fields_len=fields_len,
        )

    def count_in_scope(self, filters: Filters) -> int:
        sql, params = queries.count_sql(filters)
        return int(self._run(sql, params)[0][0])

    def expand(self, workspace: str, lookup: VocabularyLookup) -> list[VocabRow]:
        """Vocabulary rows for the lookup's words; typo neighbours in a second
        statement, for the words `fuzzy_targets` names."""
        params = {
            "ws": workspace,
            "words": list(lookup.words),
            "stems": list(lookup.stems),
            "prefix": list(lookup.prefix),
            "prefix_limit": lookup.prefix_limit,
        }
        rows = [
            VocabRow(word_index=int(i) - 1, term=term, df=int(df), sf=int(sf), how=how)
            for i, term, df, sf, how in self._run(queries.EXPAND_EXACT, params)
        ]
        targets = fuzzy_targets(lookup, rows)
        if targets:
            params = {
                "ws": workspace,
                "words": [lookup.words[i] for i in targets],
                "fuzzy_limit": lookup.fuzzy_limit,
            }
            rows.extend(
                VocabRow(
                    word_index=targets[int(i) - 1], term=term, df=int(df), sf=int(sf), how="fuzzy"
                )
                for i, term, df, sf in self._run(queries.EXPAND_FUZZY, params)
            )
        return rows

    def candidates(self, filters: Filters, plan: CandidatePlan) -> list[CandidateRow]:
        if plan.strategy == "any_unit_by_coverage":
            sql, params = queries.candidates_by_coverage_sql(filters)
            params.update(
                unit_q=[tsquery_and(unit) for unit, _ in plan.coverage],
                unit_w=[weight for _, weight in plan.coverage],
            )
        else:
            sql, params = queries.candidates_sql(filters, newest_first=plan.newest_first)
        params.update(
            terms=list(plan.terms),
            phrase=tsquery_phrases(plan.phrases),
            tsq=candidate_tsquery(plan),
            cap=plan.cap,
        )
        return [
            CandidateRow(
                session_id=sid,
                seq=seq,
                kind=kind,
                role=role,
                created_at=created_at,
                length=length,
                tfs=parse_tf(tfs),
                phrase_hit=bool(phrase_hit),
                speaker=speaker,
            )
            for sid, seq, kind, role, created_at, length, tfs, phrase_hit, speaker in self._run(
                sql, params
            )
        ]

    def session_fields(self, workspace: str, plan: FieldPlan) -> list[FieldRow]:
        params: dict[str, Any] = {
            "ws": workspace,
            "terms": list(plan.terms),
            "tsq": tsquery_or(plan.selective),
            "cap": plan.cap,
        }
        sql = queries.SESSION_FIELD_MATCHES
        if plan.session_id is not None:
            sql = queries.SESSION_FIELD_MATCHES_ONE
            params["session_id"] = plan.session_id
        out: list[FieldRow] = []
        for sid, field_len, entries in self._run(sql, params):
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
            out.append(
                FieldRow(
                    session_id=sid,
                    field_len=int(field_len),
                    tfs=tfs,
                    in_title=frozenset(in_title),
                    in_summary=frozenset(in_summary),
                )
            )
        return out

    def session_anchors(
        self, workspace: str, hits: Mapping[str, FieldHit]
    ) -> dict[str, StoredMessage]:
        """The entry each title/summary-only hit points at, by session."""
        params = {
            "ws": workspace,
            "sids": list(hits),
            "summary_sids": [sid for sid, hit in hits.items() if hit.matched_in == "summary"],
        }
        rows = self._run(queries.SESSION_ANCHOR_ENTRY, params)
        return {m.session_id: m for m in map(_stored_message, rows)}

    def messages(
        self, workspace: str, page: Sequence[Ranked]
    ) -> dict[tuple[str, int], StoredMessage]:
        params = {
            "ws": workspace,
            "sids": [h.session_id for h in page],
            "seqs": [h.seq for h in page],
        }
        rows = self._run(queries.FETCH_MESSAGES, params)
        return {(m.session_id, m.seq): m for m in map(_stored_message, rows)}

    def browse(
        self, filters: Filters, *, per_session: bool, after: BrowsePosition | None, limit: int
    ) -> list[BrowseRow]:
        sql, params = queries.browse_sql(filters, per_session=per_session, after=after is not None)
        params["limit"] = limit
        if after is not None:
            params.update(c_time=after[0], c_sid=after[1], c_seq=after[2])
        return [
            BrowseRow(session_id=sid, seq=seq, kind=kind, role=role, created_at=created_at)
            for sid, seq, kind, role, created_at in self._run(sql, params)
        ]
