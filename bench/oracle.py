"""Does the search rank as an exhaustive run of its own scorer would?

    python -m bench.oracle --dsn DSN --queries bench/results/corpus-100k/queries.jsonl
    python -m bench.oracle --dsn DSN --devset locomo

The oracle is `pgsearch.search.SearchEngine` with ``exhaustive=True``: the same
expansions, scorer, evidence rules, floor and paging, over every message holding
any expansion of any query word and every session whose title or summary matches,
with no candidate cap. Each query runs through both, with the default request (one
best hit per session) and with all hits; a query agrees when the first ten hits are
the same entries in the same order. The database is one a benchmark left
(``bench.speed --keep-db``, ``bench.ab``); it is only read.

Prints the share of agreeing searches per query class (and, for searches the engine
marks, the share certified exact) and writes ``bench/results/oracle-<name>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import locomo
from bench.speed import RESULTS, load_queries, request_for, sample_queries
from pgsearch import PgSearch, SessionQueryRequest, SessionQueryResult
from pgsearch.search import SearchEngine

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

    def report(self) -> dict[str, Any]:
        n = max(self.searches, 1)
        return {
            "searches": self.searches,
            "identical": self.identical,
            "identical_share": round(self.identical / n, 4),
            "approximate": self.approximate,
            "certified_share": round((self.searches - self.approximate) / n, 4),
            "wrong_exact": self.wrong_exact,
            "differ_examples": self.differ[:8],
        }


def top(result: SessionQueryResult, k: int = 10) -> list[Key]:
    """The first `k` hits as (session, seq, kind): what must agree, in order."""
    return [(m.session_id, m.seq, m.kind) for m in result.matches[:k]]


def approximate(result: SessionQueryResult) -> bool:
    """Whether the engine says it could not prove its first page exact."""
    return bool(getattr(result, "approximate", False))


def compare(pg: PgSearch, cases: Iterable[Case]) -> dict[str, Tally]:
    """Each case through the engine and the oracle, tallied per class."""
    oracle = SearchEngine(pg.settings, exhaustive=True)
    engine = pg._engine
    out: dict[str, Tally] = {}
    for case in cases:
        tally = out.setdefault(case.cls, Tally())
        provider = pg.provider(workspace=case.workspace, session_id=case.session_id)
        t0 = time.perf_counter()
        got = provider.search(case.request)
        t1 = time.perf_counter()
        pg._engine = oracle
        try:
            want = pg.provider(workspace=case.workspace, session_id=case.session_id).search(
                case.request
            )
        finally:
            pg._engine = engine
        t2 = time.perf_counter()
        tally.searches += 1
        tally.ms_engine.append((t1 - t0) * 1000)
        tally.ms_oracle.append((t2 - t1) * 1000)
        same = top(got) == top(want)
        tally.identical += same
        marked = approximate(got)
        tally.approximate += marked
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


def render(tallies: dict[str, Tally]) -> str:
    lines = [
        "| class | searches | identical to the oracle | certified exact "
        "| marked exact but differ |",
        "|---|---:|---:|---:|---:|",
    ]
    total = Tally()
    for cls, t in tallies.items():
        r = t.report()
        lines.append(
            f"| {cls} | {t.searches} | {r['identical_share']:.3f} | {r['certified_share']:.3f} "
            f"| {t.wrong_exact} |"
        )
        total.searches += t.searches
        total.identical += t.identical
        total.approximate += t.approximate
        total.wrong_exact += t.wrong_exact
    r = total.report()
    lines.append(
        f"| all | {total.searches} | {r['identical_share']:.3f} | {r['certified_share']:.3f} "
        f"| {total.wrong_exact} |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", required=True, help="a database a benchmark left")
    parser.add_argument("--queries", type=Path, help="a benchmark corpus's queries.jsonl")
    parser.add_argument("--devset", choices=("locomo",))
    parser.add_argument("--devset-dir", type=Path)
    parser.add_argument("--sample", type=int, default=0, help="first N queries of each class")
    parser.add_argument("--name", default="", help="results name")
    args = parser.parse_args(argv)
    if args.devset:
        cases = devset_cases(locomo.locate(args.devset, args.devset_dir))
        name = args.name or args.devset
    elif args.queries:
        queries = load_queries(args.queries)
        if args.sample:
            queries = sample_queries(queries, args.sample)
        cases = bench_cases(queries)
        name = args.name or args.queries.parent.name
    else:
        parser.error("give --queries or --devset")
    with PgSearch.connect(args.dsn) as pg:
        tallies = compare(pg, cases)
    results = {c: t.report() for c, t in tallies.items()}
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"oracle-{name}.json"
    path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(render(tallies))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
