"""Seed parity: every public name of seed 002's import blocks, and where helix-dbos keeps it.

The list is data: one line per name the seeds import from ``@helix-agents/core``, converted by the
naming rule (camelCase -> snake_case, PascalCase types stay, acronyms as one word:
``mapOpenAIFinishReason`` -> ``map_openai_finish_reason``), with its home module. A new seed name is
one line here. A name whose Python form differs on purpose (a Zod schema is a pydantic
``TypeAdapter``; Immer's tracker is ``StateTracker``) names its equivalent; names that belong to
another open issue are ``pending:<issue>``, never faked; ``n/a`` names say why in ``NOT_APPLICABLE``.
"""

from __future__ import annotations

import importlib
import re

import pytest

SEED_NAMES: list[tuple[str, str, str]] = [
    ("AcquireOptions", "AcquireOptions", "helix_dbos.lock"),
    ("AgentAlreadyRunningError", "AgentAlreadyRunningError", "helix_dbos"),
    ("AgentInput", "AgentInput", "helix_dbos"),
    ("AgentNotResumableError", "AgentNotResumableError", "helix_dbos"),
    ("agentStatusToSessionStatus", "agent_status_to_session_status", "helix_dbos.session"),
    ("AgentStatusValues", "AgentStatusValues", "helix_dbos.session"),
    ("anthropicCache", "anthropic_cache", "helix_dbos.llm.caching"),
    ("AppliedCacheResult", "AppliedCacheResult", "helix_dbos.llm.caching"),
    ("applyCacheStrategies", "apply_cache_strategies", "helix_dbos.llm.caching"),
    ("Attachment", "Attachment", "helix_dbos.attachments"),
    ("buildEffectiveTools", "build_effective_tools", "helix_dbos.orchestration.state_operations"),
    ("buildMessagesForLLM", "build_messages_for_llm", "helix_dbos.orchestration.message_builder"),
    ("CacheRequest", "CacheRequest", "helix_dbos.llm.caching"),
    ("CacheResult", "CacheResult", "helix_dbos.llm.caching"),
    ("CacheStrategy", "CacheStrategy", "helix_dbos.llm.caching"),
    ("Checkpoint", "Checkpoint", "helix_dbos.checkpoint"),
    ("CHECKPOINT_ID_PREFIX", "CHECKPOINT_ID_PREFIX", "helix_dbos.checkpoint"),
    ("CHECKPOINT_ID_VERSION", "CHECKPOINT_ID_VERSION", "helix_dbos.checkpoint"),
    ("CheckpointMeta", "CheckpointMeta", "helix_dbos.checkpoint"),
    ("classifyError", "classify_error", "helix_dbos.errors"),
    ("coerceToolCallArguments", "coerce_tool_call_arguments", "helix_dbos.orchestration.step_processor"),
    ("collectAll", "collect_all", "helix_dbos.stream.filters"),
    ("collectInjectedMemoryIds", "collect_injected_memory_ids", "helix_dbos.memory"),
    ("collectLoadedSkillNames", "collect_loaded_skill_names", "helix_dbos.skills"),
    ("collectText", "collect_text", "helix_dbos"),
    ("combineStreams", "combine_streams", "helix_dbos.stream.filters"),
    ("COMMON_METADATA_KEYS", "COMMON_METADATA_KEYS", "helix_dbos.messages"),
    ("COMPANION_TOOL_PREFIX", "COMPANION_TOOL_PREFIX", "helix_dbos.tool"),
    ("CompanionTool", "CompanionTool", "helix_dbos.companion_tools"),
    ("CompanionType", "CompanionType", "helix_dbos.companion_tools"),
    ("consoleLogger", "console_logger", "helix_dbos.logger"),
    ("createAssistantMessage", "create_assistant_message", "helix_dbos.orchestration.message_builder"),
    ("createFinishTool", "create_finish_tool", "helix_dbos.tool"),
    ("createGetChildStatusTool", "create_get_child_status_tool", "helix_dbos.companion_tools"),
    ("createImmerStateTracker", "create_state_tracker", "helix_dbos.state.tracker"),
    ("createInitialAgentState", "create_initial_agent_state", "helix_dbos.orchestration.state_operations"),
    ("createListChildrenTool", "create_list_children_tool", "helix_dbos.companion_tools"),
    ("createResumableStreamHandler", "create_resumable_stream_handler", "helix_dbos.stream.resumable"),
    ("createSendMessageTool", "create_send_message_tool", "helix_dbos.companion_tools"),
    ("createSpawnAgentTool", "create_spawn_agent_tool", "helix_dbos.companion_tools"),
    ("createStateProjection", "create_state_projection", "helix_dbos.stream.projection"),
    ("createStateStreamer", "create_state_streamer", "helix_dbos.stream.state_streamer"),
    ("createSubAgentResultMessage", "create_sub_agent_result_message", "helix_dbos.orchestration.message_builder"),
    ("createSubAgentTool", "create_sub_agent_tool", "helix_dbos"),
    ("createTerminateChildTool", "create_terminate_child_tool", "helix_dbos.companion_tools"),
    ("createToolContext", "create_tool_context", "helix_dbos.tool"),
    ("createToolResultMessage", "create_tool_result_message", "helix_dbos.orchestration.message_builder"),
    ("createWaitForResultTool", "create_wait_for_result_tool", "helix_dbos.companion_tools"),
    ("CustomStateStreamer", "CustomStateStreamer", "helix_dbos.stream.state_streamer"),
    ("defineAgent", "define_agent", "helix_dbos"),
    ("defineSkill", "define_skill", "helix_dbos"),
    ("defineTool", "define_tool", "helix_dbos"),
    ("determineFinalStatus", "determine_final_status", "helix_dbos.orchestration.stop_checker"),
    ("DistributedLock", "DistributedLock", "helix_dbos.lock"),
    ("Draft", "-", "n/a"),
    ("ensureError", "ensure_error", "helix_dbos.errors"),
    ("ErrorCategory", "ErrorCategory", "helix_dbos.errors"),
    ("ErrorCode", "ErrorCode", "helix_dbos"),
    ("excludeTypes", "exclude_types", "helix_dbos.stream.filters"),
    ("ExecutorSupersededError", "ExecutorSupersededError", "helix_dbos.errors"),
    ("extractErrorMessage", "extract_error_message", "helix_dbos.errors"),
    ("extractResumePosition", "extract_resume_position", "helix_dbos.stream.resumable"),
    ("FencingTokenMismatchError", "FencingTokenMismatchError", "helix_dbos.errors"),
    ("FileDataAttachment", "FileDataAttachment", "helix_dbos.attachments"),
    ("FileInput", "FileInput", "helix_dbos"),
    ("FileUrlAttachment", "FileUrlAttachment", "helix_dbos.attachments"),
    ("filterByAgentId", "filter_by_agent_id", "helix_dbos.stream.filters"),
    ("filterByAgentType", "filter_by_agent_type", "helix_dbos.stream.filters"),
    ("filterByMetadata", "filter_by_metadata", "helix_dbos.messages"),
    ("filterByType", "filter_by_type", "helix_dbos.stream.filters"),
    ("filterWith", "filter_with", "helix_dbos.stream.filters"),
    ("FINISH_TOOL_NAME", "FINISH_TOOL_NAME", "helix_dbos.tool"),
    ("generateCheckpointId", "generate_checkpoint_id", "helix_dbos.checkpoint"),
    ("getMessagesWithMetadataKey", "get_messages_with_metadata_key", "helix_dbos.messages"),
    ("getSubSessionRefsByType", "get_sub_session_refs_by_type", "helix_dbos.session"),
    ("getToolResultsFromMessages", "get_tool_results_from_messages", "helix_dbos.messages"),
    ("HelixError", "HelixError", "helix_dbos"),
    ("HelixErrorOptions", "HelixErrorOptions", "helix_dbos.errors"),
    ("ImageDataAttachment", "ImageDataAttachment", "helix_dbos.attachments"),
    ("ImageUrlAttachment", "ImageUrlAttachment", "helix_dbos.attachments"),
    ("ImmerStateTracker", "StateTracker", "helix_dbos.state.tracker"),
    ("inCodeSkillProvider", "in_code_skill_provider", "helix_dbos"),
    ("initializeAgentState", "initialize_agent_state", "helix_dbos.orchestration.state_operations"),
    ("InterruptContext", "InterruptContext", "helix_dbos.session"),
    ("InterruptContextSchema", "InterruptContext", "helix_dbos.session"),
    ("isAssistantMessage", "is_assistant_message", "helix_dbos.messages"),
    ("isCheckpointCreatedChunk", "is_checkpoint_created_chunk", "helix_dbos.stream.chunks"),
    ("isCompanionTool", "is_companion_tool", "helix_dbos.companion_tools"),
    ("isCustomEventChunk", "is_custom_event_chunk", "helix_dbos.stream.chunks"),
    ("isErrorChunk", "is_error_chunk", "helix_dbos.stream.chunks"),
    ("isErrorStopReason", "is_error_stop_reason", "helix_dbos.step_result"),
    ("isExecutorSupersededChunk", "is_executor_superseded_chunk", "helix_dbos.stream.chunks"),
    ("isFinishTool", "is_finish_tool", "helix_dbos.tool"),
    ("isOutputChunk", "is_output_chunk", "helix_dbos.stream.chunks"),
    ("isRecoverableErrorStopReason", "is_recoverable_error_stop_reason", "helix_dbos.step_result"),
    ("isRunInterruptedChunk", "is_run_interrupted_chunk", "helix_dbos.stream.chunks"),
    ("isRunPausedChunk", "is_run_paused_chunk", "helix_dbos.stream.chunks"),
    ("isRunResumedChunk", "is_run_resumed_chunk", "helix_dbos.stream.chunks"),
    ("isStatePatchChunk", "is_state_patch_chunk", "helix_dbos.stream.chunks"),
    ("isStepCommittedChunk", "is_step_committed_chunk", "helix_dbos.stream.chunks"),
    ("isStepDiscardedChunk", "is_step_discarded_chunk", "helix_dbos.stream.chunks"),
    ("isStreamEnd", "is_stream_end", "helix_dbos.stream.chunks"),
    ("isStreamResyncChunk", "is_stream_resync_chunk", "helix_dbos.stream.chunks"),
    ("isSubAgentEndChunk", "is_sub_agent_end_chunk", "helix_dbos.stream.chunks"),
    ("isSubAgentStartChunk", "is_sub_agent_start_chunk", "helix_dbos.stream.chunks"),
    ("isSubAgentTool", "is_sub_agent_tool", "helix_dbos.sub_agent"),
    ("isTextDeltaChunk", "is_text_delta_chunk", "helix_dbos.stream.chunks"),
    ("isThinkingChunk", "is_thinking_chunk", "helix_dbos.stream.chunks"),
    ("isToolEndChunk", "is_tool_end_chunk", "helix_dbos.stream.chunks"),
    ("isToolResultMessage", "is_tool_result_message", "helix_dbos.messages"),
    ("isToolStartChunk", "is_tool_start_chunk", "helix_dbos.stream.chunks"),
    ("LOAD_SKILL_TOOL_NAME", "LOAD_SKILL_TOOL_NAME", "helix_dbos.tool"),
    ("loadConversationMessages", "load_conversation_messages", "helix_dbos.store.conversation"),
    ("LockAcquisitionResult", "LockAcquisitionResult", "helix_dbos.lock"),
    ("LockLostError", "LockLostError", "helix_dbos.errors"),
    ("LockManager", "LockManager", "helix_dbos.lock"),
    ("LockNotAcquiredError", "LockNotAcquiredError", "helix_dbos.errors"),
    ("Logger", "Logger", "helix_dbos.logger"),
    ("mapAnthropicStopReason", "map_anthropic_stop_reason", "helix_dbos.llm.stop_reason"),
    ("mapGeminiFinishReason", "map_gemini_finish_reason", "helix_dbos.llm.stop_reason"),
    ("mapOpenAIFinishReason", "map_openai_finish_reason", "helix_dbos.llm.stop_reason"),
    ("mapVercelFinishReason", "map_vercel_finish_reason", "helix_dbos.llm.stop_reason"),
    ("mergeProviderOptions", "merge_provider_options", "helix_dbos.llm.caching"),
    ("MockLLMAdapter", "MockLLMAdapter", "helix_dbos"),
    ("NoOpLockManager", "NoOpLockManager", "helix_dbos.lock"),
    ("noopLogger", "noop_logger", "helix_dbos.logger"),
    ("openaiCache", "openai_cache", "helix_dbos.llm.caching"),
    ("parseCheckpointId", "parse_checkpoint_id", "helix_dbos.checkpoint"),
    ("ParsedCheckpointId", "ParsedCheckpointId", "helix_dbos.checkpoint"),
    ("ParseResult", "ParseResult", "helix_dbos.skills"),
    ("parseSkillFile", "parse_skill_file", "helix_dbos.skills"),
    ("planStepProcessing", "plan_step_processing", "helix_dbos.orchestration.step_processor"),
    ("READ_SKILL_FILE_TOOL_NAME", "READ_SKILL_FILE_TOOL_NAME", "helix_dbos.tool"),
    ("ReadResourceRange", "ReadResourceRange", "helix_dbos.skills"),
    ("recoverConversation", "recover_conversation", "helix_dbos.store.conversation"),
    ("repairStructuredOutput", "repair_structured_output", "helix_dbos.orchestration.step_processor"),
    ("resolveSkillsCatalog", "resolve_skills_catalog", "helix_dbos.skills"),
    ("SendInput", "SendInput", "helix_dbos.session"),
    ("sessionStatusToAgentStatus", "session_status_to_agent_status", "helix_dbos.session"),
    ("shouldStopExecution", "should_stop_execution", "helix_dbos.orchestration.stop_checker"),
    ("Skill", "Skill", "helix_dbos.skills"),
    ("SkillDefinition", "SkillDefinition", "helix_dbos"),
    ("SkillMetadata", "SkillMetadata", "helix_dbos.skills"),
    ("skillMetadataSchema", "SkillMetadata", "helix_dbos.skills"),
    ("SkillProvider", "SkillProvider", "helix_dbos"),
    ("SkillResourceRef", "SkillResourceRef", "helix_dbos.skills"),
    ("SkillsConfig", "SkillsConfig", "helix_dbos.skills"),
    ("skip", "skip", "helix_dbos.stream.filters"),
    ("StaleStateError", "StaleStateError", "helix_dbos.errors"),
    ("stepWritesToRFC6902", "step_writes_to_rfc6902", "helix_dbos.state.tracker"),
    ("StreamChunkSchema", "StreamChunkAdapter", "helix_dbos.stream.chunks"),
    ("StreamMessageSchema", "MessageAdapter", "helix_dbos.messages"),
    ("StreamProjector", "StreamProjector", "helix_dbos.stream.projection"),
    ("StreamTruncatedError", "StreamTruncatedError", "helix_dbos.errors"),
    ("stripMetadata", "strip_metadata", "helix_dbos.messages"),
    ("stripThinking", "strip_thinking", "helix_dbos.messages"),
    ("SUBAGENT_TOOL_PREFIX", "SUBAGENT_TOOL_PREFIX", "helix_dbos.tool"),
    ("SubSessionStatusValues", "SubSessionStatusValues", "helix_dbos.session"),
    ("take", "take", "helix_dbos.stream.filters"),
    ("UserInputMessage", "UserInputMessage", "helix_dbos"),
    ("xaiCache", "xai_cache", "helix_dbos.llm.caching"),
]
"""``(seed name, Python name, home)``: home is a module, ``pending:<issue>`` or ``n/a``."""

EXTRA_SEED_NAMES: list[tuple[str, str, str]] = [
    # Named in seed 002's type listings rather than in an import block.
    ("StepOutcome", "StepOutcome", "helix_dbos.session"),
    ("SuspendedChildWait", "SuspendedChildWait", "helix_dbos.session"),
    ("InMemoryLockManager", "InMemoryLockManager", "helix_dbos.lock"),
    ("PostgresLockManager", "PostgresLockManager", "helix_dbos.lock"),
]

NOT_APPLICABLE = {
    "Draft": "Immer's draft type; in Python the draft handed to update_state is a copy of the state model "
    "itself, so it is typed as that model",
}

RENAMED = {
    "ImmerStateTracker": "no Immer in Python: the same tracker (draft -> step writes -> RFC 6902)",
    "createImmerStateTracker": "as ImmerStateTracker",
    "InterruptContextSchema": "a pydantic model validates itself: InterruptContext.model_validate",
    "skillMetadataSchema": "a Zod schema is a pydantic model: SkillMetadata.model_validate",
    "StreamChunkSchema": "a Zod schema is a pydantic TypeAdapter of the chunk union",
    "StreamMessageSchema": "a Zod schema is a pydantic TypeAdapter of the message union",
}
"""Seed names whose Python equivalent has another name, with the reason."""

ALL = SEED_NAMES + EXTRA_SEED_NAMES


def snake_case(name: str) -> str:
    """The naming rule: ``buildMessagesForLLM`` -> ``build_messages_for_llm``; types keep their case."""
    if name[0].isupper():
        return name
    for acronym in ("OpenAI", "RFC"):
        name = name.replace(acronym, acronym[0] + acronym[1:].lower())
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    return re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name).lower()


def test_the_list_has_each_seed_name_once() -> None:
    seeds = [seed for seed, _, _ in ALL]
    assert len(seeds) == len(set(seeds))
    assert len(SEED_NAMES) == 161


@pytest.mark.parametrize(("seed", "python", "home"), ALL, ids=[s for s, _, _ in ALL])
def test_seed_name_follows_the_naming_rule(seed: str, python: str, home: str) -> None:
    if seed in RENAMED or home == "n/a":
        return
    assert python == snake_case(seed)


@pytest.mark.parametrize(
    ("seed", "python", "home"), [e for e in ALL if not e[2].startswith(("pending:", "n/a"))], ids=lambda v: str(v)
)
def test_seed_name_is_importable_from_its_home(seed: str, python: str, home: str) -> None:
    assert hasattr(importlib.import_module(home), python), f"seed {seed}: {python} is not in {home}"


def test_every_pending_or_inapplicable_name_says_why() -> None:
    for seed, _, home in ALL:
        if home == "n/a":
            assert seed in NOT_APPLICABLE
        elif home.startswith("pending:"):
            assert home.split(":", 1)[1].isdigit(), seed


def test_counts() -> None:
    """The figures the README's parity note quotes."""
    importable = [e for e in SEED_NAMES if not e[2].startswith(("pending:", "n/a"))]
    pending = [e for e in SEED_NAMES if e[2].startswith("pending:")]
    assert len(importable) + len(pending) + len(NOT_APPLICABLE) == len(SEED_NAMES)
    assert (len(SEED_NAMES), len(importable), len(pending)) == (161, 160, 0)  # README, "Where this differs"
