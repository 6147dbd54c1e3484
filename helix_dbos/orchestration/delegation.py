"""What a delegated run reads and what the model reads back: the pure half of sub-agent calls.

A local sub-agent (a child workflow, ``runtime/sub_agents.py``) and a remote one (another
deployment's agent, ``runtime/remote_sub_agents.py``) start from the same first message and end in
the same words, so the model cannot tell them apart by how they fail.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from helix_dbos.tool import Tool


def delegation_message(tool: Tool, arguments: dict[str, Any]) -> str | ValidationError:
    """The delegated run's first user message: its input, validated, as JSON (sorted keys: deterministic)."""
    try:
        validated = tool.validate_input(arguments)
    except ValidationError as exc:
        return exc
    data = validated.model_dump(mode="json") if hasattr(validated, "model_dump") else validated
    return json.dumps(data, sort_keys=True, ensure_ascii=False)


def ended_run_message(who: str, status: str, error: str | None) -> str:
    """What the model reads when a delegated run did not complete; ``who`` names it ("Sub-agent 'x'")."""
    if status == "timeout":
        return f"{who} timed out: {error}"
    if status == "interrupted":
        return f"{who} was interrupted before it finished"
    if status == "aborted":
        return f"{who} was stopped: {error}"
    return f"{who} failed: {error or status}"


__all__ = ["delegation_message", "ended_run_message"]
