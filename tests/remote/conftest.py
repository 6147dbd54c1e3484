"""Two real ``helix-dbos serve`` processes, each on its own PostgreSQL database: A (the parent's
service) delegates to agents that B serves. Both can be SIGKILLed and started again on the same
port and database (``tests/serve_process.py``'s :meth:`ServeProcess.kill`, :meth:`ServeProcess.start`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from helix_dbos.store.migrate import upgrade
from tests import pg
from tests.remote.agents import TOKEN
from tests.serve_process import ServeProcess
from tests.tool_gate import ToolGate


@dataclass
class Pair(ToolGate):
    """A and B, and (``shared``: ``$HELIX_REMOTE_DIR``) the remote tool's execution log and gate."""

    a: ServeProcess
    b: ServeProcess


@pytest.fixture(scope="module")
def services(pg_server_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """A and B, started once per module (a start costs seconds): tests tell their runs apart by session."""
    logs = tmp_path_factory.mktemp("remote")
    names = [pg.unique_name("helix_remote_a"), pg.unique_name("helix_remote_b")]
    a_url, b_url = (pg.create_database(pg_server_url, name) for name in names)
    shared = logs / "shared"
    shared.mkdir()
    for url in (a_url, b_url):
        upgrade(url)
    common = {"llm_adapter": "tests.remote.agents:model", "token": TOKEN, "logs": logs}
    b = ServeProcess(
        "service-b", b_url, agents="tests.remote.agents:remote_agents", env={"HELIX_REMOTE_DIR": str(shared)}, **common
    )
    env_a = {"HELIX_REMOTE_URL": b.base_url, "HELIX_REMOTE_DIR": str(shared)}
    a = ServeProcess("service-a", a_url, agents="tests.remote.agents:parent_agents", env=env_a, **common)
    try:
        b.start()
        a.start()
        yield Pair(shared=shared, a=a, b=b)
    finally:
        (shared / "gate").touch()  # release a tool still waiting
        a.stop(fail_on_hang=False)
        b.stop(fail_on_hang=False)
        for name in names:
            pg.drop_database(pg_server_url, name)


@pytest.fixture
def pair(services: Pair) -> Iterator[Pair]:
    """The module's services with a fresh execution log and a closed gate."""
    for name in ("gate", "dig-entries"):
        (services.shared / name).unlink(missing_ok=True)
    yield services
    services.open_gate()
