"""The agent and model of the scale-out tests and of ``scripts/bench_queue.py``.

``helix-dbos worker|serve --agents tests.scale.agents:agents --llm-adapter tests.scale.agents:model``
loads them in real processes. Each run makes one model call that sleeps ``HELIX_SCALE_STEP_SECONDS``
(asynchronously, so runs in one worker overlap as real model calls do) and, when
``HELIX_SCALE_LOG`` names a file, appends one JSON line per call: the run's session, the worker's
executor id and pid, and the call's start and end (epoch seconds). The tests measure concurrency
and spread from those lines, the runs' own timestamps.
"""

from __future__ import annotations

import asyncio
import json
import os
import time

from helix_dbos import LLMGenerateInput, UserMessage, define_agent
from helix_dbos.step_result import StepResult, TextStepResult

sleeper = define_agent("sleeper", system_prompt="Answer after a while.", llm_config="scripted/sleeper")
agents = [sleeper]


class SleepyModel:
    """One model call per run: log its start, sleep, log its end, answer with the user's text."""

    async def generate_step(self, input: LLMGenerateInput) -> StepResult:
        start = time.time()
        await asyncio.sleep(float(os.environ.get("HELIX_SCALE_STEP_SECONDS", "0")))
        end = time.time()
        last = input.messages[-1]
        said = last.content if isinstance(last, UserMessage) else "?"
        log = os.environ.get("HELIX_SCALE_LOG")
        if log:
            line = {
                "session_id": input.session_id,
                "executor_id": os.environ.get("HELIX_EXECUTOR_ID", ""),
                "pid": os.getpid(),
                "start": start,
                "end": end,
            }
            with open(log, "a") as out:  # one short write per line: O_APPEND keeps lines whole
                out.write(json.dumps(line) + "\n")
        return TextStepResult(content=f"done: {said}", should_stop=True, stop_reason="end_turn")


def model() -> SleepyModel:
    return SleepyModel()
