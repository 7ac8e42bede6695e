"""The cost of secret scrubbing per MB of text, on typical and on secret-dense text.

    python -m bench.secrets                 # 4 MB of each, a minute or two
    python -m bench.secrets --mb 16 --json bench/results/secrets.json

*Typical* text is the message text of a generated agent corpus (`bench.generate`:
prose, identifiers, paths, SQL, hashes, UUIDs, a few fake secrets in tool traffic).
*Secret-dense* text puts one credential of a common shape (assignments in several
quoting styles, URLs with passwords, CLI flags, vendor tokens, private keys) in
every line of about 60 bytes. Both are scrubbed in message-sized pieces, as ingest
does; the table gives seconds per MB (UTF-8) and how much of the text the cheap
keyword pre-check lets through untouched.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.generate import Config, generate
from pgsearch import secrets

DENSE_LINES = (
    "export DB_PASSWORD=hunter2-{i} && ./migrate.sh",
    '{{"user": "svc{i}", "password": "correct horse {i}"}}',
    "postgres://app:p@ss{i}@db.internal:5432/app",
    "curl -u admin:Zx9-{i}Qw8 https://api.internal/v1/items",
    "mysql -u root -pS3cret{i} shop < dump.sql",
    "STRIPE_KEY=sk_live_4eC39HqLyjWDarjtT1zd{i:04d}",
    "token ghp_abcdefghijklmnopqrstuvwxyz01234{i:05d}",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRf{i:06d}",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIx{i}In0.SflKxwRJSMeKKF2QT4fw",
    "smtp:\n  user: mailer\n  password: Tr0ub4dor{i}",
)


def typical_texts(target_bytes: int) -> list[str]:
    """Message texts of a generated corpus, about `target_bytes` of them."""
    messages = max(500, target_bytes // 200)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        generate(Config(messages=messages, workspaces=4), out, quiet=True)
        texts: list[str] = []
        size = 0
        for path in sorted((out / "corpus").rglob("*.jsonl")):
            for line in path.read_text(encoding="utf-8").splitlines():
                obj = json.loads(line)
                parts = [obj.get("content") or ""]
                for call in obj.get("tool_calls") or ():
                    parts.append(json.dumps(call.get("function", call), ensure_ascii=False))
                text = "\n".join(p for p in parts if p)
                if text:
                    texts.append(text)
                    size += len(text.encode("utf-8"))
                if size >= target_bytes:
                    return texts
    return texts


def dense_texts(target_bytes: int) -> list[str]:
    texts: list[str] = []
    size = 0
    i = 0
    while size < target_bytes:
        lines = [DENSE_LINES[(i + k) % len(DENSE_LINES)].format(i=i + k) for k in range(8)]
        text = "\n".join(f"step {i + k}: {line}" for k, line in enumerate(lines))
        texts.append(text)
        size += len(text.encode("utf-8"))
        i += 8
    return texts


def measure(texts: list[str], repeat: int) -> dict[str, Any]:
    size = sum(len(t.encode("utf-8")) for t in texts)
    secrets.rule_set()  # compiled once per process, not per text
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for text in texts:
            secrets.scrub(text)
        best = min(best, time.perf_counter() - started)
    untouched = sum(1 for t in texts if not secrets.find_secrets(t))
    changed = len(texts) - untouched
    return {
        "bytes": size,
        "texts": len(texts),
        "seconds": round(best, 4),
        "seconds_per_mb": round(best / (size / 2**20), 4),
        "texts_with_secrets": changed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=4.0, help="MB of each kind of text")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many passes")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    target = int(args.mb * 2**20)
    started = time.perf_counter()
    secrets.rule_set()
    compile_s = time.perf_counter() - started
    results = {
        "rules": len(secrets.rule_set().rules),
        "compile_seconds": round(compile_s, 3),
        "typical": measure(typical_texts(target), args.repeat),
        "dense": measure(dense_texts(target), args.repeat),
    }
    print(f"{results['rules']} gitleaks rules, compiled in {compile_s * 1000:.0f} ms")
    print(f"{'text':<10} {'MB':>6} {'texts':>7} {'with secrets':>13} {'s per MB':>9}")
    for name in ("typical", "dense"):
        r = results[name]
        print(
            f"{name:<10} {r['bytes'] / 2**20:>6.1f} {r['texts']:>7} "
            f"{r['texts_with_secrets']:>13} {r['seconds_per_mb']:>9.3f}"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
