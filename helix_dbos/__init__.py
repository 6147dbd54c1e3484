"""helix-dbos: durable AI agents on DBOS.

The public API is tiered, as httpx's is:

* **This module** (81 names) holds what an application touches in the README's quickstart and main
  sections: defining agents, tools, skills and sub-agents, launching or embedding the executor, the
  handle a run returns and its results and outcomes, the hook payloads, the messages a user sends and
  reads, the model adapters, the stream chunk union and the stores and stream managers a user wires
  up, and the errors a user catches. A test pins ``__all__`` (``tests/unit/test_public_api.py``) so
  nothing joins or leaves it by accident.
* **Subpackages** hold the rest of the public API, importable where it lives: the individual chunk
  types and the ``is_*`` chunk predicates (``helix_dbos.stream.chunks``), stream filters
  (``helix_dbos.stream.filters``), the client streaming toolkit (wire events and their
  ``parse_stream_event`` / ``serialize_stream_event`` in ``helix_dbos.stream.events``, the state
  streamer in ``helix_dbos.stream.state_streamer``, ``StreamProjector`` in
  ``helix_dbos.stream.projection``, the resumable SSE handler in ``helix_dbos.stream.resumable``:
  the ``server`` extra, so never imported here), memory stores and helpers (``helix_dbos.memory``),
  the ``StepResult`` variants a custom ``LLMAdapter`` returns (``helix_dbos.step_result``), cache
  strategies and stop-reason mapping (``helix_dbos.llm.*``), tool-name constants and predicates
  (``helix_dbos.tool``, ``helix_dbos.sub_agent``), the rarer errors (``helix_dbos.errors``), message
  helpers (``helix_dbos.messages``), the pure orchestration functions (``helix_dbos.orchestration.*``),
  the state tracker (``helix_dbos.state.tracker``), checkpoint ids (``helix_dbos.checkpoint``) and the
  seeds' ``Logger`` (``helix_dbos.logger``). A second pinned list (``SUBPACKAGE_NAMES`` in the same
  test) keeps them where a seed reader expects them.
* Everything else is internal, even where its module is importable.

Logging is silent unless the application configures it, as the seeds' default ``noopLogger`` is:
the ``helix_dbos`` logger has a ``NullHandler``, so Python's last-resort handler never prints our
warnings to stderr. Configure ``logging`` (or call
``helix_dbos.observability.configure_logging``) to see them; the command line does.
"""

import logging

from helix_dbos._version import __version__
from helix_dbos.agent import AgentConfig, AgentHooks, PersistentAgentConfig, define_agent
from helix_dbos.double_text import DoubleTextPolicy, DoubleTextReceipt
from helix_dbos.errors import (
    AgentAlreadyRunningError,
    AgentMismatchError,
    AgentNotResumableError,
    ConflictingOptionsError,
    DatabaseUnavailableError,
    DefinitionError,
    DoubleTextPolicyError,
    ErrorCode,
    HelixError,
    InvalidTextError,
    PendingToolCallNotFoundError,
    SessionNotFoundError,
    TenantBudgetExceededError,
    ToolCallAlreadyAnsweredError,
)
from helix_dbos.llm.base import LLMAdapter, LLMGenerateInput, LLMStreamCallbacks
from helix_dbos.llm.config import LLMConfig
from helix_dbos.llm.litellm import LiteLLMAdapter
from helix_dbos.llm.mock import MockLLMAdapter
from helix_dbos.llm.router import ModelRouter
from helix_dbos.memory import MemoryConfig
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
from helix_dbos.runtime.rate_limits import ProviderRateLimit
from helix_dbos.runtime.schedules import AgentSchedule
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
from helix_dbos.settings import HelixSettings
from helix_dbos.skills import (
    SkillDefinition,
    SkillProvider,
    define_skill,
    file_system_skill_provider,
    in_code_skill_provider,
)
from helix_dbos.step_result import StepResult
from helix_dbos.store.base import PendingToolCall, SessionStore
from helix_dbos.store.migrate import upgrade
from helix_dbos.store.sessions import SqlSessionStore
from helix_dbos.stream.base import StreamManager
from helix_dbos.stream.chunks import StreamChunk
from helix_dbos.stream.filters import collect_text
from helix_dbos.stream.memory import InMemoryStreamManager
from helix_dbos.stream.sql import SqlStreamManager
from helix_dbos.sub_agent import SubAgentTool, create_sub_agent_tool
from helix_dbos.tenancy import TenantBudget
from helix_dbos.tool import AbortSignal, Tool, ToolContext, define_tool
from helix_dbos.usage import Budget, UsageSummary

__all__ = [
    "APPLICATION_VERSION",
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
    "AgentSchedule",
    "AgentState",
    "AssistantMessage",
    "Budget",
    "CanResumeResult",
    "CompletedOutcome",
    "ConflictingOptionsError",
    "DBOSAgentExecutor",
    "DatabaseUnavailableError",
    "DefinitionError",
    "DoubleTextPolicy",
    "DoubleTextPolicyError",
    "DoubleTextReceipt",
    "ErrorCode",
    "FailedOutcome",
    "FileInput",
    "HelixError",
    "HelixSettings",
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
    "PendingToolCall",
    "PendingToolCallNotFoundError",
    "PersistentAgentConfig",
    "ProviderRateLimit",
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
    "StepResult",
    "StreamChunk",
    "StreamManager",
    "SubAgentTool",
    "SubmitToolResult",
    "SuspendedClientToolOutcome",
    "SystemMessage",
    "TenantBudget",
    "TenantBudgetExceededError",
    "Tool",
    "ToolCallAlreadyAnsweredError",
    "ToolCallRequest",
    "ToolContext",
    "ToolHookPayload",
    "ToolResultMessage",
    "UsageSummary",
    "UserInputMessage",
    "UserMessage",
    "__version__",
    "collect_text",
    "create_sub_agent_tool",
    "dbos_config_for",
    "define_agent",
    "define_skill",
    "define_tool",
    "file_system_skill_provider",
    "in_code_skill_provider",
    "launch",
    "shutdown",
    "upgrade",
]

logging.getLogger("helix_dbos").addHandler(logging.NullHandler())
