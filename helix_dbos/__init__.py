"""helix-dbos: durable AI agents on DBOS.

The public API is tiered, as httpx's is:

* **This module** holds what an application touches: defining agents and tools, launching the
  executor, the handle a run returns, the messages, step results and stream chunks a user reads or
  scripts, the errors a user catches, the stores and stream managers a user wires up. A test pins
  ``__all__`` (``tests/unit/test_public_api.py``) so nothing joins or leaves it by accident.
* **Subpackages** hold the seeds' parity helpers, importable where they live: the ``is_*`` chunk
  predicates and the rest of the chunk types (``helix_dbos.stream.chunks``), stream filters
  (``helix_dbos.stream.filters``), message helpers (``helix_dbos.messages``), the pure orchestration
  functions (``helix_dbos.orchestration.*``), the state tracker (``helix_dbos.state.tracker``),
  checkpoint ids (``helix_dbos.checkpoint``), stop-reason mapping and cache strategies
  (``helix_dbos.llm.*``), the seeds' ``Logger`` (``helix_dbos.logger``). A second pinned list
  (``SUBPACKAGE_NAMES`` in the same test) keeps them where a seed reader expects them.
* Everything else is internal, even where its module is importable.
"""

from helix_dbos._version import __version__
from helix_dbos.agent import AgentConfig, AgentHooks, PersistentAgentConfig, define_agent
from helix_dbos.errors import (
    AgentAlreadyRunningError,
    AgentMismatchError,
    AgentNotResumableError,
    DatabaseUnavailableError,
    DefinitionError,
    ErrorCode,
    HelixError,
    InvalidTextError,
    PendingToolCallNotFoundError,
    SessionNotFoundError,
    StreamTruncatedError,
    ToolCallAlreadyAnsweredError,
)
from helix_dbos.llm.base import LLMAdapter, LLMGenerateInput, LLMStreamCallbacks
from helix_dbos.llm.caching import anthropic_cache, openai_cache, xai_cache
from helix_dbos.llm.config import LLMConfig
from helix_dbos.llm.litellm import LiteLLMAdapter
from helix_dbos.llm.mock import MockLLMAdapter
from helix_dbos.llm.router import ModelRouter
from helix_dbos.memory import InMemoryMemoryStore, MemoryConfig, PostgresMemoryStore, collect_injected_memory_ids
from helix_dbos.messages import (
    AssistantMessage,
    FileInput,
    Message,
    SystemMessage,
    ToolCallRequest,
    ToolResultMessage,
    UserInputMessage,
    UserMessage,
)
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.runtime.handle import AgentExecutionHandle
from helix_dbos.runtime.hooks import MessagePayload, RunPayload, StateChangePayload, ToolHookPayload
from helix_dbos.runtime.launch import APPLICATION_VERSION, dbos_config_for, launch, shutdown
from helix_dbos.runtime.queues import RateLimit, RunQueue
from helix_dbos.session import (
    AbortedOutcome,
    AgentInput,
    AgentResult,
    AgentState,
    CanResumeResult,
    CompletedOutcome,
    FailedOutcome,
    InterruptedOutcome,
    ResumeOptions,
    RetryOptions,
    RunOutcome,
    SubmitToolResult,
    SuspendedClientToolOutcome,
)
from helix_dbos.skills import (
    SkillDefinition,
    SkillProvider,
    define_skill,
    file_system_skill_provider,
    in_code_skill_provider,
)
from helix_dbos.step_result import (
    ErrorStepResult,
    ParsedToolCall,
    StepResult,
    StructuredOutputStepResult,
    TextStepResult,
    ToolCallsStepResult,
)
from helix_dbos.store.base import PendingToolCall, SessionStore
from helix_dbos.store.migrate import upgrade
from helix_dbos.store.sessions import SqlSessionStore
from helix_dbos.stream.base import StreamManager
from helix_dbos.stream.chunks import (
    ErrorChunk,
    OutputChunk,
    StatePatchChunk,
    StreamChunk,
    TextDeltaChunk,
    ToolApprovalRequestChunk,
    ToolEndChunk,
    ToolStartChunk,
)
from helix_dbos.stream.filters import collect_text, filter_by_type
from helix_dbos.stream.memory import InMemoryStreamManager
from helix_dbos.stream.sql import SqlStreamManager
from helix_dbos.sub_agent import SubAgentTool, create_sub_agent_tool, is_sub_agent_tool
from helix_dbos.tool import FINISH_TOOL_NAME, AbortSignal, Tool, ToolContext, define_tool
from helix_dbos.usage import Budget, UsageSummary

__all__ = [
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
    "InMemoryMemoryStore",
    "InMemoryStreamManager",
    "InterruptedOutcome",
    "InvalidTextError",
    "LLMAdapter",
    "LLMConfig",
    "LLMGenerateInput",
    "LLMStreamCallbacks",
    "LiteLLMAdapter",
    "MemoryConfig",
    "Message",
    "MessagePayload",
    "MockLLMAdapter",
    "ModelRouter",
    "OutputChunk",
    "ParsedToolCall",
    "PendingToolCall",
    "PendingToolCallNotFoundError",
    "PersistentAgentConfig",
    "PostgresMemoryStore",
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
    "collect_injected_memory_ids",
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
