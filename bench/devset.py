"""A synthetic labelled development set: sessions with planted facts and questions.

    python -m bench.devset --out bench/results/devset

Each fact is one message planted in a session of filler agent work (the filler of
`bench.generate`); sometimes the assistant restates it in the next message, and then
both messages are relevant. The question about a fact shares its key entities
(code names, components, numbers) but is worded differently, as a person asks
later ("who owns ...", "which port ..."). Other sessions mention the same code names
or components in other contexts, so a question's words alone do not point at one
message. About one fact in ten is written with accents and one in ten in CJK.

Use it to tune, never to prove: real-world quality is judged on data nobody here
has seen. Output: ``OUT/corpus/<workspace>/<session>.jsonl`` and
``OUT/queries.jsonl`` (``qid``, ``query``, ``workspace``, ``relevant``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.generate import BASE_TIME, Config, TextMaker, Vocabulary

CODENAMES = """
Falcon Orchid Nimbus Quartz Juniper Cobalt Saffron Tundra Marlin Zephyr Pebble Lumen
Harbor Cinder Aspen Vortex Kestrel Basalt Comet Dahlia Ember Fjord Garnet Heron Indigo
Jasper Koala Lagoon Magnet Nectar Onyx Prairie Quill Raven Sierra Thistle Umber Velvet
Walnut Yarrow Zircon Acorn Beacon Canyon Delta Echo Flint Glacier Hazel Iris
""".split()

COMPONENTS = [
    "billing service",
    "scheduler",
    "search indexer",
    "auth gateway",
    "payment webhook",
    "image resizer",
    "report exporter",
    "notification worker",
    "inventory sync",
    "checkout page",
    "audit log",
    "rate limiter",
    "feature flags",
    "email renderer",
    "metrics collector",
    "session store",
]
TECH = [
    "PostgreSQL advisory locks",
    "Redis streams",
    "a token bucket",
    "exponential backoff with jitter",
    "Kafka consumer groups",
    "SQLite in WAL mode",
    "gRPC streaming",
    "a materialized view",
    "server-sent events",
    "a bloom filter",
    "optimistic concurrency",
    "a circuit breaker",
]
PEOPLE = ["Priya", "Tomasz", "Aiko", "Mateo", "Fatima", "Lars", "Chidi", "Ingrid", "Ravi", "Sofia"]
PEOPLE_ACCENTED = ["José", "Zoë", "Björn", "Anaïs", "Łukasz", "Søren", "Inés", "Dvořák", "Renée"]
CITIES_ACCENTED = ["Montréal", "Zürich", "Kraków", "São Paulo", "Málaga", "Göteborg", "Tromsø"]
ERRORS = ["ConnectionResetError", "OOMKilled", "DeadlockDetected", "ETIMEDOUT", "SIGSEGV"]
CJK_COMPONENTS = ["数据库迁移", "搜索索引", "支付接口", "用户会话", "日志服务", "缓存配置"]
CJK_DAYS = ["周一", "周二", "周三", "周四", "周五"]


@dataclass(frozen=True, slots=True)
class Fact:
    statement: str
    question: str
    #: How the assistant restates the fact (None: not restated).
    restatement: str | None
    #: A decoy that shares the entities but says something else.
    decoy: str


def _fact(rng: random.Random) -> Fact:
    code = rng.choice(CODENAMES)
    comp = rng.choice(COMPONENTS)
    other = rng.choice([c for c in COMPONENTS if c != comp])
    tech = rng.choice(TECH)
    person = rng.choice(PEOPLE)
    n = rng.choice((3, 5, 8, 12, 15, 30, 45, 90))
    port = rng.randrange(3000, 9999)
    version = f"{rng.randrange(1, 9)}.{rng.randrange(0, 20)}.{rng.randrange(0, 9)}"
    error = rng.choice(ERRORS)
    makers: list[Callable[[], Fact]] = [
        lambda: Fact(
            f"We decided to rebuild the {code} {comp} on {tech}; the old polling loop kept "
            "timing out under load.",
            f"what approach did we choose for {code} {comp}",
            f"Agreed, {tech} it is for {code}.",
            f"The {code} {other} dashboard shows the polling loop is fine for now.",
        ),
        lambda: Fact(
            f"The {code} {comp} crashes with {error} whenever an upload is bigger than {n} MB.",
            f"why does {code} {comp} fail on large files",
            None,
            f"{code} {other} uploads finished without errors after the restart.",
        ),
        lambda: Fact(
            f"Set the {code} {comp} timeout to {n} seconds in config/{comp.split()[0]}.yaml.",
            f"where is the {code} {comp} timeout configured",
            f"Done: timeout for {code} is {n}s now.",
            f"The {code} {other} has no timeout configured at all.",
        ),
        lambda: Fact(
            f"{person} owns the {code} {comp}, so ask {person} before changing its schema.",
            f"who is responsible for {code} {comp}",
            None,
            f"{person} reviewed the {code} {other} pull request yesterday.",
        ),
        lambda: Fact(
            f"In staging the {code} {comp} listens on port {port}, not the default one.",
            f"which port does {code} {comp} use on staging",
            f"Noted, port {port} for {code} in staging.",
            f"The {code} {other} in production sits behind the shared load balancer.",
        ),
        lambda: Fact(
            f"We rolled back {code} {comp} release {version} because of a memory leak in "
            "the cache layer.",
            f"why was {code} {comp} {version} reverted",
            None,
            f"{code} {other} release {version} went out on Tuesday without incident.",
        ),
        lambda: Fact(
            f"The flaky test in {code} {comp} was fixed by freezing the clock in the retry tests.",
            f"how did we fix the flaky {code} {comp} tests",
            f"Right, frozen clock fixed {code} flakiness.",
            f"Tests for {code} {other} are still slow but they pass.",
        ),
    ]
    return rng.choice(makers)()


def _accented_fact(rng: random.Random) -> Fact:
    code = rng.choice(CODENAMES)
    person = rng.choice(PEOPLE_ACCENTED)
    city = rng.choice(CITIES_ACCENTED)
    amount = rng.randrange(100, 9999)
    return Fact(
        f"{person} from the {city} office approved the {code} invoice of {amount} euros.",
        # Typed without accents, as most people type on an English keyboard.
        f"who approved the {code} invoice from {_ascii(city)}",
        None,
        f"The {code} invoice template still shows the old address of {_ascii(person)}.",
    )


def _cjk_fact(rng: random.Random) -> Fact:
    code = rng.choice(CODENAMES)
    comp = rng.choice(CJK_COMPONENTS)
    day = rng.choice(CJK_DAYS)
    other = rng.choice([c for c in CJK_COMPONENTS if c != comp])
    return Fact(
        f"{code} 的{comp}已经在{day}完成了,没有停机。",
        f"{code} {comp}",
        None,
        f"{code} 的{other}还在测试中。",
    )


def _ascii(text: str) -> str:
    import unicodedata

    decomposed = unicodedata.normalize("NFKD", text)
    out = "".join(c for c in decomposed if not unicodedata.combining(c))
    return out.translate(str.maketrans("øŁł", "oLl"))


def generate_devset(
    out: Path,
    *,
    seed: int = 11,
    workspaces: int = 5,
    sessions: int = 300,
    facts: int = 300,
    session_length: int = 40,
) -> dict[str, Any]:
    """Write a development corpus and its labelled questions under `out`."""
    rng = random.Random(seed)
    cfg = Config(messages=sessions * session_length, seed=seed)
    maker = TextMaker(Vocabulary(random.Random(seed + 1)), rng, cfg)
    # Filler sessions first (in memory), then facts and decoys are planted.
    corpus: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for i in range(sessions):
        ws = f"dev{i % workspaces}"
        sid = f"{ws}-s{i:04d}"
        n = max(6, int(rng.lognormvariate(0, 0.5) * session_length))
        corpus[(ws, sid)] = [
            {
                "role": "user" if j % 2 == 0 else "assistant",
                "content": maker.latin(maker.words_for("user" if j % 2 == 0 else "assistant"))[0],
            }
            for j in range(n)
        ]
    keys = sorted(corpus)
    planted: list[tuple[str, str, int, str, Fact]] = []
    for k in range(facts):
        r = rng.random()
        fact = _cjk_fact(rng) if r < 0.1 else _accented_fact(rng) if r < 0.2 else _fact(rng)
        ws, sid = rng.choice(keys)
        lines = corpus[(ws, sid)]
        pos = rng.randrange(0, len(lines) - 1) // 2 * 2  # a user position
        role = "user" if rng.random() < 0.7 else "assistant"
        lines.insert(pos, {"role": role, "content": fact.statement, "_fact": k})
        if fact.restatement:
            lines.insert(pos + 1, {"role": "assistant", "content": fact.restatement, "_fact": k})
        # Decoys go to other sessions of the same workspace.
        same_ws = [key for key in keys if key[0] == ws and key[1] != sid]
        for _ in range(rng.choice((1, 2))):
            decoy_lines = corpus[rng.choice(same_ws)]
            decoy_lines.insert(
                rng.randrange(len(decoy_lines)), {"role": "user", "content": fact.decoy}
            )
        planted.append((ws, sid, k, fact.question, fact))
    # Seq is the line number, known only once every insertion is done.
    relevant: dict[int, list[list[Any]]] = {}
    (out / "corpus").mkdir(parents=True, exist_ok=True)
    messages = 0
    for (ws, sid), lines in corpus.items():
        wdir = out / "corpus" / ws
        wdir.mkdir(exist_ok=True)
        t = BASE_TIME - timedelta(days=rng.randrange(300))
        rows = []
        for seq, obj in enumerate(lines):
            k = obj.pop("_fact", None)
            if k is not None:
                relevant.setdefault(k, []).append([sid, seq])
            t += timedelta(seconds=rng.randrange(5, 300))
            obj["created_at"] = t.strftime("%Y-%m-%dT%H:%M:%SZ")
            rows.append(json.dumps(obj, ensure_ascii=False))
        messages += len(rows)
        (wdir / f"{sid}.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    with (out / "queries.jsonl").open("w", encoding="utf-8") as fh:
        for ws, _sid, k, question, _ in planted:
            fh.write(
                json.dumps(
                    {
                        "qid": f"dev-{k:04d}",
                        "query": question,
                        "workspace": ws,
                        "relevant": relevant[k],
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
    manifest = {"seed": seed, "sessions": sessions, "messages": messages, "facts": facts}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate the synthetic labelled dev set.")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent / "results" / "devset"
    )
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--facts", type=int, default=300)
    args = parser.parse_args(argv)
    manifest = generate_devset(args.out, seed=args.seed, sessions=args.sessions, facts=args.facts)
    print(f"{manifest['messages']:,} messages, {manifest['facts']} questions -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
