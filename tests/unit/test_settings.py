"""Settings come from PGSEARCH_* variables; a bad value is a clear ConfigError."""

from __future__ import annotations

import dataclasses

import pytest

from pgsearch import ConfigError, PgSearchError, Settings
from pgsearch.settings import IndexPolicy


def test_defaults() -> None:
    settings = Settings.from_env({})
    assert settings == Settings()
    assert settings.dsn == ""  # libpq then reads PGHOST, PGUSER, ...
    assert settings.candidate_cap == 1000
    assert settings.relative_floor == 0.15
    assert settings.index_policy == IndexPolicy()
    assert not settings.row_level_security


def test_given_environment_is_used_instead_of_the_process_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PGSEARCH_CANDIDATE_CAP", "not a number")
    monkeypatch.setenv("PGSEARCH_DSN", "postgresql://from-process/db")
    assert Settings.from_env({}) == Settings()


def test_process_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGSEARCH_DSN", "postgresql://from-process/db")
    monkeypatch.setenv("PGSEARCH_CANDIDATE_CAP", "500")
    settings = Settings.from_env()
    assert (settings.dsn, settings.candidate_cap) == ("postgresql://from-process/db", 500)


def test_dsn_order_flag_then_variable() -> None:
    env = {"PGSEARCH_DSN": "postgresql://env/db"}
    assert Settings.from_env(env).dsn == "postgresql://env/db"
    assert Settings.from_env(env, dsn="postgresql://flag/db").dsn == "postgresql://flag/db"
    # An option the user did not give (None) does not override anything.
    assert Settings.from_env(env, dsn=None).dsn == "postgresql://env/db"


def test_integers_are_parsed() -> None:
    settings = Settings.from_env(
        {
            "PGSEARCH_CANDIDATE_CAP": "250",
            "PGSEARCH_MAX_QUERY_CHARS": " 500 ",
            "PGSEARCH_MAX_QUERY_TERMS": "8",
            "PGSEARCH_STATEMENT_TIMEOUT_MS": "0",
            "PGSEARCH_MAX_INDEXED_CHARS": "10000",
        }
    )
    assert settings.candidate_cap == 250
    assert settings.max_query_chars == 500
    assert settings.max_query_terms == 8
    assert settings.statement_timeout_ms == 0
    assert settings.max_indexed_chars == 10_000


def test_the_maintainer_settings() -> None:
    # Every minute, past 100 messages behind, by default; 0 turns it off.
    assert (Settings().maintain_interval, Settings().maintain_behind) == (60.0, 100)
    settings = Settings.from_env(
        {"PGSEARCH_MAINTAIN_INTERVAL": "0.5", "PGSEARCH_MAINTAIN_BEHIND": "1"}
    )
    assert (settings.maintain_interval, settings.maintain_behind) == (0.5, 1)
    assert Settings.from_env({"PGSEARCH_MAINTAIN_INTERVAL": "0"}).maintain_interval == 0
    with pytest.raises(ConfigError, match="PGSEARCH_MAINTAIN_INTERVAL"):
        Settings.from_env({"PGSEARCH_MAINTAIN_INTERVAL": "soon"})
    with pytest.raises(ConfigError, match="PGSEARCH_MAINTAIN_BEHIND"):
        Settings.from_env({"PGSEARCH_MAINTAIN_BEHIND": "many"})


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("PGSEARCH_CANDIDATE_CAP", "lots"),
        ("PGSEARCH_CANDIDATE_CAP", "1.5"),
        ("PGSEARCH_MAX_QUERY_CHARS", ""),
        ("PGSEARCH_MAX_QUERY_TERMS", "ten"),
        ("PGSEARCH_STATEMENT_TIMEOUT_MS", "5s"),
        ("PGSEARCH_MAX_INDEXED_CHARS", "1e6"),
    ],
)
def test_a_non_integer_names_the_variable_and_the_value(var: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({var: value})
    assert var in str(info.value)
    assert repr(value) in str(info.value)


@pytest.mark.parametrize(
    ("var", "value", "words"),
    [
        ("PGSEARCH_CANDIDATE_CAP", "5", "candidate_cap"),
        ("PGSEARCH_CANDIDATE_CAP", "-1", "candidate_cap"),
        ("PGSEARCH_MAX_QUERY_CHARS", "0", "query limits"),
        ("PGSEARCH_MAX_QUERY_TERMS", "-3", "query limits"),
        ("PGSEARCH_STATEMENT_TIMEOUT_MS", "-1", "statement_timeout_ms"),
        ("PGSEARCH_MAX_INDEXED_CHARS", "0", "max_indexed_chars"),
        ("PGSEARCH_MAX_INDEXED_CHARS", "-5", "max_indexed_chars"),
        ("PGSEARCH_MAINTAIN_INTERVAL", "-1", "PGSEARCH_MAINTAIN_INTERVAL"),
        ("PGSEARCH_MAINTAIN_INTERVAL", "100000", "PGSEARCH_MAINTAIN_INTERVAL"),
        ("PGSEARCH_MAINTAIN_BEHIND", "0", "PGSEARCH_MAINTAIN_BEHIND"),
    ],
)
def test_out_of_range_values_are_rejected(var: str, value: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        Settings.from_env({var: value})


@pytest.mark.parametrize(
    "overrides",
    [
        {"relative_floor": 1.0},
        {"relative_floor": -0.1},
        {"candidate_cap": 0},
        {"max_expansions": 0},
        {"trigram_threshold": 0.0},
        {"trigram_threshold": 1.5},
        {"stop_df_ratio": 0.0},
        {"stop_df_ratio": 2.0},
    ],
)
def test_out_of_range_overrides_are_rejected(overrides: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        Settings.from_env({}, **overrides)
    with pytest.raises(ConfigError):
        Settings().with_(**overrides)


def test_index_policy_variable() -> None:
    settings = Settings.from_env({"PGSEARCH_INDEX": "tool_output, system"})
    assert settings.index_policy == IndexPolicy(tool_output=True, system=True)
    assert Settings.from_env({"PGSEARCH_INDEX": ""}).index_policy == IndexPolicy()
    everything = Settings.from_env({"PGSEARCH_INDEX": "tool_arguments,tool_output,system"})
    assert everything.index_policy == IndexPolicy(
        tool_arguments=True, tool_output=True, system=True
    )


def test_unknown_index_policy_entry_names_what_is_allowed() -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({"PGSEARCH_INDEX": "tool_output,secrets"})
    message = str(info.value)
    assert "PGSEARCH_INDEX" in message
    assert "secrets" in message
    assert "tool_arguments, tool_output, system" in message


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "yes", "on", " On "])
def test_row_level_security_on(value: str) -> None:
    assert Settings.from_env({"PGSEARCH_RLS": value}).row_level_security


@pytest.mark.parametrize("value", ["0", "false", "False", "no", "off", ""])
def test_row_level_security_off(value: str) -> None:
    assert not Settings.from_env({"PGSEARCH_RLS": value}).row_level_security


@pytest.mark.parametrize("value", ["maybe", "enabled", "2", "y e s"])
def test_row_level_security_rejects_what_it_cannot_read(value: str) -> None:
    # A security switch must not silently read an unexpected value as "off".
    with pytest.raises(ConfigError, match="PGSEARCH_RLS"):
        Settings.from_env({"PGSEARCH_RLS": value})


def test_settings_are_frozen_and_with_validates() -> None:
    settings = Settings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.candidate_cap = 5  # type: ignore[misc]
    assert settings.with_(candidate_cap=50).candidate_cap == 50
    assert settings.candidate_cap == 1000
    with pytest.raises(ConfigError):
        settings.with_(candidate_cap=5)


def test_repr_never_shows_a_password() -> None:
    settings = Settings(dsn="postgresql://alice:hunter2@db.internal/pgsearch")
    assert "hunter2" not in repr(settings)
    assert "hunter2" not in str(settings)


def test_config_error_is_a_pgsearch_error_with_a_default_message() -> None:
    assert issubclass(ConfigError, PgSearchError)
    assert str(ConfigError()) == "The configuration is invalid."
