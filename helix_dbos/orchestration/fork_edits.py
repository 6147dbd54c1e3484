"""Edits a fork applies at its branch point: the input (a replaced or added user message) and the state.

Time travel is a fork plus an edit: "what if the user had said X at turn k" or "what if the state had
been Y at step k". The fork copies the source's transcript up to a checkpoint; these pure functions
decide what of that prefix it keeps and what it appends, and what custom state it starts from. No
store, no clock: the runtime (:mod:`helix_dbos.runtime.forks`) resolves the checkpoint and writes.

- ``message_mode="replace"`` replaces the last user message at or before the checkpoint and drops
  what followed it, so the fork's transcript ends with the edited input: ``retry`` on the fork runs
  the model on it. ``"append"`` adds the message after the whole prefix instead.
- ``state`` replaces the custom state; ``state_patch`` is a JSON merge patch (RFC 7396) over the
  checkpoint's state (``null`` deletes a key). Naming both is refused: they would disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from helix_dbos.errors import ForkEditError
from helix_dbos.messages import Message, UserMessage

__all__ = [
    "ForkEdits",
    "MessageMode",
    "apply_merge_patch",
    "check_edits",
    "edited_state",
    "edited_transcript",
]

MessageMode = Literal["replace", "append"]


class ForkEdits(BaseModel):
    """What a fork changes at its branch point; the default changes nothing."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    message: str | None = None
    """A user message: replaces the last one at the checkpoint, or is added after it (``message_mode``)."""
    message_mode: MessageMode = "replace"
    """``replace`` (the checkpoint's last user message, and what followed it) or ``append``."""
    state: dict[str, Any] | None = None
    """The fork's custom state, replacing the checkpoint's."""
    state_patch: dict[str, Any] | None = None
    """A JSON merge patch (RFC 7396) applied to the checkpoint's custom state."""

    def is_empty(self) -> bool:
        """True when the fork is a plain copy of the checkpoint."""
        return self.message is None and self.state is None and self.state_patch is None

    def recorded(self) -> dict[str, Any]:
        """The edits as the fork's metadata records them (what a repeat is compared against)."""
        return self.model_dump(exclude_none=True, exclude_defaults=True) if not self.is_empty() else {}


def check_edits(edits: ForkEdits) -> None:
    """Refuse edits that contradict each other, before anything is read or written."""
    if edits.state is not None and edits.state_patch is not None:
        raise ForkEditError("give state= (a replacement) or state_patch= (a merge patch), not both")
    if edits.message is not None and not edits.message.strip():
        raise ForkEditError("the edited message is empty")


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396: objects merge key by key, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


def edited_state(custom_state: dict[str, Any], edits: ForkEdits) -> dict[str, Any] | None:
    """The fork's custom state, or ``None`` when the edits leave the checkpoint's as it is."""
    if edits.state is not None:
        return dict(edits.state)
    if edits.state_patch is not None:
        patched = apply_merge_patch(custom_state, edits.state_patch)
        return patched if isinstance(patched, dict) else {}
    return None


def edited_transcript(messages: Sequence[Message], edits: ForkEdits) -> tuple[int, list[Message]]:
    """How many of the checkpoint's messages the fork keeps, and the edited message to add after them.

    Returns ``(len(messages), [])`` without a message edit. ``replace`` keeps the messages before
    the checkpoint's last user message; a checkpoint with no user message has nothing to replace.
    """
    if edits.message is None:
        return len(messages), []
    edited = UserMessage(content=edits.message)
    if edits.message_mode == "append":
        return len(messages), [edited]
    last_user = next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], UserMessage)), None)
    if last_user is None:
        raise ForkEditError("the checkpoint has no user message to replace (use message_mode='append')")
    return last_user, [edited]
