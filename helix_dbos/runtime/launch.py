"""Standalone mode: DBOS, the store and an executor from one database URL.

``launch("postgresql://...")`` puts everything in one PostgreSQL database (DBOS's tables in its
``dbos`` schema, helix-dbos's ``helix_*`` tables next to them). With no URL (no ``database_url``
argument, no :attr:`HelixSettings.database_url <helix_dbos.settings.HelixSettings.database_url>`,
no ``HELIX_DATABASE_URL``), it uses the embedded default: two SQLite files under ``.helix/`` (DBOS's
system database and the session store), in WAL mode with a short polling interval, which is what
DBOS needs to be usable on SQLite.

Embedding in an existing DBOS app needs none of this: create a ``DBOSAgentExecutor`` over a
``SqlSessionStore`` before your own ``DBOS.launch()``.

Why a run in flight needs more than ``DBOS.launch()`` to finish (found by killing demos):

- At launch DBOS re-enqueues the ``PENDING`` workflows of *this executor id* (and application
  version) on its internal queue; the queue thread dequeues them about a second later and runs
  them in the background. A process that does its own short job and exits (a demo) would destroy
  DBOS before that: the run is left ``ENQUEUED`` (invisible to the next launch's recovery, which
  looks for ``PENDING`` only) or ``PENDING`` again, after any number of reruns.
  :func:`recovering_runs` lists what is being recovered so a caller can wait for it.
- ``DBOS.destroy()`` does not wait for workflows: one whose session already reads ``completed``
  still has to record its result, and its thread then logs ``System database accessed before DBOS
  was launched``. :func:`shutdown` drains first.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from dbos import DBOS, DBOSConfig
from sqlalchemy.pool import NullPool

from helix_dbos.agent import AgentConfig, AgentHooks
from helix_dbos.llm.base import LLMAdapter
from helix_dbos.logger import Logger
from helix_dbos.observability.otlp import configure_otlp
from helix_dbos.runtime.aio import background_loop
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.runtime.exiting import mark_stopping
from helix_dbos.runtime.identity import DEFAULT_EXECUTOR_ID, claim_executor_id
from helix_dbos.runtime.queues import RunQueue, register_run_queue
from helix_dbos.runtime.rate_limits import (
    ProviderRateLimit,
    check_rate_limits,
    parse_rate_limits,
    register_rate_limits,
)
from helix_dbos.runtime.step_names import AGENT_WORKFLOW_NAME
from helix_dbos.settings import HelixSettings
from helix_dbos.store import SqlSessionStore
from helix_dbos.store.base import RunRecord
from helix_dbos.store.engine import to_sqlalchemy_url
from helix_dbos.store.migrate import upgrade
from helix_dbos.store.retry import RetryPolicy, is_transient, retry_call
from helix_dbos.stream.base import StreamManager
from helix_dbos.stream.sql import SqlStreamManager
from helix_dbos.tenancy import TenantBudget

DEFAULT_SQLITE_DIR = ".helix"
APPLICATION_VERSION = "helix-dbos-1"
"""Pinned DBOS application version: code edits must not strand runs in flight (bump with care)."""
DEFAULT_DRAIN_SECONDS = 10.0
"""How long :func:`shutdown` waits for this process's runs in flight before leaving them to recovery."""
_IN_FLIGHT = ["PENDING", "ENQUEUED"]


SCHEDULER_POLLING_INTERVAL_SEC = 1.0
"""How often a launched process reads the agent schedules (:mod:`helix_dbos.runtime.schedules`)."""


def default_database_url() -> str:
    """The database URL of :meth:`HelixSettings.from_env` (``HELIX_DATABASE_URL``, else the embedded SQLite default)."""
    return HelixSettings.from_env().database_url


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


def _store_is_dbos_database(database_url: str, config: DBOSConfig) -> bool:
    """Whether DBOS keeps its tables, in its default schema and format, in the store's PostgreSQL database.

    Then a submission can wake a hot run in its own transaction (``wake_in_submission``); overrides
    that move DBOS elsewhere, rename its schema, change its serializer or shard its tables turn that
    off (the wake-up is written as an unsharded DBOS client in the default schema would write it).
    """
    return (
        not database_url.startswith("sqlite:")
        and config.get("system_database_url") == dbos_system_database_url(database_url)
        and config.get("system_database_engine") is None
        and config.get("dbos_system_schema") in (None, "dbos")
        and config.get("serializer") is None
        and not config.get("sharding")
    )


def _prepare_sqlite(url: str) -> None:
    path = _sqlite_path(url)
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")


SYSTEM_DATABASE_ENGINE_KWARGS: dict[str, Any] = {"pool_pre_ping": False}
"""What standalone mode changes in DBOS's engine for a PostgreSQL system database (the rest stays DBOS's).

DBOS pings a pooled connection on every checkout, and a DBOS step checks out twice (the "already
recorded?" read, then the result's write): two extra round trips per step, and two extra committed
transactions on the server (``scripts/bench_capacity.py``: about 40 of a run's 100). A connection
that went stale in a PostgreSQL restart fails its first statement instead; SQLAlchemy then
invalidates it and every pooled connection older than it, and DBOS retries its system-database
operations on such disconnects (``db_retry``), as helix-dbos's store does (:mod:`helix_dbos.store.engine`).
The outage tests (``tests/durability``, ``tests/chaos``) run with it. ``launch(dbos_overrides=
{"db_engine_kwargs": {}})`` puts DBOS's own settings back.
"""


def dbos_config_for(
    database_url: str,
    *,
    app_name: str = "helix-dbos",
    executor_id: str | None = None,
    application_version: str = APPLICATION_VERSION,
    log_level: str = "WARNING",
) -> DBOSConfig:
    """A DBOS configuration for standalone mode; without ``executor_id``, DBOS's id is ``local``.

    :func:`launch` claims a free id instead (:mod:`helix_dbos.runtime.identity`), so that no two
    live processes share it.
    """
    system_url = dbos_system_database_url(database_url)
    config: DBOSConfig = {
        "name": app_name,
        "system_database_url": system_url,
        "application_version": application_version,
        "executor_id": executor_id or DEFAULT_EXECUTOR_ID,
        "log_level": log_level,
        # Agent schedules are read from DBOS's table by polling (DBOS's default is every 30 s):
        # every second, a created, paused or resumed schedule takes effect within about a second.
        "scheduler_polling_interval_sec": SCHEDULER_POLLING_INTERVAL_SEC,
    }
    if system_url.startswith("sqlite:"):
        _prepare_sqlite(system_url)
        config["notification_listener_polling_interval_sec"] = 0.05
    else:
        config["db_engine_kwargs"] = dict(SYSTEM_DATABASE_ENGINE_KWARGS)
    return config


def default_llm_adapter() -> LLMAdapter:
    """LiteLLM for every model string, plus the built-in model names registered so far.

    Built-in names (:mod:`helix_dbos.llm.builtin`) are registered by the modules that own them when
    they are imported: ``helix/demo-scripted``, the demo's offline scripted model, by
    :mod:`helix_dbos.demo`, which ``worker`` and ``serve`` import to load the demo agent, so they
    run (and recover) it. The runtime never imports the demo itself.
    """
    from helix_dbos.llm.builtin import builtin_models
    from helix_dbos.llm.litellm import LiteLLMAdapter
    from helix_dbos.llm.router import ModelRouter

    return ModelRouter({name: factory() for name, factory in builtin_models().items()}, LiteLLMAdapter())


def wait_for_database(url: str, policy: RetryPolicy | None = None) -> None:
    """Block until the PostgreSQL server at ``url`` answers, for at most the retry bound.

    A worker restarted by its supervisor while the database restarts or fails over must wait for
    it rather than die (every process dying during an outage turns a blip into an outage of the
    whole tier). Past the bound it raises :class:`~helix_dbos.store.retry.DatabaseUnavailableError`;
    an error that is not transient (a wrong password, a missing database) is raised at once.

    This is start-up's first contact, where a server that does not answer is as likely a wrong URL
    (a mistyped host or port) as an outage. So the first failure is one warning at once, naming the
    URL (password masked), the bound and ``HELIX_DB_RETRY_SECONDS``, and the wait after it is quiet
    but for a reminder every 30 s: not a warning per attempt, which buried that line under 69 others
    for two minutes. A database that drops out later is retried where it is used, with a warning
    per retry (:mod:`helix_dbos.store.retry`).
    """
    from sqlalchemy.engine import make_url

    from helix_dbos.store.retry import CONNECTING, RETRY_SECONDS_ENV, RetryAttempt

    bound = policy or RetryPolicy()
    log = logging.getLogger(__name__)
    shown = make_url(url).render_as_string(hide_password=True)
    last_line_at = [0.0]

    def report(attempt: RetryAttempt) -> None:
        if attempt.attempt == 1:
            log.warning(
                "cannot reach the database at %s (%s): if the URL is wrong, stop and fix it "
                "(--database-url or HELIX_DATABASE_URL); waiting up to %g s for it to answer (%s)",
                shown,
                attempt.error_line(),
                attempt.max_seconds,
                RETRY_SECONDS_ENV,
            )
        elif attempt.elapsed_seconds - last_line_at[0] >= 30:
            last_line_at[0] = attempt.elapsed_seconds
            log.warning("still waiting for the database at %s: %.0f s left", shown, attempt.remaining_seconds)

    engine = sa.create_engine(to_sqlalchemy_url(url), poolclass=NullPool)
    try:

        def ping() -> None:
            with engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")

        retry_call(ping, policy=bound, operation=CONNECTING, on_retry=report)
    finally:
        engine.dispose()


def _launch_dbos(config: DBOSConfig, policy: RetryPolicy, listen_queues: list[str] | None = None) -> None:
    """``DBOS.launch()``, started again when the database drops out in the middle of it.

    DBOS retries its own records without a bound, but not the migrations and checks of its launch:
    a database that crashes in that window (a worker restarted by its supervisor just as the database
    restarts) would fail the launch and the process with it. A failed launch is undone with
    ``DBOS.destroy`` (keeping the registered workflows) and tried again within the retry bound; an
    error that is not transient is raised at once. ``listen_queues`` (``DBOS.listen_queues``) is set
    again on every attempt, because a relaunch builds a new DBOS instance.
    """

    def attempt() -> None:
        try:
            if listen_queues is not None:
                DBOS.listen_queues(listen_queues)
            DBOS.launch()
        except Exception as exc:
            if is_transient(exc):
                DBOS.destroy()
                DBOS(config=config)
            raise

    retry_call(attempt, policy=policy, operation="launching DBOS")


def launch(
    database_url: str | None = None,
    *,
    settings: HelixSettings | None = None,
    agents: Sequence[AgentConfig] = (),
    llm_adapter: LLMAdapter | None = None,
    stream_manager: StreamManager | None = None,
    executor_id: str | None = None,
    migrate: bool = True,
    logger: Logger | None = None,
    hot_window_seconds: float | None = None,
    background_tasks: bool = True,
    takeover_after_seconds: float | None = 30.0,
    dbos_overrides: dict[str, Any] | None = None,
    queue: RunQueue | None = None,
    execute: bool = True,
    executor_id_base: str = DEFAULT_EXECUTOR_ID,
    hooks: AgentHooks | dict[str, Any] | None = None,
    rate_limits: Sequence[ProviderRateLimit] | None = None,
    tenant_budgets: Mapping[str, TenantBudget] | None = None,
) -> DBOSAgentExecutor:
    """Configure DBOS and the store from one URL, register ``agents``, launch, and return the executor.

    Runs of this executor that were in flight when the process last died are recovered by DBOS
    shortly after launch (:func:`recovering_runs` lists them); runs orphaned between their store
    write and their workflow start are started here. Without ``llm_adapter``, models are called
    through :func:`default_llm_adapter`.

    ``settings`` (:class:`~helix_dbos.settings.HelixSettings`; default :meth:`HelixSettings.from_env
    <helix_dbos.settings.HelixSettings.from_env>`) configures the process: the database URL, the
    executor id, the retry bound of every database operation (the store's, the streams', start-up's),
    the hot window, the run queue and the OTLP endpoint (with no tracer provider installed by the
    application, runs' spans are exported there: :mod:`helix_dbos.observability.otlp`). The keyword
    arguments ``database_url``, ``executor_id``, ``hot_window_seconds`` and ``queue`` override it.

    With a ``queue`` (:class:`~helix_dbos.runtime.queues.RunQueue`), runs are enqueued on it rather
    than started here, and this process also runs queued runs unless ``execute=False`` (an API-only
    process: it listens to no queue). ``execute=False`` needs a queue, or runs would never start.
    ``hooks`` are the executor-wide hooks (:class:`DBOSAgentExecutor`), fired first on every run
    this process runs.

    ``rate_limits`` (default: the settings' ``rate_limits``, ``HELIX_RATE_LIMITS``) are provider
    limits every process on the database shares (:mod:`helix_dbos.runtime.rate_limits`): a model
    call they match waits for admission on its limit's DBOS queue. Give every process of a
    deployment the same ones. ``tenant_budgets`` caps each tenant's spend (:class:`~helix_dbos.TenantBudget`).

    The executor id is claimed before DBOS launches (:mod:`helix_dbos.runtime.identity`): ``executor_id``
    (or ``dbos_overrides["executor_id"]``, or the settings' ``executor_id``) is taken, or
    refused with :class:`~helix_dbos.errors.ExecutorIdInUseError` while a live process holds it;
    without one, the first free id of the ``executor_id_base`` family (``local``, ``local-2``, ...).
    """
    settings = (settings or HelixSettings.from_env()).override(
        database_url=database_url, executor_id=executor_id, hot_window_seconds=hot_window_seconds
    )
    if queue is None and settings.run_queue is not None:
        queue = RunQueue.parse(settings.run_queue)
    if rate_limits is None:
        rate_limits = parse_rate_limits(settings.rate_limits or "")
    rate_limits = check_rate_limits(rate_limits)
    if not execute and queue is None:
        raise ValueError("launch(execute=False) needs a queue: without one, runs start in the process that asks")
    if settings.otlp_endpoint:  # spans to an OTLP backend, unless the app set a provider
        configure_otlp(settings.otlp_endpoint)
    url = settings.database_url
    policy = settings.retry_policy
    if url.startswith("sqlite:"):
        _prepare_sqlite(url)
    else:
        wait_for_database(url, policy)
    if migrate:
        retry_call(lambda: upgrade(url), policy=policy, operation="migrating the database")
    store = SqlSessionStore(url, retry=policy)
    if stream_manager is None:  # durable, resumable streams next to the store
        stream_manager = SqlStreamManager(store.engine, retry=policy)
    config = dbos_config_for(url, executor_id=DEFAULT_EXECUTOR_ID)
    if dbos_overrides:
        config.update(dbos_overrides)  # type: ignore[typeddict-item]
    requested = executor_id or (dbos_overrides or {}).get("executor_id") or settings.executor_id
    config["executor_id"] = claim_executor_id(
        store.workers,
        app_version=str(config.get("application_version") or APPLICATION_VERSION),
        requested=requested,
        base=executor_id_base,
    )
    DBOS(config=config)
    executor = DBOSAgentExecutor(
        store,
        llm_adapter=llm_adapter or default_llm_adapter(),
        stream_manager=stream_manager,
        agents=agents,
        logger=logger,
        hot_window_seconds=settings.hot_window_seconds,
        queue=queue,
        wake_in_submission=_store_is_dbos_database(url, config),
        hooks=hooks,
        rate_limits=rate_limits,
        tenant_budgets=tenant_budgets,
    )
    launched_at = datetime.now(UTC)
    _launch_dbos(config, policy, listen_queues=None if execute else [])  # [] dequeues nothing: workers run them
    executor.schedules.fill_launch_gap(launched_at)
    if queue is not None:
        register_run_queue(queue)
    register_rate_limits(rate_limits)
    executor.client.double_text.register_queue()
    executor.recover_orphaned_runs()
    if background_tasks:
        executor.start_background_tasks(takeover_after_seconds=takeover_after_seconds)
    return executor


def recovering_runs(executor: DBOSAgentExecutor) -> list[RunRecord]:
    """The runs that were in flight when a process died and are now being run again, oldest first.

    That is every agent workflow of this application version still ``PENDING`` under this executor
    id (DBOS re-enqueues them at launch; orphans started by :func:`launch` are among them), and
    every one ``ENQUEUED`` on DBOS's internal queue (re-enqueued by an earlier launch or
    ``helix-dbos recover`` and not yet dequeued; any live process may dequeue it), but not a run
    queue's backlog. Call it right after :func:`launch`; wait for a
    run with ``AgentExecutionHandle(executor, run, agent_name).result()``.
    """
    statuses = DBOS.list_workflows(
        name=AGENT_WORKFLOW_NAME,
        status=_IN_FLIGHT,
        app_version=str(DBOS.application_version),
        load_input=False,
        load_output=False,
    )
    me = executor.executor_id
    runs = [executor.store.get_run(w.workflow_id) for w in statuses if w.executor_id == me or _requeued(w)]
    return sorted((r for r in runs if r is not None), key=lambda r: (r.started_at, r.run_id))


def _requeued(status: Any) -> bool:
    """An ``ENQUEUED`` run put back by recovery, as opposed to a run queue's ordinary backlog.

    Recovery and takeover of runs started locally use DBOS's internal queue; a run queue's waiting
    runs (:mod:`.queues`) are new work, not recovery, unless this executor was running them.
    """
    return status.status == "ENQUEUED" and (not status.queue_name or status.queue_name.startswith("_dbos"))


def _running_here(executor: DBOSAgentExecutor) -> list[str]:
    """Agent workflows PENDING under this executor id: the ones this process is running."""
    statuses = DBOS.list_workflows(
        name=AGENT_WORKFLOW_NAME,
        status="PENDING",
        executor_id=executor.executor_id,
        app_version=str(DBOS.application_version),
        load_input=False,
        load_output=False,
    )
    return [w.workflow_id for w in statuses]


def drain(executor: DBOSAgentExecutor, timeout_seconds: float = DEFAULT_DRAIN_SECONDS) -> list[str]:
    """Wait until this process runs no agent workflow, at most ``timeout_seconds``; returns those left.

    A run's session reads ``completed`` when its last step commits, which is 0.2-2 s under load
    before DBOS records the workflow's own success: that is the work a shutdown must wait for.
    """
    deadline = time.monotonic() + timeout_seconds
    delay = 0.01
    while True:
        running = _running_here(executor)
        if not running or time.monotonic() >= deadline:
            return running
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.2)


class _AfterShutdownNoise(logging.Filter):
    """Drops DBOS's tracebacks from workflow threads that outlived ``DBOS.destroy()``.

    Such a thread (a run blocked in a hot HITL wait, a tool slower than the drain) fails at its next
    DBOS call because DBOS is gone; nothing is recorded, so its workflow stays ``PENDING`` and is
    recovered at the next start. :func:`shutdown` reports those runs once instead.
    """

    MESSAGE = "System database accessed before DBOS was launched"

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return exc is None or self.MESSAGE not in str(exc)


_after_shutdown_noise = _AfterShutdownNoise()


def shutdown(
    executor: DBOSAgentExecutor | None = None, *, drain_timeout_seconds: float = DEFAULT_DRAIN_SECONDS
) -> list[str]:
    """Drain, then stop DBOS (keeping workflow registrations, so a later ``launch`` in this process works).

    Waits up to ``drain_timeout_seconds`` for the agent workflows this process runs to finish
    (:func:`drain`). Those still running then stay ``PENDING`` under this executor id: DBOS runs
    them again when a process with the same executor id starts, or another worker takes them over.
    Returns their workflow ids. Queued stream chunks are flushed before the store's connections close.
    """
    left: list[str] = []
    drained = False
    executor_id = str(DBOS.executor_id) if executor is not None else ""
    if executor is not None:
        executor.stop_background_tasks()  # no takeover or sweep may start work while draining
        executor.schedules.close()  # nor a backfill of a fire dropped at launch (fill_launch_gap)
        try:
            left = drain(executor, drain_timeout_seconds)
            drained = not left
        except Exception as exc:  # a database that is down must not keep a process from stopping
            executor.logger.warn("[helix-dbos] could not drain runs at shutdown", {"error": repr(exc)})
        if left:
            executor.logger.warn(
                "[helix-dbos] runs still in flight at shutdown are left to recovery",
                {"executor_id": executor.executor_id, "workflow_ids": left},
            )
        logging.getLogger("dbos").addFilter(_after_shutdown_noise)
    # DBOS goes first: a workflow thread that outlives the drain must find DBOS gone (and record
    # nothing, staying recoverable), never the executor's services gone while DBOS could still
    # record that as the run's failure.
    mark_stopping()
    DBOS.destroy()
    if executor is not None and drained:
        # Free for the next process at once. Not while runs are left in flight: their threads may
        # still be in a tool, and a process taking the id would recover and run them alongside;
        # the id frees itself when this process is gone (the liveness rules of .identity).
        try:
            executor.store.workers.release(executor_id)
        except Exception as exc:
            executor.logger.warn("[helix-dbos] could not release the executor id", {"error": repr(exc)})
    if executor is not None:
        executor.close()
        manager = executor.streams.manager
        if isinstance(manager, SqlStreamManager):
            background_loop.run(manager.aclose())
        executor.store.close()
    background_loop.close_resources()  # sessions kept across runs (MCP) end with the runtime
    return left
