"""What a long session's model sees: the per-agent compaction policy (data only, no I/O).

A session that talks for a week would send its whole transcript on every model call until the
provider refuses it. ``define_agent(..., compaction=CompactionPolicy(...))`` bounds what the model
sees; the durable transcript itself is never rewritten (see :mod:`helix_dbos.compaction`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from helix_dbos.llm.config import LLMConfig

DEFAULT_SUMMARY_INSTRUCTIONS = (
    "You compress the earlier part of a conversation between a user and an assistant that uses tools. "
    "Write a concise summary that keeps every fact, decision, name, number and open task the assistant "
    "needs to continue the conversation. Write only the summary."
)
"""The summariser's system prompt when the policy names none."""


class CompactionPolicy(BaseModel):
    """When to compact what the model sees, and how.

    A compaction happens only at a boundary: when the model's view of the transcript counts more
    than ``max_input_tokens`` (LiteLLM's ``token_counter`` for the agent's model), or when the
    provider refused a call for its context window. Its result is sticky: the following calls
    reuse it (the same summary, the same cut) until the next compaction, so the cached prompt
    prefix survives from call to call.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    max_input_tokens: int = Field(gt=0)
    """Compact when the messages the model would see count more tokens than this (system prompt
    included, tool definitions and the answer not: leave room for them below the model's window)."""
    keep_last_messages: int | None = Field(default=20, ge=1)
    """The transcript's last messages kept verbatim (moved back so a tool call and its results are
    never split); the older ones are dropped, or summarised with ``summarize``. ``None``: drop none."""
    clear_tool_results_after_turns: int | None = Field(default=None, ge=0)
    """In what is kept, tool results of the model turns older than the last N are replaced by a short
    placeholder (the call and its pairing stay). ``None``: never cleared."""
    summarize: bool = False
    """Summarise the dropped part with a model call (a recorded step, with its usage); the summary is
    shown as a system message right after the system prompt. False: the dropped part is just gone."""
    summary_llm_config: LLMConfig | None = None
    """The model that summarises; the agent's own when ``None``."""
    summary_instructions: str = DEFAULT_SUMMARY_INSTRUCTIONS
    """The summariser's system prompt."""
    retry_on_context_window: bool = True
    """When the provider refuses a call for its context window, compact and call again, once."""

    @model_validator(mode="after")
    def _does_something(self) -> CompactionPolicy:
        if self.keep_last_messages is None and self.clear_tool_results_after_turns is None:
            raise ValueError("a CompactionPolicy needs keep_last_messages or clear_tool_results_after_turns")
        if self.summarize and self.keep_last_messages is None:
            raise ValueError("summarize needs keep_last_messages: only dropped messages are summarised")
        return self


__all__ = ["DEFAULT_SUMMARY_INSTRUCTIONS", "CompactionPolicy"]
