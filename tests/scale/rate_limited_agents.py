"""The agent of the rate-limit tests and of ``scripts/bench_rate_limits.py``: one real LiteLLM call per run.

``helix-dbos worker|serve --agents tests.scale.rate_limited_agents:agents`` loads it in real
processes. Its model is ``openai/fake`` on the scripted OpenAI-compatible server whose base URL
``HELIX_RATE_TEST_API_BASE`` names (the test's or the benchmark's), called through the default
LiteLLM adapter, so every call is an HTTP request the server timestamps.

Loading it warms the process up with one call (``WARM_UP``) when the server is named. A process's
first LiteLLM call loads the provider's SDK and clients (about 2 s on the test machine), and in a
worker that happens *after* the call's admission: the call reaches the provider late, in the same
second as calls admitted a second later. A long-running worker has paid that once; the tests
measure the limit in that steady state, and leave the warm-up requests out of their counts.
"""

from __future__ import annotations

import os

from helix_dbos import LLMConfig, define_agent
from helix_dbos._litellm_import import import_litellm_offline
from helix_dbos.runtime.aio import background_loop

WARM_UP = "warm-up"
_API_BASE = os.environ.get("HELIX_RATE_TEST_API_BASE")

caller = define_agent(
    "caller",
    system_prompt="Answer in one word.",
    llm_config=LLMConfig(model="openai/fake", api_base=_API_BASE or "http://127.0.0.1:9/v1", api_key="test"),
)
agents = [caller]

if _API_BASE and os.environ.get("HELIX_EXECUTOR_ID", "").startswith("w"):
    # On the loop the runs' model calls use, so the async client it builds is the one they reuse.
    background_loop.run(
        import_litellm_offline().acompletion(
            model="openai/fake", api_base=_API_BASE, api_key="test", messages=[{"role": "user", "content": WARM_UP}]
        )
    )
