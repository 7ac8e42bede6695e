"""Kinds, the tool-error rule, secret scrubbing and the per-kind indexing policy."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgsearch import policy
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

SECRETS = {
    "bearer header": (
        "Authorization: Bearer sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        "9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    ),
    "bearer opaque": ("curl -H 'Authorization: Bearer abcDEF123ghiJKL456'", "abcDEF123ghiJKL456"),
    "sk key": ("OPENAI_API_KEY is sk-proj-abcdefghijklmnop1234 now", "abcdefghijklmnop1234"),
    "anthropic key": ("key sk-ant-api03-abcdefghijklmnopqrstuvwx.", "abcdefghijklmnopqrstuvwx"),
    "aws key id": ("aws key AKIAIOSFODNN7EXAMPLE in config", "AKIAIOSFODNN7EXAMPLE"),
    "aws secret": (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    "private key": (
        "here:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAx7\nQ2x9\n"
        "-----END RSA PRIVATE KEY-----\nafter",
        "MIIEpAIBAAKCAQEAx7",
    ),
    "unterminated private key": (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA",
        "b3BlbnNzaC1rZXktdjEAAAAA",
    ),
    "password in url": ("postgresql://billing:hunter2@db.internal/billing", "hunter2"),
    "password in https url": ("https://alice:s3cr3t%21@example.com/x", "s3cr3t"),
    "password assignment": ("export PASSWORD=hunter2; run", "hunter2"),
    "quoted password": ('password: "correct horse battery staple"', "correct horse"),
    "api key assignment": ("api_key='0123456789abcdef'", "0123456789abcdef"),
    "jwt": (
        "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    ),
    "github token": ("GH_TOKEN ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdef"),
    "github pat": (
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "11ABCDEFG0123456789",
    ),
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
