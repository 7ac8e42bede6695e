"""Where the time of ``pgsearch ingest DIR`` goes: a wall-clock profile of every thread.

    pip install py-spy
    python -m bench.profile                       # this checkout, the 100k corpus
    python -m bench.profile --checkout ../base --messages 10000

Runs ``pgsearch ingest`` of the generated corpus (`bench.generate`, one workspace,
a fresh database) under ``py-spy record --idle --threads --subprocesses``, which
samples every thread and process of the command a hundred times a second whether
it runs or waits, then sorts each sample into what it was doing (the first rule of
`RULES` its stack matches) and prints the share of each thread's wall time. A thread
that only ever waited for work (a connection pool's workers) is left out.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from bench.ingest import ROOT, corpus, database, load, python_of

RATE = 100

#: (what the thread was doing, a pattern some frame of its stack matches); first wins.
RULES: tuple[tuple[str, str], ...] = (
    ("idle: a worker waiting for work", r"^(?!.*(ingest|prepare)).*(_worker|worker) \("),
    ("start-up: imports, connecting, finding files", r"^(?!.*(ingest_paths|_prepare|prepare))"),
    ("waiting for the server (round trips)", r"psycopg/waiting\.py|\bwait \(psycopg/"),
    (
        "waiting for another thread or process",
        r"(concurrent/futures/_base|threading|queue|multiprocessing/\w+)\.py:\d+\)$",
    ),
    ("encoding parameters and COPY rows", r"psycopg/(types|_queries|_copy|_py_transformer)"),
    ("secret scan", r"pgsearch/secrets\.py"),
    ("parsing lines (JSON, adapters)", r"pgsearch/adapters/|pgsearch/messages\.py|json/"),
    ("indexing (normalise, tokenise, stem)", r"pgsearch/(indexing|normalize)\.py"),
    ("reading files and digests", r"pgsearch/sources\.py|hashlib|_digest|file_windows"),
    ("vocabulary and statistics deltas", r"apply_deltas|Deltas|deltas|Counter"),
    ("other pgsearch code", r"pgsearch/"),
    ("other", r""),
)
_COMPILED = tuple((name, re.compile(pattern)) for name, pattern in RULES)
#: Threads of the connection pool (they only hand connections out).
_IDLE = re.compile(r"pgsearch-\w+-(worker|scheduler)")


def classify(stack: str) -> str:
    for name, pattern in _COMPILED:
        if pattern.search(stack):
            return name
    return "other"


def parse(raw: str) -> dict[str, Counter[str]]:
    """Samples per thread (``process:thread``) and per category, from py-spy's raw form."""
    threads: dict[str, Counter[str]] = defaultdict(Counter)
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        process, thread, *frames = stack.split(";")
        pid = process.split(":", 1)[0].removeprefix("process ")
        name = thread.split(": ", 1)[-1]
        threads[f"{pid} {name}"][classify(";".join(frames))] += int(count)
    return {
        key: counts
        for key, counts in threads.items()
        if sum(counts.values()) >= RATE // 10 and not _IDLE.search(key)
    }


def profile(checkout: Path, admin: str, messages: int) -> dict[str, Any]:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        raise SystemExit("py-spy is needed: pip install py-spy")
    root = corpus(messages)
    with tempfile.TemporaryDirectory() as tmp, database(admin, checkout) as dsn:
        out = Path(tmp) / "profile.txt"
        command = [spy, "record", "--idle", "--threads", "--subprocesses", "-r", str(RATE)]
        command += ["-f", "raw", "-o", str(out), "--", python_of(checkout), "-m", "pgsearch"]
        command += ["--dsn", dsn, "ingest", "-w", "bench", "-q", str(root)]
        subprocess.run(command, check=True, cwd=checkout, capture_output=True)
        threads = parse(out.read_text(encoding="utf-8"))
    result: dict[str, Any] = {"checkout": str(checkout), "messages": messages, "threads": {}}
    for key, counts in sorted(threads.items(), key=lambda kv: -sum(kv[1].values())):
        total = sum(counts.values())
        result["threads"][key] = {
            "seconds": round(total / RATE, 1),
            "shares": {name: round(n / total, 3) for name, n in counts.most_common()},
        }
    return result


def render(result: dict[str, Any]) -> str:
    lines = [f"{result['checkout']}: pgsearch ingest of {result['messages']:,} messages"]
    for key, row in result["threads"].items():
        lines.append(f"  {key}: {row['seconds']} s")
        for name, share in row["shares"].items():
            lines.append(f"    {share * 100:5.1f} %  {name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dsn", default="postgresql://127.0.0.1:5432/postgres")
    parser.add_argument("--checkout", type=Path, default=ROOT)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    before = load()
    result = profile(args.checkout.resolve(), args.dsn, args.messages)
    result["load"] = f"{before} -> {load()}"
    print(render(result))
    print(f"load average {result['load']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
