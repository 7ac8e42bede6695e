"""The integration suites that make sense on a cluster, run on it unchanged.

Search behaviour, ingest (idempotence, growth, rewrites, statistics recounted), the
agent-log formats, append types and the asyncio facade: the very tests of
tests/integration, collected here again with this suite's `pg` and `dsn` fixtures,
which point at the distributed schema on the Citus cluster (and every workspace
unit is held to one shard, see conftest).
"""

from __future__ import annotations

from tests.integration.test_agent_logs import *  # noqa: F403
from tests.integration.test_append_types import *  # noqa: F403
from tests.integration.test_async import *  # noqa: F403
from tests.integration.test_ingest import *  # noqa: F403
from tests.integration.test_search import *  # noqa: F403
from tests.integration.test_smoke import *  # noqa: F403
