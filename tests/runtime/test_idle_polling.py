"""What a launched process costs while idle: its DBOS queue polls (issue 32, "Capacity").

DBOS's queue thread polls every registered queue on its interval whether or not anything waits
(there is no wake-up on enqueue). The double-texting tickets' queue is partitioned, so each poll is
a few statements and transactions; polled every 20 ms it was about an eighth of a helix-dbos
process's CPU under the capacity load, and as many transactions a second on an idle worker.
The test counts the polls DBOS really makes of it over an idle stretch of a launched process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from helix_dbos import MockLLMAdapter, define_agent
from helix_dbos.runtime.double_text import DOUBLE_TEXT_QUEUE
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.runtime.launch import launch, shutdown

pytestmark = pytest.mark.postgres

agent = define_agent("idle-greeter", system_prompt="Greet.", llm_config="openai/none")
IDLE_SECONDS = 2.0


@pytest.fixture
def launched(pg_database_url: str) -> Iterator[DBOSAgentExecutor]:
    executor = launch(pg_database_url, agents=[agent], llm_adapter=MockLLMAdapter([]))
    try:
        yield executor
    finally:
        shutdown(executor)


def test_an_idle_process_polls_the_ticket_queue_a_few_times_a_second(launched: DBOSAgentExecutor) -> None:
    from dbos._dbos import _get_dbos_instance

    sys_db = _get_dbos_instance()._sys_db
    polls: list[float] = []
    lock = threading.Lock()
    dequeue = sys_db.start_queued_partitioned_workflows

    def counted(queue: Any, *args: Any, **kwargs: Any) -> Any:
        if queue.name == DOUBLE_TEXT_QUEUE:
            with lock:
                polls.append(time.monotonic())
        return dequeue(queue, *args, **kwargs)

    sys_db.start_queued_partitioned_workflows = counted  # type: ignore[method-assign]
    try:
        time.sleep(1.5)  # DBOS's queue thread reads the interval at its next poll
        with lock:
            polls.clear()
        time.sleep(IDLE_SECONDS)
        with lock:
            seen = len(polls)
    finally:
        sys_db.start_queued_partitioned_workflows = dequeue  # type: ignore[method-assign]
    assert 1 <= seen <= 5 * IDLE_SECONDS, f"{seen} polls of the ticket queue in {IDLE_SECONDS} idle seconds"
