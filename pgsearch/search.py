"""The search engine: query → vocabulary expansion → indexed candidates → BM25 → page.

1. The query is normalised and split like documents (`normalize.query_words`).
2. Each word is expanded against the workspace vocabulary in one indexed statement:
   the term itself, terms with the same English stem and, for 3-4 letter words not
   found as written, terms starting with it. Words of 5+ letters not found as
   written (or rarer than `TRUSTED_DF`) are also matched to terms one edit away
   (two from 9 letters) through a trigram GIN on the vocabulary; the edit distance
   is re-checked with rapidfuzz.
3. Candidate messages come from the tsvector GIN index with every filter in the same
   statement: first the AND of all word groups, then, if that left room, an OR over
   the groups that are not stop-like. Each statement is capped; when a group is
   common enough that the cap could bind, the newest matches are taken.
4. Session titles and summaries are matched the same way through their own index.
5. Candidates are scored in Python (`ranking`), floored, collapsed per session and
   paged with a signed keyset cursor; excerpts come from the indexed text only.

Every statement runs with sequential scans disabled locally (see `Connector`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from rapidfuzz.distance import Levenshtein

from pgsearch import policy, ranking
from pgsearch.cursor import CursorCodec, request_fingerprint
from pgsearch.db import queries as q
from pgsearch.db.store import Cursor, Store
from pgsearch.errors import InvalidQuery, ScopeError
from pgsearch.excerpt import clip, make_excerpt, utf8_len
from pgsearch.normalize import QueryWord, query_words, stem
from pgsearch.settings import Settings
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
from pgsearch.validate import check_key, check_names, check_time

log = logging.getLogger(__name__)

#: A query word found in at least this many documents is taken as spelled right.
TRUSTED_DF = 3
#: Trigram neighbours fetched per word before the edit-distance check.
FUZZY_FETCH = 32
PREFIX_FETCH = 16
#: Below this document frequency no word counts as stop-like, whatever its share.
STOP_MIN_DF = 50
MIN_EXCERPT_BYTES = 40
MAX_TITLE_BYTES = 300


@dataclass(slots=True)
class _Candidate:
    session_id: str
    seq: int
    kind: str
    role: str
    created_at: datetime
    length: int
    tfs: dict[str, int]
    phrase_hit: bool


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


def tsquery_and(groups: Sequence[Sequence[ranking.Expansion]]) -> str:
    return " & ".join("(" + " | ".join(_quote(e.term) for e in g) + ")" for g in groups)


def _share_chunks(
    words: list[QueryWord], expanded: dict[str, list[ranking.Expansion]]
) -> dict[str, list[ranking.Expansion]]:
    """Words typed as one unquoted chunk (`resolve_dirs(config)`, `7.9.5`, a CJK run)
    name one thing: they share one word's weight instead of adding up."""
    size: dict[int, set[str]] = {}
    for w in words:
        if not w.quoted:
            size.setdefault(w.unit, set()).add(w.text)
    share: dict[str, float] = {}
    for w in words:
        n = len(size.get(w.unit, ()))
        if n > 1:
            share.setdefault(w.text, 1.0 / n)
    return {
        text: [replace(e, weight=e.weight * share[text]) for e in group] if text in share else group
        for text, group in expanded.items()
    }


def _units(
    words: list[QueryWord], expanded: dict[str, list[ranking.Expansion]]
) -> list[list[list[ranking.Expansion]]]:
    """Query chunks as lists of word groups; a chunk with an unknown word cannot match."""
    by_unit: dict[int, list[str]] = {}
    for w in words:
        by_unit.setdefault(w.unit, [])
        if w.text not in by_unit[w.unit]:
            by_unit[w.unit].append(w.text)
    units = []
    seen: set[tuple[str, ...]] = set()
    for texts in by_unit.values():
        key = tuple(texts)
        if key in seen or not all(t in expanded for t in texts):
            continue
        seen.add(key)
        units.append([expanded[t] for t in texts])
    return units


def tsquery_or(groups: Sequence[Sequence[ranking.Expansion]]) -> str:
    return " | ".join(_quote(e.term) for g in groups for e in g)


def tsquery_phrases(phrases: Sequence[Sequence[str]]) -> str | None:
    parts = ["(" + " <-> ".join(_quote(t) for t in p) + ")" for p in phrases if len(p) > 1]
    return " | ".join(parts) or None


class SearchEngine:
    """Runs `SessionQueryRequest`s for a `Scope` through a `Store`."""

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings

    # --- validation ---------------------------------------------------------------

    def _validate(self, scope: Scope, req: SessionQueryRequest) -> q.Filters:
        if not isinstance(req, SessionQueryRequest):
            raise InvalidQuery("request must be a SessionQueryRequest")
        if req.workspace_id is not None and req.workspace_id != scope.workspace:
            raise ScopeError(
                f"this provider is bound to workspace {scope.workspace!r}; "
                f"a request cannot search workspace {req.workspace_id!r}"
            )
        session = scope.session_id
        if req.session_id is not None:
            if scope.session_id is not None and req.session_id != scope.session_id:
                raise ScopeError(
                    f"this provider is bound to session {scope.session_id!r}; "
                    f"a request cannot search session {req.session_id!r}"
                )
            session = req.session_id
        if not isinstance(req.query, str):
            raise InvalidQuery("query must be a string")
        if len(req.query) > self.settings.max_query_chars:
            raise InvalidQuery(
                f"query is {len(req.query):,} characters; the limit is "
                f"{self.settings.max_query_chars:,}"
            )
        if isinstance(req.limit, bool) or not isinstance(req.limit, int) or req.limit < 1:
            raise InvalidQuery("limit must be a positive integer")
        if (
            isinstance(req.excerpt_bytes, bool)
            or not isinstance(req.excerpt_bytes, int)
            or req.excerpt_bytes < 1
        ):
            raise InvalidQuery("excerpt_bytes must be a positive integer")
        if req.cursor is not None and not isinstance(req.cursor, str):
            raise InvalidQuery("cursor must be a string from a previous result")
        kinds = check_names(req.kinds, "kinds") or policy.DEFAULT_SEARCH_KINDS
        roles = check_names(req.roles, "roles")
        bad = [k for k in kinds if k not in policy.ALL_KINDS]
        if bad:
            raise InvalidQuery(
                f"unknown kind {bad[0]!r}; known kinds: {', '.join(policy.ALL_KINDS)}"
            )
        bad = [r for r in roles if r not in policy.ROLES]
        if bad:
            raise InvalidQuery(f"unknown role {bad[0]!r}; roles: {', '.join(policy.ROLES)}")
        since = check_time(req.since, "since")
        until = check_time(req.until, "until")
        if since and until and since >= until:
            raise InvalidQuery("since must be earlier than until")
        for name, value in (("tool_name", req.tool_name), ("session_id", session)):
            if value is not None:
                check_key(name, value)
        return q.Filters(
            workspace=scope.workspace,
            kinds=kinds,
            session_id=session,
            roles=roles,
            tool_name=req.tool_name,
            since=since,
            until=until,
        )

    # --- entry point --------------------------------------------------------------

    def search(
        self, scope: Scope, req: SessionQueryRequest, *, explain: bool = False
    ) -> SessionQueryResult:
        filters = self._validate(scope, req)
        limit = min(req.limit, MAX_LIMIT)
        excerpt_bytes = min(req.excerpt_bytes or DEFAULT_EXCERPT_BYTES, MAX_EXCERPT_BYTES)
        words, phrases = query_words(req.query)
        distinct = list(dict.fromkeys(w.text for w in words))
        if len(distinct) > self.settings.max_query_terms:
            raise InvalidQuery(
                f"query has {len(distinct)} distinct words; the limit is "
                f"{self.settings.max_query_terms}"
            )
        plans: list[str] | None = [] if explain else None
        with self.store.transaction(
            scope.workspace,
            search=True,
            timeout_ms=self.settings.statement_timeout_ms,
            context="searching",
        ) as cur:
            codec = CursorCodec(self.store.cursor_key(cur))
            fingerprint = request_fingerprint(scope, req, filters.kinds)
            after = codec.decode(req.cursor, fingerprint) if req.cursor else None
            if not req.query.strip():
                result = self._browse(
                    cur, filters, req, limit, excerpt_bytes, codec, fingerprint, after, plans
                )
            elif not words:
                searched = self._searched(cur, filters, plans)
                result = SessionQueryResult(
                    matches=(), searched=searched, notice="the query has no searchable words"
                )
            else:
                result = self._search(
                    cur,
                    filters,
                    req,
                    words,
                    phrases,
                    limit,
                    excerpt_bytes,
                    codec,
                    fingerprint,
                    after,
                    plans,
                )
        if plans is not None:
            return SessionQueryResult(
                matches=result.matches,
                searched=result.searched,
                next_cursor=result.next_cursor,
                candidates_capped=result.candidates_capped,
                notice=result.notice,
                explain=tuple(plans),
            )
        return result

    # --- pieces -------------------------------------------------------------------

    def _searched(self, cur: Cursor, f: q.Filters, plans: list[str] | None) -> int:
        if f.only_kinds:
            rows = self.store.run(
                cur, q.SEARCH_STATS, {"ws": f.workspace, "kinds": list(f.kinds)}, explain=plans
            )
            return int(rows[0][2])
        sql, params = q.count_sql(f)
        return int(self.store.run(cur, sql, params, explain=plans)[0][0])

    def _expand(
        self, cur: Cursor, ws: str, words: list[QueryWord], plans: list[str] | None
    ) -> dict[str, list[ranking.Expansion]]:
        """Vocabulary expansions of each distinct query word (words with none left out)."""
        texts = list(dict.fromkeys(w.text for w in words))
        cjk = {w.text for w in words if w.cjk}
        stems = [t if t in cjk else stem(t) for t in texts]
        prefix = [t not in cjk and 3 <= len(t) <= 4 and not t.isdigit() for t in texts]
        rows = self.store.run(
            cur,
            q.EXPAND_EXACT,
            {
                "ws": ws,
                "words": texts,
                "stems": stems,
                "prefix": prefix,
                "prefix_limit": PREFIX_FETCH,
            },
            explain=plans,
        )
        groups: list[dict[str, ranking.Expansion]] = [{} for _ in texts]
        exact_df = [0] * len(texts)
        prefix_rows: list[tuple[int, ranking.Expansion]] = []
        for i, term, df, sf, how in rows:
            idx = int(i) - 1
            if how == "exact":
                exact_df[idx] = int(df) + int(sf)
                groups[idx][term] = ranking.Expansion(idx, term, ranking.EXACT, int(df), int(sf))
            elif how == "stem":
                groups[idx].setdefault(
                    term, ranking.Expansion(idx, term, ranking.STEM, int(df), int(sf))
                )
            else:
                prefix_rows.append(
                    (idx, ranking.Expansion(idx, term, ranking.PREFIX, int(df), int(sf)))
                )
        for idx, exp in prefix_rows:
            if exact_df[idx] < TRUSTED_DF:
                groups[idx].setdefault(exp.term, exp)
        fuzzy_idx = [
            i
            for i, t in enumerate(texts)
            if t not in cjk
            and len(t) >= 5
            and not any(c.isdigit() for c in t)
            and exact_df[i] < TRUSTED_DF
        ]
        if fuzzy_idx:
            rows = self.store.run(
                cur,
                q.EXPAND_FUZZY,
                {"ws": ws, "words": [texts[i] for i in fuzzy_idx], "fuzzy_limit": FUZZY_FETCH},
                explain=plans,
            )
            found: dict[int, list[tuple[int, int, str, int]]] = {}
            for i, term, df, sf in rows:
                idx = fuzzy_idx[int(i) - 1]
                word = texts[idx]
                allowed = 1 if len(word) <= 8 else 2
                dist = Levenshtein.distance(word, term, score_cutoff=allowed)
                if dist <= allowed:
                    found.setdefault(idx, []).append((dist, -(int(df) + int(sf)), term, int(sf)))
            for idx, options in found.items():
                options.sort()
                for dist, neg_df, term, sf in options[: self.settings.max_expansions]:
                    weight = ranking.FUZZY_1 if dist <= 1 else ranking.FUZZY_2
                    groups[idx].setdefault(
                        term, ranking.Expansion(idx, term, weight, -neg_df - sf, sf)
                    )
        return {texts[i]: list(g.values()) for i, g in enumerate(groups) if g}

    def _search(
        self,
        cur: Cursor,
        f: q.Filters,
        req: SessionQueryRequest,
        words: list[QueryWord],
        phrases: list[list[str]],
        limit: int,
        excerpt_bytes: int,
        codec: CursorCodec,
        fingerprint: str,
        after: list[Any] | None,
        plans: list[str] | None,
    ) -> SessionQueryResult:
        stats = self.store.run(
            cur, q.SEARCH_STATS, {"ws": f.workspace, "kinds": list(f.kinds)}, explain=plans
        )
        n_indexed, total_len, kind_total, n_fields, fields_len = (int(v) for v in stats[0])
        searched = kind_total if f.only_kinds else self._searched(cur, f, plans)
        expanded = _share_chunks(words, self._expand(cur, f.workspace, words, plans))
        groups = list(expanded.values())
        if not groups:
            return SessionQueryResult(matches=(), searched=searched)
        corpus = ranking.Corpus(n_indexed, total_len)
        terms = sorted({e.term for g in groups for e in g})
        phrase_q = tsquery_phrases(phrases)
        cap = self.settings.candidate_cap
        stop_df = max(self.settings.stop_df_ratio * n_indexed, STOP_MIN_DF)

        def group_df(g: list[ranking.Expansion]) -> int:
            return sum(e.df for e in g)

        candidates: dict[tuple[str, int], _Candidate] = {}
        capped = False

        def fetch(
            tsq: str,
            newest_first: bool,
            room: int,
            unit_queries: list[str] | None = None,
            unit_weights: list[float] | None = None,
        ) -> None:
            nonlocal capped
            if unit_queries is None:
                sql, params = q.candidates_sql(f, newest_first=newest_first)
            else:
                sql, params = q.candidates_by_coverage_sql(f)
                params.update({"unit_q": unit_queries, "unit_w": unit_weights})
            params.update({"terms": terms, "phrase": phrase_q, "tsq": tsq, "cap": room})
            rows = self.store.run(cur, sql, params, explain=plans)
            if len(rows) >= room:
                capped = True
            for sid, seq, kind, role, created, length, tfs, phrase_hit in rows:
                key = (sid, seq)
                if key in candidates:
                    continue
                counts = parse_tf(tfs)
                candidates[key] = _Candidate(
                    sid, seq, kind, role, created, length, counts, bool(phrase_hit)
                )

        units = _units(words, expanded)
        unit_dfs = [min(map(group_df, u)) for u in units]
        selective = sorted(
            (i for i, d in enumerate(unit_dfs) if d < stop_df), key=lambda i: unit_dfs[i]
        )
        if len(units) < 2 or not selective:
            # One unit, or only stop-like ones: documents holding every word; the
            # newest first when more than the cap may match. Words this common say
            # little about which of their documents is meant, so fewer are re-ranked.
            room = cap if selective else min(cap, self.settings.stop_candidate_cap)
            fetch(tsquery_and(groups), min(map(group_df, groups)) > room, room)
        else:
            # Documents holding any of the selective units (rarest first, as many as
            # keep the scan bounded). When more than the cap may match, the cap keeps
            # those covering the most of the query, each unit weighted by its IDF:
            # documents with every word come first, common words only break ties.
            drivers = [selective[0]]
            total = unit_dfs[selective[0]]
            for i in selective[1:]:
                if total + unit_dfs[i] > self.settings.candidate_scan_limit:
                    break
                drivers.append(i)
                total += unit_dfs[i]
            tsq = " | ".join(f"({tsquery_and(units[i])})" for i in drivers)
            if total <= cap:
                fetch(tsq, False, cap)
            else:
                n = max(n_indexed, 1)
                weights = [
                    sum(ranking.idf(n, max(e.df for e in g)) for g in unit) for unit in units
                ]
                fetch(tsq, False, cap, [tsquery_and(u) for u in units], weights)

        field_hits = self._session_fields(
            cur, f, groups, ranking.Corpus(n_fields, fields_len), corpus, plans
        )

        scored: list[ranking.Ranked] = []
        scorer = ranking.Scorer(groups, corpus)
        for c in candidates.values():
            base, matched = scorer.score(c.tfs, c.length)
            if base <= 0:
                continue
            score = base * policy.role_weight(c.kind, c.role)
            if c.phrase_hit:
                score *= ranking.PHRASE_BOOST
            boost = field_hits.get(c.session_id)
            if boost is not None:
                score *= boost[0]
                matched = matched | boost[2]
            scored.append(
                ranking.Ranked(c.session_id, c.seq, c.kind, score, c.created_at, frozenset(matched))
            )
        with_messages = {c.session_id for c in candidates.values()}
        orphans = [sid for sid in field_hits if sid not in with_messages]
        first_entries: dict[str, tuple[Any, ...]] = {}
        if orphans:
            for row in self.store.run(
                cur,
                q.SESSION_ANCHOR_ENTRY,
                {
                    "ws": f.workspace,
                    "sids": orphans,
                    "summary_sids": [s for s in orphans if field_hits[s][3] == "summary"],
                },
                explain=plans,
            ):
                first_entries[row[0]] = row
        for sid in orphans:
            first = first_entries.get(sid)
            if first is None:
                continue
            field_boost, field_score, field_terms, field_kind = field_hits[sid]
            scored.append(
                ranking.Ranked(
                    sid,
                    int(first[1]),
                    field_kind,
                    field_boost * field_score,
                    first[7],
                    frozenset(field_terms),
                )
            )

        ranked = ranking.rank(
            scored, per_session=req.per_session, floor=self.settings.relative_floor
        )
        position = None
        if after is not None:
            try:
                position = (float(after[0]), float(after[1]), str(after[2]), int(after[3]))
            except (IndexError, TypeError, ValueError):
                raise InvalidQuery("cursor is malformed") from None
        page, more = ranking.page_after(ranked, position, limit)
        next_cursor = codec.encode(fingerprint, list(page[-1].order_key)) if more and page else None
        matches = self._materialise(cur, f.workspace, page, excerpt_bytes, plans)
        return SessionQueryResult(
            matches=tuple(matches),
            searched=searched,
            next_cursor=next_cursor,
            candidates_capped=capped,
        )

    def _session_fields(
        self,
        cur: Cursor,
        f: q.Filters,
        groups: list[list[ranking.Expansion]],
        fields: ranking.Corpus,
        messages: ranking.Corpus,
        plans: list[str] | None,
    ) -> dict[str, tuple[float, float, set[str], str]]:
        """Sessions whose title/summary matches: boost, field score, terms, kind.

        The boost grows with how much of the query the field covers, weighting each
        word by its IDF: a title holding every rare word of the query doubles its
        session's hits (a summary triples them), a title sharing only a common word
        barely moves them. Words common among titles/summaries do not select sessions.
        """
        if f.roles or f.tool_name or f.since or f.until or fields.n == 0:
            return {}
        stop_sf = max(self.settings.stop_df_ratio * fields.n, STOP_MIN_DF)
        selective = [g for g in groups if max(e.sf for e in g) < stop_sf]
        if not selective:
            return {}
        params: dict[str, Any] = {
            "ws": f.workspace,
            "terms": sorted({e.term for g in groups for e in g}),
            "tsq": tsquery_or(selective),
            "cap": self.settings.candidate_cap,
        }
        sql = q.SESSION_FIELD_MATCHES
        if f.session_id is not None:
            sql = q.SESSION_FIELD_MATCHES_ONE
            params["session_id"] = f.session_id
        rows = self.store.run(cur, sql, params, explain=plans)
        n = max(messages.n, 1)
        weights = [ranking.idf(n, max(e.df for e in g)) for g in groups]
        total_weight = sum(weights) or 1.0
        out: dict[str, tuple[float, float, set[str], str]] = {}
        for sid, field_len, tfs in rows:
            counts: dict[str, int] = {}
            where: dict[str, str] = {}
            for item in tfs or ():
                term, num, w = item.split(" ")
                counts[term] = int(num)
                where[term] = w
            score, matched = ranking.score_document(
                counts, int(field_len), groups, fields, use_sf=True
            )
            if score <= 0:
                continue
            in_title = sum(
                w
                for g, w in zip(groups, weights, strict=True)
                if any("A" in where.get(e.term, "") for e in g)
            )
            in_summary = sum(
                w
                for g, w in zip(groups, weights, strict=True)
                if any("B" in where.get(e.term, "") for e in g)
            )
            title_boost = 1 + (ranking.TITLE_BOOST - 1) * in_title / total_weight
            summary_boost = 1 + (ranking.SUMMARY_BOOST - 1) * in_summary / total_weight
            kind = "summary" if summary_boost > title_boost else "title"
            out[sid] = (max(title_boost, summary_boost), score, matched, kind)
        return out

    def _materialise(
        self,
        cur: Cursor,
        ws: str,
        page: list[ranking.Ranked],
        excerpt_bytes: int,
        plans: list[str] | None,
    ) -> list[SessionMatch]:
        if not page:
            return []
        rows = self.store.run(
            cur,
            q.FETCH_MESSAGES,
            {"ws": ws, "sids": [h.session_id for h in page], "seqs": [h.seq for h in page]},
            explain=plans,
        )
        by_key = {(r[0], r[1]): r for r in rows}
        # The whole result stays under MAX_RESULT_BYTES whatever the page size asks.
        per_hit = (MAX_RESULT_BYTES - 200 * len(page)) // len(page) - MAX_TITLE_BYTES
        budget = max(min(excerpt_bytes, per_hit), MIN_EXCERPT_BYTES)
        matches: list[SessionMatch] = []
        for hit in page:
            row = by_key.get((hit.session_id, hit.seq))
            if row is None:
                continue
            (
                sid, seq, entry_id, kind, role, turn, tool_name, created_at, content, arguments,
                title, summary, parent_session_id,
            ) = row  # fmt: skip
            if hit.kind in ("title", "summary"):
                text = (summary if hit.kind == "summary" else title) or ""
                excerpt = make_excerpt(policy.scrub_secrets(text), hit.matched, budget)
                kind = hit.kind
            else:
                text = policy.indexable_text(
                    kind,
                    content,
                    tool_names=[n for n in (tool_name or "").split(", ") if n],
                    arguments=arguments,
                    policy=self.settings.index_policy,
                )
                excerpt = make_excerpt(text, hit.matched, budget)
            matches.append(
                SessionMatch(
                    workspace_id=ws,
                    session_id=sid,
                    entry_id=entry_id or f"{sid}:{seq}",
                    seq=seq,
                    kind=kind,
                    turn=turn,
                    role=role,
                    tool_name=tool_name,
                    excerpt=excerpt,
                    created_at=created_at,
                    score=hit.score,
                    title=clip(policy.scrub_secrets(title), MAX_TITLE_BYTES) if title else None,
                    parent_session_id=parent_session_id,
                )
            )
        return matches

    def _browse(
        self,
        cur: Cursor,
        f: q.Filters,
        req: SessionQueryRequest,
        limit: int,
        excerpt_bytes: int,
        codec: CursorCodec,
        fingerprint: str,
        after: list[Any] | None,
        plans: list[str] | None,
    ) -> SessionQueryResult:
        searched = self._searched(cur, f, plans)
        sql, params = q.browse_sql(f, per_session=req.per_session, after=after is not None)
        params["limit"] = limit + 1
        if after is not None:
            try:
                params.update(
                    c_time=datetime.fromisoformat(str(after[0])),
                    c_sid=str(after[1]),
                    c_seq=int(after[2]),
                )
            except (IndexError, TypeError, ValueError):
                raise InvalidQuery("cursor is malformed") from None
        rows = self.store.run(cur, sql, params, explain=plans)
        more = len(rows) > limit
        rows = rows[:limit]
        page = [
            ranking.Ranked(sid, seq, kind, 0.0, created, frozenset())
            for sid, seq, kind, _role, created in rows
        ]
        matches = self._materialise(cur, f.workspace, page, excerpt_bytes, plans)
        next_cursor = None
        if more and rows:
            last = rows[-1]
            next_cursor = codec.encode(fingerprint, [last[4].isoformat(), last[0], last[1]])
        return SessionQueryResult(
            matches=tuple(matches), searched=searched, next_cursor=next_cursor
        )


def text_size(result: SessionQueryResult) -> int:
    """UTF-8 bytes of text a result carries (excerpts and titles)."""
    return sum(utf8_len(m.excerpt) + utf8_len(m.title or "") for m in result.matches)
