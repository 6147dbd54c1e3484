"""The compaction's recorded steps: count the view's tokens, and compact (with the summary call).

Both run inside ``DBOS.run_step``: their outputs are what a replay reads back, so the view a
replayed model call sends is rebuilt from them byte for byte, whatever the token counter or the
summariser would answer today.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, TypedDict

from dbos import DBOS

from helix_dbos._litellm_import import import_litellm_offline
from helix_dbos.compaction.view import CompactionState, applies_to, compacted_view, render_for_summary
from helix_dbos.errors import extract_error_message
from helix_dbos.llm.base import LLMGenerateInput
from helix_dbos.llm.config import LLMConfig
from helix_dbos.messages import Message, SystemMessage, UserMessage
from helix_dbos.runtime import services
from helix_dbos.runtime.aio import background_loop
from helix_dbos.step_result import ErrorStepResult, TextStepResult


class CheckStepOutput(TypedDict):
    """``{agent}.compaction.check``: the view's token count, and the state a run starts from."""

    tokens: int
    inherited: dict[str, Any] | None
    """The first check of a run: the compaction in effect when the previous run ended (sticky across
    turns). ``None`` on later checks, and when there is none."""


class CompactStepOutput(TypedDict):
    """``{agent}.compaction.compact``: the new compaction, and the summary call's usage."""

    state: dict[str, Any]
    usage: dict[str, Any] | None
    model: str | None
    duration_ms: float | None


def count_tokens(model: str, messages: Sequence[Message]) -> int:
    """LiteLLM's ``token_counter`` for ``model``; without LiteLLM, about four bytes a token."""
    try:
        litellm = import_litellm_offline()
    except ImportError:
        return sum(len(m.model_dump_json()) for m in messages) // 4 + 1
    from helix_dbos.llm.litellm.request import message_to_dict

    dicts = [message_to_dict(m, anthropic=False) for m in messages]
    return int(litellm.token_counter(model=model, messages=dicts))


def inherited_state(previous_run_id: str, check_name: str, compact_name: str) -> CompactionState | None:
    """The compaction in effect at the end of a previous run, from its recorded steps (DBOS's own record)."""
    state: dict[str, Any] | None = None
    for step in DBOS.list_workflow_steps(previous_run_id):
        output = step.get("output")
        if not isinstance(output, dict):
            continue
        if step.get("function_name") == compact_name:
            state = output.get("state")
        elif step.get("function_name") == check_name and output.get("inherited") is not None and state is None:
            state = output["inherited"]
    return None if state is None else CompactionState.model_validate(state)


def check_step(
    model: str,
    built: list[Message],
    transcript_length: int,
    state: CompactionState | None,
    load_from: tuple[str, str, str] | None,
) -> CheckStepOutput:
    """Count what the model would see; on a run's first check, load the previous run's compaction first.

    ``load_from``: the previous run's id and the names of the check and compact steps.
    """
    inherited = None
    if load_from is not None:
        inherited = applies_to(inherited_state(*load_from), transcript_length)
        state = inherited
    view = compacted_view(built, transcript_length, state)
    return {
        "tokens": count_tokens(model, view),
        "inherited": None if inherited is None else inherited.model_dump(mode="json"),
    }


def compact_step(
    identity: tuple[str, str, str],
    config: LLMConfig | None,
    instructions: str,
    dropped: list[Message],
    state: CompactionState,
) -> CompactStepOutput:
    """Make the compaction ``state`` describes; with a ``config``, summarise ``dropped`` first.

    ``identity``: the run id, agent name and session id the summary call is made for. A summary
    that fails leaves the new part dropped, the earlier summary kept (its error is recorded): a long session should
    not fail because its summariser did.
    """
    if config is None or not dropped:
        return {"state": state.model_dump(mode="json"), "usage": None, "model": None, "duration_ms": None}
    run_id, agent_name, session_id = identity
    request = LLMGenerateInput(
        messages=[
            SystemMessage(content=instructions),
            UserMessage(content=render_for_summary(dropped, state.summary)),
        ],
        tools=[],
        config=config,
        agent_id=run_id,
        agent_type=agent_name,
        session_id=session_id,
    )
    started = time.perf_counter()
    result = background_loop.run(services.current().llm.generate_step(request))
    duration_ms = round((time.perf_counter() - started) * 1000, 3)
    usage = None if result.usage is None else result.usage.model_dump(mode="json")
    if isinstance(result, TextStepResult) and result.content.strip():
        made = state.model_copy(update={"summary": result.content})
    else:
        error = extract_error_message(result.error) if isinstance(result, ErrorStepResult) else "no summary text"
        made = state.model_copy(update={"summary_error": error})  # the earlier summary stays
    return {"state": made.model_dump(mode="json"), "usage": usage, "model": config.model, "duration_ms": duration_ms}


__all__ = ["CheckStepOutput", "CompactStepOutput", "check_step", "compact_step", "count_tokens", "inherited_state"]
