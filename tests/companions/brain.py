"""A scripted model for companion tests: one handler for the parent and its companions.

The scripted OpenAI-compatible server calls :meth:`Brain.__call__` with each request; the request's
system prompt says which agent asks, and the agent's script is a function of the transcript it
sent, so a re-executed LLM call gets the same answer.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

Script = Callable[[list[dict[str, Any]]], dict[str, Any]]


def tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool results of a request, as parsed JSON where they are JSON (else the raw text)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] != "tool":
            continue
        try:
            out.append(json.loads(m["content"]))
        except ValueError:
            out.append({"raw": m["content"]})
    return out


def users(messages: list[dict[str, Any]]) -> list[str]:
    """The user messages' text."""
    texts = []
    for m in messages:
        if m["role"] != "user":
            continue
        content = m["content"]
        texts.append(content if isinstance(content, str) else " ".join(p.get("text", "") for p in content))
    return texts


def call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


class Brain:
    """Routes each request to the script of the agent whose system prompt contains its marker."""

    def __init__(self, scripts: dict[str, Script]) -> None:
        self.scripts = scripts
        self.lock = threading.Lock()
        self.requests: dict[str, list[list[dict[str, Any]]]] = {k: [] for k in scripts}

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
        if not isinstance(system, str):
            system = " ".join(p.get("text", "") for p in system)
        for marker, script in self.scripts.items():
            if marker in system:
                with self.lock:
                    self.requests[marker].append(body["messages"])
                return script(body["messages"])
        raise AssertionError(f"no script for system prompt {system[:80]!r}")
