"""A2A (agent-to-agent protocol): serve helix agents to A2A clients, and call A2A agents as sub-agents.

- **Server**: ``create_app(executor, a2a=True)`` (``helix-dbos serve --a2a``) mounts every served
  agent at ``/a2a/{agent}``: its agent card at ``/a2a/{agent}/.well-known/agent-card.json`` and the
  JSON-RPC endpoint at ``/a2a/{agent}`` (A2A 1.0 methods ``SendMessage``, ``SendStreamingMessage``,
  ``GetTask``, ``ListTasks``, ``CancelTask``, ``SubscribeToTask``, and the 0.3 names
  ``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``, ``tasks/resubscribe``).
  A task is a run, its context a session (:mod:`helix_dbos.a2a.tasks`); the task store is helix's
  own durable state (:mod:`helix_dbos.a2a.handler`).
- **Client**: :class:`A2ARemoteAgentTransport` reaches an A2A agent as a remote sub-agent
  (``create_remote_sub_agent_tool(..., transport=A2ARemoteAgentTransport(url))``): the calls are the
  remote sub-agent's durable steps, and its message ids derive from the parent's session and tool
  call, so a recovered parent never sends a message twice (:mod:`helix_dbos.a2a.transport`).

The protocol layer (JSON-RPC parsing, errors, the 0.3 compatibility names, SSE) is the official
``a2a-sdk``'s; it is imported only here, and a missing SDK is named at once
(``pip install 'helix-dbos[a2a]'``).
"""

from helix_dbos.a2a.sdk import A2A_INSTALL_HINT, require_a2a_sdk
from helix_dbos.a2a.transport import A2ARemoteAgentTransport

__all__ = ["A2A_INSTALL_HINT", "A2ARemoteAgentTransport", "require_a2a_sdk"]
