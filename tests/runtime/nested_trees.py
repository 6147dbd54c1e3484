"""A ``top -> mid -> leaf`` session served by real worker processes: the crash tests' shared set-up.

The scripted model runs in the test's process (``tests.runtime.nested_agents.Model``) behind the
scripted OpenAI-compatible server; each worker is ``nested_worker.py`` on the test's database, with
a 0.3 s hot window, so ``mid`` parks on a slow ``leaf`` and ``top`` parks on ``mid``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from helix_dbos import SqlSessionStore
from helix_dbos.testing import ScriptedOpenAIServer
from tests.runtime.nested_agents import Model
from tests.worker_process import WorkerProcess, start_worker

WORKER = Path(__file__).with_name("nested_worker.py")
REPO = Path(__file__).resolve().parents[2]


@dataclass
class NestedTree:
    """The session under test, its store and its model; :meth:`worker` starts a worker on them."""

    url: str
    session: str
    model: Model
    base_url: str
    store: SqlSessionStore

    @property
    def mid(self) -> str:
        """The middle child's session id (``top``'s first call, to ``mid``)."""
        return f"{self.session}-sub-1.1-ask_mid"

    def worker(self, mid_timeout_ms: int, deadline_seconds: float, *flags: str) -> WorkerProcess:
        """``nested_worker.py`` on this session (``--start``, ``--die-continuing-a-child``: see there)."""
        env = {**os.environ, "PYTHONPATH": str(REPO), "HELIX_HOT_WINDOW_SECONDS": "0.3"}
        args = [self.url, self.base_url, self.session, str(mid_timeout_ms), str(deadline_seconds), *flags]
        return start_worker(WORKER, args, env=env)


@contextmanager
def nested_tree(url: str, session: str, *, leaf_seconds: float) -> Iterator[NestedTree]:
    """The scripted server with ``leaf``'s answer held ``leaf_seconds``, and the store on ``url``."""
    model = Model(leaf_seconds=leaf_seconds)
    server = ScriptedOpenAIServer(handler=model)
    base_url = server.start()
    store = SqlSessionStore(url)
    try:
        yield NestedTree(url, session, model, base_url, store)
    finally:
        store.close()
        server.stop()
