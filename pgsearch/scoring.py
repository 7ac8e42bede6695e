"""How the rows a plan read are scored (pure): what ranks, beside `pgsearch.ranking`.

`pgsearch.plan` decides what a search reads; this module turns what was read into
scored hits, with `pgsearch.ranking`'s BM25 and factors:

1. `field_hits` scores the sessions whose title or summary matched, and how much
   each boosts its session's messages (`FieldHit`);
2. `orphan_hits` names those found by nothing else, which `score_candidates` shows
   at an entry of their session;
3. `score_candidates` scores each candidate message, adds its neighbours' and its
   session's evidence (`Evidence`), then the sessions found only by a field: in two
   steps, `own_scores` and `with_evidence`, so that a read in two trips scores each
   candidate once;
4. `rare_terms` names the words a hit is kept for whatever its score.

Kept apart from the planner so that tuning the ranking opens this module and
`pgsearch.ranking`, never the rules that choose the reads: the same functions score
a plan's capped read, the exhaustive read and a bounded read through the term lists
(`pgsearch.impact`), so that their results can be compared hit for hit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pgsearch import ranking
from pgsearch.plan import Field, Group
from pgsearch.ranking import Corpus, Ranked, Scorer
from pgsearch.rows import CandidateRow, FieldRow, SearchStats, StoredMessage
from pgsearch.settings import Settings

# --- session titles and summaries ----------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class FieldHit:
    """A session whose title or summary matches: how much it boosts the session's
    messages, its own score (for a session no message of which matched) and terms."""

    boost: float
    score: float
    terms: frozenset[str]
    #: The field the hit shows, or None when the session's messages are boosted but
    #: the match is no hit of its own (the kinds searched exclude it).
    matched_in: Field | None
    #: The title holds every word of a query of two or more words, as typed or in
    #: another form (no typo or prefix guess): the session the user named.
    whole_title: bool = False


def field_hits(
    rows: Iterable[FieldRow],
    groups: Sequence[Group],
    stats: SearchStats,
    *,
    alone: Sequence[Field] = ("title", "summary"),
) -> dict[str, FieldHit]:
    """Sessions whose title/summary matches, by session id.

    The boost grows with how much of the query the field covers, weighting each word
    by its IDF among messages: a title holding every rare word of the query doubles
    its session's hits (a summary triples them), a title sharing only a common word
    barely moves them. A session found only this way is a hit on the field that
    matched best among `alone`; with neither field in `alone` it is none.
    """
    scorer = Scorer(groups, Corpus(stats.n_fields, stats.fields_len), use_sf=True)
    n = max(stats.n_indexed, 1)
    weights = [ranking.idf(n, max(e.df for e in g)) for g in groups]
    total_weight = sum(weights) or 1.0
    out: dict[str, FieldHit] = {}
    for row in rows:
        score, matched = scorer.score(row.tfs, row.field_len)
        if score <= 0:
            continue
        in_title = sum(
            w
            for g, w in zip(groups, weights, strict=True)
            if any(e.term in row.in_title for e in g)
        )
        in_summary = sum(
            w
            for g, w in zip(groups, weights, strict=True)
            if any(e.term in row.in_summary for e in g)
        )
        title_boost = 1 + (ranking.TITLE_BOOST - 1) * in_title / total_weight
        summary_boost = 1 + (ranking.SUMMARY_BOOST - 1) * in_summary / total_weight
        shown: Field | None = "summary" if summary_boost > title_boost else "title"
        whole_title = len(groups) >= 2 and all(
            any(e.term in row.in_title and e.how in ("exact", "stem") for e in g) for g in groups
        )
        if whole_title:
            shown = "title"
        if shown not in alone:
            shown = "summary" if "summary" in alone and in_summary else None
        out[row.session_id] = FieldHit(
            boost=max(title_boost, summary_boost),
            score=score,
            terms=frozenset(matched),
            matched_in=shown,
            whole_title=whole_title,
        )
    return out


# --- messages -------------------------------------------------------------------------


def orphan_hits(
    candidates: Iterable[CandidateRow], hits: Mapping[str, FieldHit]
) -> dict[str, FieldHit]:
    """The sessions found only by their title or summary (no candidate message), when
    that match is a hit of its own."""
    with_messages = {c.session_id for c in candidates}
    return {
        sid: hit
        for sid, hit in hits.items()
        if sid not in with_messages and hit.matched_in is not None
    }


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """How much a hit's surroundings add to its own score (each 0 to leave out)."""

    #: Share of the best neighbouring turn's score added (`ranking.add_context`).
    context: float = 0.0
    #: Share of the session's summed best scores added (`ranking.add_session`).
    session: float = 0.0
    #: Match weight of a query word naming the message's speaker.
    speaker: float = 0.0
    #: Typo expansions of a word absent from the vocabulary keep their own IDF.
    per_expansion_idf: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> Evidence:
        return cls(
            context=settings.context_weight,
            session=settings.session_weight,
            speaker=settings.speaker_weight,
            per_expansion_idf=settings.per_expansion_idf,
        )


@dataclass(frozen=True, slots=True)
class OwnScores:
    """Candidate messages scored on their own (`own_scores`): the hits, in the order
    of the candidates, and every candidate's session (a session a candidate came
    from is never shown at an entry of its own through its title or summary)."""

    hits: list[Ranked]
    sessions: frozenset[str]

    def __add__(self, other: OwnScores) -> OwnScores:
        """These hits, then `other`'s: the scores of the candidates of both reads."""
        return OwnScores(self.hits + other.hits, self.sessions | other.sessions)


def own_scores(
    candidates: Iterable[CandidateRow],
    groups: Sequence[Group],
    stats: SearchStats,
    hits: Mapping[str, FieldHit],
    evidence: Evidence = Evidence(),
) -> OwnScores:
    """Each candidate message's own score: BM25 times the factors of
    `ranking.message_score` (a candidate that scores nothing is left out). It does
    not depend on the other candidates, so the scores of two reads add up
    (`OwnScores.__add__`)."""
    scorer = Scorer(
        groups,
        Corpus(stats.n_indexed, stats.total_len),
        per_expansion_idf=evidence.per_expansion_idf,
        field_weight=evidence.speaker,
    )
    scored: list[Ranked] = []
    seen: set[str] = set()
    none: frozenset[str] = frozenset()
    speakers = bool(evidence.speaker)
    score_of = scorer.score
    speaker_terms = ranking.speaker_terms
    message_score = ranking.message_score
    hit_of = hits.get
    # One frozenset per distinct set of matched terms (a search has few).
    matched_sets: dict[frozenset[str], frozenset[str]] = {}
    new = tuple.__new__
    for sid, seq, kind, role, created_at, length, tfs, phrase_hit, speaker in candidates:
        seen.add(sid)
        fields = speaker_terms(kind, speaker) if speakers else none
        base, matched = score_of(tfs, length, fields=fields)
        if base <= 0:
            continue
        hit = hit_of(sid)
        score = message_score(
            base,
            kind=kind,
            role=role,
            phrase_hit=phrase_hit,
            field_boost=None if hit is None else hit.boost,
        )
        if hit is not None:
            matched |= hit.terms
        held = frozenset(matched)
        held = matched_sets.setdefault(held, held)
        # `Ranked` made from its fields in order, without its constructor's call.
        scored.append(new(Ranked, (sid, seq, kind, score, created_at, held, None)))
    return OwnScores(scored, frozenset(seen))


def with_evidence(
    own: OwnScores,
    hits: Mapping[str, FieldHit],
    anchors: Mapping[str, StoredMessage],
    evidence: Evidence = Evidence(),
) -> list[Ranked]:
    """The scored hits: each message's own score plus its neighbours' and its
    session's evidence (`Evidence`), then each session found only by its title or
    summary, at the entry `anchors` names."""
    scored = ranking.add_evidence(own.hits, evidence.context, evidence.session)
    for sid, hit in hits.items():
        anchor = anchors.get(sid)
        if sid in own.sessions or anchor is None or hit.matched_in is None:
            continue
        scored.append(
            Ranked(
                sid,
                anchor.seq,
                anchor.kind,
                hit.boost * hit.score,
                anchor.created_at,
                hit.terms,
                matched_in=hit.matched_in,
            )
        )
    named = {sid for sid, hit in hits.items() if hit.whole_title}
    return ranking.sessions_first(scored, named) if named else scored


def score_candidates(
    candidates: Iterable[CandidateRow],
    groups: Sequence[Group],
    stats: SearchStats,
    hits: Mapping[str, FieldHit],
    anchors: Mapping[str, StoredMessage],
    evidence: Evidence = Evidence(),
) -> list[Ranked]:
    """Scored hits: each candidate message (BM25 times the factors of
    `ranking.message_score`, plus its neighbours' and its session's evidence), then
    each session found only by its title or summary, at the entry `anchors` names
    (`own_scores`, then `with_evidence`)."""
    own = own_scores(candidates, groups, stats, hits, evidence)
    return with_evidence(own, hits, anchors, evidence)


#: A query word found as typed (or in another form) in at most this many messages is
#: rare: a hit holding it is kept whatever its score (see `ranking.rank`).
RARE_FLOOR_DF = 3


def rare_terms(groups: Iterable[Group]) -> frozenset[str]:
    """The exact and same-stem terms of the query found in at most `RARE_FLOOR_DF`
    messages: a long message that is the only one holding such a word must not fall
    under the relative floor because length normalisation shrank its score."""
    return frozenset(
        e.term
        for g in groups
        for e in g
        if e.how in ("exact", "stem") and 0 < e.df <= RARE_FLOOR_DF
    )
