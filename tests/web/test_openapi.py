"""The OpenAPI document is pinned: a change to the API shows up as a diff here.

After a deliberate change, write the new snapshot with
``PGSEARCH_UPDATE_SNAPSHOTS=1 pytest tests/web/test_openapi.py`` and review it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import schemathesis

from pgsearch.web import inputs
from pgsearch.web.openapi import openapi_document

SNAPSHOT = Path(__file__).resolve().parent.parent / "fixtures" / "openapi.json"


def test_openapi_document_matches_the_snapshot() -> None:
    text = json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"
    if os.environ.get("PGSEARCH_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(text, encoding="utf-8")
    assert SNAPSHOT.read_text(encoding="utf-8") == text, (
        "the API changed: review it and update the snapshot (see this module's docstring)"
    )


def test_the_document_is_valid_and_describes_every_route() -> None:
    schema = schemathesis.openapi.from_dict(openapi_document())
    schema.validate()
    found = [result.ok() for result in schema.get_all_operations()]
    operations = {(op.method.upper(), op.path) for op in found}
    assert operations >= {
        ("GET", "/healthz"),
        ("POST", "/v1/search"),
        ("GET", "/v1/sessions"),
        ("GET", "/v1/sessions/{session_id}"),
        ("GET", "/v1/sessions/{session_id}/around"),
        ("GET", "/v1/sessions/{session_id}/messages"),
        ("GET", "/v1/stats"),
        ("GET", "/v1/whoami"),
        ("POST", "/v1/append"),
        ("POST", "/v1/ingest"),
    }


def test_request_schemas_are_the_ones_the_server_checks() -> None:
    schemas = openapi_document()["components"]["schemas"]
    assert schemas["SessionQueryRequest"] == inputs.SEARCH_BODY
    assert schemas["AppendRequest"] == inputs.APPEND_BODY
    assert schemas["IngestRequest"] == inputs.INGEST_BODY
    seam = {"session_id", "entry_id", "seq", "kind", "turn", "role", "excerpt", "created_at"}
    assert seam | {"score"} <= set(schemas["SessionMatch"]["properties"])
    assert "searched" in schemas["SessionQueryResult"]["properties"]
