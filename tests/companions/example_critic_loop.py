"""The README's critic loop (issue 12): a writer re-consults a persistent critic on its preserved session."""

from pydantic import BaseModel

from helix_dbos import MockLLMAdapter, PersistentAgentConfig, define_agent, launch, shutdown


class Verdict(BaseModel):  # a companion always completes via __finish__, so it needs an output schema
    ok: bool
    note: str


class Draft(BaseModel):
    text: str


critic = define_agent(
    "critic",
    system_prompt="Judge the draft you are sent. Remember what you said before.",
    output_schema=Verdict,
    llm_config="openai/gpt-4o-mini",
)
writer = define_agent(
    "writer",
    system_prompt="Write a draft, ask the critic, revise until it approves.",
    output_schema=Draft,
    llm_config="openai/gpt-4o-mini",
    # Adds the companion__* tools; "blocking": spawnAgent/sendMessage return the critic's verdict.
    persistent_agents=[PersistentAgentConfig(agent=critic, mode="blocking", description="reviews drafts")],
)


def call(call_id: str, name: str, arguments: dict) -> dict:
    return {"type": "tool_calls", "tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


# One scripted model plays both agents, in the order they speak (offline; drop llm_adapter= for real).
model = MockLLMAdapter(
    [
        call("c1", "companion__spawnAgent", {"agentType": "critic", "name": "critic", "message": "Draft: hi"}),
        call("v1", "__finish__", {"ok": False, "note": "too short"}),  # the critic, turn 1
        call("c2", "companion__sendMessage", {"name": "critic", "message": "Draft: hello, world"}),
        call("v2", "__finish__", {"ok": True, "note": "better than before"}),  # the critic, turn 2
        call("f1", "__finish__", {"text": "hello, world"}),
    ]
)
executor = launch(agents=[writer], llm_adapter=model)
result = executor.execute(writer, "Write a greeting.", session_id="greeting").result()
assert result.status == "completed" and result.output == Draft(text="hello, world")

# The critic kept one session across both consultations: two turns, one transcript.
critic_session = executor.get_state("greeting-agent-critic")
assert critic_session is not None and critic_session.output == {"ok": True, "note": "better than before"}
assert [run.turn for run in executor.list_runs("greeting-agent-critic")] == [1, 2]
shutdown(executor)
