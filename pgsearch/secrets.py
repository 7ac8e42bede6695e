"""Secret scrubbing: what no index, excerpt, title or listing may ever show.

Two kinds of detector find secrets; every span either finds is replaced by
``[redacted]``:

1. **Token shapes** from the gitleaks rule set (``data/gitleaks.toml``, vendored with
   its licence; see that file for how to update it), run with gitleaks' own
   semantics: a rule runs only when one of its keywords occurs in the text, its
   secret is the first non-empty capture group, a secret at or below the rule's
   entropy is ignored, and the global and per-rule allowlists and stopwords apply.
   A few shapes that rule set matches only at exact lengths (or, for documented
   AWS example keys, not at all) are added with looser bounds, since logs carry
   truncated and example credentials alike.
2. **Assignments to secret-like keys** in every quoting style: ``KEY=value``,
   ``export KEY='…'``, ``"key": "…"``, ``key: value`` (YAML), ``\\"key\\": \\"…\\"``
   (JSON inside a JSON string), CLI flags (``--password X``, ``mysql -pX``,
   ``docker login -p X``, ``sshpass -p X``), credentials in URLs (the password may
   itself contain ``@``) and ``Authorization`` headers. A key is split into words
   (``DB_PASSWORD``, ``SecretAccessKey``, ``_authToken``); a *strong* word
   (password, secret, token, passphrase, api key, ...) makes any literal value a
   secret, a *weak* one (key, auth, credential) only a random-looking value (the
   high-entropy check). Values that are code or placeholders survive
   (``password: str``, ``token = get_token()``, ``${DB_PASSWORD}``, ``<password>``),
   and so do keys that merely mention a secret (``password_reset_view``,
   ``max_tokens``, ``secret_name``).

All patterns run on RE2 (``google-re2``): matching time is linear in the text
whatever it contains, so a hostile log cannot make ingest backtrack for minutes.
Most text holds no secret; one RE2 set match over the lower-cased text finds which
rule keywords occur at all, and text with none of them is returned untouched. A
rule's pattern (and its allowlists) is compiled the first time one of its keywords
occurs, once per process: compiling all ~210 up front would cost a short command
(a search scrubbing ten excerpts) far more than its own work.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import marshal
import math
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import re2

REDACTED = "[redacted]"

#: The vendored rule set, read from the package directory (``importlib.resources``
#: would cost a short command more than reading the file does).
RULES_FILE = os.path.join(os.path.dirname(__file__), "data", "gitleaks.toml")

# --- gitleaks rules ------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Allowlist:
    """Findings a rule (or every rule) lets through: gitleaks' ``[[allowlists]]``."""

    #: What the regexes look at: the ``secret``, the whole ``match`` or the ``line``.
    target: str
    #: Its regexes as one alternation ("any of them matches" in one search), or "".
    pattern: str
    stopwords: tuple[str, ...]
    #: ``AND``: every configured check must hold; ``OR``: any one.
    all_required: bool

    def allows(self, secret: str, match: str, line: str) -> bool:
        subject = {"match": match, "line": line}.get(self.target, secret)
        checks: list[bool] = []
        if self.pattern:
            checks.append(compiled(self.pattern).search(subject) is not None)
        if self.stopwords:
            # One RE2 set of them (a rule may have over a thousand).
            checks.append(bool(_literal_set(self.stopwords).Match(secret.lower())))
        if not checks:
            return False
        return all(checks) if self.all_required else any(checks)


@dataclass(frozen=True, kw_only=True, slots=True)
class Rule:
    id: str
    pattern: str
    keywords: tuple[str, ...]
    entropy: float
    secret_group: int
    allowlists: tuple[Allowlist, ...]

    @property
    def regex(self) -> Any:
        """The compiled pattern (compiled on first use, then kept)."""
        return compiled(self.pattern)


@cache
def compiled(pattern: str) -> Any:
    """`pattern` compiled by RE2, once per process."""
    return re2.compile(pattern)


class _Pattern:
    """An RE2 pattern compiled on first use (`compiled`): every one of pgsearch's own
    patterns waits behind a keyword, so most texts never need most of them."""

    __slots__ = ("pattern",)

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern

    def __getattr__(self, name: str) -> Any:
        return getattr(compiled(self.pattern), name)


@dataclass(frozen=True, kw_only=True, slots=True)
class RuleSet:
    rules: tuple[Rule, ...]
    #: Rules without keywords run on every text.
    always: tuple[Rule, ...]
    #: One RE2 set of every keyword (lower case); index i is `keywords[i]`.
    keyword_set: Any
    keywords: tuple[str, ...]
    by_keyword: dict[str, tuple[Rule, ...]]
    allowlists: tuple[Allowlist, ...]


def _allowlist(raw: dict[str, Any]) -> Allowlist | None:
    """One gitleaks allowlist; None when it only applies to paths or commits."""
    scoped = bool(raw.get("paths") or raw.get("commits"))
    all_required = str(raw.get("condition", "OR")).upper() == "AND"
    if scoped and all_required:
        return None  # needs a path or commit to match: never holds for bare text
    patterns = [str(p) for p in raw.get("regexes", ())]
    stopwords = tuple(str(w).lower() for w in raw.get("stopwords", ()))
    if not patterns and not stopwords:
        return None
    # RE2 scopes flags such as (?i) to the group they appear in, so joining the
    # patterns as groups keeps each one's meaning.
    joined = "|".join(f"(?:{p})" for p in patterns)
    return Allowlist(
        target=str(raw.get("regexTarget", "secret")),
        pattern=joined,
        stopwords=stopwords,
        all_required=all_required,
    )


def load_rules(text: str) -> RuleSet:
    """Parse a gitleaks configuration (its TOML) into a `RuleSet`.

    Rules scoped to file paths and path-only rules are skipped: pgsearch scrubs
    text that has no path.
    """
    import tomllib

    return _rule_set_of(tomllib.loads(text))


#: Keywords for a rule that has none (gitleaks runs such a rule on every text), by the
#: rule's pattern: literals of which every match holds one in its case-insensitive
#: part. gitleaks' ``database-password`` matches ``db_passw(or)d``,
#: ``database_passw(or)d`` or ``pwd``. The literals hold no letter whose case fold
#: reaches beyond ASCII (``s`` folds with U+017F, ``k`` with U+212A), so a text whose
#: lower case holds none of them cannot match; `tests/unit/test_policy.py` checks that
#: over every code point and against the rule run on every text.
REQUIRED_LITERALS: dict[str, tuple[str, ...]] = {
    r"""[\w.-]{0,50}?(?i:[\w.-]{0,50}?(?:db_passw(?:or)?d|database_passw(?:or)?d|pwd)"""
    r"""(?:[ \t\w.-]{0,20})[\s'"]{0,3})(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)[\x60'"\s=]{0,5}"""
    r"""([a-zA-Z0-9:;<@=},!$?^]{1,100})(?:[\x60'"\s;]|\\[nr]|$)""": ("pwd", "db_pa", "databa"),
}


def _rule_set_of(config: dict[str, Any]) -> RuleSet:
    rules: list[Rule] = []
    for raw in config.get("rules", ()):
        if "regex" not in raw or raw.get("path") or raw.get("skipReport"):
            continue
        allowlists = [a for a in map(_allowlist, raw.get("allowlists", ())) if a is not None]
        if "allowlist" in raw:  # the older singular form
            single = _allowlist(raw["allowlist"])
            if single is not None:
                allowlists.append(single)
        rules.append(
            Rule(
                id=str(raw["id"]),
                pattern=str(raw["regex"]),
                keywords=tuple(str(k).lower() for k in raw.get("keywords", ()))
                or REQUIRED_LITERALS.get(str(raw["regex"]), ()),
                entropy=float(raw.get("entropy", 0.0)),
                secret_group=int(raw.get("secretGroup", 0)),
                allowlists=tuple(allowlists),
            )
        )
    global_raw = list(config.get("allowlists", ()))
    if "allowlist" in config:
        global_raw.append(config["allowlist"])
    global_lists = tuple(a for a in map(_allowlist, global_raw) if a is not None)
    keywords = tuple(sorted({k for r in rules for k in r.keywords}))
    by_keyword: dict[str, list[Rule]] = {k: [] for k in keywords}
    for rule in rules:
        for k in dict.fromkeys(rule.keywords):
            by_keyword[k].append(rule)
    return RuleSet(
        rules=tuple(rules),
        always=tuple(r for r in rules if not r.keywords),
        keyword_set=_literal_set(keywords),
        keywords=keywords,
        by_keyword={k: tuple(v) for k, v in by_keyword.items()},
        allowlists=global_lists,
    )


@cache
def _literal_set(words: tuple[str, ...]) -> Any:
    """One RE2 set matching any of `words` literally (compiled once per tuple)."""
    matcher = re2.Set.SearchSet()
    for word in words:
        matcher.Add(re2.escape(word))
    matcher.Compile()
    return matcher


@cache
def rule_set() -> RuleSet:
    """The vendored gitleaks rules, loaded once per process (on first use).

    The parsed file is kept beside it as Python keeps bytecode (``__pycache__``,
    named by the digest of the file's bytes, written only where it may be): reading
    that back costs a fraction of parsing the TOML again, which a short command
    would otherwise pay every time.
    """
    with open(RULES_FILE, "rb") as fh:
        raw = fh.read()
    cache_file = os.path.join(
        os.path.dirname(RULES_FILE),
        "__pycache__",
        f"gitleaks.{hashlib.sha256(raw).hexdigest()[:24]}.marshal",
    )
    try:
        with open(cache_file, "rb") as fh:
            config = marshal.load(fh)
    except (OSError, EOFError, ValueError, TypeError):
        import tomllib

        config = tomllib.loads(raw.decode("utf-8"))
        _keep(cache_file, config)
    return _rule_set_of(config)


def _keep(path: str, config: dict[str, Any]) -> None:
    """Write the parsed rules for the next process; any failure leaves no file."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as fh:
            marshal.dump(config, fh)
        os.replace(tmp, path)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            os.remove(tmp)


def shannon_entropy(text: str) -> float:
    """Bits per character of `text` (gitleaks' measure of randomness)."""
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def _line_around(text: str, start: int, end: int) -> str:
    first = text.rfind("\n", 0, start) + 1
    last = text.find("\n", end)
    return text[first : len(text) if last < 0 else last]


def _subject(text: str) -> str | bytes:
    """What the patterns run on: ASCII text as bytes, where RE2's offsets are already
    character offsets (for str, the binding converts every offset it returns)."""
    return text.encode("ascii") if text.isascii() else text


def _gitleaks_spans(text: str, lowered: str, rules: RuleSet) -> Iterator[tuple[int, int]]:
    hits = rules.keyword_set.Match(lowered) or ()
    selected: dict[str, Rule] = {r.id: r for r in rules.always}
    for index in hits:
        for rule in rules.by_keyword[rules.keywords[index]]:
            selected[rule.id] = rule
    subject = _subject(text)
    for rule in selected.values():
        for m in rule.regex.finditer(subject):
            span = _secret_span(rule, m, text)
            if span is None:
                continue
            secret = text[span[0] : span[1]]
            if rule.entropy and shannon_entropy(secret) <= rule.entropy:
                continue
            match = text[m.start() : m.end()].strip("\n")
            line = _line_around(text, m.start(), m.end())
            if any(a.allows(secret, match, line) for a in rules.allowlists):
                continue
            if any(a.allows(secret, match, line) for a in rule.allowlists):
                continue
            yield span


def _secret_span(rule: Rule, m: Any, text: str) -> tuple[int, int] | None:
    groups = m.re.groups
    if rule.secret_group and rule.secret_group <= groups:
        start, end = m.span(rule.secret_group)
        return (start, end) if end > start else None
    for g in range(1, groups + 1):
        start, end = m.span(g)
        if end > start:
            return start, end
    start, end = m.span()
    # gitleaks trims newlines the pattern swallowed at either end of a match.
    while start < end and text[start] == "\n":
        start += 1
    while end > start and text[end - 1] == "\n":
        end -= 1
    return (start, end) if end > start else None


# --- shapes the rule set matches too narrowly ---------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Shape:
    """One of pgsearch's own patterns: redact `group` (0: the whole match)."""

    regex: Any
    group: int
    #: Lower-cased substrings the text must contain for the pattern to be tried.
    keywords: tuple[str, ...]


_EXTRA_SHAPES = tuple(
    Shape(regex=_Pattern(pattern), group=group, keywords=keywords)
    for pattern, group, keywords in (
        # OpenAI / Anthropic style keys of any length (sk-..., sk-proj-..., sk-ant-...).
        (r"\bsk-[A-Za-z0-9_\-]{16,}", 0, ("sk-",)),
        # AWS access key ids, AWS's documented example keys included.
        (
            r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ABIA|ACCA)[0-9A-Z]{16}\b",
            0,
            ("akia", "asia", "agpa", "aida", "aroa", "abia", "acca"),
        ),
        # GitHub, GitLab, Slack, Google, Hugging Face, npm, SendGrid, Stripe tokens
        # of any length.
        (
            r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
            0,
            ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        ),
        (r"\bglpat-[A-Za-z0-9_\-]{20,}", 0, ("glpat-",)),
        (r"\bxox[abposre]-[A-Za-z0-9\-]{10,}", 0, ("xox",)),
        (r"\bAIza[0-9A-Za-z_\-]{35}", 0, ("aiza",)),
        (r"\bhf_[A-Za-z0-9]{30,}", 0, ("hf_",)),
        (r"\bnpm_[A-Za-z0-9]{36,}", 0, ("npm_",)),
        (r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}", 0, ("sg.",)),
        (r"\b[rs]k_(?:live|test|prod)_[A-Za-z0-9]{10,}", 0, ("k_live_", "k_test_", "k_prod_")),
        (
            r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{8,}",
            0,
            ("hooks.slack.com",),
        ),
        # JSON web tokens.
        (r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", 0, ("eyj",)),
        # PEM and PGP private key blocks (an unterminated one is scrubbed to the end).
        (
            r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
            0,
            ("private key",),
        ),
        # Credentials in URLs: scheme://user:password@host, where the password may
        # hold '@' (the host follows the last '@' before the path).
        (r"(?i)\b[a-z][a-z0-9+.\-]*://([^\s/@:]*:[^\s/]*)@[^\s/@]", 1, ("://",)),
        # Authorization headers: whatever credential follows the scheme.
        (
            r"(?i)\bauthorization:[ \t]*(?:bearer|basic|token|digest)[ \t]+(\S+)",
            1,
            ("authorization",),
        ),
        # Database and login command lines.
        (
            r"(?i)\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n]*?[ \t]-p([^\s\-][^\s]*)",
            1,
            ("mysql", "mariadb"),
        ),
        (r"(?i)\bdocker[ \t]+login\b[^\n]*?[ \t]-p[ \t]+(\S+)", 1, ("login",)),
        (r"(?i)\bsshpass\b[^\n]*?[ \t]-p[ \t]*(\S+)", 1, ("sshpass",)),
        (
            r"(?i)(?:^|[ \t])--(?:password|passwd|pass|passphrase|token|secret)[ \t]+([^\s\-]\S*)",
            1,
            ("--pass", "--token", "--secret"),
        ),
        (
            r"(?i)\bcurl\b[^\n]*?[ \t](?:-u|--user)(?:[ \t]+|=)([^\s:]+:\S+)",
            1,
            ("curl",),
        ),
    )
)

#: "Bearer x", "token x" outside a header: the credential must look random (a digit,
#: a symbol, or a lower-to-upper change), so "token validation" stays prose.
_SCHEME_CREDENTIAL = _Pattern(r"(?i)\b(?:bearer|basic|token)[ \t]+([A-Za-z0-9._~+/=\-]{8,})")
_RANDOM_LOOKING = _Pattern(r"[0-9_~+/=]|[a-z][A-Z]")

# --- assignments to secret-like keys ---------------------------------------------

_KEY_WORD = r"(?:pass|pwd|secret|token|credential|creds|auth|key)"
_ASSIGNMENT = _Pattern(
    # The key: an identifier holding a secret-ish word, maybe quoted or escaped-quoted.
    r"(?i)(?P<key>[A-Za-z0-9_.\-]*" + _KEY_WORD + r"[A-Za-z0-9_.\-]*)"
    r"(?:\\?[\"'`])?"
    r"(?P<pre>[ \t]*)(?P<sep>:=|=>|==|=|:)(?P<post>[ \t]*)"
    r"(?:"
    r"\\\"(?P<eq>(?:[^\"\\\n]|\\[^\"\n])*)\\\""
    r"|\"(?P<dq>(?:[^\"\\\n]|\\.)*)\""
    r"|'(?P<sq>[^'\n]*)'"
    r"|`(?P<bq>[^`\n]*)`"
    r"|(?P<bare>[^\s\"'`,;)}\]&|]+)"
    r")"
)
#: The value's groups, one per quoting style.
_VALUE_NAMES = ("eq", "dq", "sq", "bq", "bare")


@cache
def _group_of() -> dict[str, int]:
    """`_ASSIGNMENT`'s group numbers by name."""
    return dict(_ASSIGNMENT.groupindex)


_WORD_SPLIT = _Pattern(r"[A-Z]?[a-z]+|[A-Z]+(?:[a-z]+)?|[0-9]+")

#: A key with one of these words makes any literal value a secret.
STRONG_WORDS = frozenset(
    {
        "password", "passwd", "passphrase", "passcode", "secret", "secrets",
        "token", "credentials", "apikey", "authtoken", "privatekey", "secretkey",
        "accesskey", "accountkey", "sessiontoken", "clientsecret", "pat",
    }
)  # fmt: skip
#: A word run together from several (PGPASSWORD, newpassword, apitoken) ends in one.
_STRONG_ENDINGS = ("password", "passwd", "passphrase", "secret", "token", "apikey", "secretkey")
#: Adjacent words that together name a secret (``api_key``, ``AccountKey``).
STRONG_PAIRS = frozenset(
    {
        ("api", "key"), ("access", "key"), ("private", "key"), ("account", "key"),
        ("auth", "key"), ("signing", "key"), ("encryption", "key"), ("master", "key"),
        ("session", "key"), ("app", "key"), ("license", "key"), ("client", "key"),
        ("access", "token"), ("shared", "key"), ("secret", "key"),
    }
)  # fmt: skip
#: Words that make a key secret-like only when its value also looks random.
WEAK_WORDS = frozenset({"key", "auth", "credential", "creds", "pass", "pwd", "signature", "salt"})
#: A key ending in one of these names something *about* a secret, not the secret.
NOT_SECRET_SUFFIXES = frozenset(
    {
        "url", "uri", "path", "file", "filename", "dir", "view", "field", "fields", "length",
        "len", "size", "name", "names", "id", "ids", "type", "types", "policy", "reset",
        "prompt", "label", "hint", "regex", "pattern", "min", "max", "count", "enabled",
        "required", "form", "input", "template", "endpoint", "header", "prefix", "env",
        "var", "ttl", "expiry", "expires", "expiration", "timeout", "limit", "budget",
        "help", "text", "message", "error", "errors", "strength", "rules", "validator",
        "validation", "widget", "format", "mode", "location", "source", "version",
        "provider", "manager", "kind", "class", "method", "scheme", "algorithm",
        "encoding", "bits", "ref", "store", "storage", "usage", "used", "cache", "counter",
        "index", "position", "pos", "offset", "map", "list", "set", "bucket",
        "tokens", "changed", "rotation", "placeholder", "flag", "option", "options",
    }
)  # fmt: skip
#: Values that are code or types, not secrets (compared lower-cased).
_NOT_VALUES = frozenset(
    {
        "", "none", "null", "nil", "true", "false", "undefined", "required", "optional",
        "str", "string", "int", "integer", "bool", "boolean", "bytes", "float", "number",
        "any", "object", "secretstr", "secretbytes", "list", "dict", "text", "varchar",
        "self", "this", "redacted",
    }
)  # fmt: skip
_PLACEHOLDER = _Pattern(
    r"^(?:\$\S*|\{\{.*\}\}|<[^>]*>|%\(?\w*\)?s|\[redacted\]|[*x.•…_\-#?]+|\.\.\.)$"
)
_CODE_VALUE = _Pattern(r"^[A-Za-z_][\w.]*[(\[]|^[\[{(]|^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
_LITERAL_CHARS = _Pattern(r"[0-9]|[^\w.\-]|[a-z][A-Z]")


def _group(text: str, m: Any, group: int) -> str:
    start, end = m.span(group)
    return text[start:end] if start >= 0 else ""


def key_words(key: str) -> list[str]:
    """The lower-cased words of an identifier: ``SecretAccessKey`` -> secret, access, key."""
    return [w.lower() for w in _WORD_SPLIT.findall(key)]


@lru_cache(maxsize=4096)
def key_strength(key: str) -> str:
    """``strong``, ``weak`` or ``none``: how much a key's name says its value is secret.

    Kept per name: code and logs repeat a few key names (``key``, ``token``,
    ``password``) in every line, and splitting a name into words is most of the cost
    of an assignment that is no secret."""
    words = key_words(key)
    if not words or words[-1] in NOT_SECRET_SUFFIXES:
        return "none"
    if any(w in STRONG_WORDS or w.endswith(_STRONG_ENDINGS) for w in words):
        return "strong"
    if any(pair in STRONG_PAIRS for pair in itertools.pairwise(words)):
        return "strong"
    # "pass" or "pwd" with another word (DB_PASS, smtp_pwd) is a password; alone it
    # is as often a test count or the working directory.
    if len(words) > 1 and any(w in ("pass", "pwd") for w in words):
        return "strong"
    if any(w in WEAK_WORDS for w in words):
        return "weak"
    return "none"


def looks_random(value: str) -> bool:
    """The high-entropy check: long, mixed letters and digits, many distinct characters."""
    return (
        len(value) >= 12
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
        and shannon_entropy(value) >= 3.0
    )


def _assignment_spans(text: str) -> Iterator[tuple[int, int]]:
    group_of = _group_of()
    for m in _ASSIGNMENT.finditer(_subject(text)):
        strength = key_strength(_group(text, m, group_of["key"]))
        if strength == "none":
            continue
        quoted, start, end = False, -1, -1
        for name in _VALUE_NAMES:
            start, end = m.span(group_of[name])
            if start >= 0:
                quoted = name != "bare"
                break
        value = text[start:end]
        if not _is_secret_value(value, m, strength, quoted=quoted, text=text):
            continue
        yield start, end


def _is_secret_value(value: str, m: Any, strength: str, *, quoted: bool, text: str) -> bool:
    stripped = value.strip()
    if stripped.lower() in _NOT_VALUES or _PLACEHOLDER.match(stripped):
        return False
    if strength == "weak":
        return looks_random(stripped)
    if quoted:
        return True
    if _CODE_VALUE.search(stripped):
        return False  # get_token(), os.environ[...], {…}, settings.DB_PASSWORD
    lowered = stripped.lower()
    if any(word in lowered for word in ("password", "passwd", "secret", "token")):
        return False  # a variable named after the secret: password=password
    pre, post, sep = (_group_of()[name] for name in ("pre", "post", "sep"))
    spaced = m.end(pre) > m.start(pre) or m.end(post) > m.start(post)
    if _group(text, m, sep) == "=" and not spaced:
        return True  # KEY=value: environment files, shells, query strings, flags
    if _LITERAL_CHARS.search(stripped) or looks_random(stripped):
        return True
    # A bare word as the last thing on its line (YAML, .env, config dumps).
    end = m.end()
    rest_end = text.find("\n", end)
    rest = text[end : len(text) if rest_end < 0 else rest_end]
    return not rest.strip()


#: Lower-cased substrings without which no assignment can name a secret.
_ASSIGNMENT_TRIGGERS = ("pass", "pwd", "secret", "token", "credential", "creds", "auth", "key")
_SCHEME_TRIGGERS = ("bearer", "basic", "token")
_OWN_KEYWORDS = tuple(
    sorted(
        {k for shape in _EXTRA_SHAPES for k in shape.keywords}
        | set(_ASSIGNMENT_TRIGGERS)
        | set(_SCHEME_TRIGGERS)
    )
)
_OWN_SET = _literal_set(_OWN_KEYWORDS)


def _own_spans(text: str, lowered: str) -> Iterator[tuple[int, int]]:
    hits = {_OWN_KEYWORDS[i] for i in _OWN_SET.Match(lowered) or ()}
    if not hits:
        return
    subject = _subject(text)
    for shape in _EXTRA_SHAPES:
        if hits.isdisjoint(shape.keywords):
            continue
        for m in shape.regex.finditer(subject):
            start, end = m.span(shape.group)
            if end > start:
                yield start, end
    if not hits.isdisjoint(_SCHEME_TRIGGERS):
        for m in _SCHEME_CREDENTIAL.finditer(subject):
            credential = text[m.start(1) : m.end(1)]
            if _RANDOM_LOOKING.search(credential) and credential != REDACTED:
                yield m.span(1)
    if not hits.isdisjoint(_ASSIGNMENT_TRIGGERS):
        yield from _assignment_spans(text)


def find_secrets(text: str) -> list[tuple[int, int]]:
    """Character spans of `text` that are secrets, merged and in order."""
    if not text:
        return []
    lowered = text.lower()
    spans = [*_gitleaks_spans(text, lowered, rule_set()), *_own_spans(text, lowered)]
    # What is already redacted is no secret (scrubbing twice changes nothing).
    return _merge([(a, b) for a, b in spans if text[a:b].strip("[]") not in _MARKER_PARTS])


_MARKER_PARTS = frozenset({"redacted", "", "[redacted"})


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def scrub(text: str) -> str:
    """`text` with every secret replaced by ``[redacted]``."""
    spans = find_secrets(text)
    if not spans:
        return text
    parts: list[str] = []
    last = 0
    for start, end in spans:
        parts.append(text[last:start])
        parts.append(REDACTED)
        last = end
    parts.append(text[last:])
    return "".join(parts)
