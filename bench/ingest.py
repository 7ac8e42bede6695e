"""Ingest of large files: peak memory and time, as a user runs `pgsearch ingest`.

    python -m bench.ingest                       # 2 GB, 200 MB + one line, 300 MB blank
    python -m bench.ingest --gb 0.2 --grown-mb 50 --blank-mb 50   # a quick look
    python -m bench.ingest --json bench/RESULTS-ingest.json

Each case writes its file in a temporary directory (deleted afterwards), creates a
database of its own on the server (``--dsn``, default the local one; dropped
afterwards), and runs ``pgsearch ingest`` as a child process under ``nice``; the
child's peak resident memory comes from ``wait4`` (``ru_maxrss``), its time from the
wall clock. Files are in pgsearch's own format: lines of 0.3 to 1 KB of prose,
identifiers and paths, one session per file; as in agent logs, most lines (5 of 8)
are tool output, which is stored but not indexed.

Cases:

- *large*: one file of ``--gb`` GB, ingested once;
- *grown*: a file of ``--grown-mb`` MB ingested, then one line appended and ingested
  again (the second run is the one measured; the first is shown too);
- *blank*: ``--blank-mb`` MB of blank lines around a few messages.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgsearch.db.migrate import migrate

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


def run_ingest(dsn: str, path: Path) -> dict[str, Any]:
    """``nice pgsearch ingest`` as a child: seconds, peak RSS (MB) and its summary."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGSEARCH_")}
    for key in ("PGSEARCH_INGEST_CHUNK_BYTES",):
        if key in os.environ:
            env[key] = os.environ[key]
    command = [
        "nice", "-n", "10", sys.executable, "-m", "pgsearch", "--dsn", dsn,
        "ingest", "-w", "bench", "-q", str(path),
    ]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    out = proc.stdout.read().decode() if proc.stdout else ""
    err = proc.stderr.read().decode() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"ingest failed ({proc.returncode}): {err or out}")
    return {
        "seconds": round(seconds, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),  # kilobytes on Linux
        "summary": out.strip().splitlines()[-1] if out.strip() else "",
    }


class Database:
    """A database of the bench's own on the server, migrated, dropped on exit."""

    def __init__(self, admin_dsn: str) -> None:
        self.admin_dsn = admin_dsn
        self.name = f"pgsearch_bench_ingest_{uuid.uuid4().hex[:8]}"
        self.dsn = make_conninfo(admin_dsn, dbname=self.name)

    def __enter__(self) -> Database:
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.name)))
        migrate(self.dsn)
        return self

    def __exit__(self, *exc: object) -> None:
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self.name))
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dsn", default=os.environ.get("PGSEARCH_BENCH_DSN", ""))
    parser.add_argument("--gb", type=float, default=2.0, help="size of the large file")
    parser.add_argument("--grown-mb", type=float, default=200.0)
    parser.add_argument("--blank-mb", type=float, default=300.0)
    parser.add_argument("--only", choices=("large", "grown", "blank"), action="append")
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args(argv)
    admin = args.dsn or "postgresql://127.0.0.1:5432/postgres"
    conninfo_to_dict(admin)  # a bad DSN fails here, before any file is written
    cases = args.only or ["grown", "blank", "large"]
    results: dict[str, Any] = {
        "chunk_bytes": int(os.environ.get("PGSEARCH_INGEST_CHUNK_BYTES", 4 << 20))
    }
    with tempfile.TemporaryDirectory(prefix="pgsearch-bench-ingest-") as tmp:
        folder = Path(tmp)
        if "grown" in cases:
            path = folder / "grown.jsonl"
            lines = write_plain(path, int(args.grown_mb * (1 << 20)))
            with Database(admin) as db:
                first = run_ingest(db.dsn, path)
                with path.open("a", encoding="utf-8") as fh:
                    fh.write('{"role": "user", "content": "one more line"}\n')
                again = run_ingest(db.dsn, path)
            results["grown"] = {
                "mb": round(path.stat().st_size / (1 << 20), 1),
                "lines": lines,
                "first": first,
                "append_one_line": again,
            }
            path.unlink()
        if "blank" in cases:
            path = folder / "blank.jsonl"
            write_blank(path, int(args.blank_mb * (1 << 20)))
            with Database(admin) as db:
                results["blank"] = {
                    "mb": round(path.stat().st_size / (1 << 20), 1),
                    **run_ingest(db.dsn, path),
                }
            path.unlink()
        if "large" in cases:
            path = folder / "large.jsonl"
            lines = write_plain(path, int(args.gb * (1 << 30)))
            with Database(admin) as db:
                results["large"] = {
                    "mb": round(path.stat().st_size / (1 << 20), 1),
                    "lines": lines,
                    **run_ingest(db.dsn, path),
                }
            path.unlink()
    print(f"{'case':<28} {'MB':>8} {'seconds':>9} {'peak RSS MB':>12}")
    for name, row in results.items():
        if not isinstance(row, dict):
            continue
        runs = [(name, row)] if "seconds" in row else [
            (f"{name} ({k})", {**v, "mb": row["mb"]}) for k, v in row.items() if isinstance(v, dict)
        ]  # fmt: skip
        for label, r in runs:
            print(f"{label:<28} {r['mb']:>8} {r['seconds']:>9} {r['peak_rss_mb']:>12}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
