"""The step commit carrying a stream's chunks stays short enough for psycopg to cache its parse.

psycopg converts a statement's ``%(name)s`` placeholders in Python on every execution, unless the
statement is at most ``MAX_CACHED_STATEMENT_LENGTH`` (4096) characters, when it caches the result.
The commit with the chunks riding in it is executed once per model call, so going over the limit
costs every step that parse (measured: ~0.2 ms of CPU per step). A column added to the commit may
push it over: then shorten the statement (or its parameter names) rather than raise this bound.
"""

from __future__ import annotations

import psycopg._queries
import sqlalchemy as sa

from helix_dbos.store.postgres import COMMIT_STEP, COMMIT_STEP_ALONE, commit_carrying
from helix_dbos.stream.sql.postgres import PostgresStreamDialect

LIMIT = getattr(psycopg._queries, "MAX_CACHED_STATEMENT_LENGTH", 4096)


def as_psycopg_sends_it(statement: sa.TextClause, engine: sa.Engine) -> str:
    return str(statement.compile(dialect=engine.dialect))


def test_the_commit_with_its_riding_chunks_is_short_enough_to_be_cached() -> None:
    engine = sa.create_engine("postgresql+psycopg://helix@localhost/unused")  # never connects
    for notify in (True, False):
        dialect = PostgresStreamDialect(engine, notify=notify)
        ctes, columns, _params = dialect.riding_append("s", [], None, 0)
        assert len(as_psycopg_sends_it(commit_carrying(ctes, columns), engine)) <= LIMIT
        # ... and with the guard of a commit outside a transaction (the common case)
        assert len(as_psycopg_sends_it(commit_carrying(ctes, columns, dialect.riding_complete), engine)) <= LIMIT
    assert len(as_psycopg_sends_it(COMMIT_STEP, engine)) <= LIMIT
    assert len(as_psycopg_sends_it(COMMIT_STEP_ALONE, engine)) <= LIMIT
