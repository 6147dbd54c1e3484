"""Compaction for long sessions: a bounded view of the transcript for the model, durable and replay-exact.

``define_agent(..., compaction=CompactionPolicy(...))`` decides what the model sees once the
transcript is long: a window of the last messages, old tool results cleared, the older part
summarised by a model call. The durable transcript is never rewritten; each compaction is a
recorded step output, so a replay sends the very bytes the first execution sent. The run-loop side
is the built-in capability in :mod:`helix_dbos.compaction.capability`; the view is pure
(:mod:`helix_dbos.compaction.view`); what the model saw at a step, beside the transcript, is
:func:`model_view` (:mod:`helix_dbos.compaction.model_view`). See ``docs/long-sessions.md``.
"""

from __future__ import annotations

from helix_dbos.compaction.model_view import ModelView, ModelViewMessage, TranscriptMark, model_view
from helix_dbos.compaction.policy import DEFAULT_SUMMARY_INSTRUCTIONS, CompactionPolicy
from helix_dbos.compaction.view import CLEARED_TOOL_RESULT, SUMMARY_HEADER, CompactionState, compacted_view

__all__ = [
    "CLEARED_TOOL_RESULT",
    "DEFAULT_SUMMARY_INSTRUCTIONS",
    "SUMMARY_HEADER",
    "CompactionPolicy",
    "CompactionState",
    "ModelView",
    "ModelViewMessage",
    "TranscriptMark",
    "compacted_view",
    "model_view",
]
