"""pgsearch on Citus against one PostgreSQL: the same answers, and what it costs.

    python -m bench.citus --messages 100000 --workspaces 50

ingests the bench corpus (`bench.generate`) into a database of one PostgreSQL
(``--node``, default the local server, a database made and dropped here) and into a
schema of a Citus cluster (``--cluster``, a coordinator DSN; by default one started
here with ``../shared/tools/citus/cluster.sh``), then runs every query of every class
on both and reports:

- same answers: for each query, the hits (session, seq), their order and their BM25
  scores must be identical; the mismatches are counted per class;
- speed: ingest throughput and search p50/p99 on each side. Here the three servers
  of the cluster share the machine's cores with the client, so the cluster pays the
  coordinator's extra hop without the extra hardware that is the point of it: the
  figures bound its overhead, not its capacity;
- independence of the workspace count: the same queries on the same workspaces after
  the first tenth of the workspaces was loaded, and again once all were (10x the
  tenants): the answers and the latency stay the same, as every statement reads only
  its workspace's entries of its shard's indexes.

Results go to ``bench/RESULTS-citus-<size>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from bench.generate import Config, ensure_corpus
from bench.speed import corpus_files, ingest_phase, load_queries, request_for
from pgsearch import PgSearch
from pgsearch.db.migrate import migrate

HERE = Path(__file__).resolve().parent
TOOLS = Path(os.environ.get("PGSEARCH_CITUS_TOOLS") or HERE.parent.parent / "shared/tools/citus")

#: (session, seq, kind, score) of each hit, in order.
Answer = list[tuple[str, int, str, float]]


def with_options(dsn: str, **settings: str) -> str:
    params = conninfo_to_dict(dsn)
    extra = " ".join(f"-c {k.replace('__', '.')}={v}" for k, v in settings.items())
    params["options"] = f"{params.get('options', '')} {extra}".strip()
    return make_conninfo(**params)  # type: ignore[arg-type]


@contextmanager
def started_cluster(port: int) -> Iterator[str]:
    """A throw-away cluster (coordinator + 2 workers) from the Citus tools folder."""
    script = TOOLS / "cluster.sh"
    if not script.is_file():
        raise SystemExit(f"no {script}: pass --cluster DSN of a Citus coordinator")
    base = Path(tempfile.mkdtemp(prefix="pgsearch-bench-citus-"))
    base.chmod(0o711)
    try:
        out = subprocess.run(
            [str(script), "start", str(base / "c"), str(port)],
            capture_output=True,
            text=True,
            check=True,
        )
        yield out.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([str(script), "stop", str(base / "c")], capture_output=True)
        subprocess.run(["rm", "-rf", str(base)], capture_output=True)


def answers(dsn: str, queries: list[dict[str, Any]]) -> tuple[list[Answer], list[float]]:
    """Each query's hits and its latency (ms, a second run after a warm-up run)."""
    out: list[Answer] = []
    ms: list[float] = []
    with PgSearch.connect(dsn) as pg:
        for q in queries:
            request = request_for(q, per_session=False)
            provider = pg.provider(workspace=q["workspace"], session_id=q.get("session_id"))
            provider.search(request)
            t0 = time.perf_counter()
            result = provider.search(request)
            ms.append((time.perf_counter() - t0) * 1000)
            out.append([(m.session_id, m.seq, m.kind, m.score) for m in result.matches])
    return out, ms


def compare(
    queries: list[dict[str, Any]], one: list[Answer], other: list[Answer]
) -> dict[str, dict[str, int]]:
    """Per class: queries compared, and those whose hits, order or scores differ."""
    by_class: dict[str, dict[str, int]] = {}
    for q, a, b in zip(queries, one, other, strict=True):
        row = by_class.setdefault(q["class"], {"queries": 0, "different": 0, "hits": 0})
        row["queries"] += 1
        row["hits"] += len(a)
        if a != b:
            row["different"] += 1
    return by_class


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 2) if ordered else 0.0


def summary(ms: list[float]) -> dict[str, float]:
    return {
        "p50_ms": pct(ms, 0.5),
        "p99_ms": pct(ms, 0.99),
        "mean_ms": round(statistics.mean(ms), 2),
    }


def load(dsn: str, files: list[tuple[str, str, int]], jobs: int) -> dict[str, Any]:
    report = ingest_phase(dsn, files, jobs)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return report


def run(args: argparse.Namespace) -> dict[str, Any]:
    cfg = Config(
        messages=args.messages, workspaces=args.workspaces, queries_per_class=args.per_class
    )
    corpus = args.corpus or HERE / "results" / f"corpus-{cfg.label()}"
    manifest = ensure_corpus(cfg, corpus, quiet=True)
    queries = load_queries(corpus / "queries.jsonl")
    bulk, tail = corpus_files(corpus / "corpus")
    files = bulk + tail
    workspaces = sorted({f[0] for f in files})
    first = set(workspaces[: max(1, len(workspaces) // 10)])
    early = [q for q in queries if q["workspace"] in first]
    result: dict[str, Any] = {"label": cfg.label(), "corpus": manifest["stats"]}
    name = f"pgsearch_bench_citus_{uuid.uuid4().hex[:8]}"
    node_admin = args.node
    with psycopg.connect(node_admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))
    node = make_conninfo(node_admin, dbname=name)
    cluster_ctx = started_cluster(args.port) if args.cluster is None else _given(args.cluster)
    try:
        with cluster_ctx as coordinator:
            with psycopg.connect(coordinator, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
            cluster = with_options(coordinator, search_path=f"{name},public")
            migrate(node)
            migrate(cluster)
            sides = {"one_node": node, "cluster": cluster}
            for side, dsn in sides.items():
                # The first tenth of the workspaces, then the rest: per-workspace work
                # measured with 10x fewer tenants around.
                head = [f for f in files if f[0] in first]
                load(dsn, head, args.jobs)
                small, small_ms = answers(dsn, early)
                result.setdefault("workspace_count", {})[side] = {
                    "few": {
                        "workspaces": len(first),
                        **summary(small_ms),
                    }
                }
                ingest = load(dsn, [f for f in files if f[0] not in first], args.jobs)
                result.setdefault("ingest", {})[side] = ingest
                result[side] = {"answers": answers(dsn, queries)}
                many, many_ms = answers(dsn, early)
                result["workspace_count"][side]["all"] = {
                    "workspaces": len(workspaces),
                    **summary(many_ms),
                    "same_answers_as_few": many == small,
                }
            one, one_ms = result["one_node"]["answers"]
            other, other_ms = result["cluster"]["answers"]
            result["same_answers"] = compare(queries, one, other)
            result["search"] = {"one_node": summary(one_ms), "cluster": summary(other_ms)}
            del result["one_node"], result["cluster"]
            with psycopg.connect(coordinator, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))
    finally:
        with psycopg.connect(node_admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
    result["note"] = (
        f"{os.cpu_count()} cores shared by the client, one node and the cluster's three "
        "servers (coordinator and two workers): the cluster's figures include the "
        "coordinator's extra hop but none of the extra hardware it is for"
    )
    return result


@contextmanager
def _given(dsn: str) -> Iterator[str]:
    yield dsn


def scaling(args: argparse.Namespace) -> dict[str, Any]:
    """Per-workspace latency with 10x the workspaces, interleaved against drift.

    Two schemas of one cluster: one holding the first tenth of the corpus'
    workspaces, one holding all of them (the same first tenth among them). The
    queries of the first tenth run on both in alternation, round after round, so
    that the load of the machine weighs on both alike.
    """
    cfg = Config(
        messages=args.messages, workspaces=args.workspaces, queries_per_class=args.per_class
    )
    corpus = args.corpus or HERE / "results" / f"corpus-{cfg.label()}"
    ensure_corpus(cfg, corpus, quiet=True)
    queries = load_queries(corpus / "queries.jsonl")
    bulk, tail = corpus_files(corpus / "corpus")
    files = bulk + tail
    workspaces = sorted({f[0] for f in files})
    first = set(workspaces[: max(1, len(workspaces) // 10)])
    early = [q for q in queries if q["workspace"] in first]
    ctx = started_cluster(args.port) if args.cluster is None else _given(args.cluster)
    out: dict[str, Any] = {"label": cfg.label(), "queries": len(early)}
    with ctx as coordinator:
        dsns: dict[str, str] = {}
        for label, chosen in (("few", [f for f in files if f[0] in first]), ("all", files)):
            name = f"pgsearch_bench_scale_{label}_{uuid.uuid4().hex[:6]}"
            with psycopg.connect(coordinator, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
            dsn = with_options(coordinator, search_path=f"{name},public")
            migrate(dsn)
            load(dsn, chosen, args.jobs)
            dsns[label] = dsn
            out[label] = {"workspaces": len({f[0] for f in chosen}), "messages": 0}
            with psycopg.connect(dsn) as conn:
                row = conn.execute("SELECT count(*) FROM messages").fetchone()
                out[label]["messages"] = int(row[0]) if row else 0
        ms: dict[str, list[float]] = {"few": [], "all": []}
        answers_of: dict[str, list[Answer]] = {}
        for _ in range(args.rounds):
            for label in ("few", "all"):
                got, took = answers(dsns[label], early)
                ms[label] += took
                answers_of[label] = got
        for label in ("few", "all"):
            out[label].update(summary(ms[label]))
        out["same_answers"] = answers_of["few"] == answers_of["all"]
        with psycopg.connect(coordinator, autocommit=True) as conn:
            for dsn in dsns.values():
                schema = conninfo_to_dict(dsn)["options"].split("search_path=")[1].split(",")[0]
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--workspaces", type=int, default=50)
    parser.add_argument("--per-class", type=int, default=30, help="queries per class")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--node", default="postgresql://127.0.0.1:5432/postgres")
    parser.add_argument("--cluster", help="a Citus coordinator DSN (default: start one)")
    parser.add_argument("--port", type=int, default=56130, help="first port of a started cluster")
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--scaling",
        action="store_true",
        help="only the workspace-count check: 1/10 vs all workspaces, interleaved",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --scaling")
    args = parser.parse_args(argv)
    if args.scaling:
        scaled = scaling(args)
        out = args.out or HERE / f"RESULTS-citus-scaling-{scaled['label']}.json"
        out.write_text(json.dumps(scaled, indent=2) + "\n", encoding="utf-8")
        json.dump(scaled, sys.stdout, indent=2)
        print()
        return 0 if scaled["same_answers"] else 1
    result = run(args)
    out = args.out or HERE / f"RESULTS-citus-{result['label']}.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    json.dump({k: v for k, v in result.items() if k != "corpus"}, sys.stdout, indent=2)
    print()
    same = all(c["different"] == 0 for c in result["same_answers"].values())
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
