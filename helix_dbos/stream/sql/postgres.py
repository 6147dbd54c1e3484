"""The stream manager on PostgreSQL: one-parameter batch inserts, ``NOTIFY`` on every write, ``LISTEN``.

Differences from SQLite, and why:

- A batch of chunks goes in as ONE parameter, a JSON array of ``[run_id, dedupe_key, chunk]``: a
  short query that psycopg and the server parse once, and no per-value escaping (a 64-row
  ``VALUES`` list, or one text array per column, costs milliseconds of client CPU per batch).
  ``json`` (not ``jsonb``) operators return the chunk's text verbatim; its ``type`` and ``step``
  come from the chunk itself.
- Every write transaction announces its stream on :data:`~helix_dbos.stream.sql.listen.NOTIFY_CHANNEL`;
  for appends, ``pg_notify`` rides in the upsert's ``RETURNING`` list, saving a round trip per batch
  (NOTIFY is delivered at commit).
- Single-statement reads run on an autocommit connection: one statement is one snapshot, and
  autocommit saves the BEGIN and COMMIT round trips.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from helix_dbos.store import alone
from helix_dbos.stream.sql import queries
from helix_dbos.stream.sql.dialect import StreamDialect
from helix_dbos.stream.sql.flusher import PendingChunk
from helix_dbos.stream.sql.listen import MAX_NOTIFY_ID_BYTES, NOTIFY_CHANNEL, Listener, notify_payload

_NOTIFY_RETURNING: Final = (
    f", pg_notify('{NOTIFY_CHANNEL}', CASE WHEN octet_length(stream_id) > {MAX_NOTIFY_ID_BYTES} "
    "THEN '*' ELSE 'c:' || stream_id END)"
)

_INSERT_CHUNKS: Final = sa.text(
    """
INSERT INTO helix_stream_chunks (stream_id, sequence, run_id, step, type, chunk, dedupe_key, created_at)
SELECT :sid, :base + t.ord, t.x ->> 0, CAST(t.x -> 2 ->> 'step' AS INTEGER), t.x -> 2 ->> 'type', t.x -> 2,
       t.x ->> 1, :now
FROM json_array_elements(CAST(:rows AS JSON)) WITH ORDINALITY AS t(x, ord)
ON CONFLICT (stream_id, dedupe_key) DO NOTHING
RETURNING sequence
"""
)

_NOTIFY: Final = sa.text("SELECT pg_notify(:channel, :payload)")

_APPEND_CTES: Final = """st AS ({append}), ins AS (
    INSERT INTO helix_stream_chunks (stream_id, sequence, run_id, step, type, chunk, dedupe_key, created_at)
    SELECT :sid, st.latest_sequence - :n + t.ord, t.x ->> 0, CAST(t.x -> 2 ->> 'step' AS INTEGER),
           t.x -> 2 ->> 'type', t.x -> 2, t.x ->> 1, :now
    FROM st, json_array_elements(CAST(:rows AS JSON)) WITH ORDINALITY AS t(x, ord)
    ON CONFLICT (stream_id, dedupe_key) DO NOTHING
    RETURNING sequence
)"""
"""The append upsert and the chunk insert as CTEs: one statement per batch, or part of another's.

The insert reads the reserved sequences from the upsert's ``RETURNING`` row, so a stream that
has ended (no row) gets no chunks. Only the count of inserted rows comes back
(:data:`_APPEND_RESULT`); when some keys were stored already (a replay, rare) their sequences
are read in a second statement.
"""

_NOTIFY_TERMINATE: Final = (
    f"RETURNING pg_notify('{NOTIFY_CHANNEL}', CASE WHEN octet_length(stream_id) > {MAX_NOTIFY_ID_BYTES} "
    "THEN '*' ELSE 'c:' || stream_id END)"
)
"""The end's announcement (as ``notify_payload(stream_id, control=False)`` spells it) in its ``RETURNING`` list."""

_APPEND_RESULT: Final = "(SELECT latest_sequence FROM st), (SELECT count(*) FROM ins)"

_RIDING_PREFIX: Final = "stream_"
"""Prefix of the append's bind parameters when it rides in a step commit's statement."""

_APPEND_COMPLETE: Final = "(SELECT count(*) FROM ins) = :n * (SELECT count(*) FROM st)"
"""True when every chunk went in, or none was due because the stream has ended (``st`` returned no
row): :meth:`PostgresStreamDialect.settle_append` then reads nothing and renumbers nothing."""


_END_WITH_CHUNKS: Final = _APPEND_CTES.format(
    append="""
    UPDATE helix_streams SET
        latest_sequence = latest_sequence + :n,
        chunk_count = chunk_count + :n,
        status = :status,
        end_sequence = latest_sequence + :n,
        error = :error,
        updated_at = :now
    WHERE stream_id = :sid AND status NOT IN ('ended', 'failed')
    RETURNING latest_sequence{returning}"""
)
"""The CTEs of a stream's last chunks and its end (``terminate``) as ONE statement: the append's
(:data:`_APPEND_CTES`), its upsert replaced by one ``UPDATE`` that reserves the sequences and
records the end at the new latest sequence (``SET`` reads the row as it was, so
``latest_sequence + :n`` is the sequence of the last chunk), announced once.

The transaction path it replaces (``BEGIN``, the append, ``TERMINATE``, ``COMMIT``) cost four
round trips at the end of every run. The statement's last column is a guard (:data:`_END_COMPLETE`)
that divides by zero, failing the statement whole, unless the stream had a live row and every
chunk went in; the transaction path
then does what it always did: closes a replay's holes, records the end of a stream that has ended
already, or creates a missing row. (One ``UPDATE`` of the row, not the append's upsert and then
``TERMINATE``'s: a statement may not change one row twice.)
"""

_END_COMPLETE: Final = "(SELECT count(*) FROM st) = 1 AND (SELECT count(*) FROM ins) = :n"
"""The guard of :data:`_END_WITH_CHUNKS`: the stream had a live row and every chunk went in."""

_APPEND_GROUPS: Final = """
WITH input AS (
    SELECT g.x ->> 0 AS sid, CAST(g.x ->> 1 AS INTEGER) AS n, g.x -> 2 AS rows
    FROM json_array_elements(CAST(:groups AS JSON)) AS g(x)
), st AS (
    INSERT INTO helix_streams ({columns})
    SELECT sid, 'active', n, n, 0, NULL, NULL, 0, :now, :now FROM input ORDER BY sid COLLATE "C"
    ON CONFLICT (stream_id) DO UPDATE SET
        latest_sequence = helix_streams.latest_sequence + excluded.latest_sequence,
        chunk_count = helix_streams.chunk_count + excluded.chunk_count,
        updated_at = excluded.updated_at
    WHERE helix_streams.status NOT IN ('ended', 'failed')
    RETURNING stream_id, latest_sequence{returning}
), ins AS (
    INSERT INTO helix_stream_chunks (stream_id, sequence, run_id, step, type, chunk, dedupe_key, created_at)
    SELECT i.sid, st.latest_sequence - i.n + t.ord, t.x ->> 0, CAST(t.x -> 2 ->> 'step' AS INTEGER),
           t.x -> 2 ->> 'type', t.x -> 2, t.x ->> 1, :now
    FROM input i JOIN st ON st.stream_id = i.sid, json_array_elements(i.rows) WITH ORDINALITY AS t(x, ord)
    ON CONFLICT (stream_id, dedupe_key) DO NOTHING
    RETURNING 1
)
SELECT i.sid, st.latest_sequence,
       1 / CAST((SELECT count(*) FROM ins) = (SELECT COALESCE(sum(n), 0) FROM input JOIN st ON st.stream_id = sid)
                AS INTEGER)
FROM input i LEFT JOIN st ON st.stream_id = i.sid
"""
"""A flusher batch of several streams as ONE statement: :data:`APPEND`'s reservation and the chunk
insert for every stream at once, the stream rows locked in ``stream_id`` order (byte order,
``COLLATE "C"``: the order of Python's ``sorted``, in which the transaction path locks them, so two
batches never deadlock whatever the database's collation).

The flusher's batches hold many streams under load (about 20 at 200 runs in flight): one statement
per stream inside a transaction cost a round trip each, plus ``BEGIN`` and ``COMMIT``. A stream
that has ended gets no row from ``st`` and no chunks (its ``latest_sequence`` comes back ``NULL``).
The last column is the guard of :data:`_APPEND_COMPLETE` for the whole batch: a chunk whose dedupe
key is stored already (a replay) divides by zero, the statement fails whole, and the batch takes
the transaction path, which closes the holes under the row locks. Only batches that change no
stream status come here (a status switch is rare and keeps its own statement).
"""


def _prefixed(sql: str) -> str:
    """``sql`` with every bind parameter ``:name`` renamed ``:stream_name`` (casts use ``CAST``, not ``::``)."""
    return re.sub(r"(?<![:\w]):([A-Za-z_]\w*)", rf":{_RIDING_PREFIX}\1", sql)


_RIDING_SEQUENCE: Final = _prefixed("COALESCE((SELECT latest_sequence FROM helix_streams WHERE stream_id = :sid), 0)")
"""The stream's latest sequence (0 for a new stream) as a scalar expression: ``latest_sequence_in``'s read."""

_RIDING_ACTIVATE: Final = f"stream_on AS ({_prefixed(queries.ACTIVATE.text.strip())})"
"""The stream's activation (``activate_in``) as a CTE of a run start's statement."""


class PostgresStreamDialect(StreamDialect):
    """PostgreSQL: see the module docstring. ``notify=False`` neither sends ``NOTIFY`` nor listens."""

    def __init__(self, engine: Engine, *, notify: bool) -> None:
        super().__init__(engine)
        self.notify = notify
        self._append = queries.append_statement(_NOTIFY_RETURNING if notify else "")
        ctes = _APPEND_CTES.format(append=self._append.text.strip())
        self._append_chunks = sa.text(f"WITH {ctes}\nSELECT {_APPEND_RESULT}")
        self._append_alone = sa.text(f"WITH {ctes}\nSELECT {_APPEND_RESULT}, 1 / CAST({_APPEND_COMPLETE} AS int)")
        self._terminate = queries.terminate_statement(_NOTIFY_TERMINATE if notify else "")
        self._riding_ctes = _prefixed(ctes)
        self.riding_complete = _prefixed(_APPEND_COMPLETE)
        self._read_engine = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._append_groups = sa.text(
            _APPEND_GROUPS.format(columns=queries.STREAM_COLUMNS, returning=_NOTIFY_RETURNING if notify else "")
        )
        end_ctes = _END_WITH_CHUNKS.replace("{returning}", _NOTIFY_RETURNING if notify else "")
        self._end_with_chunks = sa.text(f"WITH {end_ctes}\nSELECT 1 / CAST({_END_COMPLETE} AS int)")

    @property
    def append_statement(self) -> sa.TextClause:
        """The append upsert, with ``pg_notify`` in its ``RETURNING`` list when notifying."""
        return self._append

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """An autocommit connection: a single statement needs no transaction."""
        with self._read_engine.connect() as conn:
            yield conn

    def single_statement(self) -> AbstractContextManager[Connection]:
        """An autocommit connection: one statement is atomic without ``BEGIN`` and ``COMMIT`` round trips."""
        return self._read_engine.connect()

    def terminate(self, conn: Connection, stream_id: str, params: dict[str, Any]) -> None:
        """The end with its ``pg_notify`` in the ``RETURNING`` list: one statement, one round trip."""
        conn.execute(self._terminate, params)

    def append_alone(self, stream_id: str, items: list[PendingChunk], status: str | None, now: int) -> bool | None:
        """The append statement with :data:`_APPEND_COMPLETE` as a guard, autocommitted (see the base method).

        The guard divides by zero unless the append is complete, failing the statement whole.
        """
        row = alone.run_alone(self.engine, self._append_alone, _append_params(stream_id, items, status, now))
        if row is None:
            return None
        latest, _inserted, _guard = row
        return latest is not None

    def end_with_chunks_alone(
        self, stream_id: str, items: list[PendingChunk], status: str, error: str | None, now: int
    ) -> bool:
        """The last chunks and the end as the one autocommitted statement :data:`_END_WITH_CHUNKS`."""
        params = {"sid": stream_id, "n": len(items), "status": status, "error": error, "now": now, "rows": _rows(items)}
        return alone.run_alone(self.engine, self._end_with_chunks, params) is not None

    def append_groups_alone(self, groups: dict[str, list[PendingChunk]], now: int) -> set[str] | None:
        """Every stream's append in the one autocommitted statement :data:`_APPEND_GROUPS`.

        Returns the streams that had ended (nothing written for them), or ``None`` having written
        nothing when a replayed chunk needs the transaction path.
        """
        body = ",".join(f"[{json.dumps(sid)},{len(items)},{_rows(items)}]" for sid, items in groups.items())
        rows = alone.run_alone(self.engine, self._append_groups, {"groups": f"[{body}]", "now": now}, rows="all")
        if rows is None:
            return None  # a replayed chunk: the transaction path, nothing written
        return {sid for sid, latest, _guard in rows if latest is None}

    def insert_chunks(
        self, conn: Connection, stream_id: str, base: int, items: list[PendingChunk], now: int
    ) -> list[int] | None:
        """Insert ``items`` as ``base + 1, ...``; ``None`` if all went in, else the stored sequences."""
        result = conn.execute(_INSERT_CHUNKS, {"sid": stream_id, "base": base, "rows": _rows(items), "now": now})
        stored = sorted(int(sequence) for sequence in result.scalars())
        return None if len(stored) == len(items) else stored

    def append_chunks(
        self, conn: Connection, stream_id: str, items: list[PendingChunk], status: str | None, now: int
    ) -> tuple[int, list[int] | None] | None:
        """The reservation and the insert in one round trip (:data:`_APPEND_CTES`)."""
        latest, inserted = conn.execute(self._append_chunks, _append_params(stream_id, items, status, now)).one()
        return self.settle_append(conn, stream_id, latest, inserted, len(items))

    def riding_append(
        self, stream_id: str, items: list[PendingChunk], status: str | None, now: int
    ) -> tuple[str, str, dict[str, Any]]:
        """The append's CTEs, parameters prefixed ``stream_``, to ride in a step commit's statement."""
        params = _append_params(stream_id, items, status, now)
        return self._riding_ctes, _APPEND_RESULT, {_RIDING_PREFIX + name: value for name, value in params.items()}

    def riding_start(self, stream_id: str, now: int) -> tuple[str, str, dict[str, Any]]:
        """The stream's start as SQL, parameters prefixed ``stream_``: ``latest_sequence_in``'s read, ``ACTIVATE``.

        The activation sends no ``NOTIFY``: a start announces nothing, as in the transaction path.
        """
        return _RIDING_SEQUENCE, _RIDING_ACTIVATE, {f"{_RIDING_PREFIX}sid": stream_id, f"{_RIDING_PREFIX}now": now}

    def settle_append(
        self, conn: Connection, stream_id: str, latest: int | None, inserted: int, n: int
    ) -> tuple[int, list[int] | None] | None:
        """``(base, stored)`` from the append's result; the stored sequences are read only after a replay."""
        if latest is None:
            return None
        base = int(latest) - n
        if int(inserted) == n:
            return base, None
        after = {"sid": stream_id, "after": base}
        return base, [int(s) for s in conn.execute(queries.SEQUENCES_AFTER, after).scalars()]

    def send_notify(self, conn: Connection, stream_id: str, *, control: bool) -> None:
        """``NOTIFY`` the stream's change, delivered when ``conn`` commits."""
        if self.notify:
            conn.execute(_NOTIFY, {"channel": NOTIFY_CHANNEL, "payload": notify_payload(stream_id, control=control)})

    def listener(self, on_payload: Callable[[str], None], on_state: Callable[[], None]) -> Listener | None:
        """A ``LISTEN`` thread on the engine's database (psycopg's own URL form), when notifying."""
        if not self.notify:
            return None
        url = self.engine.url.set(drivername="postgresql")
        return Listener(url.render_as_string(hide_password=False), on_payload, on_state)


def _append_params(stream_id: str, items: list[PendingChunk], status: str | None, now: int) -> dict[str, Any]:
    return {"sid": stream_id, "n": len(items), "status": status, "now": now, "rows": _rows(items)}


def _rows(items: list[PendingChunk]) -> str:
    """The batch as the one JSON parameter the inserts take: ``[[run_id, dedupe_key, chunk], ...]``."""
    rows = ",".join(f"[{json.dumps(item.run_id)},{json.dumps(item.dedupe_key)},{item.body}]" for item in items)
    return f"[{rows}]"
