"""Does the search rank as an exhaustive run of its own scorer would?

    python -m bench.oracle --dsn DSN --queries bench/results/corpus-100k/queries.jsonl
    python -m bench.oracle --dsn DSN --devset locomo [--devset-dir DIR]
    python -m bench.oracle --dsn DSN --devset synthetic --quality
    python -m bench.oracle ... --oracle any-word      # the earlier definition

The oracle is `pgsearch.search.SearchEngine` with ``exhaustive=True``: the same
expansions, scorer, evidence rules, floor and paging, over exactly the hits the
planner's rules define, with no cap and no scan limit
(`pgsearch.plan.CandidatePlan.hit_units`):

- the messages holding any selective unit (a unit whose rarest word is not
  stop-like), every one of them, or, when the query has fewer than two complete
  units or no selective one, the messages holding every word;
- the sessions whose title or summary holds a word not common among them
  (`pgsearch.plan.plan_fields`), every one of them;
- neighbouring-turn and session evidence among those hits only.

A stop-like word (in at least ``stop_df_ratio`` of the messages) still scores
inside a hit, but never makes a message a hit on its own: that is a rule of the
ranking, not a shortcut of the read, so the oracle keeps it. The earlier
definition (``--oracle any-word``) ranked every message holding any expansion of
any word; its stop-word-only messages then fed neighbouring-turn and session
evidence, and could themselves reach the top ten, which no capped read ever
ranks (bench/README.md compares the quality of both).

Each query runs through both, with the default request (one best hit per session)
and with all hits; a query agrees when the first ten hits are the same entries in
the same order. A result the engine does not mark ``approximate`` is certified:
its reads were every hit the rules define, so it must agree (``wrong_exact``
counts those that do not, and must stay 0). The database is one a benchmark left
(``bench.speed --keep-db``, ``bench.ab``, ``bench.quality --keep-db``); it is only
read. ``--devset synthetic`` reads the queries of the synthetic dev set
(``bench/results/devset``, made by `bench.quality`), against a database
``bench.quality --keep-db`` left.

Prints the share of agreeing searches per query class, the share certified exact,
and with ``--quality`` the dev set's figures for the engine and the oracle; writes
``bench/results/oracle-<name>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench import locomo, quality
from bench.speed import RESULTS, load_queries, request_for, sample_queries
from pgsearch import PgSearch, SessionQueryRequest, SessionQueryResult
from pgsearch.db import queries, reads
from pgsearch.db.work import Statement
from pgsearch.plan import CandidatePlan, Filters
from pgsearch.rows import CandidateRow
from pgsearch.search import SearchEngine

#: The oracle definitions: the hits the planner's rules define (the reference), and
#: the earlier one, every message holding any expansion of any word.
ORACLES = ("rules", "any-word")
SYNTHETIC = RESULTS / "devset"

Key = tuple[str, int, str]


@dataclass(frozen=True, slots=True)
class Case:
    """One search to compare: a class name, a workspace and session, a request."""

    cls: str
    qid: str
    workspace: str
    session_id: str | None
    request: SessionQueryRequest


@dataclass
class Tally:
    searches: int = 0
    identical: int = 0
    #: Searches the engine marked approximate (its result may differ from the oracle's).
    approximate: int = 0
    #: Searches marked exact whose first ten still differ (must stay 0).
    wrong_exact: int = 0
    ms_engine: list[float] = field(default_factory=list)
    ms_oracle: list[float] = field(default_factory=list)
    differ: list[str] = field(default_factory=list)
    #: Which read limits made results approximate (`pgsearch.plan.read_limits`).
    why: Counter[str] = field(default_factory=Counter)

    def report(self) -> dict[str, Any]:
        n = max(self.searches, 1)
        return {
            "searches": self.searches,
            "identical": self.identical,
            "identical_share": round(self.identical / n, 4),
            "approximate": self.approximate,
            "certified_share": round((self.searches - self.approximate) / n, 4),
            "wrong_exact": self.wrong_exact,
            "approximate_because": dict(self.why.most_common()),
            "differ_examples": self.differ[:8],
        }


def top(result: SessionQueryResult, k: int = 10) -> list[Key]:
    """The first `k` hits as (session, seq, kind): what must agree, in order."""
    return [(m.session_id, m.seq, m.kind) for m in result.matches[:k]]


def approximate(result: SessionQueryResult) -> bool:
    """Whether the engine says it could not prove its first page exact."""
    return bool(getattr(result, "approximate", False))


@contextmanager
def any_word_reads() -> Iterator[None]:
    """While open, the exhaustive engine reads the earlier oracle's set: every message
    holding any expansion of any query word (stop-like words included)."""
    original = reads.every_match

    def every_word(filters: Filters, plan: CandidatePlan) -> Statement[CandidateRow]:
        statement = original(filters, plan)
        return replace(
            statement, params={**(statement.params or {}), "tsq": queries.tsquery_or(plan.groups)}
        )

    reads.every_match = every_word
    try:
        yield
    finally:
        reads.every_match = original


@contextmanager
def searching_with(pg: PgSearch, engine: SearchEngine, kind: str = "rules") -> Iterator[PgSearch]:
    """`pg` answering through `engine` (the oracle of definition `kind`) while open."""
    before = pg._engine
    pg._engine = engine
    try:
        if kind == "any-word" and engine.exhaustive:
            with any_word_reads():
                yield pg
        else:
            yield pg
    finally:
        pg._engine = before


def compare(pg: PgSearch, cases: Iterable[Case], kind: str = "rules") -> dict[str, Tally]:
    """Each case through the engine and the oracle (definition `kind`), per class."""
    oracle = SearchEngine(pg.settings, exhaustive=True)
    out: dict[str, Tally] = {}
    for case in cases:
        tally = out.setdefault(case.cls, Tally())
        provider = pg.provider(workspace=case.workspace, session_id=case.session_id)
        t0 = time.perf_counter()
        got = provider.search(case.request)
        t1 = time.perf_counter()
        with searching_with(pg, oracle, kind):
            want = pg.provider(workspace=case.workspace, session_id=case.session_id).search(
                case.request
            )
        t2 = time.perf_counter()
        tally.searches += 1
        tally.ms_engine.append((t1 - t0) * 1000)
        tally.ms_oracle.append((t2 - t1) * 1000)
        same = top(got) == top(want)
        tally.identical += same
        marked = approximate(got)
        tally.approximate += marked
        if marked:
            trace = provider.explain(case.request).trace
            for reason in trace.approximate if trace is not None else ():
                tally.why[reason.split(":")[0]] += 1
        if not same:
            if not marked:
                tally.wrong_exact += 1
            tally.differ.append(f"{case.qid} per_session={case.request.per_session}")
    return out


def bench_cases(queries: list[dict[str, Any]]) -> list[Case]:
    """The benchmark's queries (browse aside: nothing is ranked), both request shapes."""
    return [
        Case(
            q["class"],
            q["qid"],
            q["workspace"],
            q.get("session"),
            request_for(q, per_session=per_session),
        )
        for q in queries
        if q["class"] != "browse"
        for per_session in (True, False)
    ]


def devset_cases(devset: Path, variants: Iterable[str] = ("clean", "typo", "accent")) -> list[Case]:
    """The dev set's questions, as `bench.locomo` runs them (both request shapes)."""
    out = []
    for name in variants:
        file, corpus = locomo.VARIANTS[name]
        suffix = locomo.ACCENT_SUFFIX if corpus == "sessions_accent" else ""
        for q in locomo.load_queries(devset / file):
            for per_session in (True, False):
                out.append(
                    Case(
                        f"locomo-{name}",
                        q.qid,
                        q.workspace + suffix,
                        None,
                        SessionQueryRequest(query=q.text, limit=10, per_session=per_session),
                    )
                )
    return out


def synthetic_queries(path: Path = SYNTHETIC / "queries.jsonl") -> list[dict[str, Any]]:
    """The synthetic dev set's queries (`bench.quality`), each in its three variants."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [
        {**row, "variant": name, "text": quality.variant(row["query"], row["qid"], name)}
        for row in rows
        for name in quality.VARIANTS
    ]


def synthetic_cases(queries: list[dict[str, Any]]) -> list[Case]:
    """The synthetic dev set's searches as `bench.quality` runs them (both shapes)."""
    return [
        Case(
            f"devset-{row['variant']}",
            f"{row['qid']}/{row['variant']}",
            row["workspace"],
            None,
            SessionQueryRequest(query=row["text"], limit=10, per_session=per_session),
        )
        for row in queries
        for per_session in (False, True)
    ]


def devset_quality(
    pg: PgSearch, devset: str, devset_dir: Path | None, kind: str
) -> dict[str, dict[str, Any]]:
    """The dev set's figures (`bench.locomo` or `bench.quality`) for the engine and for
    the oracle of definition `kind`."""
    engines = {"engine": pg._engine, "oracle": SearchEngine(pg.settings, exhaustive=True)}
    out: dict[str, dict[str, Any]] = {}
    for name, engine in engines.items():
        with searching_with(pg, engine, kind):
            if devset == "locomo":
                figures = locomo.evaluate(
                    locomo.searcher(pg),
                    locomo.locate("locomo", devset_dir),
                    variants=("clean", "typo", "accent"),
                )
            else:
                rows = [
                    json.loads(line)
                    for line in (SYNTHETIC / "queries.jsonl").read_text().splitlines()
                    if line
                ]
                figures = quality.evaluate(quality.ours(pg), rows)
        figures.pop("latency_ms", None)
        out[name] = figures
    return out


def render_quality(devset: str, figures: dict[str, dict[str, Any]]) -> str:
    """The dev set's headline figures per variant, engine and oracle side by side."""
    keys: tuple[str, ...]
    if devset == "locomo":
        keys = ("r@10", "mrr@10", "evr@10", "session_r@1", "session_r@10")
    else:
        keys = ("message:recall@10", "message:mrr@10", "message:ndcg@10", "session:recall@1")
    lines = [
        "| ranked by | variant | " + " | ".join(keys) + " |",
        "|---|---|" + "---:|" * len(keys),
    ]
    for who, by_variant in figures.items():
        for variant, values in by_variant.items():
            if not isinstance(values, dict):
                continue
            cells = []
            for key in keys:
                level, _, metric = key.rpartition(":")
                value = (values.get(level) or {}).get(metric) if level else values.get(key)
                cells.append("-" if value is None else f"{value:.3f}")
            lines.append(f"| {who} | {variant} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def why(reasons: Counter[str]) -> str:
    return ", ".join(f"{reason} {n}" for reason, n in reasons.most_common()) or "-"


def render(tallies: dict[str, Tally]) -> str:
    lines = [
        "| class | searches | identical to the oracle | certified exact "
        "| marked exact but differ | approximate because |",
        "|---|---:|---:|---:|---:|---|",
    ]
    total = Tally()
    for cls, t in tallies.items():
        r = t.report()
        lines.append(
            f"| {cls} | {t.searches} | {r['identical_share']:.3f} | {r['certified_share']:.3f} "
            f"| {t.wrong_exact} | {why(t.why)} |"
        )
        total.searches += t.searches
        total.identical += t.identical
        total.approximate += t.approximate
        total.wrong_exact += t.wrong_exact
        total.why.update(t.why)
    r = total.report()
    lines.append(
        f"| all | {total.searches} | {r['identical_share']:.3f} | {r['certified_share']:.3f} "
        f"| {total.wrong_exact} | {why(total.why)} |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", required=True, help="a database a benchmark left")
    parser.add_argument("--queries", type=Path, help="a benchmark corpus's queries.jsonl")
    parser.add_argument("--devset", choices=("locomo", "synthetic"))
    parser.add_argument("--devset-dir", type=Path)
    parser.add_argument("--sample", type=int, default=0, help="first N queries of each class")
    parser.add_argument(
        "--oracle", choices=ORACLES, default="rules", help="the oracle's definition of a hit"
    )
    parser.add_argument(
        "--quality", action="store_true", help="also the dev set's figures, engine and oracle"
    )
    parser.add_argument("--name", default="", help="results name")
    args = parser.parse_args(argv)
    if args.devset == "locomo":
        cases = devset_cases(locomo.locate(args.devset, args.devset_dir))
        name = args.name or args.devset
    elif args.devset == "synthetic":
        cases = synthetic_cases(synthetic_queries())
        name = args.name or "devset"
    elif args.queries:
        queries = load_queries(args.queries)
        if args.sample:
            queries = sample_queries(queries, args.sample)
        cases = bench_cases(queries)
        name = args.name or args.queries.parent.name
    else:
        parser.error("give --queries or --devset")
    if args.quality and not args.devset:
        parser.error("--quality needs --devset")
    if args.oracle != "rules":
        name += f"-{args.oracle}"
    with PgSearch.connect(args.dsn) as pg:
        tallies = compare(pg, cases, args.oracle)
        figures = (
            devset_quality(pg, args.devset, args.devset_dir, args.oracle) if args.quality else {}
        )
    results: dict[str, Any] = {c: t.report() for c, t in tallies.items()}
    if figures:
        results["quality"] = figures
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"oracle-{name}.json"
    path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"oracle: {args.oracle}")
    print(render(tallies))
    if figures:
        print()
        print(render_quality(args.devset, figures))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
