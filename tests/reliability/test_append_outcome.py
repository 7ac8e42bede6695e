"""An append whose connection is lost after its COMMIT committed leaves no doubt.

A TCP proxy between pgsearch and the server forwards everything until it is armed;
armed, it waits for the server's answer to a ``COMMIT`` (the transaction is then
committed), drops that answer and closes both ends. The client has sent COMMIT and
lost its connection: the outcome is unknown to it. An append is run again by the
driver, finds its messages by their keys and acknowledges them, stored once; any
other write still reports `OutcomeUnknown`.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgsearch import PgSearch, Settings
from pgsearch.aio import AsyncPgSearch
from pgsearch.errors import IngestError, OutcomeUnknown
from tests.helpers import assert_statistics_exact

WS = "outcome"
#: The CommandComplete message of a COMMIT: tag, length, "COMMIT\0".
COMMIT_DONE = b"C\x00\x00\x00\x0bCOMMIT\x00"


class CommitCutter:
    """A proxy to the server of `dsn` that cuts a connection after a COMMIT."""

    def __init__(self, dsn: str) -> None:
        params = conninfo_to_dict(dsn)
        host, port = str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432)
        # A host that is a directory names the server's Unix socket (an embedded server).
        self.upstream: str | tuple[str, int] = (
            f"{host}/.s.PGSQL.{port}" if host.startswith("/") else (host, port)
        )
        self.listener = socket.create_server(("127.0.0.1", 0))
        params.update(host="127.0.0.1", port=str(self.listener.getsockname()[1]))
        self.dsn = make_conninfo(**params)
        self.armed = threading.Event()
        self.cuts = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self) -> None:
        self.armed.set()

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = self._connect()
            except OSError:
                client.close()
                continue
            pair = (client, server)
            threading.Thread(target=self._pump, args=(client, server, pair, False)).start()
            threading.Thread(target=self._pump, args=(server, client, pair, True)).start()

    def _connect(self) -> socket.socket:
        if isinstance(self.upstream, str):
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                server.connect(self.upstream)
            except OSError:
                server.close()
                raise
            return server
        return socket.create_connection(self.upstream)

    def _pump(
        self, src: socket.socket, dst: socket.socket, pair: tuple[socket.socket, ...], answers: bool
    ) -> None:
        tail = b""
        try:
            while data := src.recv(65536):
                if answers and self.armed.is_set() and COMMIT_DONE in tail + data:
                    with self.lock:
                        if self.armed.is_set():
                            self.armed.clear()
                            self.cuts += 1
                            raise ConnectionAbortedError("cut after COMMIT")
                tail = data[-len(COMMIT_DONE) :]
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in pair:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()


@pytest.fixture
def cutter(dsn: str) -> Iterator[CommitCutter]:
    proxy = CommitCutter(dsn)
    try:
        yield proxy
    finally:
        proxy.close()


def _stored(dsn: str, session_id: str) -> list[tuple[int, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT seq, content FROM messages WHERE workspace_id = %s AND session_id = %s "
            "ORDER BY seq",
            (WS, session_id),
        ).fetchall()
    return [(int(r[0]), str(r[1])) for r in rows]


def _messages(*texts: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": t} for t in texts]


def test_an_append_cut_after_commit_is_acknowledged_and_stored_once(
    dsn: str, cutter: CommitCutter
) -> None:
    settings = Settings.from_env({}, dsn=cutter.dsn)
    with PgSearch.connect(settings=settings) as pg:
        assert pg.append(workspace=WS, session_id="s", messages=_messages("first")) == 1
        cutter.arm()
        stored = pg.append(workspace=WS, session_id="s", messages=_messages("second", "third"))
        assert cutter.cuts == 1, "the proxy cut the connection after COMMIT"
        assert stored == 2, "the append's own messages, stored by the attempt that was cut"
        assert pg.append(workspace=WS, session_id="s", messages=_messages("fourth")) == 1
    assert _stored(dsn, "s") == [(0, "first"), (1, "second"), (2, "third"), (3, "fourth")]
    assert_statistics_exact(dsn, WS)


def test_an_async_append_cut_after_commit_is_acknowledged_and_stored_once(
    dsn: str, cutter: CommitCutter
) -> None:
    async def main() -> int:
        pg = await AsyncPgSearch.connect(settings=Settings.from_env({}, dsn=cutter.dsn))
        try:
            cutter.arm()
            return await pg.append(
                workspace=WS,
                session_id="a",
                messages=[{"role": "user", "content": "only", "id": "m1"}],
            )
        finally:
            await pg.close()

    assert asyncio.run(main()) == 1
    assert cutter.cuts == 1
    assert _stored(dsn, "a") == [(0, "only")]
    assert_statistics_exact(dsn, WS)


def test_other_writes_cut_after_commit_still_report_the_doubt(
    dsn: str, cutter: CommitCutter
) -> None:
    with PgSearch.connect(settings=Settings.from_env({}, dsn=cutter.dsn)) as pg:
        pg.append(workspace=WS, session_id="f", messages=_messages("gone"))
        cutter.arm()
        with pytest.raises(OutcomeUnknown, match="whether the transaction committed is unknown"):
            pg.forget(workspace=WS, session_id="f")
    assert cutter.cuts == 1
    assert _stored(dsn, "f") == []


def test_messages_sent_again_with_their_ids_are_stored_once(pg: PgSearch, dsn: str) -> None:
    def msg(i: str, text: str) -> dict[str, str]:
        return {"role": "user", "content": text, "id": i}

    assert pg.append(workspace=WS, session_id="k", messages=[msg("a", "alpha"), msg("b", "bravo")])
    # A client that retries after losing the answer sends the same ids again.
    assert (
        pg.append(workspace=WS, session_id="k", messages=[msg("b", "bravo"), msg("c", "echo")]) == 1
    )
    assert pg.append(workspace=WS, session_id="k", messages=[msg("a", "alpha")]) == 0
    # The same id in another session is another message.
    assert pg.append(workspace=WS, session_id="k2", messages=[msg("a", "alpha")]) == 1
    assert _stored(dsn, "k") == [(0, "alpha"), (1, "bravo"), (2, "echo")]
    with pytest.raises(IngestError, match=r"message 1: id 'x' is also message 0's"):
        pg.append(workspace=WS, session_id="k", messages=[msg("x", "one"), msg("x", "two")])
    assert _stored(dsn, "k") == [(0, "alpha"), (1, "bravo"), (2, "echo")]
    assert_statistics_exact(dsn, WS)


def test_the_store_keeps_append_keys_unique(pg: PgSearch, dsn: str) -> None:
    pg.append(workspace=WS, session_id="u", messages=[{"role": "user", "content": "x", "id": "k1"}])
    with psycopg.connect(dsn) as conn:
        key = conn.execute(
            "SELECT append_key FROM messages WHERE workspace_id = %s AND session_id = 'u'", (WS,)
        ).fetchone()
        assert key == ("k1",)
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(
                "INSERT INTO messages (workspace_id, session_id, seq, kind, role, created_at,"
                " content, tsv, token_count, append_key)"
                " VALUES (%s, 'u', 7, 'user_text', 'user', now(), 'y', '', 0, 'k1')",
                (WS,),
            )
