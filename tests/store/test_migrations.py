"""The alembic revisions and ``schema.py`` must describe the same tables, on every backend."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from helix_dbos.store.engine import create_engine_for
from helix_dbos.store.migrate import check_migrated, current_revision, downgrade, head_revision, upgrade
from helix_dbos.store.schema import ALL_TABLES, MEMORIES_FTS_INDEX, SCHEMA_REVISION, VERSION_TABLE, metadata


def _diffs(engine: sa.Engine) -> list[object]:
    def include(obj: object, name: str | None, type_: str, reflected: bool, compare_to: object) -> bool:
        if type_ == "index" and name == MEMORIES_FTS_INDEX:
            return False  # a PostgreSQL-only expression index, checked by the test below
        return type_ != "table" or (name is not None and name.startswith("helix_") and name != VERSION_TABLE)

    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"compare_type": True, "include_object": include, "version_table": VERSION_TABLE}
        )
        return list(compare_metadata(context, metadata))


def test_schema_revision_is_the_head() -> None:
    assert head_revision() == SCHEMA_REVISION


def test_migrations_match_schema(empty_database_url: str) -> None:
    upgrade(empty_database_url)
    engine = create_engine_for(empty_database_url)
    try:
        assert _diffs(engine) == []
        tables = set(sa.inspect(engine).get_table_names())
        assert {t.name for t in ALL_TABLES} | {VERSION_TABLE} <= tables
        assert "alembic_version" not in tables  # never the application's own version table
    finally:
        engine.dispose()


def test_memories_full_text_index_exists_on_postgres(pg_database_url: str) -> None:
    upgrade(pg_database_url)
    engine = create_engine_for(pg_database_url)
    try:
        with engine.connect() as conn:
            definition = conn.execute(
                sa.text("SELECT indexdef FROM pg_indexes WHERE indexname = :name"), {"name": MEMORIES_FTS_INDEX}
            ).scalar_one()
        assert "gin" in definition and "to_tsvector('english'::regconfig, content)" in definition
    finally:
        engine.dispose()


def test_downgrade_and_upgrade_again(empty_database_url: str) -> None:
    upgrade(empty_database_url)
    downgrade(empty_database_url, "base")
    engine = create_engine_for(empty_database_url)
    try:
        assert not {t.name for t in ALL_TABLES} & set(sa.inspect(engine).get_table_names())
        assert current_revision(engine) is None
        upgrade(empty_database_url)
        assert current_revision(engine) == SCHEMA_REVISION
        check_migrated(engine, empty_database_url)
    finally:
        engine.dispose()


def test_check_migrated_masks_the_password() -> None:
    url = "sqlite:///:memory:"
    engine = create_engine_for(url)
    try:
        with pytest.raises(Exception, match="helix-dbos db upgrade") as raised:
            check_migrated(engine, "postgresql://user:secret@db.example/app")
        assert "secret" not in str(raised.value)
        assert "***" in str(raised.value)
    finally:
        engine.dispose()


def test_the_schema_check_reads_the_revision_alembic_reads(empty_database_url: str) -> None:
    """``current_revision`` reads alembic's version table itself (so a process that only checks the
    schema never imports alembic); it must agree with alembic at every revision and with none."""
    engine = create_engine_for(empty_database_url)

    def alembics() -> str | None:
        with engine.connect() as conn:
            return MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).get_current_revision()

    try:
        assert current_revision(engine) is None and alembics() is None  # no version table yet
        for revision in ("0001", "0005", SCHEMA_REVISION):
            upgrade(empty_database_url, revision)
            assert current_revision(engine) == alembics() and alembics() is not None
            assert str(alembics()).startswith(revision)
        downgrade(empty_database_url, "base")
        assert current_revision(engine) is None and alembics() is None  # the table stays, empty
    finally:
        engine.dispose()


def test_opening_a_store_does_not_import_alembic(tmp_path: Path) -> None:
    """alembic (with mako and pygments) cost every process ~0.4 s of imports; only migrating needs it."""
    db = tmp_path / "s.db"
    code = (
        "import sys\n"
        "from helix_dbos import SqlSessionStore, upgrade\n"
        f"url = 'sqlite:///{db}'\n"
        "upgrade(url)\n"
        "assert 'alembic' in sys.modules\n"
        "for name in [m for m in sys.modules if m == 'alembic' or m.startswith(('alembic.', 'mako'))]:\n"
        "    del sys.modules[name]\n"
        "SqlSessionStore(url).close()\n"
        "assert 'alembic' not in sys.modules, 'opening a store imported alembic'\n"
        "print('ok')\n"
    )
    first = subprocess.run(
        [sys.executable, "-c", "import sys, helix_dbos; print('alembic' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert first.stdout.strip() == "False"
    opened = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert opened.returncode == 0 and opened.stdout.strip() == "ok", opened.stderr[-2000:]


def test_sessions_written_before_tenants_belong_to_the_default_tenant(empty_database_url: str) -> None:
    upgrade(empty_database_url, "0011")
    engine = create_engine_for(empty_database_url)
    try:
        columns = "session_id, agent_type, status, version, stream_id, turn, step_count, message_count, custom_state"
        flags = "interrupt_requested, resume_count, aborted, created_at, updated_at"
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    f"INSERT INTO helix_sessions ({columns}, {flags}) "
                    "VALUES ('old', 'a', 'completed', 1, 'old', 1, 1, 2, '{}', false, 0, false, 1, 1)"
                )
            )
        upgrade(empty_database_url)
        with engine.connect() as conn:
            tenant = conn.execute(sa.text("SELECT tenant FROM helix_sessions WHERE session_id = 'old'")).scalar_one()
        assert tenant == "default"
        downgrade(empty_database_url, "0011")
        with engine.connect() as conn:
            assert "tenant" not in {c["name"] for c in sa.inspect(conn).get_columns("helix_sessions")}
    finally:
        engine.dispose()
