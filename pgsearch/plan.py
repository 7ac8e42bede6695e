"""The candidate plan: which messages a search reads (pure).

A search is planned in stages whose results are values, so each can be printed
(``pgsearch search --explain``) and tested without a database:

1. `parse_query` splits the query into words, phrases and units (`ParsedQuery`).
2. `vocabulary_lookup` says which vocabulary terms to read for each word: the word,
   its stem, for 3-4 letter words the terms it starts, and for longer words not
   found often enough (`TRUSTED_DF`) the terms one or two edits away.
   `choose_expansions` keeps the rows that qualify as one group per word.
3. `plan_candidates` turns the groups and the workspace statistics into a
   `CandidatePlan`: the strategy that picks candidate messages, the units that drive
   it, the cap.
4. `plan_fields` plans the match of session titles and summaries.
5. `read_limits` says why the rows read may not be every hit the rules define.

How the rows read are scored is `pgsearch.scoring`'s (with `pgsearch.ranking`).

Glossary
--------
word
    A searchable piece of the query after normalising (`QueryWord`): a run of
    letters and digits, or a CJK unigram or bigram.
phrase
    The words of quoted text, of a CJK run or of one whitespace-free chunk such as
    ``resolve_dirs(config)``, in order. A message holding a phrase is boosted.
unit
    The words typed as one chunk (an unquoted token, or quoted text). A unit
    matches all or nothing when it drives the candidate statement; a unit holding a
    word the vocabulary does not know can never match, so it never drives.
expansion
    A vocabulary term standing for a word: the word itself, a same-stem form, a
    longer term it starts, a term one or two edits away (`ranking.Expansion`), each
    with its match weight.
group
    The expansions of one word. BM25 scores, per group, a document's best
    expansion (`ranking.Scorer`).
driver
    A unit whose messages the candidate statement reads: AND inside a unit, OR
    between the drivers.
stop-like
    A word found in at least `Settings.stop_df_ratio` of the workspace's messages
    (and in `STOP_MIN_DF` of them). A unit whose rarest word is stop-like never
    drives on its own: it would read most of the workspace.
df, sf
    Document frequency (messages holding a term) and session-field frequency
    (sessions whose title or summary holds it), kept exact in `vocabulary`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from rapidfuzz.distance import OSA, Levenshtein

from pgsearch import policy, ranking
from pgsearch.errors import InvalidQuery
from pgsearch.normalize import QueryWord, query_words, stem
from pgsearch.ranking import Expansion
from pgsearch.rows import SearchStats, VocabRow
from pgsearch.settings import Settings

#: A query word found in at least this many messages and session fields together
#: is taken as spelled right: it gets no prefix and no typo expansions, which would
#: only add noise to a word the user evidently meant.
TRUSTED_DF = 3
#: Trigram neighbours read per word before the edit-distance check. Sharing trigrams
#: is a far looser test than one or two edits, so most are rejected; they are read
#: most similar first, so the likeliest spellings are among them.
FUZZY_FETCH = 32
#: Terms read per 3-4 letter word that they start, most frequent first: a short
#: prefix can start thousands of terms, and the common ones are the likely meaning.
PREFIX_FETCH = 16
#: Below this document frequency no word counts as stop-like, whatever its share:
#: in a small workspace a word in 5 % of the messages is still selective.
STOP_MIN_DF = 50
#: Shortest word that gets typo expansions; shorter words have too many neighbours.
FUZZY_MIN_CHARS = 5
#: Words up to this length are matched one edit away; longer ones two.
ONE_EDIT_MAX_CHARS = 8
#: Lengths of the words that get prefix expansions.
PREFIX_CHARS = (3, 4)
#: Vocabulary terms a query may look up per word the word limit allows. A Latin word
#: reads its exact, stem and prefix or typo rows; a CJK pair only its exact row, so a
#: CJK sentence of a few hundred characters costs less than 32 typo lookups
#: (tests/reliability/test_bounded_work.py runs the largest of each).
LOOKUPS_PER_WORD = 8

#: The expansions of one word.
Group = tuple[Expansion, ...]
#: The groups of one unit's words.
Unit = tuple[Group, ...]
Strategy = Literal["all_words", "all_words_newest", "any_unit", "any_unit_by_coverage"]


# --- the request's scope -------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Filters:
    """Scope and filters of one search, applied inside the candidate statement."""

    workspace: str
    kinds: tuple[str, ...]
    session_id: str | None = None
    roles: tuple[str, ...] = ()
    tool_name: str | None = None
    since: Any = None
    until: Any = None
    #: Matches are read through the workspace's own posting lists
    #: (``messages_terms_idx``). False for a role that row level security restricts:
    #: the text match operator is not leakproof, so no index can serve it before the
    #: policy's test, and each row's ``tsv`` is tested instead.
    keyed: bool = True

    @property
    def only_kinds(self) -> bool:
        """True when the scope is the workspace and kinds alone (stats answer counts)."""
        return self.session_id is None and not self.narrows_entries

    @property
    def narrows_entries(self) -> bool:
        """True when a role, tool or time filter applies (titles cannot satisfy it)."""
        return (
            bool(self.roles)
            or self.tool_name is not None
            or self.since is not None
            or self.until is not None
        )


# --- 1. the parsed query -------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ParsedQuery:
    """A query's words (in order, repeats kept) and its phrases."""

    words: tuple[QueryWord, ...]
    phrases: tuple[tuple[str, ...], ...]

    @property
    def texts(self) -> tuple[str, ...]:
        """The distinct words, in order: what `VocabRow.word_index` counts."""
        return tuple(dict.fromkeys(w.text for w in self.words))

    @property
    def searched_words(self) -> int:
        """Distinct words as the query limit counts them: each word, and each run of
        CJK characters once (it is searched as one phrase of its pairs)."""
        runs = {
            tuple(w.text for w in self.words if w.run == run)
            for run in {w.run for w in self.words if w.run is not None}
        }
        return len({w.text for w in self.words if w.run is None}) + len(runs)

    @property
    def unit_texts(self) -> tuple[tuple[str, ...], ...]:
        """Each distinct unit's distinct words, in order."""
        by_unit: dict[int, list[str]] = {}
        for w in self.words:
            texts = by_unit.setdefault(w.unit, [])
            if w.text not in texts:
                texts.append(w.text)
        return tuple(dict.fromkeys(tuple(texts) for texts in by_unit.values()))

    def shares(self) -> dict[str, float]:
        """Words typed as one unquoted chunk (`resolve_dirs(config)`, `7.9.5`, a CJK
        run) name one thing: each gets 1/n of a word's weight instead of adding up."""
        size: dict[int, set[str]] = {}
        for w in self.words:
            if not w.quoted:
                size.setdefault(w.unit, set()).add(w.text)
        share: dict[str, float] = {}
        for w in self.words:
            n = len(size.get(w.unit, ()))
            if n > 1:
                share.setdefault(w.text, 1.0 / n)
        return share

    def units(self, groups: Mapping[str, Group]) -> tuple[Unit, ...]:
        """The units as groups; a unit with a word that has no group cannot match."""
        return tuple(
            tuple(groups[t] for t in texts)
            for texts in self.unit_texts
            if all(t in groups for t in texts)
        )


def max_lookups(max_terms: int) -> int:
    """Most distinct terms a query may look up in the vocabulary (`LOOKUPS_PER_WORD`
    per word the limit allows)."""
    return max_terms * LOOKUPS_PER_WORD


def parse_query(query: str, *, max_terms: int) -> ParsedQuery:
    """`query` split into words and phrases, within the limits of the work it makes.

    Two limits, both about work rather than characters: at most `max_terms` distinct
    words, counting a run of CJK characters as the one phrase it is searched as; and
    at most `max_lookups(max_terms)` distinct terms to look up, where a word is one
    term and a CJK run of n characters n - 1 (its overlapping pairs, each an exact
    lookup and no expansion). `InvalidQuery` names the limit passed.
    """
    words, phrases = query_words(query)
    parsed = ParsedQuery(words=tuple(words), phrases=tuple(tuple(p) for p in phrases))
    searched = parsed.searched_words
    runs = any(w.run is not None for w in parsed.words)
    if searched > max_terms:
        counted = " (a run of CJK characters counts as one)" if runs else ""
        raise InvalidQuery(
            f"query has {searched} distinct words{counted}; the limit is {max_terms}"
        )
    lookups = len(parsed.texts)
    if lookups > max_lookups(max_terms):
        raise InvalidQuery(
            f"query has {lookups} distinct terms to look up (each pair of adjacent CJK "
            f"characters is one); the limit is {max_lookups(max_terms)}"
        )
    return parsed


# --- 2. vocabulary expansion ---------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class VocabularyLookup:
    """The vocabulary terms to read for each distinct query word (index-aligned)."""

    words: tuple[str, ...]
    stems: tuple[str, ...]
    #: Read the terms the word starts (3-4 letter words that are not numbers).
    prefix: tuple[bool, ...]
    #: The word's shape allows typo expansions (not CJK, 5+ letters, no digit); they
    #: are read only when the word itself is found fewer than `trusted_df` times.
    fuzzy: tuple[bool, ...]
    prefix_limit: int = PREFIX_FETCH
    fuzzy_limit: int = FUZZY_FETCH
    trusted_df: int = TRUSTED_DF
    #: Words found as written fewer times than this still get their neighbours read,
    #: in case a far more common word one edit away was meant (0: only below
    #: `trusted_df`).
    realword_df: int = 0

    @property
    def typo_below(self) -> int:
        """A word whose shape allows typos gets its typo neighbours read when found
        as written fewer times than this."""
        return max(self.trusted_df, self.realword_df)


def vocabulary_lookup(
    query: ParsedQuery, *, fuzzy_limit: int = FUZZY_FETCH, realword_df: int = 0
) -> VocabularyLookup:
    """What to read from the vocabulary for `query`'s words."""
    cjk = {w.text for w in query.words if w.cjk}
    texts = query.texts
    return VocabularyLookup(
        words=texts,
        stems=tuple(t if t in cjk else stem(t) for t in texts),
        prefix=tuple(t not in cjk and len(t) in PREFIX_CHARS and not t.isdigit() for t in texts),
        fuzzy=tuple(
            t not in cjk and len(t) >= FUZZY_MIN_CHARS and not any(c.isdigit() for c in t)
            for t in texts
        ),
        fuzzy_limit=fuzzy_limit,
        realword_df=realword_df,
    )


def _exact_df(rows: Iterable[VocabRow], n_words: int) -> list[int]:
    """Per word, how often it is found as written (messages plus session fields)."""
    found = [0] * n_words
    for row in rows:
        if row.how == "exact":
            found[row.word_index] = row.df + row.sf
    return found


def fuzzy_targets(lookup: VocabularyLookup, exact_rows: Iterable[VocabRow]) -> tuple[int, ...]:
    """Indexes of the words whose typo expansions are read: the shape allows them and
    the word is found fewer than `trusted_df` times as written."""
    exact_df = _exact_df(exact_rows, len(lookup.words))
    below = lookup.typo_below
    return tuple(i for i, shaped in enumerate(lookup.fuzzy) if shaped and exact_df[i] < below)


def allowed_edits(word: str) -> int:
    """Edits a typo expansion of `word` may be away: one, two from 9 letters."""
    return 1 if len(word) <= ONE_EDIT_MAX_CHARS else 2


def choose_expansions(
    query: ParsedQuery,
    rows: Sequence[VocabRow],
    *,
    max_expansions: int,
    typo_distance: str = "levenshtein",
    realword_ratio: float = 0.0,
    trusted_df: int = TRUSTED_DF,
) -> dict[str, Group]:
    """One group of expansions per query word found (words with none left out).

    The word as written and its same-stem forms are always kept. Prefix and typo
    terms count only for a word found fewer than `trusted_df` times (the lookup's, which
    the vocabulary statement reads with: `VocabularyLookup.trusted_df`); typo terms must
    be one edit away (two from 9 letters), re-checked here because the trigram read
    is looser, and the nearest, most frequent `max_expansions` are kept; with
    ``typo_distance="osa"`` a transposition is one edit. With `realword_ratio`, a word found
    as written `trusted_df` times or more also gets the typo terms found at least
    `realword_ratio` times as often as it (a misspelling that recurs in the logs still
    reaches the word meant). Weights of words typed as one chunk are shared
    (`ParsedQuery.shares`).

    Mirrored in SQL: the vocabulary statement (`pgsearch.db.queries._direct_terms`)
    makes the same choice on the server, with these arguments as its parameters
    (`pgsearch.db.reads.direct_search`), to read the direct plan; a search uses its
    rows only when both choices agree (`same_expansions`), and
    tests/integration/test_round_trips.py checks that they do.
    """
    edit_distance = OSA.distance if typo_distance == "osa" else Levenshtein.distance
    texts = query.texts
    exact_df = _exact_df(rows, len(texts))
    groups: list[dict[str, Expansion]] = [{} for _ in texts]
    later: list[VocabRow] = []
    for row in rows:
        i = row.word_index
        if row.how == "exact":
            groups[i][row.term] = Expansion(i, row.term, ranking.EXACT, row.df, row.sf)
        elif row.how == "stem":
            groups[i].setdefault(
                row.term, Expansion(i, row.term, ranking.STEM, row.df, row.sf, how="stem")
            )
        elif exact_df[i] < trusted_df:
            later.append(row)
        elif (
            realword_ratio > 0
            and row.how == "fuzzy"
            and row.df + row.sf >= realword_ratio * exact_df[i]
        ):
            later.append(row)
    typos: dict[int, list[tuple[int, int, str, int, int]]] = {}
    for row in later:
        i = row.word_index
        if row.how == "prefix":
            groups[i].setdefault(
                row.term, Expansion(i, row.term, ranking.PREFIX, row.df, row.sf, how="prefix")
            )
            continue
        word = texts[i]
        allowed = allowed_edits(word)
        distance = edit_distance(word, row.term, score_cutoff=allowed)
        if distance <= allowed:
            typos.setdefault(i, []).append((distance, -(row.df + row.sf), row.term, row.sf, row.df))
    for i, options in typos.items():
        options.sort()
        for distance, _, term, sf, df in options[:max_expansions]:
            weight = ranking.FUZZY_1 if distance <= 1 else ranking.FUZZY_2
            groups[i].setdefault(
                term, Expansion(i, term, weight, df, sf, how="fuzzy", distance=distance)
            )
    share = query.shares()
    return {
        texts[i]: tuple(replace(e, weight=e.weight * share[texts[i]]) for e in g.values())
        if texts[i] in share
        else tuple(g.values())
        for i, g in enumerate(groups)
        if g
    }


# --- 3. the candidate plan -----------------------------------------------------------


def group_df(group: Group) -> int:
    """Messages one word's expansions can match at most (their summed df)."""
    return sum(e.df for e in group)


def unit_df(unit: Unit) -> int:
    """Messages a unit can match at most: those of its rarest word."""
    return min(group_df(g) for g in unit)


def stop_df(n_indexed: int, settings: Settings) -> float:
    """The document frequency from which a word is stop-like (mirrored in SQL by the
    direct read, `queries._DIRECT_UNITS` and `_DIRECT_FIELD_STOP`, which take
    `stop_df_ratio` and `STOP_MIN_DF` as parameters)."""
    return max(settings.stop_df_ratio * n_indexed, STOP_MIN_DF)


@dataclass(frozen=True, kw_only=True)
class CandidatePlan:
    """Which messages the candidate statement reads, and how many.

    - ``all_words``: messages holding every word (one unit, or only stop-like ones);
    - ``all_words_newest``: the same, newest first, because more than the cap match;
    - ``any_unit``: messages holding any driving unit (the selective units, rarest
      first, while their summed df stays within ``candidate_scan_limit``);
    - ``any_unit_by_coverage``: the same, but more than the cap may match, so the cap
      keeps the messages covering the most IDF-weighted units (newest on ties).
    """

    strategy: Strategy
    #: The units read: AND inside a unit, OR between units.
    drivers: tuple[Unit, ...]
    #: Every unit with its IDF weight (``any_unit_by_coverage`` only).
    coverage: tuple[tuple[Unit, float], ...] = ()
    #: Most candidate rows read.
    cap: int
    #: Each query word and its group of expansions (what candidates are scored on).
    words: tuple[str, ...]
    groups: tuple[Group, ...]
    #: Every expansion term, sorted: the statement returns their frequencies.
    terms: tuple[str, ...]
    phrases: tuple[tuple[str, ...], ...]
    #: Words at or above the stop-like document frequency, and that frequency.
    stop_like: tuple[str, ...] = ()
    stop_df: float = 0.0
    #: The selective units not read because their df would pass
    #: ``candidate_scan_limit`` (``any_unit`` strategies only): their messages are
    #: hits too, but only those the drivers also find are ranked.
    left_out: tuple[Unit, ...] = ()
    #: ``all_words_newest`` only: entries of the scope a read may walk newest first,
    #: testing each, before it reads the matches from the index instead (0: read
    #: them from the index at once; `newest_walk`).
    walk: int = 0

    @property
    def newest_first(self) -> bool:
        return self.strategy == "all_words_newest"

    @property
    def hit_units(self) -> tuple[Unit, ...]:
        """The units a message holds one of to be a hit under the rules, with no cap
        and no scan limit: every word (the ``all_words`` strategies), or any selective
        unit. A stop-like word scores in a hit but never makes one on its own. An
        exhaustive run ranks all of these (`pgsearch.search.SearchEngine`)."""
        return self.drivers + self.left_out

    @property
    def driver_df(self) -> int:
        """Messages the drivers can match at most (their summed df)."""
        return sum(unit_df(u) for u in self.drivers)

    def unit_words(self, unit: Unit) -> list[str]:
        """The query words a unit stands for."""
        by_index = {g[0].group: w for w, g in zip(self.words, self.groups, strict=True)}
        return [by_index[g[0].group] for g in unit]


#: A newest-first walk reads this many times the entries expected to hold the cap's
#: matches before it gives up (`newest_walk`).
WALK_MARGIN = 2


#: How far the share of entries expected to hold several words leans from the product
#: of their shares (the words independent) to the smallest of them (every entry
#: holding the rarest word holding the others): `match_share`.
CO_OCCURRENCE = 0.75


def match_share(dfs: Iterable[int], n_indexed: int) -> float:
    """The share of indexed entries expected to hold words of these dfs: the share of
    entries a walk passes that match (`newest_walk`, `pgsearch.db.queries.spread_walks`).

    For one word it is the word's share. For several it lies between the product of
    their shares (words found independently of each other) and the smallest share
    (every entry of the rarest word holding the others). Frequent words are found
    together far more often than independently (a long entry holds many of them:
    ``the`` and ``and`` are together in 17 % of the entries of the largest benchmark
    workspace, where the product of their shares says 8 %), so the estimate is taken
    `CO_OCCURRENCE` of the way from the product to the smallest, on a log scale:
    ``product ** (1 - c) * smallest ** c``. It only chooses how the same rows are
    read (`newest_walk`, `pgsearch.db.queries.spread_walks`): a walk that finds too
    few ends in the index read."""
    n = max(n_indexed, 1)
    shares = [min(df, n) / n for df in dfs]
    if not shares:
        return 1.0
    return float(math.prod(shares) ** (1 - CO_OCCURRENCE) * min(shares) ** CO_OCCURRENCE)


def newest_walk(cap: int, dfs: Sequence[int], n_indexed: int, scope_share: float = 1.0) -> int:
    """How many entries the newest `cap` messages holding words of these dfs may be
    looked for in, newest first, before they are read from the index instead.

    The newest matches are found two ways at a cost per entry read that is about
    the same: walking the scope newest first and testing each entry (about
    ``cap / share`` entries, where ``share`` is the share of entries that match), or
    reading every match from the index and keeping the newest (``share * n``
    entries). A walk passes the entries of other kinds too: it reads
    ``1 / scope_share`` entries for each one in scope. A walk is tried when what it
    is expected to read, `WALK_MARGIN` times over, is less than the matches
    (``share`` as `match_share` expects it): with every kind in scope, a read then
    costs at most about ``sqrt(WALK_MARGIN * cap * n)`` entries whatever their
    frequency when the share is as expected; a walk that finds fewer than the cap
    adds its length (shorter than the matches expected) to the index read after it.
    The result is the same either way: every entry a walk leaves is older than every
    entry it kept."""
    n = max(n_indexed, 1)
    share = match_share(dfs, n_indexed)
    if share <= 0 or scope_share <= 0:
        return 0
    walk = math.ceil(WALK_MARGIN * cap / share)
    return walk if walk / min(scope_share, 1.0) < share * n else 0


def plan_candidates(
    query: ParsedQuery, groups: Mapping[str, Group], stats: SearchStats, settings: Settings
) -> CandidatePlan:
    """The candidate plan for `query`'s expanded words under these statistics.

    Mirrored in SQL for the plans the direct read can serve (``all_words`` and
    ``any_unit`` when every match fits the cap: `pgsearch.db.queries._DIRECT_UNITS`,
    with the caps as parameters); `direct_candidates_hold` accepts its rows only
    when they are this plan's (tests/unit/test_direct_plan.py)."""
    all_groups = tuple(groups.values())
    units = query.units(groups)
    dfs = [unit_df(u) for u in units]
    threshold = stop_df(stats.n_indexed, settings)
    selective = sorted((i for i, d in enumerate(dfs) if d < threshold), key=dfs.__getitem__)
    cap = settings.candidate_cap
    common: dict[str, Any] = {
        "words": tuple(groups),
        "groups": all_groups,
        "terms": tuple(sorted({e.term for g in all_groups for e in g})),
        "phrases": query.phrases,
        "stop_like": tuple(w for w, g in groups.items() if group_df(g) >= threshold),
        "stop_df": threshold,
    }
    if len(units) < 2 or not selective:
        # One unit, or only stop-like ones: messages holding every word, the newest
        # first when more than the cap may match. Words this common say little about
        # which of their messages is meant, so fewer are re-ranked.
        if not selective:
            cap = min(cap, settings.stop_candidate_cap)
        newest = min(map(group_df, all_groups)) > cap
        return CandidatePlan(
            strategy="all_words_newest" if newest else "all_words",
            drivers=(all_groups,),
            cap=cap,
            walk=newest_walk(
                cap,
                [group_df(g) for g in all_groups],
                stats.n_indexed,
                stats.in_scope / stats.n_messages if stats.n_messages else 1.0,
            )
            if newest
            else 0,
            **common,
        )
    # Messages holding any selective unit, rarest first, as many as keep the scan
    # bounded. When more than the cap may match, the cap keeps those covering the most
    # of the query, each unit weighted by its IDF: messages with every word come
    # first, common words only break ties.
    drivers = [selective[0]]
    total = dfs[selective[0]]
    for i in selective[1:]:
        if total + dfs[i] > settings.candidate_scan_limit:
            break
        drivers.append(i)
        total += dfs[i]
    chosen = tuple(units[i] for i in drivers)
    common["left_out"] = tuple(units[i] for i in selective[len(drivers) :])
    if total <= cap:
        return CandidatePlan(strategy="any_unit", drivers=chosen, cap=cap, **common)
    n = max(stats.n_indexed, 1)
    coverage = tuple(
        (unit, sum(ranking.idf(n, max(e.df for e in g)) for g in unit)) for unit in units
    )
    return CandidatePlan(
        strategy="any_unit_by_coverage", drivers=chosen, coverage=coverage, cap=cap, **common
    )


# --- 3b. the direct plan, read before it is known ------------------------------------
# A plan's reads follow from the vocabulary rows and the rules above. The store
# reads them in the statement that reads the vocabulary (`pgsearch.db.reads.
# direct_search`): the server chooses each word's expansions from the rows it
# returns, as `choose_expansions` does, then decides as `plan_candidates` and
# `plan_fields` do. The functions below say, once the plan is made, whether those
# rows are the very rows its own statements would return.


def unit_indexes(query: ParsedQuery) -> tuple[tuple[int, ...], ...]:
    """Each unit's words as indexes into `ParsedQuery.texts`."""
    index = {t: i for i, t in enumerate(query.texts)}
    return tuple(tuple(index[t] for t in texts) for texts in query.unit_texts)


def is_direct(groups: Mapping[str, Group]) -> bool:
    """Whether every expansion is a word as written or a same-stem term."""
    return all(e.how in ("exact", "stem") for g in groups.values() for e in g)


def same_expansions(groups: Mapping[str, Group], chosen: Iterable[tuple[int, str]] | None) -> bool:
    """Whether the direct read's expansions are the groups': those it `chosen`
    ((word index, term) pairs), or with None its words as written and same-stem
    terms only."""
    if chosen is None:
        return is_direct(groups)
    return {(e.group, e.term) for g in groups.values() for e in g} == set(chosen)


def _unit_key(unit: Unit) -> frozenset[int]:
    return frozenset(g[0].group for g in unit)


def direct_candidates_hold(
    query: ParsedQuery,
    groups: Mapping[str, Group],
    plan: CandidatePlan,
    stats: SearchStats,
    settings: Settings,
    rows_read: int,
    chosen: Iterable[tuple[int, str]] | None = None,
) -> bool:
    """Whether the direct candidate rows (`rows_read` of them) are exactly those the
    plan's candidate statement returns.

    The direct read (`pgsearch.db.queries._direct_terms`) chooses each word's
    expansions on the server (`chosen`; see `same_expansions`), and holds only when
    they are the groups'. It (`_DIRECT_UNITS`) makes `plan_candidates`' choice
    from the same vocabulary rows, and reads only when every
    match fits the cap: every word, which is the plan's read when no unit drives and
    the rarest word is within the cap (``all_words``); or any selective unit, which
    is the plan's read when those are its drivers and their df sum is within the cap
    (``any_unit``). Reading the newest of more matches is left to the plan's own
    statement, which the planner can answer from the time index."""
    if not same_expansions(groups, chosen) or rows_read > plan.cap:
        return False
    if plan.strategy == "all_words":
        return True
    if plan.strategy != "any_unit":
        return False
    threshold = stop_df(stats.n_indexed, settings)
    selective = [u for u in query.units(groups) if unit_df(u) < threshold]
    if sum(unit_df(u) for u in selective) > settings.candidate_cap:
        return False  # not read
    return {_unit_key(u) for u in plan.drivers} == {_unit_key(u) for u in selective}


def direct_fields_hold(
    groups: Mapping[str, Group],
    field_plan: FieldPlan | None,
    rows_read: int,
    chosen: Iterable[tuple[int, str]] | None = None,
) -> bool:
    """Whether the direct title/summary rows are the field plan's: the same terms
    (`same_expansions`) and no more than its cap (the direct read stops one row
    beyond it)."""
    return (
        field_plan is not None and same_expansions(groups, chosen) and rows_read <= field_plan.cap
    )


# --- 4. session titles and summaries -------------------------------------------------


Field = Literal["title", "summary"]


def alone_fields(kinds: Sequence[str]) -> tuple[Field, ...]:
    """The session fields whose match is a hit on its own under these kinds.

    A title or summary stands for its session in a search of the default kinds. A
    search naming other kinds asks for entries of those kinds only: a summary match
    is then a hit only when ``summary`` is among them, a title match never (a title
    is no entry of any kind). Either still boosts its session's messages.
    """
    if tuple(kinds) == policy.DEFAULT_SEARCH_KINDS:
        return ("title", "summary")
    return ("summary",) if policy.SUMMARY in kinds else ()


@dataclass(frozen=True, kw_only=True)
class FieldPlan:
    """Sessions whose title or summary to match: any of the selective words."""

    #: The words not common among titles and summaries (OR between them).
    selective: tuple[Group, ...]
    #: Every expansion term (the statement returns their frequencies and weights).
    terms: tuple[str, ...]
    cap: int
    session_id: str | None = None
    #: The fields whose match is a hit of its own (`alone_fields`).
    alone: tuple[Field, ...] = ("title", "summary")


def plan_fields(
    filters: Filters, groups: Mapping[str, Group], stats: SearchStats, settings: Settings
) -> FieldPlan | None:
    """How to match titles and summaries, or None when they cannot help: a role, tool
    or time filter (a title has none of those), no titles yet, or only words common
    among titles. Mirrored in SQL by the direct read's title part
    (`pgsearch.db.queries.direct_search_sql`); `direct_fields_hold` accepts its rows
    only when they are this plan's."""
    if filters.narrows_entries or stats.n_fields == 0:
        return None
    threshold = stop_df(stats.n_fields, settings)
    selective = tuple(g for g in groups.values() if max(e.sf for e in g) < threshold)
    if not selective:
        return None
    return FieldPlan(
        selective=selective,
        terms=tuple(sorted({e.term for g in groups.values() for e in g})),
        cap=settings.candidate_cap,
        session_id=filters.session_id,
        alone=alone_fields(filters.kinds),
    )


# --- 5. exact or approximate --------------------------------------------------------


def read_limits(
    plan: CandidatePlan,
    field_plan: FieldPlan | None,
    *,
    candidates_read: int,
    fields_read: int,
    spread: bool = False,
) -> tuple[str, ...]:
    """Why the rows read may not be every hit the rules define (none: the result is
    exact, the same as an uncapped run of the same scorer would give).

    The reads are exact by construction unless a limit cut them: the candidates
    filled the plan's cap (the newest or best-covering cap of more matches), selective
    units were left out by the scan limit, the titles and summaries filled their cap,
    or one match per session was read among the first matches beyond the cap
    (`spread`). Scores come from the same statistics either way, and the order of
    hits depends on nothing else (`ranking.Ranked.order_key`)."""
    why: list[str] = []
    if candidates_read >= plan.cap:
        which = {
            "all_words_newest": "the newest ",
            "any_unit_by_coverage": "the best-covering ",
        }.get(plan.strategy, "")
        why.append(f"candidates: {which}{plan.cap} read of more matches")
    if plan.left_out:
        words = " | ".join(f"({' '.join(plan.unit_words(u))})" for u in plan.left_out)
        why.append(f"units left out by the scan limit: {words}")
    if field_plan is not None and fields_read >= field_plan.cap:
        why.append(f"titles/summaries: {field_plan.cap} read of more matches")
    if spread:
        why.append("one match per session among the first matches beyond the cap")
    return tuple(why)


# --- what --explain shows -------------------------------------------------------------


def _expansion_text(e: Expansion) -> str:
    how: str = e.how
    if e.how == "fuzzy":
        how += f", {e.distance} edit{'s' if e.distance > 1 else ''}"
    return f"{e.term} ({how}, df {e.df}, sf {e.sf}, weight {e.weight:.3g})"


@dataclass(frozen=True, kw_only=True)
class SearchTrace:
    """What a search decided and ran: its plans and its statements with their plans."""

    #: ``ranked`` (a plan was made), ``browse`` (empty query), ``no_words`` (nothing
    #: searchable in the query) or ``unknown_words`` (no word is in the vocabulary).
    mode: Literal["ranked", "browse", "no_words", "unknown_words"]
    plan: CandidatePlan | None = None
    field_plan: FieldPlan | None = None
    #: Each statement run, then the server's plan for it.
    statements: tuple[str, ...] = ()
    #: Why the result may differ from an uncapped run of the same rules
    #: (`read_limits`; empty: exact).
    approximate: tuple[str, ...] = ()
    #: How a capped plan was read through the term lists instead (`pgsearch.impact`).
    bounded: str | None = None

    def describe(self) -> str:
        """The plan as text, for people: strategy, drivers, expansions, stop-like words."""
        plan = self.plan
        if plan is None:
            return {
                "browse": "plan: browse (the newest entries in scope)",
                "no_words": "plan: none (the query has no searchable words)",
                "unknown_words": "plan: none (no query word is in the vocabulary)",
                "ranked": "plan: none",
            }[self.mode]
        lines = [f"plan: {plan.strategy}, at most {plan.cap} candidates"]
        drivers = " | ".join(f"({' '.join(plan.unit_words(u))})" for u in plan.drivers)
        lines.append(f"  drivers: {drivers} (df at most {plan.driver_df})")
        if plan.newest_first:
            lines.append(
                f"  newest matches: a walk of at most {plan.walk} entries, then the index"
                " (no walk in one session or with a role or tool filter)"
                if plan.walk
                else "  newest matches: from the index (a walk would read more)"
            )
        for unit, weight in plan.coverage:
            lines.append(f"  coverage: ({' '.join(plan.unit_words(unit))}) weight {weight:.3f}")
        for word, group in zip(plan.words, plan.groups, strict=True):
            lines.append(f"  word {word}: " + "; ".join(_expansion_text(e) for e in group))
        stop = ", ".join(plan.stop_like) or "none"
        lines.append(f"  stop-like (df >= {plan.stop_df:g}): {stop}")
        for phrase in plan.phrases:
            if len(phrase) > 1:
                lines.append(f"  phrase: {' '.join(phrase)}")
        fields = self.field_plan
        if fields is None:
            lines.append("  titles/summaries: not searched")
        else:
            words = " | ".join(plan.unit_words(fields.selective))
            alone = ", ".join(fields.alone) or "none (they only boost their sessions)"
            lines.append(
                f"  titles/summaries: any of {words}, at most {fields.cap}; hits alone: {alone}"
            )
        if plan.left_out:
            left = " | ".join(f"({' '.join(plan.unit_words(u))})" for u in plan.left_out)
            lines.append(f"  left out by the scan limit: {left}")
        if self.bounded:
            lines.append(f"  read: {self.bounded}")
        if self.approximate:
            lines.append("result: approximate (" + "; ".join(self.approximate) + ")")
        elif self.bounded:
            lines.append("result: exact (certified: no hit left unread can reach the top)")
        else:
            lines.append("result: exact (every hit the rules define was ranked)")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The plan as data (``pgsearch search --explain --json``)."""
        plan = self.plan
        data: dict[str, Any] = {"mode": self.mode}
        if plan is not None:
            data.update(
                strategy=plan.strategy,
                cap=plan.cap,
                walk=plan.walk,
                drivers=[plan.unit_words(u) for u in plan.drivers],
                driver_df=plan.driver_df,
                coverage=[[plan.unit_words(u), w] for u, w in plan.coverage],
                expansions={
                    word: [
                        {
                            "term": e.term,
                            "how": e.how,
                            "distance": e.distance,
                            "df": e.df,
                            "sf": e.sf,
                            "weight": e.weight,
                        }
                        for e in group
                    ]
                    for word, group in zip(plan.words, plan.groups, strict=True)
                },
                stop_like=list(plan.stop_like),
                stop_df=plan.stop_df,
                left_out=[plan.unit_words(u) for u in plan.left_out],
            )
            if self.field_plan is not None:
                data["fields"] = plan.unit_words(self.field_plan.selective)
            if self.bounded:
                data["bounded"] = self.bounded
            data["approximate"] = bool(self.approximate)
            data["approximate_because"] = list(self.approximate)
        return data
