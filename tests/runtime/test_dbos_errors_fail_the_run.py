"""A DBOS *error* escaping the loop fails the run like any other error; DBOS's *control* exceptions pass.

DBOS unwinds a workflow with ``DBOSBaseException`` subclasses (cancelled, no longer owned): they
derive from ``BaseException`` so that workflow code's ``except Exception`` cannot swallow them. The
loop's last-resort handler (``except Exception``: record the run as failed, so its session does not
stay ``active`` forever) used to let through every exception whose module is ``dbos``. Inside
``except Exception`` that never matched a control exception; it matched DBOS's ordinary errors
(a conflicting child workflow id, a step timeout, a workflow that does not exist), which then skipped
``fail_run`` and left the session ``active`` with its workflow in ``ERROR``.
"""

from __future__ import annotations

from dbos import DBOS
from dbos._error import DBOSConflictingWorkflowError

from helix_dbos import MockLLMAdapter, define_agent
from helix_dbos.capability import RunCapability


class ConflictingChild(RunCapability):
    """Workflow code that meets a DBOS error: what starting a child under a taken id raises, for one."""

    name = "conflicting"

    def before_model_call(self, run: object) -> None:
        raise DBOSConflictingWorkflowError("child-wf", "it was started by another function")


agent = define_agent(
    "dbos-error", system_prompt="You answer.", llm_config="mock/model", capabilities=[ConflictingChild()]
)


def test_a_dbos_error_raised_in_workflow_code_fails_the_run_and_its_session(make_executor) -> None:
    executor = make_executor(MockLLMAdapter([{"type": "text", "content": "never called"}]), agents=[agent])
    handle = executor.execute(agent, "hello", session_id="dbos-error-1")
    result = handle.result()
    assert result.status == "failed", result
    session = executor.store.load_session("dbos-error-1")
    assert session is not None and session.status == "failed", session
    status = DBOS.get_workflow_status(handle.run_id)
    assert status is not None and status.status == "SUCCESS", status  # the failure is the run's result
