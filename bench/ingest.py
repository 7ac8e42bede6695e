"""Ingest speed and memory, as a user runs it, against PostgreSQL's own floor.

    python -m bench.ingest                       # every case below, default sizes
    python -m bench.ingest --only dir --only file --only append --base ../base
    python -m bench.ingest --only bulk --messages 1000000
    python -m bench.ingest --only large --gb 2   # peak memory of a 2 GB file
    python -m bench.ingest --json bench/RESULTS-ingest.json

Each case creates databases of its own on the server (``--dsn``, default the local
one; dropped afterwards) and runs the ingest in a child process (wall clock; peak
resident memory from ``wait4``). With ``--base DIR`` every case also runs the code of
that checkout (its ``.venv``) in the same run, right after this checkout's, so the
two see the same machine; the load average is printed with each figure.

Cases:

- *dir*: ``pgsearch ingest DIR`` of the generated corpus of `bench.generate`
  (``--messages``, default 100k, one workspace), and PostgreSQL's floor for the
  same text in the same run: ``COPY`` of every message's content into a plain
  table, then a GIN index on its ``to_tsvector('simple', ...)``.
- *file*: ``PgSearch.ingest_file`` of ``--files`` files of 50 messages of that
  corpus, one by one (ms a file, p50 and p95, and messages a second).
- *append*: ``PgSearch.append`` of one message, ``--appends`` times (p50/p95), and
  the floor: a bare durable one-row ``INSERT`` and ``COMMIT`` on the same server.
- *bulk*: the corpus through ``PgSearch.ingest_paths``, two writer processes on
  disjoint workspaces, as `bench.speed` ingests it (``--messages 1000000`` for 1M).
- *large*: one file of ``--gb`` GB in pgsearch's own format, ingested once (peak
  memory); *grown*: ``--grown-mb`` MB ingested, one line appended, ingested again;
  *blank*: ``--blank-mb`` MB of blank lines around a few messages. Lines of 0.3 to
  1 KB of prose, identifiers and paths, one session per file; as in agent logs, most
  lines (5 of 8) are tool output, which is stored but not indexed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
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

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

WORDS = (
    "the deploy failed because the migration lock was held by a stale worker so we "
    "retried after clearing it cache invalidation version mismatch in resolve_dirs "
    "config parser résumé naïve café tokenizer max_tokens timeout retry backoff jitter "
    "postgres index vacuum analyze partition shard replica primary standby failover "
    "src/pgsearch/ingest.py tests/test_cli.py README.md Dockerfile Makefile kubectl "
    "helm chart values yaml json toml request response handler middleware router"
).split()


def _bodies(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(40, 140))]
        words.insert(rng.randrange(len(words)), f"token{i:05d}")
        out.append(" ".join(words))
    return out


def write_plain(path: Path, target_bytes: int) -> int:
    """A file of pgsearch's format of about `target_bytes`; returns its line count."""
    bodies = _bodies(4096)
    # As in agent logs, most bytes are tool output (stored, not indexed).
    roles = ("user", "tool", "assistant", "tool", "tool", "tool", "tool", "tool")
    written = 0
    lines = 0
    with path.open("w", encoding="utf-8") as fh:
        while written < target_bytes:
            body = bodies[lines % len(bodies)]
            line = json.dumps(
                {"role": roles[lines % len(roles)], "content": f"{body} n{lines}"},
                ensure_ascii=False,
            )
            fh.write(line + "\n")
            written += len(line.encode()) + 1
            lines += 1
    return lines


def write_blank(path: Path, target_bytes: int) -> None:
    with path.open("w", encoding="utf-8") as fh:
        fh.write('{"role": "user", "content": "before the blank lines"}\n')
        block = "\n" * (1 << 20)
        for _ in range(target_bytes >> 20):
            fh.write(block)
        fh.write('{"role": "assistant", "content": "after the blank lines"}\n')


# --- sides: this checkout and, with --base, another ---------------------------------


def python_of(checkout: Path) -> str:
    """The interpreter that runs `checkout`'s code (this one for this checkout)."""
    if checkout.resolve() == ROOT:
        return sys.executable
    python = checkout / ".venv" / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"no {python}: make that checkout's venv first")
    return str(python)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGSEARCH_")}
    for key in ("PGSEARCH_INGEST_CHUNK_BYTES",):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def child(checkout: Path, args: list[str], *, code: str | None = None) -> dict[str, Any]:
    """Run ``python -m pgsearch ARGS`` (or ``python -c CODE ARGS``) of `checkout` under
    ``nice``: wall seconds, the child's own peak RSS (MB, from ``wait4``) and the last
    line it printed."""
    python = python_of(checkout)
    command = ["nice", "-n", "10", python, *(["-c", code] if code else ["-m", "pgsearch"]), *args]
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        start = time.perf_counter()
        proc = subprocess.Popen(command, env=_env(), cwd=checkout, stdout=out_f, stderr=err_f)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out_f.seek(0)
        err_f.seek(0)
        out = out_f.read().decode().strip()
        err = err_f.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command[3:7])} failed ({proc.returncode}): {err or out}")
    return {
        "seconds": round(seconds, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),  # kilobytes on Linux
        "summary": out.splitlines()[-1] if out else "",
    }


def run_ingest(checkout: Path, dsn: str, path: Path) -> dict[str, Any]:
    """``nice pgsearch ingest`` of `checkout` as a child: seconds, peak RSS (MB), summary."""
    return child(checkout, ["--dsn", dsn, "ingest", "-w", "bench", "-q", str(path)])


@contextmanager
def database(admin_dsn: str, checkout: Path, *, migrate: bool = True) -> Iterator[str]:
    """A database of the bench's own (migrated by `checkout`'s code), dropped on exit."""
    name = f"pgsearch_bench_ingest_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0 "
                "LC_COLLATE 'C.UTF-8' LC_CTYPE 'C.UTF-8'"
            ).format(sql.Identifier(name))
        )
    dsn = make_conninfo(admin_dsn, dbname=name)
    try:
        if migrate:
            child(checkout, ["--dsn", dsn, "migrate"])
        yield dsn
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# --- the generated corpus and PostgreSQL's floor -------------------------------------


def corpus(messages: int) -> Path:
    """The directory of session files of the generated corpus of `messages` messages."""
    from bench.generate import Config, ensure_corpus

    cfg = Config(messages=messages)
    out = RESULTS / f"corpus-{cfg.label()}"
    ensure_corpus(cfg, out, quiet=True)
    return out / "corpus"


def contents(root: Path) -> Iterator[str]:
    for path in sorted(root.rglob("*.jsonl")):
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield str(json.loads(line).get("content") or "")


def floor(admin_dsn: str, root: Path) -> dict[str, Any]:
    """PostgreSQL's own cost for the same text: COPY into a plain table, then a GIN
    index on its tsvector (``simple`` configuration, as pgsearch's keys)."""
    texts = list(contents(root))
    with database(admin_dsn, ROOT, migrate=False) as dsn, psycopg.connect(dsn) as conn:
        conn.execute("CREATE TABLE floor (id bigint, body text)")
        conn.commit()
        start = time.perf_counter()
        with conn.cursor() as cur, cur.copy("COPY floor (id, body) FROM STDIN") as copy:
            for i, text in enumerate(texts):
                copy.write_row((i, text))
        conn.commit()
        copied = time.perf_counter() - start
        conn.execute(
            "CREATE INDEX floor_tsv ON floor USING gin (to_tsvector('simple', body)) "
            "WITH (fastupdate = off)"
        )
        conn.commit()
        seconds = time.perf_counter() - start
    return {
        "messages": len(texts),
        "copy_seconds": round(copied, 2),
        "seconds": round(seconds, 2),
        "msgs_per_s": round(len(texts) / seconds, 1),
    }


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median speed, with every round's speed beside it."""
    ordered = sorted(runs, key=lambda r: r["msgs_per_s"])
    middle = dict(ordered[len(ordered) // 2])
    middle["rounds_msgs_per_s"] = [r["msgs_per_s"] for r in runs]
    return middle


def case_dir(admin: str, sides: dict[str, Path], messages: int, rounds: int) -> dict[str, Any]:
    """Rounds of: each side's ``pgsearch ingest DIR``, then the floor; the order of the
    sides turns each round. Each figure is its median round; each ratio the median of
    the ratios within a round (so that both halves of a ratio saw the same load)."""
    root = corpus(messages)
    count = sum(1 for _ in contents(root))
    out: dict[str, Any] = {"messages": count, "files": sum(1 for _ in root.rglob("*.jsonl"))}
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in [*sides, "floor"]}
    for round_ in range(rounds):
        order = list(sides.items())
        for side, checkout in order if round_ % 2 == 0 else reversed(order):
            before = load()
            with database(admin, checkout) as dsn:
                run = run_ingest(checkout, dsn, root)
            run["msgs_per_s"] = round(count / run["seconds"], 1)
            runs[side].append({**run, "load": f"{before} -> {load()}"})
        before = load()
        runs["floor"].append({**floor(admin, root), "load": f"{before} -> {load()}"})
    for side, side_runs in runs.items():
        out[side] = _median_run(side_runs)
    for side in sides:
        ratios = [
            r["msgs_per_s"] / f["msgs_per_s"]
            for r, f in zip(runs[side], runs["floor"], strict=True)
        ]
        out[side]["of_floor"] = round(statistics.median(ratios), 3)
        if side != "new":
            new_vs = [
                n["msgs_per_s"] / b["msgs_per_s"]
                for n, b in zip(runs["new"], runs[side], strict=True)
            ]
            out[f"new_vs_{side}"] = round(statistics.median(new_vs), 2)
    return out


# --- one file at a time, and appends -------------------------------------------------

#: Run in a side's interpreter: ingest_file of each file, one by one (ms each).
_FILES = """
import json, sys, time
from pgsearch import PgSearch
dsn, listing = sys.argv[1], sys.argv[2]
paths = [p for p in open(listing).read().split("\\n") if p]
ms = []
with PgSearch.connect(dsn) as pg:
    pg.ingest_file(paths[0], workspace="warm")
    for path in paths[1:]:
        t0 = time.perf_counter()
        pg.ingest_file(path, workspace="bench")
        ms.append((time.perf_counter() - t0) * 1000)
print(json.dumps(ms))
"""

#: Run in a side's interpreter: appends of one message (ms each).
_APPENDS = """
import json, sys, time
from pgsearch import PgSearch
dsn, n = sys.argv[1], int(sys.argv[2])
words = "deploy failed migration lock stale worker retried cache invalidation".split()
ms = []
with PgSearch.connect(dsn) as pg:
    for i in range(n + 20):
        text = " ".join(words[(i + k) % len(words)] for k in range(12)) + f" n{i}"
        t0 = time.perf_counter()
        pg.append(workspace="bench", session_id=f"s{i % 20}",
                  messages=[{"role": "user" if i % 2 else "assistant", "content": text}])
        if i >= 20:
            ms.append((time.perf_counter() - t0) * 1000)
print(json.dumps(ms))
"""


def percentiles(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)

    def pct(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 2)

    return {
        "n": len(ms),
        "p50_ms": pct(0.5),
        "p95_ms": pct(0.95),
        "mean_ms": round(statistics.fmean(ms), 2),
    }


def fifty_message_files(root: Path, folder: Path, files: int) -> list[Path]:
    """`files` + 1 files of exactly 50 messages cut from the corpus's own lines."""
    lines: list[str] = []
    for path in sorted(root.rglob("*.jsonl")):
        lines += [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        if len(lines) >= 50 * (files + 1):
            break
    out = []
    for i in range(files + 1):
        path = folder / f"file-{i:04d}.jsonl"
        path.write_text("\n".join(lines[50 * i : 50 * (i + 1)]) + "\n", encoding="utf-8")
        out.append(path)
    return out


def _in_turn(sides: dict[str, Path], round_: int) -> list[tuple[str, Path]]:
    """The sides in the order of round `round_` (the lead swaps every round)."""
    order = list(sides.items())
    return order if round_ % 2 == 0 else order[::-1]


def _medians(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's median over the rounds."""
    return {k: round(statistics.median(r[k] for r in runs), 2) for k in runs[0]}


def case_file(
    admin: str, sides: dict[str, Path], messages: int, files: int, rounds: int
) -> dict[str, Any]:
    """`files` files of 50 messages through ``ingest_file``, one by one, each side in
    its own database, in rounds; each figure the median over rounds."""
    root = corpus(messages)
    out: dict[str, Any] = {"files": files, "messages_per_file": 50, "load_before": load()}
    runs: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    with tempfile.TemporaryDirectory(prefix="pgsearch-bench-files-") as tmp:
        paths = fifty_message_files(root, Path(tmp), files)
        listing = Path(tmp) / "listing.txt"
        listing.write_text("\n".join(str(p) for p in paths), encoding="utf-8")
        for round_ in range(rounds):
            for side, checkout in _in_turn(sides, round_):
                with database(admin, checkout) as dsn:
                    run = child(checkout, [dsn, str(listing)], code=_FILES)
                ms = json.loads(run["summary"])
                figures = percentiles(ms)
                figures["msgs_per_s"] = round(50 * len(ms) / (sum(ms) / 1000), 1)
                runs[side].append(figures)
    for side in sides:
        out[side] = _medians(runs[side])
    out["load_after"] = load()
    return out


def bare_commits(dsn: str, n: int) -> list[float]:
    """A durable one-row INSERT and COMMIT, `n` times (ms each)."""
    ms = []
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bare (id bigint, body text)")
        conn.commit()
        for i in range(n + 20):
            t0 = time.perf_counter()
            conn.execute("INSERT INTO bare VALUES (%s, %s)", (i, f"one row {i}"))
            conn.commit()
            if i >= 20:
                ms.append((time.perf_counter() - t0) * 1000)
    return ms


def case_append(admin: str, sides: dict[str, Path], appends: int, rounds: int) -> dict[str, Any]:
    """Appends of one message, each side in its own database, then bare durable
    commits, in rounds; each figure the median over rounds, and each side's p95 over
    the bare commit's p95 the median of the rounds' ratios."""
    out: dict[str, Any] = {"appends": appends, "load_before": load()}
    runs: dict[str, list[dict[str, float]]] = {side: [] for side in [*sides, "bare_commit"]}
    for round_ in range(rounds):
        for side, checkout in _in_turn(sides, round_):
            with database(admin, checkout) as dsn:
                run = child(checkout, [dsn, str(appends)], code=_APPENDS)
            runs[side].append(percentiles(json.loads(run["summary"])))
        with database(admin, ROOT, migrate=False) as dsn:
            runs["bare_commit"].append(percentiles(bare_commits(dsn, appends)))
    for side, side_runs in runs.items():
        out[side] = _medians(side_runs)
    for side in sides:
        ratios = [
            r["p95_ms"] / b["p95_ms"] for r, b in zip(runs[side], runs["bare_commit"], strict=True)
        ]
        out[side]["p95_vs_bare"] = round(statistics.median(ratios), 2)
    out["load_after"] = load()
    return out


# --- bulk: the corpus through ingest_paths, two writers ------------------------------

#: Run in a side's interpreter with the checkout's bench on the path: its writers.
_BULK = """
import json, sys
from bench.speed import corpus_files, ingest_phase
from pathlib import Path
dsn, root = sys.argv[1], Path(sys.argv[2])
bulk, tail = corpus_files(root)
print(json.dumps(ingest_phase(dsn, bulk + tail, 2)))
"""


def case_bulk(admin: str, sides: dict[str, Path], messages: int) -> dict[str, Any]:
    root = corpus(messages)
    out: dict[str, Any] = {"messages": messages}
    for side, checkout in sides.items():
        before = load()
        with database(admin, checkout) as dsn:
            run = child(checkout, [dsn, str(root)], code=_BULK)
        out[side] = {**json.loads(run["summary"]), "load": f"{before} -> {load()}"}
    return out


# --- large files: memory -------------------------------------------------------------


def case_files(admin: str, sides: dict[str, Path], args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    cases = args.only or []
    with tempfile.TemporaryDirectory(prefix="pgsearch-bench-ingest-") as tmp:
        folder = Path(tmp)
        if "grown" in cases:
            path = folder / "grown.jsonl"
            lines = write_plain(path, int(args.grown_mb * (1 << 20)))
            results["grown"] = {"mb": round(path.stat().st_size / (1 << 20), 1), "lines": lines}
            for side, checkout in sides.items():
                with database(admin, checkout) as dsn:
                    first = run_ingest(checkout, dsn, path)
                    with path.open("a", encoding="utf-8") as fh:
                        fh.write('{"role": "user", "content": "one more line"}\n')
                    again = run_ingest(checkout, dsn, path)
                results["grown"][side] = {"first": first, "append_one_line": again}
            path.unlink()
        if "blank" in cases:
            path = folder / "blank.jsonl"
            write_blank(path, int(args.blank_mb * (1 << 20)))
            results["blank"] = {"mb": round(path.stat().st_size / (1 << 20), 1)}
            for side, checkout in sides.items():
                with database(admin, checkout) as dsn:
                    results["blank"][side] = run_ingest(checkout, dsn, path)
            path.unlink()
        if "large" in cases:
            path = folder / "large.jsonl"
            lines = write_plain(path, int(args.gb * (1 << 30)))
            results["large"] = {"mb": round(path.stat().st_size / (1 << 20), 1), "lines": lines}
            for side, checkout in sides.items():
                before = load()
                with database(admin, checkout) as dsn:
                    run = run_ingest(checkout, dsn, path)
                run["msgs_per_s"] = round(lines / run["seconds"], 1)
                results["large"][side] = {**run, "load": f"{before} -> {load()}"}
            path.unlink()
    return results


CASES = ("dir", "file", "append", "bulk", "grown", "blank", "large")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dsn", default=os.environ.get("PGSEARCH_BENCH_DSN", ""))
    parser.add_argument("--base", type=Path, help="another checkout, timed in the same run")
    parser.add_argument("--messages", type=int, default=100_000, help="corpus size (dir, bulk)")
    parser.add_argument("--files", type=int, default=200, help="50-message files (file)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds (dir, file, append)")
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--gb", type=float, default=2.0, help="size of the large file")
    parser.add_argument("--grown-mb", type=float, default=200.0)
    parser.add_argument("--blank-mb", type=float, default=300.0)
    parser.add_argument("--only", choices=CASES, action="append")
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args(argv)
    admin = args.dsn or "postgresql://127.0.0.1:5432/postgres"
    conninfo_to_dict(admin)  # a bad DSN fails here, before any file is written
    args.only = args.only or [c for c in CASES if c != "bulk"]
    sides = {"new": ROOT}
    if args.base is not None:
        sides["base"] = args.base.resolve()
    results: dict[str, Any] = {
        "chunk_bytes": int(os.environ.get("PGSEARCH_INGEST_CHUNK_BYTES", 4 << 20)),
        "load_before": load(),
    }
    if "dir" in args.only:
        results["dir"] = case_dir(admin, sides, args.messages, args.rounds)
    if "file" in args.only:
        results["file"] = case_file(admin, sides, args.messages, args.files, args.rounds)
    if "append" in args.only:
        results["append"] = case_append(admin, sides, args.appends, args.rounds)
    if "bulk" in args.only:
        results["bulk"] = case_bulk(admin, sides, args.messages)
    results.update(case_files(admin, sides, args))
    results["load_after"] = load()
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
