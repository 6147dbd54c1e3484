"""The public API is pinned in two tiers (httpx ``tests/test_exported_members.py``).

``helix_dbos.__all__`` is what an application touches; a name joining or leaving it is a deliberate
change. The seeds' parity helpers (the ``is_*`` chunk predicates, message and orchestration helpers,
the state tracker, checkpoint ids, ...) live in their subpackages: the second list pins where each
one is importable from, so a seed reader finds ``plan_step_processing`` in
``helix_dbos.orchestration.step_processor`` and a move of it is deliberate too.
"""

from __future__ import annotations

import importlib

import pytest

import helix_dbos

EXPECTED = [
    "APPLICATION_VERSION",
    "FINISH_TOOL_NAME",
    "AbortSignal",
    "AbortedOutcome",
    "AgentAlreadyRunningError",
    "AgentConfig",
    "AgentExecutionHandle",
    "AgentHooks",
    "AgentInput",
    "AgentMismatchError",
    "AgentNotResumableError",
    "AgentResult",
    "AgentState",
    "AssistantMessage",
    "Budget",
    "CanResumeResult",
    "CompletedOutcome",
    "DBOSAgentExecutor",
    "DatabaseUnavailableError",
    "DefinitionError",
    "ErrorChunk",
    "ErrorCode",
    "ErrorStepResult",
    "FailedOutcome",
    "FileInput",
    "HelixError",
    "InMemoryStreamManager",
    "InterruptedOutcome",
    "InvalidTextError",
    "LLMAdapter",
    "LLMConfig",
    "LLMGenerateInput",
    "LLMStreamCallbacks",
    "LiteLLMAdapter",
    "Message",
    "MessagePayload",
    "MockLLMAdapter",
    "ModelRouter",
    "OutputChunk",
    "ParsedToolCall",
    "PendingToolCall",
    "PendingToolCallNotFoundError",
    "PersistentAgentConfig",
    "RateLimit",
    "ResumeOptions",
    "RetryOptions",
    "RunOutcome",
    "RunPayload",
    "RunQueue",
    "SessionNotFoundError",
    "SessionStore",
    "SkillDefinition",
    "SkillProvider",
    "SqlSessionStore",
    "SqlStreamManager",
    "StateChangePayload",
    "StatePatchChunk",
    "StepResult",
    "StreamChunk",
    "StreamManager",
    "StreamTruncatedError",
    "StructuredOutputStepResult",
    "SubAgentTool",
    "SubmitToolResult",
    "SuspendedClientToolOutcome",
    "SystemMessage",
    "TextDeltaChunk",
    "TextStepResult",
    "Tool",
    "ToolApprovalRequestChunk",
    "ToolCallAlreadyAnsweredError",
    "ToolCallRequest",
    "ToolCallsStepResult",
    "ToolContext",
    "ToolEndChunk",
    "ToolHookPayload",
    "ToolResultMessage",
    "ToolStartChunk",
    "UsageSummary",
    "UserInputMessage",
    "UserMessage",
    "__version__",
    "anthropic_cache",
    "collect_text",
    "create_sub_agent_tool",
    "dbos_config_for",
    "define_agent",
    "define_skill",
    "define_tool",
    "file_system_skill_provider",
    "filter_by_type",
    "in_code_skill_provider",
    "is_sub_agent_tool",
    "launch",
    "openai_cache",
    "shutdown",
    "upgrade",
    "xai_cache",
]

SUBPACKAGE_NAMES = {
    "CHECKPOINT_ID_PREFIX": "helix_dbos.checkpoint",
    "CHECKPOINT_ID_VERSION": "helix_dbos.checkpoint",
    "Checkpoint": "helix_dbos.checkpoint",
    "CheckpointMeta": "helix_dbos.checkpoint",
    "ParsedCheckpointId": "helix_dbos.checkpoint",
    "generate_checkpoint_id": "helix_dbos.checkpoint",
    "parse_checkpoint_id": "helix_dbos.checkpoint",
    "CompanionMode": "helix_dbos.agent",
    "CompanionTool": "helix_dbos.companion_tools",
    "CompanionType": "helix_dbos.companion_tools",
    "create_companion_tools": "helix_dbos.companion_tools",
    "create_get_child_status_tool": "helix_dbos.companion_tools",
    "create_list_children_tool": "helix_dbos.companion_tools",
    "create_send_message_tool": "helix_dbos.companion_tools",
    "create_spawn_agent_tool": "helix_dbos.companion_tools",
    "create_terminate_child_tool": "helix_dbos.companion_tools",
    "create_wait_for_result_tool": "helix_dbos.companion_tools",
    "is_companion_tool": "helix_dbos.companion_tools",
    "CheckpointNotFoundError": "helix_dbos.errors",
    "DatabaseNotMigratedError": "helix_dbos.errors",
    "ErrorCategory": "helix_dbos.errors",
    "ExecutorSupersededError": "helix_dbos.errors",
    "ForkConflictError": "helix_dbos.errors",
    "SessionAlreadyExistsError": "helix_dbos.errors",
    "StaleStateError": "helix_dbos.errors",
    "classify_error": "helix_dbos.errors",
    "ensure_error": "helix_dbos.errors",
    "extract_error_message": "helix_dbos.errors",
    "AppliedCacheResult": "helix_dbos.llm.caching",
    "CacheRequest": "helix_dbos.llm.caching",
    "CacheResult": "helix_dbos.llm.caching",
    "CacheStrategy": "helix_dbos.llm.caching",
    "apply_cache_strategies": "helix_dbos.llm.caching",
    "merge_provider_options": "helix_dbos.llm.caching",
    "MockResponse": "helix_dbos.llm.mock",
    "map_anthropic_stop_reason": "helix_dbos.llm.stop_reason",
    "map_gemini_finish_reason": "helix_dbos.llm.stop_reason",
    "map_litellm_finish_reason": "helix_dbos.llm.stop_reason",
    "map_openai_finish_reason": "helix_dbos.llm.stop_reason",
    "Logger": "helix_dbos.logger",
    "console_logger": "helix_dbos.logger",
    "noop_logger": "helix_dbos.logger",
    "std_logger": "helix_dbos.logger",
    "COMMON_METADATA_KEYS": "helix_dbos.messages",
    "OTLP_ENDPOINT_ENV": "helix_dbos.observability",
    "configure_logging": "helix_dbos.observability",
    "configure_otlp": "helix_dbos.observability",
    "instrument": "helix_dbos.observability",
    "session_trace_id": "helix_dbos.observability",
    "MessageAdapter": "helix_dbos.messages",
    "MessagesAdapter": "helix_dbos.messages",
    "ThinkingContent": "helix_dbos.messages",
    "filter_by_metadata": "helix_dbos.messages",
    "get_messages_with_metadata_key": "helix_dbos.messages",
    "get_tool_results_from_messages": "helix_dbos.messages",
    "is_assistant_message": "helix_dbos.messages",
    "is_system_message": "helix_dbos.messages",
    "is_tool_result_message": "helix_dbos.messages",
    "is_user_message": "helix_dbos.messages",
    "strip_metadata": "helix_dbos.messages",
    "strip_thinking": "helix_dbos.messages",
    "AssistantMessagePlan": "helix_dbos.orchestration.message_builder",
    "FINISH_ACKNOWLEDGEMENT": "helix_dbos.orchestration.message_builder",
    "NOT_APPROVED_MESSAGE": "helix_dbos.orchestration.message_builder",
    "build_messages_for_llm": "helix_dbos.orchestration.message_builder",
    "create_assistant_message": "helix_dbos.orchestration.message_builder",
    "create_finish_reminder_message": "helix_dbos.orchestration.message_builder",
    "create_max_tokens_correction_message": "helix_dbos.orchestration.message_builder",
    "create_sub_agent_result_message": "helix_dbos.orchestration.message_builder",
    "create_tool_result_message": "helix_dbos.orchestration.message_builder",
    "find_unpaired_finish_call_id": "helix_dbos.orchestration.message_builder",
    "find_unpaired_tool_call_ids": "helix_dbos.orchestration.message_builder",
    "heal_unpaired_finish": "helix_dbos.orchestration.message_builder",
    "output_requirement_section": "helix_dbos.orchestration.message_builder",
    "synthesize_finish_tool_result": "helix_dbos.orchestration.message_builder",
    "build_agent_messages_for_llm": "helix_dbos.orchestration.state_operations",
    "build_effective_tools": "helix_dbos.orchestration.state_operations",
    "completion_tool_name": "helix_dbos.orchestration.state_operations",
    "initialize_agent_state": "helix_dbos.orchestration.state_operations",
    "StatusUpdatePlan": "helix_dbos.orchestration.step_processor",
    "StepProcessingPlan": "helix_dbos.orchestration.step_processor",
    "coerce_tool_call_arguments": "helix_dbos.orchestration.step_processor",
    "plan_step_processing": "helix_dbos.orchestration.step_processor",
    "repair_structured_output": "helix_dbos.orchestration.step_processor",
    "StopConfig": "helix_dbos.orchestration.stop_checker",
    "determine_final_status": "helix_dbos.orchestration.stop_checker",
    "needs_finish_reminder": "helix_dbos.orchestration.stop_checker",
    "needs_max_tokens_recovery": "helix_dbos.orchestration.stop_checker",
    "should_stop_execution": "helix_dbos.orchestration.stop_checker",
    "default_database_url": "helix_dbos.runtime.launch",
    "AgentStatus": "helix_dbos.session",
    "AgentStatusValues": "helix_dbos.session",
    "ApprovalResponse": "helix_dbos.session",
    "ClientToolResult": "helix_dbos.session",
    "InterruptContext": "helix_dbos.session",
    "RunStatus": "helix_dbos.session",
    "SendInput": "helix_dbos.session",
    "SessionStatus": "helix_dbos.session",
    "SubSessionRef": "helix_dbos.session",
    "SubSessionStatusValues": "helix_dbos.session",
    "SubmitToolResultAdapter": "helix_dbos.session",
    "agent_status_to_session_status": "helix_dbos.session",
    "session_status_to_agent_status": "helix_dbos.session",
    "AppendOp": "helix_dbos.state.tracker",
    "DeleteOp": "helix_dbos.state.tracker",
    "ReplaceOp": "helix_dbos.state.tracker",
    "StateTracker": "helix_dbos.state.tracker",
    "StepWrites": "helix_dbos.state.tracker",
    "WriteOp": "helix_dbos.state.tracker",
    "apply_step_writes": "helix_dbos.state.tracker",
    "create_state_tracker": "helix_dbos.state.tracker",
    "merge_step_writes": "helix_dbos.state.tracker",
    "step_writes_to_rfc6902": "helix_dbos.state.tracker",
    "ParsedSubAgentCall": "helix_dbos.step_result",
    "StepResultAdapter": "helix_dbos.step_result",
    "StopReason": "helix_dbos.step_result",
    "TokenUsage": "helix_dbos.step_result",
    "is_error_stop_reason": "helix_dbos.step_result",
    "is_recoverable_error_stop_reason": "helix_dbos.step_result",
    "PaginatedCheckpoints": "helix_dbos.store.base",
    "PaginatedMessages": "helix_dbos.store.base",
    "RunRecord": "helix_dbos.store.base",
    "SessionRecord": "helix_dbos.store.base",
    "UsageRecord": "helix_dbos.store.base",
    "CheckpointCreatedChunk": "helix_dbos.stream.chunks",
    "CustomEventChunk": "helix_dbos.stream.chunks",
    "ExecutorSupersededChunk": "helix_dbos.stream.chunks",
    "RunInterruptedChunk": "helix_dbos.stream.chunks",
    "RunPausedChunk": "helix_dbos.stream.chunks",
    "RunResumedChunk": "helix_dbos.stream.chunks",
    "STREAM_CHUNK_TYPES": "helix_dbos.stream.chunks",
    "StepCommittedChunk": "helix_dbos.stream.chunks",
    "StepDiscardedChunk": "helix_dbos.stream.chunks",
    "StreamChunkAdapter": "helix_dbos.stream.chunks",
    "StreamResyncChunk": "helix_dbos.stream.chunks",
    "SubAgentEndChunk": "helix_dbos.stream.chunks",
    "SubAgentStartChunk": "helix_dbos.stream.chunks",
    "ThinkingChunk": "helix_dbos.stream.chunks",
    "canonical_arguments_digest": "helix_dbos.stream.chunks",
    "chunk_from_json": "helix_dbos.stream.chunks",
    "chunk_to_json": "helix_dbos.stream.chunks",
    "is_checkpoint_created_chunk": "helix_dbos.stream.chunks",
    "is_custom_event_chunk": "helix_dbos.stream.chunks",
    "is_error_chunk": "helix_dbos.stream.chunks",
    "is_executor_superseded_chunk": "helix_dbos.stream.chunks",
    "is_output_chunk": "helix_dbos.stream.chunks",
    "is_run_interrupted_chunk": "helix_dbos.stream.chunks",
    "is_run_paused_chunk": "helix_dbos.stream.chunks",
    "is_run_resumed_chunk": "helix_dbos.stream.chunks",
    "is_state_patch_chunk": "helix_dbos.stream.chunks",
    "is_step_committed_chunk": "helix_dbos.stream.chunks",
    "is_step_discarded_chunk": "helix_dbos.stream.chunks",
    "is_stream_resync_chunk": "helix_dbos.stream.chunks",
    "is_sub_agent_end_chunk": "helix_dbos.stream.chunks",
    "is_sub_agent_start_chunk": "helix_dbos.stream.chunks",
    "is_text_delta_chunk": "helix_dbos.stream.chunks",
    "is_thinking_chunk": "helix_dbos.stream.chunks",
    "is_tool_approval_request_chunk": "helix_dbos.stream.chunks",
    "is_tool_end_chunk": "helix_dbos.stream.chunks",
    "is_tool_start_chunk": "helix_dbos.stream.chunks",
    "collect_all": "helix_dbos.stream.filters",
    "combine_streams": "helix_dbos.stream.filters",
    "exclude_types": "helix_dbos.stream.filters",
    "filter_by_agent_id": "helix_dbos.stream.filters",
    "filter_by_agent_type": "helix_dbos.stream.filters",
    "filter_with": "helix_dbos.stream.filters",
    "skip": "helix_dbos.stream.filters",
    "take": "helix_dbos.stream.filters",
    "ChunkRecord": "helix_dbos.stream.base",
    "ResumableStreamReader": "helix_dbos.stream.base",
    "StreamInfo": "helix_dbos.stream.base",
    "StreamReader": "helix_dbos.stream.base",
    "StreamWriter": "helix_dbos.stream.base",
    "COMPANION_TOOL_PREFIX": "helix_dbos.tool",
    "LOAD_SKILL_TOOL_NAME": "helix_dbos.tool",
    "READ_SKILL_FILE_TOOL_NAME": "helix_dbos.tool",
    "RESERVED_TOOL_NAMES": "helix_dbos.tool",
    "SUBAGENT_TOOL_PREFIX": "helix_dbos.tool",
    "create_finish_tool": "helix_dbos.tool",
    "create_tool_context": "helix_dbos.tool",
    "is_approval_gated_tool": "helix_dbos.tool",
    "is_client_tool": "helix_dbos.tool",
    "is_finish_tool": "helix_dbos.tool",
    "is_finish_with_tool": "helix_dbos.tool",
    "FileSystemSkillProvider": "helix_dbos.skills",
    "InCodeSkillProvider": "helix_dbos.skills",
    "ParseResult": "helix_dbos.skills",
    "ReadResourceRange": "helix_dbos.skills",
    "SKILL_LOADED_EVENT": "helix_dbos.skills",
    "Skill": "helix_dbos.skills",
    "SkillMetadata": "helix_dbos.skills",
    "SkillResourceRef": "helix_dbos.skills",
    "SkillsConfig": "helix_dbos.skills",
    "collect_loaded_skill_names": "helix_dbos.skills",
    "create_skill_tools": "helix_dbos.skills",
    "generate_skills_system_prompt_fragment": "helix_dbos.skills",
    "parse_skill_file": "helix_dbos.skills",
    "resolve_skills_catalog": "helix_dbos.skills",
    "SkillNotFoundError": "helix_dbos.errors",
    "SkillPathError": "helix_dbos.errors",
}


def test_all_is_pinned() -> None:
    assert helix_dbos.__all__ == EXPECTED  # kept in ruff's __all__ order (RUF022)
    assert len(set(EXPECTED)) == len(EXPECTED)


def test_every_exported_name_exists() -> None:
    missing = [name for name in helix_dbos.__all__ if not hasattr(helix_dbos, name)]
    assert missing == []


def test_top_level_holds_only_the_curated_names() -> None:
    """Internals are not reachable as ``helix_dbos.X`` by accident (only submodules and the list)."""
    public = {name for name in vars(helix_dbos) if not name.startswith("_")}
    submodules = {name for name in public if type(getattr(helix_dbos, name)).__name__ == "module"}
    assert public - submodules == set(EXPECTED) - {"__version__"}


@pytest.mark.parametrize(("name", "module"), sorted(SUBPACKAGE_NAMES.items()))
def test_subpackage_name_is_importable_from_its_home(name: str, module: str) -> None:
    assert hasattr(importlib.import_module(module), name), f"{name} is no longer in {module}"


def test_the_tiers_do_not_overlap() -> None:
    assert set(SUBPACKAGE_NAMES).isdisjoint(EXPECTED)


def test_every_chunk_predicate_of_the_seeds_is_in_stream_chunks() -> None:
    from helix_dbos.stream import chunks

    predicates = sorted(name for name in SUBPACKAGE_NAMES if name.startswith("is_") and name.endswith("_chunk"))
    assert len(predicates) == 19
    assert all(SUBPACKAGE_NAMES[name] == "helix_dbos.stream.chunks" for name in predicates)
    assert all(callable(getattr(chunks, name)) for name in predicates)


def test_seed_names_are_importable() -> None:
    """A user who knows the seeds can guess the names (camelCase -> snake_case) and find them."""
    for name in (
        "define_agent",
        "define_tool",
        "DBOSAgentExecutor",
        "MockLLMAdapter",
        "LiteLLMAdapter",
        "HelixError",
        "StreamChunk",
        "filter_by_type",
        "collect_text",
        "SubmitToolResult",
        "CanResumeResult",
        "FINISH_TOOL_NAME",
    ):
        assert hasattr(helix_dbos, name), name
    for name in (
        "plan_step_processing",
        "should_stop_execution",
        "determine_final_status",
        "build_messages_for_llm",
        "build_effective_tools",
        "initialize_agent_state",
        "create_assistant_message",
        "create_tool_result_message",
        "create_sub_agent_result_message",
        "synthesize_finish_tool_result",
        "find_unpaired_finish_call_id",
        "coerce_tool_call_arguments",
        "repair_structured_output",
        "step_writes_to_rfc6902",
        "classify_error",
        "extract_error_message",
        "ensure_error",
        "generate_checkpoint_id",
        "parse_checkpoint_id",
        "is_error_stop_reason",
        "is_recoverable_error_stop_reason",
        "create_finish_tool",
        "is_finish_tool",
        "SUBAGENT_TOOL_PREFIX",
        "COMPANION_TOOL_PREFIX",
        "RESERVED_TOOL_NAMES",
    ):
        assert name in SUBPACKAGE_NAMES, name


def test_the_version_is_written_once_in_pyproject() -> None:
    import tomllib
    from importlib.metadata import PackageNotFoundError, version
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    try:
        installed = version("helix-dbos")
    except PackageNotFoundError:  # a checkout that was never installed
        assert helix_dbos.__version__ == "0+unknown"
    else:
        assert helix_dbos.__version__ == installed == pyproject["project"]["version"]
    offenders = [
        p.name
        for p in Path(helix_dbos.__file__).parent.rglob("*.py")
        if f'"{pyproject["project"]["version"]}"' in p.read_text()
    ]
    assert offenders == []
