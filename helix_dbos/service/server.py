"""Run the service in this process: launch helix-dbos, serve the app with uvicorn, shut down cleanly.

This is what ``helix-dbos serve`` calls. The process is a full worker as well as an HTTP server:
runs it starts execute here (or, with a queue, on any worker listening to it; ``execute=False``
keeps this process from running any), and runs of this executor id that were in flight when it
last died are recovered at launch. Authentication is decided *before* anything touches the database, so a
misconfigured server exits without side effects.
"""

from __future__ import annotations

import importlib
import signal
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from helix_dbos.agent import AgentConfig
from helix_dbos.llm.base import LLMAdapter
from helix_dbos.runtime.queues import RunQueue
from helix_dbos.service import SERVER_INSTALL_HINT
from helix_dbos.service.auth import Authenticator
from helix_dbos.settings import HelixSettings

API_TOKENS_ENV = "HELIX_API_TOKENS"
"""Comma-separated bearer tokens, for when ``--token`` is not given (read by ``HelixSettings.from_env``)."""

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def load_object(spec: str) -> Any:
    """``module:attribute`` -> the attribute (called first if it is a factory function)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{spec!r} must look like module:attribute")
    value = getattr(importlib.import_module(module_name), attr)
    if callable(value) and not hasattr(value, "generate_step") and not isinstance(value, type):
        value = value()
    return value


def check_auth(tokens: Sequence[str] | Mapping[str, str], allow_unauthenticated: bool) -> Authenticator:
    """Decide authentication up front; raises ``ServiceAuthConfigError`` when nothing (or too much) is set.

    ``tokens``: bearer tokens, or ``{token: tenant}``.
    """
    return Authenticator(bearer_tokens=_tokens(tokens), allow_unauthenticated=allow_unauthenticated)


def _tokens(tokens: Sequence[str] | Mapping[str, str]) -> list[str] | dict[str, str] | None:
    return (dict(tokens) if isinstance(tokens, Mapping) else list(tokens)) or None


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    # uvicorn handles SIGTERM while it serves, then re-raises it once it stopped; raising here turns
    # that into a normal exit, so the executor and DBOS are shut down by the ``finally`` below.
    raise SystemExit(0)


def run_server(
    *,
    agents: Sequence[AgentConfig],
    database_url: str,
    host: str,
    port: int,
    executor_id: str | None,
    tokens: Sequence[str] | Mapping[str, str],
    allow_unauthenticated: bool,
    llm_adapter: LLMAdapter | None = None,
    hot_window_seconds: float | None = None,
    log_level: str = "info",
    queue: RunQueue | None = None,
    execute: bool = True,
    settings: HelixSettings | None = None,
    a2a: bool = False,
) -> None:
    """Launch helix-dbos on ``database_url`` and serve the app until SIGINT/SIGTERM.

    ``settings`` (default :meth:`HelixSettings.from_env`) goes to :func:`launch`; the other
    arguments override it. ``a2a=True`` also serves the agents over A2A (``create_app(a2a=True)``);
    a missing ``[a2a]`` extra is named before DBOS is launched.
    """
    try:
        import uvicorn
    except ImportError as exc:
        raise ModuleNotFoundError(
            f"helix-dbos serve needs uvicorn, which is not installed: {SERVER_INSTALL_HINT}", name=exc.name
        ) from exc

    from helix_dbos.runtime.launch import launch, shutdown
    from helix_dbos.service.app import create_app

    check_auth(tokens, allow_unauthenticated)
    if a2a:
        from helix_dbos.a2a.sdk import require_a2a_sdk

        require_a2a_sdk()
    if threading.current_thread() is threading.main_thread():  # only there can handlers be installed
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    executor = launch(
        database_url,
        settings=settings,
        agents=agents,
        llm_adapter=llm_adapter,
        executor_id=executor_id,
        queue=queue,
        execute=execute,
        hot_window_seconds=hot_window_seconds,
    )
    try:
        app = create_app(executor, bearer_tokens=_tokens(tokens), allow_unauthenticated=allow_unauthenticated, a2a=a2a)
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            ws="none",  # no websocket routes; also keeps the websockets package (and its warnings) unloaded
            lifespan="on",
            log_level=log_level,
            timeout_graceful_shutdown=5,
        )
        uvicorn.Server(config).run()
    finally:
        shutdown(executor)


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts local connections (an unauthenticated server is tolerable there)."""
    return host in _LOOPBACK


__all__ = ["API_TOKENS_ENV", "check_auth", "is_loopback", "load_object", "run_server"]
