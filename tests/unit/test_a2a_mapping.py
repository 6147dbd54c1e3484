"""The pure halves of A2A: helix records read as tasks (:mod:`helix_dbos.a2a.tasks`), and a task's
JSON read back as a remote run's status (:mod:`helix_dbos.a2a.transport`)."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types.a2a_pb2 import Message, Part, TaskState
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value

from helix_dbos.a2a.tasks import build_task, message_text, task_state
from helix_dbos.a2a.transport import message_id_for, task_output, task_status
from helix_dbos.store.base import PendingToolCall, RunRecord, SessionRecord


def run(status: str, **fields: Any) -> RunRecord:
    return RunRecord(
        run_id="s-turn-1", session_id="s", turn=1, status=status, started_at=1, workflow_id="s-turn-1", **fields
    )  # type: ignore[arg-type]


def session(**fields: Any) -> SessionRecord:
    base: dict[str, Any] = {
        "session_id": "s",
        "agent_type": "a",
        "status": "active",
        "version": 1,
        "run_id": "s-turn-1",
    }
    return SessionRecord(stream_id="s", created_at=1, updated_at=1, **{**base, **fields})


def pending(kind: str = "approval") -> PendingToolCall:
    return PendingToolCall(
        session_id="s", tool_call_id="c1", run_id="s-turn-1", workflow_id="s-turn-1", tool_name="publish",
        kind=kind, arguments={"topic": "x"}, arguments_digest="d", created_at=1,
    )  # type: ignore[arg-type]  # fmt: skip


@pytest.mark.parametrize(
    ("run_status", "session_fields", "calls", "expected"),
    [
        ("running", {}, [], TaskState.TASK_STATE_WORKING),
        ("running", {}, [pending()], TaskState.TASK_STATE_INPUT_REQUIRED),
        ("suspended", {}, [], TaskState.TASK_STATE_INPUT_REQUIRED),
        ("completed", {"status": "completed"}, [], TaskState.TASK_STATE_COMPLETED),
        ("failed", {"status": "failed"}, [], TaskState.TASK_STATE_FAILED),
        ("interrupted", {"status": "interrupted"}, [], TaskState.TASK_STATE_CANCELED),
        ("running", {"aborted": True, "abort_reason": "stop"}, [], TaskState.TASK_STATE_CANCELED),
        ("failed", {"status": "failed", "aborted": True}, [], TaskState.TASK_STATE_CANCELED),
    ],
)
def test_a_run_reads_as_a_task_state(
    run_status: str, session_fields: dict[str, Any], calls: list[PendingToolCall], expected: TaskState
) -> None:
    assert task_state(run(run_status), session(**session_fields), calls) == expected


def test_an_abort_of_a_later_run_does_not_cancel_an_earlier_task() -> None:
    later = session(status="failed", aborted=True, run_id="s-turn-2", output="old")
    assert task_state(run("completed"), later, []) == TaskState.TASK_STATE_COMPLETED
    assert not build_task(run("completed"), later, []).artifacts  # the session's output is the later run's


def test_a_task_carries_the_output_or_what_went_wrong_or_what_it_waits_for() -> None:
    done = build_task(run("completed"), session(status="completed", output={"answer": 42}), [])
    assert (done.id, done.context_id) == ("s-turn-1", "s")
    assert MessageToDict(done.artifacts[0].parts[0].data) == {"answer": 42}
    failed = build_task(run("failed", error="boom"), session(status="failed"), [])
    assert failed.status.message.parts[0].text == "boom"
    waiting = build_task(run("running"), session(), [pending()])
    text, data = waiting.status.message.parts
    assert "approval tool call 'c1' (publish)" in text.text
    assert MessageToDict(data.data)["pendingToolCalls"][0]["toolName"] == "publish"


def test_a_message_becomes_helix_input() -> None:
    message = Message(parts=[Part(text="hi"), Part(data=ParseDict({"b": 1, "a": 2}, Value())), Part(text="")])
    assert message_text(message) == 'hi\n{"a": 2, "b": 1}'


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ({"status": {"state": "TASK_STATE_WORKING"}}, ("running", None, False, False)),
        ({"status": {"state": "TASK_STATE_SUBMITTED"}}, ("running", None, False, False)),
        ({"status": {"state": "TASK_STATE_INPUT_REQUIRED"}}, ("suspended", None, True, False)),
        ({"status": {"state": "TASK_STATE_AUTH_REQUIRED"}}, ("suspended", None, True, False)),
        (
            {
                "status": {"state": "TASK_STATE_COMPLETED"},
                "artifacts": [{"artifactId": "output", "parts": [{"text": "ok"}]}],
            },
            ("completed", "ok", False, False),
        ),
        (
            {"status": {"state": "TASK_STATE_FAILED", "message": {"parts": [{"text": "boom"}]}}},
            ("failed", None, False, False),
        ),
        ({"status": {"state": "TASK_STATE_CANCELED"}}, ("failed", None, False, True)),
        ({"status": {"state": "TASK_STATE_REJECTED"}}, ("failed", None, False, False)),
    ],
)
def test_a_task_reads_as_a_remote_run_status(task: dict[str, Any], expected: tuple[Any, ...]) -> None:
    status = task_status("r", task)
    assert (status.status, status.output, status.awaiting_client_tool, status.aborted) == expected
    if status.status == "failed":
        assert status.error  # always says why


def test_a_task_output_prefers_the_output_artifact_then_data_then_all_text() -> None:
    text = {"artifactId": "text", "parts": [{"text": "a"}, {"text": "b"}]}
    output = {"artifactId": "output", "parts": [{"data": {"x": 1.0, "y": [2.5]}}]}
    assert task_output({"artifacts": [text, output]}, "") == {"x": 1, "y": [2.5]}  # Struct's doubles
    assert isinstance(task_output({"artifacts": [output]}, "")["x"], int)
    assert task_output({"artifacts": [text]}, "") == "ab"
    assert task_output({}, "said") == "said"


def test_message_ids_are_deterministic_per_remote_session() -> None:
    assert message_id_for("p-sub-1.1-c") == message_id_for("p-sub-1.1-c") != message_id_for("p-sub-1.2-c")
