"""Standalone mode: DBOS, the store and an executor from one database URL.

``launch("postgresql://...")`` puts everything in one PostgreSQL database (DBOS's tables in its
``dbos`` schema, helix-dbos's ``helix_*`` tables next to them). With no URL and no
``HELIX_DATABASE_URL``, it uses the embedded default: two SQLite files under ``.helix/`` (DBOS's
system database and the session store), in WAL mode with a short polling interval, which is what
DBOS needs to be usable on SQLite.

Embedding in an existing DBOS app needs none of this: create a ``DBOSAgentExecutor`` over a
``SqlSessionStore`` before your own ``DBOS.launch()``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSConfig

from helix_dbos.agent import AgentConfig
from helix_dbos.llm.adapter import LLMAdapter
from helix_dbos.logger import Logger
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.runtime.hitl import DEFAULT_HOT_WINDOW_SECONDS
from helix_dbos.store.migrate import upgrade
from helix_dbos.store.sql import SqlSessionStore
from helix_dbos.stream.manager import StreamManager
from helix_dbos.stream.sql import SqlStreamManager

DATABASE_URL_ENV = "HELIX_DATABASE_URL"
EXECUTOR_ID_ENV = "HELIX_EXECUTOR_ID"
DEFAULT_SQLITE_DIR = ".helix"
APPLICATION_VERSION = "helix-dbos-1"
"""Pinned DBOS application version: code edits must not strand runs in flight (bump with care)."""


def default_database_url() -> str:
    """``HELIX_DATABASE_URL``, or the embedded SQLite default."""
    return os.environ.get(DATABASE_URL_ENV) or f"sqlite:///{DEFAULT_SQLITE_DIR}/helix.sqlite"


def default_executor_id() -> str:
    """``HELIX_EXECUTOR_ID``, else ``DBOS__VMID``, else ``local``: unique per live process, stable across restarts."""
    return os.environ.get(EXECUTOR_ID_ENV) or os.environ.get("DBOS__VMID") or "local"


def _sqlite_path(url: str) -> Path:
    return Path(url.removeprefix("sqlite:///"))


def dbos_system_database_url(database_url: str) -> str:
    """Where DBOS keeps its tables for a given store URL (same PostgreSQL database; a sibling SQLite file)."""
    if database_url.startswith("sqlite:"):
        path = _sqlite_path(database_url)
        return f"sqlite:///{path.with_name(path.stem + '-dbos' + path.suffix)}"
    for prefix in ("postgresql+psycopg://", "postgresql+psycopg2://", "postgres://"):
        if database_url.startswith(prefix):
            return "postgresql://" + database_url[len(prefix) :]
    return database_url


def _prepare_sqlite(url: str) -> None:
    path = _sqlite_path(url)
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")


def dbos_config_for(
    database_url: str,
    *,
    app_name: str = "helix-dbos",
    executor_id: str | None = None,
    application_version: str = APPLICATION_VERSION,
    log_level: str = "WARNING",
) -> DBOSConfig:
    """A DBOS configuration for standalone mode."""
    system_url = dbos_system_database_url(database_url)
    config: DBOSConfig = {
        "name": app_name,
        "system_database_url": system_url,
        "application_version": application_version,
        "executor_id": executor_id or default_executor_id(),
        "log_level": log_level,
    }
    if system_url.startswith("sqlite:"):
        _prepare_sqlite(system_url)
        config["notification_listener_polling_interval_sec"] = 0.05
    return config


def launch(
    database_url: str | None = None,
    *,
    agents: Sequence[AgentConfig] = (),
    llm_adapter: LLMAdapter | None = None,
    stream_manager: StreamManager | None = None,
    executor_id: str | None = None,
    migrate: bool = True,
    logger: Logger | None = None,
    hot_window_seconds: float = DEFAULT_HOT_WINDOW_SECONDS,
    background_tasks: bool = True,
    takeover_after_seconds: float | None = 30.0,
    dbos_overrides: dict[str, Any] | None = None,
) -> DBOSAgentExecutor:
    """Configure DBOS and the store from one URL, register ``agents``, launch, and return the executor.

    Runs of this executor that were in flight when the process last died are recovered by DBOS
    shortly after launch; runs orphaned between their store write and their workflow start are
    started here.
    """
    url = database_url or default_database_url()
    if url.startswith("sqlite:"):
        _prepare_sqlite(url)
    if migrate:
        upgrade(url)
    store = SqlSessionStore(url)
    if stream_manager is None:
        stream_manager = SqlStreamManager(store.engine)  # durable, resumable streams next to the store
    config = dbos_config_for(url, executor_id=executor_id)
    if dbos_overrides:
        config.update(dbos_overrides)  # type: ignore[typeddict-item]
    DBOS(config=config)
    executor = DBOSAgentExecutor(
        store,
        llm_adapter=llm_adapter,
        stream_manager=stream_manager,
        agents=agents,
        logger=logger,
        hot_window_seconds=hot_window_seconds,
    )
    DBOS.launch()
    executor.recover_orphaned_runs()
    if background_tasks:
        executor.start_background_tasks(takeover_after_seconds=takeover_after_seconds)
    return executor


def shutdown(executor: DBOSAgentExecutor | None = None) -> None:
    """Stop DBOS (keeping workflow registrations, so a later ``launch`` in this process works).

    Queued stream chunks are flushed before the store's connections close.
    """
    if executor is not None:
        executor.close()
        manager = executor.streams.manager
        if isinstance(manager, SqlStreamManager):
            background_loop.run(manager.aclose())
    DBOS.destroy()
    if executor is not None:
        executor.store.close()
