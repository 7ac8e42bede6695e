"""Kinds, the tool-error rule, secret scrubbing and the per-kind indexing policy."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pgsearch import policy, secrets
from pgsearch.policy import indexable_text, is_tool_error, scrub_secrets
from pgsearch.ranking import role_weight
from pgsearch.settings import IndexPolicy

# -- the tool-error rule ------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        "error: file not found",
        "Error: ImportError: cannot import name 'advisory_lock'",
        "ERROR: boom",
        "  \n error: after leading whitespace",
        "blocked: the sandbox refused the command",
        "Blocked: network access",
        "Error from server (Forbidden): permission denied for deployments",
        "open /etc/shadow: Permission Denied",
        "bash: ./deploy.sh: PERMISSION DENIED",
        "the first line is fine\nbut then: permission denied",
    ],
)
def test_tool_error_by_content(content: str) -> None:
    assert is_tool_error(content)


@pytest.mark.parametrize(
    "content",
    [
        "",
        "ok",
        "0 errors: all tests passed",
        "no error: nothing to do",
        "errors: none",
        "the word error: appears later, not first",
        "permission granted",
        "HTTP/1.1 200 OK",
    ],
)
def test_not_a_tool_error(content: str) -> None:
    assert not is_tool_error(content)


def test_tool_error_when_marked_by_the_source() -> None:
    assert is_tool_error("exit status 2", marked=True)
    assert is_tool_error("", marked=True)
    assert not is_tool_error("exit status 2", marked=False)


# -- secrets ----------------------------------------------------------------------------

#: Every shape named in the hardening review, plus the shapes of the first version:
#: (text, a part of the secret that must be gone).
SECRETS = {
    # keys joined by "_" (which a \b-bounded pattern misses)
    "DB_PASSWORD=": ("DB_PASSWORD=hunter2 ./run.sh", "hunter2"),
    "PGPASSWORD=": ("PGPASSWORD=s3cr3t-pg psql -h db", "s3cr3t-pg"),
    "POSTGRES_PASSWORD=": ("POSTGRES_PASSWORD=Tr0ub4dor docker compose up", "Tr0ub4dor"),
    "SECRET_KEY=": ("SECRET_KEY=django-insecure-8f3k2j1h0g", "django-insecure-8f3k2j1h0g"),
    "MY_API_KEY=": ("MY_API_KEY=a1b2c3d4e5f6g7h8", "a1b2c3d4e5f6g7h8"),
    "GOOGLE_CLIENT_SECRET=": ("GOOGLE_CLIENT_SECRET=GOCSPX-abcdEFGH1234", "GOCSPX-abcdEFGH1234"),
    "export X=": ("export OPENAI_TOKEN='tok en with spaces 99'", "tok en with spaces 99"),
    # quoting styles
    '"password": "..."': ('{"user": "bob", "password": "correct horse battery"}', "correct horse"),
    "aws_secret_access_key json": (
        '{"aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzz"}',
        "wJalrXUtnFEMI/K7MDENG",
    ),
    "aws_secret_access_key bare json": (
        "{'aws_secret_access_key': wJalrXUtnFEMI/K7MDENG/bPxRfiCYzz}",
        "wJalrXUtnFEMI/K7MDENG",
    ),
    "STS SecretAccessKey": (
        '"Credentials": {"AccessKeyId": "ASIAXXXXEXAMPLEXXXXX", '
        '"SecretAccessKey": "9drTJvcXLB89EXAMPLELB8923FB892xMFI", '
        '"SessionToken": "AQoXdzELDDY//////////wEaoAK1wvxJY12r2IrDFT2IvAzTCn3zHoZ7"}',
        "9drTJvcXLB89EXAMPLELB8923FB892xMFI",
    ),
    "STS SessionToken": (
        '"SessionToken": "AQoXdzELDDY//////////wEaoAK1wvxJY12r2IrDFT2IvAzTCn3zHoZ7"',
        "AQoXdzELDDY",
    ),
    "yaml password": ("database:\n  user: app\n  password: hunter2\n  host: db", "hunter2"),
    "yaml bare word password": ("smtp:\n  password: correcthorse\n", "correcthorse"),
    "single quoted": ("password = 'my s3cret phrase'", "my s3cret phrase"),
    "json in json string": (
        '{"arguments": "{\\"db_password\\": \\"p4ss-w0rd\\"}"}',
        "p4ss-w0rd",
    ),
    "passphrase=": ("ssh-keygen passphrase=open-sesame-42", "open-sesame-42"),
    "_authToken=": (
        "//registry.npmjs.org/:_authToken=npm_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
        "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    ),
    "_authToken uuid": (
        "//registry.npmjs.org/:_authToken=00000000-1111-2222-3333-444455556666",
        "1111-2222-3333",
    ),
    "Azure AccountKey=": (
        "DefaultEndpointsProtocol=https;AccountName=acct;"
        "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
        "EndpointSuffix=core.windows.net",
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq",
    ),
    # CLI shapes
    "curl -u user:pass": ("curl -u admin:hunter2 https://api.internal/v1", "hunter2"),
    "curl --user": ("curl --user deploy:Zx9-Qw8 https://x", "Zx9-Qw8"),
    "mysql -pPASS": ("mysql -u root -pS3cretPass shop < dump.sql", "S3cretPass"),
    "docker login -p": (
        "docker login -u ci -p dckr_pat_abc123XYZ registry.example.com",
        "dckr_pat_abc123XYZ",
    ),
    "--password PASS": ("psql-wrapper --password hunter2 --host db", "hunter2"),
    "sshpass -p": ("sshpass -p 'letmein42' ssh deploy@host", "letmein42"),
    # URLs
    "password in url": ("postgresql://billing:hunter2@db.internal/billing", "hunter2"),
    "redis://:pw@host": ("redis://:r3d1s-pw@cache.internal:6379/0", "r3d1s-pw"),
    "url password with @": ("postgres://app:p@ss@word@db.internal:5432/app", "ss@word"),
    "url password with @ start": ("postgres://app:p@ss@word@db.internal:5432/app", "p@ss"),
    # token shapes
    "stripe sk_live_": ("STRIPE=sk_live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
    "stripe rk_live_": ("key rk_live_51H8abcDEF0123456789xyz", "51H8abcDEF0123456789xyz"),
    "pgp private key block": (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0abcdEFGH1234\n=ab12\n"
        "-----END PGP PRIVATE KEY BLOCK-----\nafter",
        "lQOYBF0abcdEFGH1234",
    ),
    "npm token": ("token in .npmrc: npm_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", "aBcDeFgHiJkL"),
    "hugging face hf_": ("HF hub: hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh", "AbCdEfGhIjKlMnOpQrSt"),
    "sendgrid SG.": (
        "mail via 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",
        "TwL2iGABf9DHoTf",
    ),
    "slack webhook url": (
        "POST https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "B00000000/XXXXXXXX",
    ),
    # kept from the first version
    "bearer header": (
        "Authorization: Bearer sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        "9f8e7d6c5b4a3928",
    ),
    "bearer opaque": ("curl -H 'Authorization: Bearer abcDEF123ghiJKL456'", "abcDEF123ghiJKL456"),
    "sk key": ("OPENAI_API_KEY is sk-proj-abcdefghijklmnop1234 now", "abcdefghijklmnop1234"),
    "aws key id": ("aws key AKIAIOSFODNN7EXAMPLE in config", "AKIAIOSFODNN7EXAMPLE"),
    "jwt": (
        "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    ),
    "github token": ("GH_TOKEN ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdef"),
    "high entropy next to weak key": ("cache signing key: 9fT2xQ7mLp3Zr8Kd", "9fT2xQ7mLp3Zr8Kd"),
}


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_scrub_secrets_removes(name: str) -> None:
    text, secret = SECRETS[name]
    scrubbed = scrub_secrets(text)
    assert secret not in scrubbed
    assert "[redacted]" in scrubbed


def test_scrub_keeps_the_text_around_a_secret() -> None:
    scrubbed = scrub_secrets("connect to postgresql://billing:hunter2@db.internal/billing now")
    assert scrubbed == "connect to postgresql://[redacted]@db.internal/billing now"
    scrubbed = scrub_secrets("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\nafter")
    assert scrubbed == "[redacted]\nafter"


PROSE = [
    "Deploy the billing service to staging, the token is in the vault.",
    "We decided to use a token bucket for rate limiting and a password reset flow.",
    "Use a bearer token in the Authorization header.",
    "The bearer authentication scheme is described in RFC 6750.",
    "Start with the basic configuration, then add token validation.",
    "Basic understanding of tokenization helps; each token represents a word.",
    "I want to tokenize the text; the basic idea is simple.",
    "Keep the secret sauce out of the README.",
    "the risk-based approach and task-management tools",
    "Resetting a forgotten password sends an email with a link.",
    "https://example.com/path/to/page?q=1 and ssh://git@github.com/org/repo.git",
    "We decided to keep only the registration inside setup() and add a unique constraint.",
    "Pokémon names like Flabébé must be found without accents.",
    "東京タワーのグッズを検索できるようにしてください。",
    # Code and identifiers that mention secrets without holding one.
    "password_reset_view = PasswordResetView.as_view()",
    "see password_reset_view in urls.py",
    "the tokenizer splits words; max_tokens = 4096",
    "commit 3f7c1a5282e44b8a9c1e2a6d5f0b7e91a3c4d5e6 fixed it",
    "session 3f7c1a52-8d4e-4b8a-9c1e-2a6d5f0b7e91 failed",
    "open /home/alice/.ssh/id_rsa.pub and src/auth/token_store.py",
    "def login(username: str, password: str) -> Token:",
    "    password: str",
    "password = request.form['password']",
    "token = get_token()",
    "PGPASSWORD=${PGPASSWORD} psql",
    'password: "<your password>"',
    "Reset your password: click the link in the email we sent.",
    "secret_name: db-credentials",
    "ssh://git@github.com/org/repo.git and https://example.com:8080/x?y=1",
    "mkdir -p /tmp/build && ssh -p 2222 host",
    "The bearer authentication scheme is described in RFC 6750.",
    "Use a bearer token in the Authorization header.",
    '{"input_tokens": 1200, "output_tokens": 300}',
    "primary_key = 'id'",
    "keyboard shortcuts: press the key K to continue",
    "east-asia region and the asia-northeast1 zone",
    "PWD=/work/project OLDPWD=/tmp SHELL=/bin/bash",
]


@pytest.mark.parametrize("text", PROSE)
def test_scrub_leaves_normal_prose_intact(text: str) -> None:
    assert scrub_secrets(text) == text


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(categories=["L", "Zs"]), max_size=200))
def test_scrub_leaves_text_without_digits_or_symbols_intact(text: str) -> None:
    # Words and spaces alone are never secret-looking, whatever words they are.
    lowered = " ".join(w.lower() for w in text.split())
    assert scrub_secrets(lowered) == lowered


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_scrub_is_idempotent_and_never_raises(text: str) -> None:
    once = scrub_secrets(text)
    assert scrub_secrets(once) == once


# -- what reaches the index --------------------------------------------------------


def test_user_and_assistant_text_are_indexed_as_is() -> None:
    assert indexable_text(policy.USER_TEXT, "make the cron idempotent") == (
        "make the cron idempotent"
    )
    assert indexable_text(policy.ASSISTANT_TEXT, "done") == "done"


def test_tool_call_indexes_names_not_arguments() -> None:
    text = indexable_text(
        policy.TOOL_INPUT,
        "",
        tool_names=["http_request"],
        arguments='http_request({"url": "https://vault.internal/v1/billing"})',
    )
    assert text == "http_request"


def test_tool_call_keeps_the_assistant_text_too() -> None:
    text = indexable_text(policy.TOOL_INPUT, "let me grep", tool_names=["grep", "bash"])
    assert text.split("\n") == ["let me grep", "grep", "bash"]


def test_tool_output_and_system_text_are_not_indexed_by_default() -> None:
    assert indexable_text(policy.TOOL_OUTPUT, "HTTP/1.1 200 OK") == ""
    assert indexable_text(policy.SYSTEM, "You are a coding agent.") == ""


def test_tool_errors_and_bookkeeping_are_indexed() -> None:
    for kind in (policy.TOOL_ERROR, policy.SUMMARY, policy.GOAL, policy.TOOL_DISABLE):
        assert indexable_text(kind, "permission denied in staging") == (
            "permission denied in staging"
        )


def test_policy_opts_in_per_kind() -> None:
    everything = IndexPolicy(tool_arguments=True, tool_output=True, system=True)
    assert (
        indexable_text(
            policy.TOOL_INPUT,
            "",
            tool_names=["grep"],
            arguments='grep({"pattern": "cron"})',
            policy=everything,
        )
        == 'grep\ngrep({"pattern": "cron"})'
    )
    assert indexable_text(policy.TOOL_OUTPUT, "200 OK", policy=everything) == "200 OK"
    assert indexable_text(policy.SYSTEM, "be brief", policy=everything) == "be brief"
    only_output = IndexPolicy(tool_output=True)
    assert indexable_text(policy.SYSTEM, "be brief", policy=only_output) == ""
    assert (
        indexable_text(
            policy.TOOL_INPUT, "", tool_names=["grep"], arguments="grep(x)", policy=only_output
        )
        == "grep"
    )


@pytest.mark.parametrize("kind", policy.ALL_KINDS)
def test_secrets_are_scrubbed_from_every_kind_whatever_the_policy(kind: str) -> None:
    everything = IndexPolicy(tool_arguments=True, tool_output=True, system=True)
    secret = "Authorization: Bearer sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0"
    text = indexable_text(kind, secret, tool_names=["http"], arguments=secret, policy=everything)
    assert "9f8e7d6c5b4a39281706f5e4d3c2b1a0" not in text


def test_kind_lists() -> None:
    assert set(policy.DEFAULT_SEARCH_KINDS) == {
        policy.USER_TEXT,
        policy.ASSISTANT_TEXT,
        policy.TOOL_INPUT,
        policy.TOOL_ERROR,
    }
    assert set(policy.BOOKKEEPING_KINDS).isdisjoint(policy.DEFAULT_SEARCH_KINDS)
    assert len(set(policy.ALL_KINDS)) == len(policy.ALL_KINDS) == 9


def test_role_weights_rank_user_over_tool_call_over_assistant() -> None:
    user = role_weight(policy.USER_TEXT, "user")
    call = role_weight(policy.TOOL_INPUT, "assistant")
    assistant = role_weight(policy.ASSISTANT_TEXT, "assistant")
    assert (user, call, assistant) == (1.5, 1.3, 1.0)


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_scrubbing_twice_changes_nothing(name: str) -> None:
    once = scrub_secrets(SECRETS[name][0])
    assert scrub_secrets(once) == once


# -- the vendored gitleaks rules and their semantics ----------------------------------


def test_the_vendored_rule_set_loads_whole_with_its_licence() -> None:
    from importlib import resources

    rules = secrets.rule_set()
    assert len(rules.rules) > 200
    assert {"generic-api-key", "stripe-access-token", "huggingface-access-token"} <= {
        r.id for r in rules.rules
    }
    licence = resources.files("pgsearch.data").joinpath("LICENSE-gitleaks").read_text()
    assert "MIT License" in licence and "Zachary Rice" in licence


UPSTREAM_SHAPED = """
title = "x"
[allowlist]
paths = ['''\\.png$''']
regexes = ['''^EXAMPLE''']
[[rules]]
id = "pkcs12-file"
path = '''\\.p12$'''
[[rules]]
id = "php-only"
regex = '''secret_key'''
path = '''\\.php$'''
[[rules]]
id = "demo-token"
regex = '''\\b(demo_[a-z0-9]{8})\\b'''
entropy = 2.5
keywords = ["demo_"]
[[rules.allowlists]]
stopwords = ["demo_test"]
[[rules.allowlists]]
condition = "AND"
paths = ['''\\.md$''']
regexes = ['''.*''']
"""


def test_an_upstream_file_loads_as_it_is() -> None:
    rules = secrets.load_rules(UPSTREAM_SHAPED)
    # Path rules never apply to text; a path-and-regex allowlist never holds.
    assert [r.id for r in rules.rules] == ["demo-token"]
    (rule,) = rules.rules
    assert len(rule.allowlists) == 1
    assert rule.keywords == ("demo_",)
    assert len(rules.allowlists) == 1  # the global regexes, without the paths


def test_rule_entropy_allowlists_and_stopwords_follow_gitleaks() -> None:
    rules = secrets.load_rules(UPSTREAM_SHAPED)

    def found(text: str) -> list[str]:
        return [text[a:b] for a, b in secrets._gitleaks_spans(text, text.lower(), rules)]

    assert found("use demo_k3x9q2z7 here") == ["demo_k3x9q2z7"]
    assert found("use demo_aaaaaaaa here") == []  # entropy 0 is below 2.5
    assert found("use demo_test1234 here") == []  # a stopword
    assert found("use DEMO_k3x9q2z7 here") == []  # the pattern is case-sensitive
    assert found("nothing to see") == []


def test_the_generic_rule_keeps_identifiers_and_low_entropy_values() -> None:
    assert scrub_secrets("api_version = 2024-06-01") == "api_version = 2024-06-01"
    assert scrub_secrets("primary_key = customer_identifier") == (
        "primary_key = customer_identifier"
    )
    assert "Zq8" not in scrub_secrets("upload_key = Zq8fT2xQ7mLp3Zr8Kd")


@pytest.mark.parametrize(
    ("key", "strength"),
    [
        ("DB_PASSWORD", "strong"),
        ("PGPASSWORD", "strong"),
        ("SecretAccessKey", "strong"),
        ("SessionToken", "strong"),
        ("_authToken", "strong"),
        ("AccountKey", "strong"),
        ("MY_API_KEY", "strong"),
        ("smtp_pass", "strong"),
        ("passphrase", "strong"),
        ("password_reset_view", "none"),
        ("max_tokens", "none"),
        ("secret_name", "none"),
        ("token_type", "none"),
        ("tokenizer", "none"),
        ("pass", "weak"),
        ("pwd", "weak"),
        ("db_pwd", "strong"),
        ("cache_key", "weak"),
        ("auth", "weak"),
        ("username", "none"),
    ],
)
def test_key_strength(key: str, strength: str) -> None:
    assert secrets.key_strength(key) == strength


def test_hostile_text_is_scrubbed_in_linear_time_patterns() -> None:
    # Patterns that backtrack would take minutes here; RE2 takes milliseconds.
    hostile = ("curl " + "a" * 50 + " ") * 20_000 + "password=" + "k3" * 50_000
    scrubbed = scrub_secrets(hostile)
    assert scrubbed.endswith("password=[redacted]")


@pytest.mark.parametrize(
    ("command", "exit_code", "output", "miss"),
    [
        ("rg -n max_retries app/", 1, "Exit code 1", True),
        ("grep -rn sphinx_rtd_theme docs/", 1, "", True),
        ("cd app && git grep -n TODO", 1, "Exit code: 1\nWall time: 0.1 seconds\nOutput:\n", True),
        ("grep -c needle notes.txt", 1, "0", True),
        ("find . -name '*.orig'", 1, "find: './private': Permission denied", False),
        ("grep needle missing.txt", 1, "grep: missing.txt: No such file or directory", False),
        ("rg needle", 2, "Exit code 2", False),  # 2 is a real failure
        ("pytest -q", 1, "1 failed", False),  # not a search program
        ("rg x | head -3", 0, "", False),  # exit 0 was never an error
        (None, 1, "", False),
    ],
)
def test_a_search_program_that_found_nothing_is_not_a_failure(
    command: str | None, exit_code: int, output: str, miss: bool
) -> None:
    assert policy.is_search_miss(command, exit_code, output) is miss
    kind = policy.tool_result_kind(output, marked=True, command=command, exit_code=exit_code)
    assert kind == ("tool_output" if miss else "tool_error")


# -- the pre-check of the rule without keywords ------------------------------------------


def test_the_required_literals_fold_only_within_ascii() -> None:
    """Every letter of a rule's required literals matches, case-insensitively in RE2,
    only itself and its ASCII capital: over every code point, a character RE2 takes
    for one of them lower-cases to it, so a text whose lower case lacks the literal
    cannot hold it in RE2's eyes either."""
    import re2

    letters = sorted({c for lits in secrets.REQUIRED_LITERALS.values() for c in "".join(lits)})
    assert letters
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    for letter in letters:
        found = {m.group(0) for m in re2.finditer("(?i:" + re2.escape(letter) + ")", every)}
        assert {c.lower() for c in found} == {letter}, letter


def test_every_required_literal_set_belongs_to_a_rule_without_keywords() -> None:
    """Each set is the keywords of a vendored rule that has none of its own (so it
    is no longer run on every text)."""
    rules = {r.pattern: r for r in secrets.rule_set().rules}
    always = {r.pattern for r in secrets.rule_set().always}
    for pattern, literals in secrets.REQUIRED_LITERALS.items():
        assert pattern in rules
        assert rules[pattern].keywords == literals and pattern not in always
        assert all(literal in pattern for literal in literals)


_FRAGMENTS = st.sampled_from(
    [
        "DB_PASSWORD",
        "db_passwd",
        "Database_Password",
        "DATABASE_PASSWD",
        "PWD",
        "pwd",
        "Pwd",
        "db_pa\u017f\u017fword",
        "databa\u017fe_passwd",
        "KEY",
        "\u212a",
        "\u0130",
        "=",
        ": ",
        ":=",
        "=>",
        " ",
        "\n",
        "'",
        '"',
        "hunter2",
        "S3cr3t!x9",
        "export ",
        "my_",
        "password",
        "passwd",
        "db_",
        "data",
        "base_",
        "_pw",
        "d",
    ]
)


@settings(max_examples=400)
@given(st.lists(_FRAGMENTS, max_size=12).map("".join))
@example("export databa\u017fe_passwd=hunter2\n")
@example("DB_PA\u017f\u017fWORD: S3cr3t!x9 ")
@example("PWD=hunter2 ")
@example("my_password=hunter2 ")
def test_the_pre_check_finds_what_running_the_rule_finds(text: str) -> None:
    """A rule without keywords gives the same spans with its pre-check as run on
    every text (`secrets.REQUIRED_LITERALS`)."""
    rules = secrets.rule_set()
    lowered = text.lower()
    with_check = sorted(secrets._gitleaks_spans(text, lowered, rules))
    # The same rules with those selected by the literals also run on every text.
    required = tuple(r for r in rules.rules if r.pattern in secrets.REQUIRED_LITERALS)
    run_always = dataclasses.replace(rules, always=rules.always + required)
    every_time = sorted(secrets._gitleaks_spans(text, lowered, run_always))
    assert with_check == every_time
