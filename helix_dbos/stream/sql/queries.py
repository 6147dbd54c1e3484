"""The SQL statements of the stream manager that both dialects share, and the row they read.

The statements are text, not SQLAlchemy expressions: each is one round trip whose exact shape
matters (an upsert that locks the stream row and reserves sequences, one-snapshot page reads), and
``INSERT ... ON CONFLICT`` with ``RETURNING`` is spelled the same on PostgreSQL and SQLite. What
differs between the two (how chunks are inserted, ``NOTIFY``) lives in
:mod:`helix_dbos.stream.sql.postgres` and :mod:`helix_dbos.stream.sql.sqlite`. The tables are
``helix_streams`` and ``helix_stream_chunks`` of :mod:`helix_dbos.store.schema`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, cast

import sqlalchemy as sa

from helix_dbos.store import codec
from helix_dbos.stream.base import StreamStatus
from helix_dbos.stream.chunks import StreamChunk, StreamChunkAdapter, chunk_from_json

READ_PAGE: Final = 256
"""Chunks a reader fetches per query."""

TERMINAL: Final = frozenset({"ended", "failed"})
"""Stream statuses a writer cannot append to."""

STREAM_COLUMNS: Final = (
    "stream_id, status, latest_sequence, chunk_count, activation, end_sequence, error, "
    "truncation_epoch, created_at, updated_at"
)

APPEND: Final = """
INSERT INTO helix_streams ({columns})
VALUES (:sid, COALESCE(CAST(:status AS VARCHAR), 'active'), :n, :n, 0, NULL, NULL, 0, :now, :now)
ON CONFLICT (stream_id) DO UPDATE SET
    latest_sequence = helix_streams.latest_sequence + excluded.latest_sequence,
    chunk_count = helix_streams.chunk_count + excluded.chunk_count,
    status = COALESCE(CAST(:status AS VARCHAR), helix_streams.status),
    updated_at = excluded.updated_at
WHERE helix_streams.status NOT IN ('ended', 'failed')
RETURNING latest_sequence{returning}
"""
"""Create or lock the stream row and reserve ``n`` sequences; no row back: the stream has ended.

A template: ``{returning}`` is where a dialect adds to the ``RETURNING`` list (PostgreSQL's
``pg_notify``), ``{columns}`` is :data:`STREAM_COLUMNS`.
"""


def append_statement(returning: str = "") -> sa.TextClause:
    """:data:`APPEND` with ``returning`` added to its ``RETURNING`` list."""
    return sa.text(APPEND.format(columns=STREAM_COLUMNS, returning=returning))


SEQUENCES_AFTER: Final = sa.text(
    "SELECT sequence FROM helix_stream_chunks WHERE stream_id = :sid AND sequence > :after ORDER BY sequence"
)

RENUMBER: Final = sa.text("UPDATE helix_stream_chunks SET sequence = :new WHERE stream_id = :sid AND sequence = :old")

FIX_COUNTERS: Final = sa.text(
    "UPDATE helix_streams SET latest_sequence = latest_sequence - :unused, chunk_count = chunk_count - :missing "
    "WHERE stream_id = :sid"
)

ACTIVATE: Final = sa.text(
    f"""
INSERT INTO helix_streams ({STREAM_COLUMNS})
VALUES (:sid, 'active', 0, 0, 0, NULL, NULL, 0, :now, :now)
ON CONFLICT (stream_id) DO UPDATE SET
    activation = helix_streams.activation
        + CASE WHEN helix_streams.status IN ('ended', 'failed') THEN 1 ELSE 0 END,
    status = 'active',
    updated_at = excluded.updated_at
"""
)

TERMINATE: Final = f"""
INSERT INTO helix_streams ({STREAM_COLUMNS})
VALUES (:sid, :status, 0, 0, 0, 0, :error, 0, :now, :now)
ON CONFLICT (stream_id) DO UPDATE SET
    status = excluded.status,
    end_sequence = helix_streams.latest_sequence,
    error = excluded.error,
    updated_at = excluded.updated_at
{{returning}}"""
"""Record a stream's end; a template: ``{returning}`` is where a dialect adds a ``RETURNING`` list
(PostgreSQL's ``pg_notify``, so that the end and its announcement are one statement)."""


def terminate_statement(returning: str = "") -> sa.TextClause:
    """:data:`TERMINATE` with ``returning`` (``RETURNING ...``, or nothing)."""
    return sa.text(TERMINATE.format(returning=returning))


RESET: Final = sa.text(
    f"""
INSERT INTO helix_streams ({STREAM_COLUMNS})
VALUES (:sid, 'active', 0, 0, 0, NULL, NULL, 0, :now, :now)
ON CONFLICT (stream_id) DO UPDATE SET
    status = 'active',
    activation = helix_streams.activation + 1,
    end_sequence = helix_streams.latest_sequence,
    error = NULL,
    chunk_count = 0,
    updated_at = excluded.updated_at
"""
)

DELETE_ALL: Final = sa.text("DELETE FROM helix_stream_chunks WHERE stream_id = :sid")

DELETE_STREAM: Final = sa.text("DELETE FROM helix_streams WHERE stream_id = :sid")

LOCK_STREAM: Final = sa.text(
    "UPDATE helix_streams SET updated_at = :now WHERE stream_id = :sid RETURNING latest_sequence"
)

DELETE_AFTER_STEP: Final = sa.text(
    "DELETE FROM helix_stream_chunks WHERE stream_id = :sid AND step > :step RETURNING sequence"
)

DELETE_AFTER_SEQUENCE: Final = sa.text(
    "DELETE FROM helix_stream_chunks WHERE stream_id = :sid AND sequence > :seq RETURNING sequence"
)

MARK_TRUNCATED: Final = sa.text(
    """
UPDATE helix_streams SET
    chunk_count = chunk_count - :removed,
    truncation_epoch = truncation_epoch + 1,
    truncated_at_step = :step,
    truncation_sequence = latest_sequence,
    truncation_max_removed = :max_removed,
    updated_at = :now
WHERE stream_id = :sid
"""
)

INFO: Final = sa.text("SELECT status, latest_sequence, chunk_count FROM helix_streams WHERE stream_id = :sid")

ROW_COLUMNS: Final = (
    "s.status, s.latest_sequence, s.chunk_count, s.activation, s.end_sequence, s.error, "
    "s.truncation_epoch, s.truncated_at_step, s.truncation_sequence, s.truncation_max_removed"
)

ROW: Final = sa.text(f"SELECT {ROW_COLUMNS} FROM helix_streams s WHERE s.stream_id = :sid")

# One statement, so one snapshot on both backends: the marker columns and the chunks agree.
PAGE: Final = sa.text(
    f"""
SELECT {ROW_COLUMNS}, c.sequence, CAST(c.chunk AS TEXT) AS chunk
FROM helix_streams s
LEFT JOIN (
    SELECT sequence, chunk FROM helix_stream_chunks
    WHERE stream_id = :sid AND sequence > :after
    ORDER BY sequence
    LIMIT :limit
) c ON 1 = 1
WHERE s.stream_id = :sid
ORDER BY c.sequence
"""
)

RECORDS: Final = sa.text(
    "SELECT sequence, CAST(chunk AS TEXT) FROM helix_stream_chunks "
    "WHERE stream_id = :sid AND sequence > :after ORDER BY sequence"
)


@dataclass(frozen=True, slots=True)
class StreamRow:
    """The columns of ``helix_streams`` a reader acts on (:data:`ROW`, the head of :data:`PAGE`)."""

    status: StreamStatus
    latest_sequence: int
    chunk_count: int
    activation: int
    end_sequence: int | None
    error: str | None
    truncation_epoch: int
    truncated_at_step: int | None
    truncation_sequence: int | None
    truncation_max_removed: int | None

    @classmethod
    def from_row(cls, row: Any) -> StreamRow:
        """Decode a result row whose first columns are :data:`ROW_COLUMNS`."""
        return cls(
            status=cast(StreamStatus, row[0]),
            latest_sequence=int(row[1]),
            chunk_count=int(row[2]),
            activation=int(row[3]),
            end_sequence=None if row[4] is None else int(row[4]),
            error=None if row[5] is None else codec.unescape_text(row[5]),
            truncation_epoch=int(row[6]),
            truncated_at_step=None if row[7] is None else int(row[7]),
            truncation_sequence=None if row[8] is None else int(row[8]),
            truncation_max_removed=None if row[9] is None else int(row[9]),
        )


def chunk_from_storage(text: str) -> StreamChunk:
    """A stored chunk: its JSON, with the storage escape undone when it has one (``store.codec``)."""
    if codec.ESCAPE in text:
        return StreamChunkAdapter.validate_python(codec.loads(text))
    return chunk_from_json(text)
