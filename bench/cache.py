"""The same database searched through a small and a large buffer cache, paired per query.

    python -m bench.cache --dsn postgresql://127.0.0.1:5432/pgsearch_bench_1m

A database a ``bench.speed --keep-db`` run left (``--dsn``) is dumped and restored
once into a private server (``initdb`` on a free loopback port, run as the
``postgres`` account when this runs as root), vacuumed and analysed, and its data
directory copied while it is stopped: two servers with the same bytes on disk, one
started with ``shared_buffers`` of ``--small`` (PostgreSQL's default, 128MB) and one
with ``--large``. Every other setting is the same on both (autovacuum off, as on the
server `bench.speed` measures). `bench.pairs` then searches both, query by query,
the lead swapping every round, and prints its table (base: the small cache). Both
servers are stopped and their directory deleted at the end.

Server programs come from ``PGSEARCH_PG_BINDIR``, else ``pg_config --bindir``, else
``/usr/lib/postgresql/15/bin``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict

from bench.http import free_port

ROOT = Path(__file__).resolve().parent.parent
OS_USER = "postgres"
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "autovacuum": "off",
    "max_wal_size": "'4GB'",
    "timezone": "'Etc/UTC'",
}


def bindir() -> Path:
    if os.environ.get("PGSEARCH_PG_BINDIR"):
        return Path(os.environ["PGSEARCH_PG_BINDIR"])
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        if out.returncode == 0 and (Path(out.stdout.strip()) / "initdb").is_file():
            return Path(out.stdout.strip())
    return Path("/usr/lib/postgresql/15/bin")


def run(*argv: str | Path) -> None:
    """Run a server program, as `OS_USER` when this process is root."""
    args = [str(a) for a in argv]
    if os.geteuid() == 0:
        args = ["runuser", "-u", OS_USER, "--", *args]
    subprocess.run(args, check=True, capture_output=True, cwd="/")


def configure(data: Path, port: int, shared_buffers: str) -> None:
    lines = {**SETTINGS, "port": str(port), "shared_buffers": f"'{shared_buffers}'"}
    lines["unix_socket_directories"] = f"'{data.parent}'"
    with (data / "postgresql.auto.conf").open("a", encoding="utf-8") as fh:
        fh.writelines(f"{k} = {v}\n" for k, v in lines.items())


def dsn(port: int, db: str) -> str:
    return f"postgresql://postgres@127.0.0.1:{port}/{db}"


@contextmanager
def two_servers(source: str, small: str, large: str) -> Iterator[tuple[str, str]]:
    """(small, large): DSNs of the two copies of `source`, while open."""
    bins = bindir()
    db = str(conninfo_to_dict(source).get("dbname") or "pgsearch_bench")
    tmp = Path(tempfile.mkdtemp(prefix="pgsearch-cache-"))
    started: list[Path] = []
    try:
        if os.geteuid() == 0:
            shutil.chown(tmp, OS_USER)
        dump = tmp / "db.dump"
        print(f"dumping {db} ...", flush=True)
        subprocess.run(
            [bins / "pg_dump", "-Fc", "-Z1", "-f", dump, "-d", source], check=True, cwd="/"
        )
        a, b = tmp / "small", tmp / "large"
        run(bins / "initdb", "-D", a, "-A", "trust", "-U", "postgres", "--no-sync")
        port_a = free_port()
        configure(a, port_a, small)
        run(bins / "pg_ctl", "-D", a, "-l", tmp / "small.log", "-w", "start")
        started.append(a)
        with psycopg.connect(dsn(port_a, "postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{db}"')
        print("restoring, then VACUUM ANALYZE ...", flush=True)
        restore: list[str | Path] = [
            bins / "pg_restore",
            "-j",
            "2",
            "--no-owner",
            "--no-privileges",
        ]
        subprocess.run([*restore, "-d", dsn(port_a, db), dump], check=True, cwd="/")
        with psycopg.connect(dsn(port_a, db), autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        run(bins / "pg_ctl", "-D", a, "-w", "stop")
        started.remove(a)
        dump.unlink()
        run("cp", "-a", a, b)
        port_b = free_port()
        configure(b, port_b, large)
        for data in (a, b):
            run(bins / "pg_ctl", "-D", data, "-l", f"{data}.log", "-w", "start")
            started.append(data)
        yield dsn(port_a, db), dsn(port_b, db)
    finally:
        for data in started:
            run(bins / "pg_ctl", "-D", data, "-w", "-m", "fast", "stop")
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", required=True, help="a database a --keep-db run left")
    parser.add_argument("--small", default="128MB", help="shared_buffers of the base")
    parser.add_argument("--large", default="6GB", help="shared_buffers of the other")
    parser.add_argument("--queries", default=str(ROOT / "bench/results/corpus-1M/queries.jsonl"))
    parser.add_argument("--classes", help="comma-separated (default: all)")
    parser.add_argument("--per-class", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write bench.pairs' results here too")
    args = parser.parse_args(argv)
    with two_servers(args.dsn, args.small, args.large) as (small, large):
        pairs = [sys.executable, "-m", "bench.pairs", "--base", str(ROOT)]
        pairs += ["--base-dsn", small, "--dsn", large, "--queries", args.queries]
        pairs += ["--per-class", str(args.per_class), "--rounds", str(args.rounds)]
        if args.classes:
            pairs += ["--classes", args.classes]
        if args.json:
            pairs += ["--json", args.json]
        print(f"shared_buffers {args.small} (base) against {args.large}", flush=True)
        return subprocess.run(pairs, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
