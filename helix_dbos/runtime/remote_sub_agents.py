"""Remote sub-agent calls in a tool batch: start the remote runs, proxy their streams, await them.

Like ephemeral sub-agents (:mod:`.sub_agents`), a batch's remote calls are started before its
regular tools run and awaited after them, in call order. Each call takes two DBOS steps:

- ``{agent}.remote.start`` (:func:`remote_start_step`) records the
  :class:`~helix_dbos.session.SubSessionRef` (with its remote metadata) on the parent and starts
  the remote run under a session id derived from the parent's session and the tool call (with the
  parent's turn and step: :func:`~helix_dbos.runtime.ids.scoped_call_key`). The
  transport's start is idempotent on that id, so a step re-executed after a crash finds the run it
  started; a replayed parent reads the recorded output and calls nothing.
- ``{agent}.remote.wait`` (:func:`remote_wait_step`) first asks the remote service for the run's
  status (``transport.get_status``: a recovered parent learns where the run is), then proxies the
  remote stream into the parent's stream from the last remote sequence it stored, until the remote
  run ends. Each proxied chunk is keyed by the remote session and sequence, so a chunk proxied
  twice (a step re-executed after a crash) is stored once. Meanwhile it passes the parent's
  interrupt and abort on, enforces the call's deadline, and fails the call at once when the remote
  run waits for a client-executed tool (``client-tool-unsupported``): never a hang.

A remote service that does not answer (restarting, unreachable) is retried: the start for
:data:`START_RETRY_SECONDS`, the stream and the status for as long as the wait lasts.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dbos import DBOS
from pydantic import ValidationError

from helix_dbos.capability import RunCapability
from helix_dbos.errors import HelixError, RemoteSubAgentClientToolUnsupportedError, public_error_message
from helix_dbos.orchestration.delegation import delegation_message, ended_run_message
from helix_dbos.orchestration.tool_batch import ToolBatch
from helix_dbos.remote_sub_agent import (
    RemoteRunStatus,
    RemoteStreamEvent,
    RemoteSubAgentTool,
    remote_session_id_for,
)
from helix_dbos.runtime import services, step_names
from helix_dbos.runtime.abort import durable_stop_reason
from helix_dbos.runtime.ids import SCOPED_CALL_IDS_PATCH
from helix_dbos.runtime.run_request import RunIdentity
from helix_dbos.runtime.services import RuntimeServices
from helix_dbos.runtime.step_outputs import (
    RemoteStartOutput,
    RemoteWaitOutput,
    RemoteWaitStatus,
    ToolStepOutput,
    empty_tool_output,
)
from helix_dbos.session import RemoteSessionInfo, SubSessionRef
from helix_dbos.step_result import ParsedToolCall
from helix_dbos.store.engine import now_ms
from helix_dbos.stream.chunks import StreamChunkAdapter, SubAgentStartChunk
from helix_dbos.tool import SUBAGENT_TOOL_PREFIX, validation_error_message

if TYPE_CHECKING:
    from helix_dbos.runtime.run_context import RunContext

START_RETRY_SECONDS = 30.0
"""How long a start keeps trying a remote service that does not answer (or answers 5xx)."""
STATUS_POLL_SECONDS = 2.0
"""How often the wait asks for the remote run's status while its stream is quiet."""
END_GRACE_SECONDS = 5.0
"""How long the wait keeps reading the stream after the status says the run ended (its last chunks)."""
_SLICE_SECONDS = 0.25
_PROGRESS_EVERY_SECONDS = 0.5


@dataclass(frozen=True)
class RemoteDelegation:
    """A remote sub-agent call whose run was started (or failed to be): what the await needs."""

    call: ParsedToolCall
    tool: RemoteSubAgentTool
    opened: RemoteStartOutput


# --- workflow code ----------------------------------------------------------------------------------


def start_remote_sub_agents(
    run: RunContext, calls: list[tuple[ParsedToolCall, RemoteSubAgentTool]], results: dict[str, ToolStepOutput]
) -> list[RemoteDelegation]:
    """Announce and start every remote call, in call order; a call refused before starting gets its result now."""
    started: list[RemoteDelegation] = []
    for call, tool in calls:
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        key = run.call_key(call.id)
        remote_id = remote_session_id_for(run.who.session_id, key)
        run.emit(
            SubAgentStartChunk(
                **run.chunk_base(),
                sub_agent_id=remote_id,
                sub_agent_type=tool.name.removeprefix(SUBAGENT_TOOL_PREFIX),
                tool_call_id=call.id,
                input=arguments,
            )
        )
        message = delegation_message(tool, arguments)
        if isinstance(message, ValidationError):
            results[call.id] = _result(run, call, tool, validation_error_message(call.name, message))
            continue
        opened: RemoteStartOutput = DBOS.run_step(
            {"name": step_names.remote_start(run.agent.name)},
            remote_start_step,
            run.who,
            call.id,
            tool,
            message,
            key,
        )
        if opened["error"] is not None:
            results[call.id] = _result(run, call, tool, opened["error"])
            continue
        started.append(RemoteDelegation(call, tool, opened))
    return started


def await_remote_sub_agents(
    run: RunContext, delegations: list[RemoteDelegation], results: dict[str, ToolStepOutput]
) -> None:
    """Wait for each started remote run (in call order) and record its result."""
    for d in delegations:
        ended: RemoteWaitOutput = DBOS.run_step(
            {"name": step_names.remote_wait(run.agent.name)}, remote_wait_step, run.who, d.opened, d.tool
        )
        if ended["status"] == "completed":
            results[d.call.id] = {
                **empty_tool_output(d.call.id, d.call.name),
                "success": True,
                "result": ended["output"],
                "duration_ms": ended["duration_ms"],
            }
        else:
            error = _failure_message(d.tool, ended)
            results[d.call.id] = {**_result(run, d.call, d.tool, error), "duration_ms": ended["duration_ms"]}


class RemoteSubAgentsCapability(RunCapability):
    """Remote sub-agents on the seam: runs on another helix-dbos service, started alongside the regular tools.

    Started (one ``remote.start`` step each) after the batch's local children and awaited after
    them; their results are announced by :class:`~.sub_agents.SubAgentsCapability` (``subagent_end``).
    """

    name = "remote_sub_agents"
    replay_patches = (SCOPED_CALL_IDS_PATCH,)

    def start_calls(
        self, run: RunContext, batch: ToolBatch, results: dict[str, ToolStepOutput]
    ) -> list[RemoteDelegation]:
        return start_remote_sub_agents(run, batch.remote_sub_agents, results)

    def finish_calls(self, run: RunContext, started: object, results: dict[str, ToolStepOutput]) -> None:
        assert isinstance(started, list)
        await_remote_sub_agents(run, started, results)


# --- step bodies --------------------------------------------------------------------------------------


def remote_start_step(
    parent: RunIdentity, tool_call_id: str, tool: RemoteSubAgentTool, message: str, call_key: str
) -> RemoteStartOutput:
    """``{agent}.remote.start``: record the remote session on the parent, start (or find) its run.

    The remote session id derives from ``call_key`` (``RunContext.call_key``: the tool call with the
    parent's turn and step, or the bare call id in a run recorded before they were added).
    """
    rt = services.current()
    remote_id = remote_session_id_for(parent.session_id, call_key)
    ref = SubSessionRef(
        sub_session_id=remote_id,
        agent_type=tool.remote_agent,
        parent_tool_call_id=tool_call_id,
        started_at=now_ms(),
        remote=RemoteSessionInfo(url=tool.transport.describe(), agent=tool.remote_agent),
    )
    rt.store.add_sub_session_refs(parent.session_id, [ref])  # a re-executed step keeps the first
    stored = _ref(rt, parent.session_id, remote_id) or ref
    deadline = None if tool.timeout_ms is None else stored.started_at + tool.timeout_ms
    output: RemoteStartOutput = {
        "session_id": remote_id,
        "run_id": "",
        "started_at_ms": stored.started_at,
        "deadline_ms": deadline,
        "error": None,
    }
    give_up = time.monotonic() + START_RETRY_SECONDS
    while True:
        try:
            run_id = tool.transport.start(tool.remote_agent, message, remote_id)
            break
        except HelixError as exc:
            if exc.retryable and time.monotonic() < give_up:
                time.sleep(0.5)
                continue
            error = f"the remote run could not be started: {public_error_message(exc)}"
        except Exception as exc:
            error = f"the remote run could not be started: {public_error_message(exc)}"
        rt.store.update_sub_session_ref(parent.session_id, remote_id, status="failed", completed_at=now_ms())
        return {**output, "error": error}
    rt.store.update_remote_progress(parent.session_id, remote_id, run_id=run_id)
    return {**output, "run_id": run_id}


def remote_wait_step(parent: RunIdentity, opened: RemoteStartOutput, tool: RemoteSubAgentTool) -> RemoteWaitOutput:
    """``{agent}.remote.wait``: proxy the remote stream, pass the parent's controls on, return how the run ended.

    Everything it decides on is durable or remote: the deadline was recorded by the start, the
    parent's flags live in the store, the proxied position in the ``SubSessionRef``, the run's
    state on the remote service. A step re-executed after a crash therefore resumes where the
    recorded position says, against the same deadline.
    """
    rt = services.current()
    remote_id = opened["session_id"]
    stored = _ref(rt, parent.session_id, remote_id)
    after = stored.remote.last_sequence if stored is not None and stored.remote is not None else 0
    proxy = _Proxy(rt, parent, tool, remote_id, after)
    started = opened["started_at_ms"]

    def ended(status: RemoteWaitStatus, output: Any = None, error: str | None = None) -> RemoteWaitOutput:
        proxy.stop()
        _close_ref(rt, parent.session_id, remote_id, "completed" if status == "completed" else "failed")
        reason = (
            RemoteSubAgentClientToolUnsupportedError.failure_reason if status == "client-tool-unsupported" else None
        )
        duration = float(max(0, now_ms() - started))
        return {"status": status, "output": output, "error": error, "failure_reason": reason, "duration_ms": duration}

    interrupt_passed_on = False
    next_status_at = 0.0  # at once: a recovered parent first asks where the run is
    final: RemoteRunStatus | None = None
    final_seen_at = 0.0
    while True:
        proxy.pump(_SLICE_SECONDS)
        now = time.monotonic()
        if opened["deadline_ms"] is not None and now_ms() >= opened["deadline_ms"]:
            error = f"the remote run did not finish within {tool.timeout_ms} ms; it was stopped"
            _control(tool.transport.abort, remote_id, error)
            return ended("timeout", error=error)
        stop = durable_stop_reason(rt.store, parent.session_id)
        if stop is not None and stop.startswith("aborted"):
            _control(tool.transport.abort, remote_id, f"parent {stop}")
            return ended("aborted", error=f"parent {stop}")
        if stop is not None and not interrupt_passed_on:
            interrupt_passed_on = _control(tool.transport.interrupt, remote_id, stop)
        if final is not None:
            if proxy.done or now - final_seen_at >= END_GRACE_SECONDS:
                return ended(_ended_status(final), final.output, final.error)
            continue
        if not (proxy.done or proxy.paused or now >= next_status_at):
            continue
        proxy.paused = False
        next_status_at = now + STATUS_POLL_SECONDS
        try:
            status = tool.transport.get_status(remote_id)
        except HelixError as exc:
            if not exc.retryable:
                return ended("failed", error=f"the remote run's status could not be read: {public_error_message(exc)}")
            continue  # the remote service is away (restarting): ask again at the next poll
        if status.awaiting_client_tool:
            refused = RemoteSubAgentClientToolUnsupportedError(tool.remote_agent, remote_id)
            _control(tool.transport.abort, remote_id, refused.failure_reason)
            return ended("client-tool-unsupported", error=refused.message)
        if status.ended:
            final, final_seen_at = status, now


# --- the stream proxy ---------------------------------------------------------------------------------


class _Proxy:
    """Reads the remote stream in a daemon thread; :meth:`pump` writes its chunks into the parent's stream.

    The reader reconnects from the last sequence it saw whenever its stream breaks for good (the
    transport already retried), until :meth:`stop` or the stream's ``end`` / ``fail``.
    """

    def __init__(self, rt: RuntimeServices, parent: RunIdentity, tool: RemoteSubAgentTool, remote_id: str, after: int):
        self._rt, self._parent, self._tool, self._remote_id = rt, parent, tool, remote_id
        self._events: queue.Queue[RemoteStreamEvent | None] = queue.Queue()
        self._stopped = threading.Event()
        self.last_sequence = after
        self._saved_sequence = after
        self._saved_at = time.monotonic()
        self.done = False
        self.paused = False
        threading.Thread(target=self._read, args=(after,), name=f"helix-remote-{remote_id}", daemon=True).start()

    def _read(self, after: int) -> None:
        while not self._stopped.is_set():
            try:
                for event in self._tool.transport.stream(self._remote_id, after_sequence=after):
                    if self._stopped.is_set():
                        return
                    self._events.put(event)
                    if event.sequence is not None:
                        after = event.sequence
                    if event.event in ("end", "fail"):
                        self._events.put(None)
                        return
                    if event.event == "truncated":
                        valid = event.data.get(
                            "lastValidSequence"
                        )  # resume after it (``atSequence`` is the old high-water mark)
                        after = int(valid) if valid is not None else after
            except Exception as exc:
                self._rt.logger.warn(
                    "[helix-dbos] remote sub-agent stream broke; reconnecting",
                    {"remote_session_id": self._remote_id, "error": public_error_message(exc)},
                )
            self._stopped.wait(1.0)

    def pump(self, timeout: float) -> None:
        """Write the chunks read so far (waiting up to ``timeout`` for the first), and save the position."""
        deadline = time.monotonic() + timeout
        while not self.done:
            try:
                event = self._events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if event is None:
                self.done = True
            elif event.event == "chunk" and event.sequence is not None and event.sequence > self.last_sequence:
                self._write(event)
            elif event.event == "status" and event.data.get("status") == "paused":
                self.paused = True
        self._save(force=self.done)

    def _write(self, event: RemoteStreamEvent) -> None:
        assert event.sequence is not None
        self.last_sequence = event.sequence
        try:
            chunk = StreamChunkAdapter.validate_python(event.data)
        except ValidationError:
            return  # a chunk type this version does not know (a newer remote service): not proxied
        key = f"remote:{self._remote_id}:{event.sequence}"
        self._rt.streams.write(self._parent.stream_id, chunk, dedupe_key=key)
        if self._parent.parent_stream_id is not None:
            self._rt.streams.write(self._parent.parent_stream_id, chunk, dedupe_key=key)

    def _save(self, *, force: bool) -> None:
        """Record the proxied position (after the chunks it covers were handed to the stream)."""
        if self.last_sequence == self._saved_sequence:
            return
        if not force and time.monotonic() - self._saved_at < _PROGRESS_EVERY_SECONDS:
            return
        self._rt.streams.flush()
        self._rt.store.update_remote_progress(
            self._parent.session_id, self._remote_id, last_sequence=self.last_sequence
        )
        self._saved_sequence, self._saved_at = self.last_sequence, time.monotonic()

    def stop(self) -> None:
        self.pump(0.0)
        self._save(force=True)
        self._stopped.set()


# --- helpers ----------------------------------------------------------------------------------------------


def _ended_status(status: RemoteRunStatus) -> RemoteWaitStatus:
    if status.status in ("completed", "interrupted"):
        return "completed" if status.status == "completed" else "interrupted"
    return "failed"


def _control(call: Any, remote_id: str, reason: str) -> bool:
    """Pass an interrupt or abort on; a remote service that cannot be reached is logged, not fatal."""
    try:
        call(remote_id, reason)
        return True
    except Exception as exc:
        services.current().logger.warn(
            "[helix-dbos] remote sub-agent control failed",
            {"remote_session_id": remote_id, "error": public_error_message(exc)},
        )
        return False


def _ref(rt: RuntimeServices, parent_session: str, remote_id: str) -> SubSessionRef | None:
    return next((r for r in rt.store.get_sub_session_refs(parent_session) if r.sub_session_id == remote_id), None)


def _close_ref(rt: RuntimeServices, parent_session: str, remote_id: str, status: str) -> None:
    rt.store.update_sub_session_ref(parent_session, remote_id, status=status, completed_at=now_ms())


def _failure_message(tool: RemoteSubAgentTool, ended: RemoteWaitOutput) -> str:
    if ended["status"] == "client-tool-unsupported":
        return ended["error"] or f"Remote sub-agent '{tool.remote_agent}' needs a client-executed tool"
    return ended_run_message(f"Remote sub-agent '{tool.remote_agent}'", ended["status"], ended["error"])


def _result(run: RunContext, call: ParsedToolCall, tool: RemoteSubAgentTool, error: str) -> ToolStepOutput:
    """A failed delegation: the model sees ``error``; operators see an ERROR ``subagent.dispatch_failed``."""
    run.rt.logger.error(
        "subagent.dispatch_failed",
        {
            "session_id": run.who.session_id,
            "run_id": run.who.run_id,
            "tool_call_id": call.id,
            "sub_agent": tool.remote_agent,
            "remote": True,
            "error": error,
        },
    )
    return {**empty_tool_output(call.id, call.name), "error": error}


__all__ = [
    "END_GRACE_SECONDS",
    "START_RETRY_SECONDS",
    "STATUS_POLL_SECONDS",
    "RemoteDelegation",
    "RemoteSubAgentsCapability",
    "await_remote_sub_agents",
    "remote_start_step",
    "remote_wait_step",
    "start_remote_sub_agents",
]
