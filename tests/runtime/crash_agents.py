"""Agents shared by the crash-test worker process and the test process.

DBOS 3.4 re-enqueues a recovered workflow on an internal queue that every DBOS process on the
system database dequeues from, so any process of the app may finish it: they must all register
the same agents (as a real deployment does).
"""

from __future__ import annotations

from pydantic import BaseModel

from helix_dbos import AgentConfig, define_agent, define_tool


class LocationIn(BaseModel):
    text: str


class Answer(BaseModel):
    answer: str


def hitl_agent(llm_base_url: str) -> AgentConfig:
    """Asks the client for its location (a client-executed tool), then finishes with it."""
    return define_agent(
        "hitl-crash-agent",
        system_prompt="Ask for the location, then finish.",
        llm_config={"model": "openai/fake", "api_base": llm_base_url, "api_key": "test", "max_retries": 0},
        tools=[define_tool("get_location", input_schema=LocationIn, execute="client")],
        output_schema=Answer,
    )


def text_agent(llm_base_url: str) -> AgentConfig:
    """Answers with streamed text (no tools), for the streamed-step crash test."""
    return define_agent(
        "stream-crash-agent",
        system_prompt="Answer.",
        llm_config={"model": "openai/fake", "api_base": llm_base_url, "api_key": "test", "max_retries": 0},
    )


class NoteIn(BaseModel):
    text: str


def compaction_agent(llm_base_url: str, *, with_policy: bool = True) -> AgentConfig:
    """Notes lines in many tool turns of one run, then finishes; its view is compacted and summarised.

    ``with_policy=False``: the same agent as it was before it had a compaction policy.
    """
    from helix_dbos.compaction import CompactionPolicy

    return define_agent(
        "compaction-crash-agent",
        system_prompt="Note the lines, then submit.",
        llm_config={"model": "openai/fake", "api_base": llm_base_url, "api_key": "test", "max_retries": 0},
        tools=[
            define_tool("note", input_schema=NoteIn, execute=lambda inp, ctx: {"noted": inp.text}),
            define_tool(
                "submit", input_schema=Answer, execute=lambda inp, ctx: {"answer": inp.answer}, finish_with=True
            ),
        ],
        output_schema=Answer,
        max_steps=30,
        compaction=CompactionPolicy(max_input_tokens=400, keep_last_messages=6, summarize=True)
        if with_policy
        else None,
    )
