"""A worker process for ``test_park_crash.py``: two runs behind a ``concurrency=1`` limit, the second parked.

``start``: launch on the given SQLite file, start run ``one`` (its call is slow at the provider,
so it holds the only slot) and run ``two`` (which waits past its 0.2 s hot window and parks);
print ``parked`` once ``two``'s park is recorded and no thread runs it, then wait to be killed.
``recover``: launch again (which recovers both runs), wait for both results and print each
status and how often ``two`` recorded its park and its model call, as ``two <status> <parks> <llm>``.
"""

from __future__ import annotations

import sys
import time

from dbos import DBOS

from helix_dbos import LLMConfig, ProviderRateLimit, define_agent, launch
from tests.ratelimit.probes import threads_running

ONE, TWO = "park-one", "park-two"


def _names(run_id: str) -> list[str]:
    return [str(s["function_name"]) for s in DBOS.list_workflow_steps(run_id)]


def main() -> None:
    mode, url, base_url = sys.argv[1:4]
    agent = define_agent(
        "limited",
        system_prompt="Answer.",
        llm_config=LLMConfig(model="openai/fake", api_base=base_url, api_key="test"),
    )
    limit = ProviderRateLimit(match="openai/fake", name="openai", concurrency=1)
    executor = launch(url, agents=[agent], rate_limits=[limit], hot_window_seconds=0.2, background_tasks=False)
    two_run = f"{TWO}-turn-1"
    if mode == "start":
        executor.execute("limited", "one", session_id=ONE)
        time.sleep(0.5)
        executor.execute("limited", "two", session_id=TWO)
        deadline = time.monotonic() + 60
        while "limited.rate_limit.park" not in _names(two_run) or threads_running(two_run):
            if time.monotonic() > deadline:
                print("timed out", flush=True)
                sys.exit(3)
            time.sleep(0.05)
        print("parked", flush=True)
        time.sleep(600)
        return
    for session_id in (ONE, TWO):
        handle = executor.get_handle(session_id)
        assert handle is not None
        status = handle.result(timeout_seconds=90).status
        names = _names(f"{session_id}-turn-1")
        print(session_id, status, names.count("limited.rate_limit.park"), names.count("limited.llm"), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
