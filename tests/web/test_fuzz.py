"""Property-based runs of the whole API from its OpenAPI document (schemathesis).

Every operation gets generated requests, valid ones and hostile ones (wrong types,
out-of-range numbers, odd strings, extra fields, missing bodies): the server must
never answer 5xx, must only answer statuses the document lists, and every answer
must match its documented schema. The run has its own database, so what it appends
never reaches other tests. The example count stays modest to keep CI short.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from pgsearch import PgSearch, Settings
from pgsearch.db.migrate import migrate
from pgsearch.web.app import ServeConfig
from pgsearch.web.openapi import openapi_document
from tests.conftest import EXAMPLES, Databases
from tests.web.conftest import WORKSPACE, LiveServer

#: Examples per operation and generation mode.
EXAMPLES_PER_OPERATION = 20

schema = schemathesis.openapi.from_dict(openapi_document())
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
    max_examples=EXAMPLES_PER_OPERATION,
)


@pytest.fixture(scope="module")
def fuzz_target(
    databases: Databases, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    name = databases.create(prefix="fuzz")
    dsn = databases.dsn(name)
    migrate(dsn)
    with PgSearch.connect(dsn) as pg:
        pg.ingest_paths([EXAMPLES], workspace=WORKSPACE)
        secret = pg.create_token(workspace=WORKSPACE, write=True).secret
    config = ServeConfig(
        enable_append=True,
        ingest_roots=((WORKSPACE, tmp_path_factory.mktemp("fuzz-root")),),
        default_rate=100_000,
    )
    with LiveServer(config, Settings.from_env(dsn=dsn)) as live:
        yield live.url, secret
    databases.drop(name)


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_the_api_answers_as_documented(
    case: schemathesis.Case, fuzz_target: tuple[str, str]
) -> None:
    url, secret = fuzz_target
    # Valid requests may still name sessions that do not exist (404): documented,
    # and not a failure to accept valid data.
    case.call_and_validate(
        base_url=url,
        headers={"Authorization": f"Bearer {secret}"},
        excluded_checks=[positive_data_acceptance],
    )
