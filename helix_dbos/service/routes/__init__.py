"""The service's routes, one router per area; :func:`~helix_dbos.service.app.create_app` includes them.

Routes, and the seeds' ``AgentServer`` operations they implement (seed 001 "Agent Server"):

===========================================  ==================================================
Route                                        Seeds' operation / executor call
===========================================  ==================================================
``POST /v1/runs``                            ``/start``: ``execute``                   (sessions)
``GET  /v1/sessions/{id}``                   ``/status``: session, current run, pending calls
``GET  /v1/sessions/{id}/messages``          transcript page; ``/runs``: run records
``GET  /v1/sessions/{id}/result``            ``handle.result()`` of the current run
``GET  /v1/sessions/{id}/stream``            ``/sse``: resumable (``Last-Event-ID``)    (streams)
``POST /v1/sessions/{id}/resume``            ``/resume``: ``resume``                   (control)
``POST /v1/sessions/{id}/retry``             ``retry`` (seed 002 ``RetryOptions``)
``POST /v1/sessions/{id}/interrupt``         ``/interrupt``: ``interrupt``
``POST /v1/sessions/{id}/abort``             ``/abort``: ``abort``
``GET  /v1/sessions/{id}/checkpoints``       ``list_checkpoints`` (the state history)  (forks)
``POST /v1/sessions/{id}/fork``              ``fork`` (a session branched from a checkpoint)  (forks)
``POST /v1/sessions/{id}/tool-results``      ``/submit-tool-result``: ``submit_tool_result`` (hitl)
``POST /v1/chat``                            chat handler ``POST /chat``                 (chat)
``GET  /v1/chat/{id}/stream``                ``GET /chat/{sessionId}/stream`` (current run)
``POST /v1/chat/{id}/tool-results``          ``POST /chat/{sessionId}/submit-tool-result``
``POST /v1/chat/{id}/interrupt`` / abort     ``POST /chat/{sessionId}/interrupt`` / ``abort``
``POST /v1/chat/ui``                         AI SDK ``useChat`` (UI message stream)   (ui_chat)
``GET  /v1/chat/ui/{id}/stream``             its reconnect (``DefaultChatTransport``)
``POST /v1/agui``                            AG-UI ``HttpAgent`` (AG-UI events over SSE)  (agui)
``GET  /v1/agui/threads/{id}/stream``        its re-attach (``Last-Event-ID``)
``GET  /v1/queue``                           run queue depth and per-worker load        (queue)
``POST /v1/schedules`` (list, get, delete)   agent schedules: ``executor.schedules``   (schedules)
``POST /v1/schedules/{name}/pause|resume``   pause, resume
``POST /v1/schedules/{name}/backfill``       run a past window's fires once each
``GET  /v1/schedules/{name}/fires``          the fires and what each did
``GET  /v1/agents``                          the served agents                          (inspector)
``GET  /v1/sessions``                        sessions list, with cost
``GET  /v1/sessions/{id}/timeline``          runs and steps: durations, tokens, cost
``GET  /v1/sessions/{id}/state``             the custom state
``GET  /ui``                                 the web inspector (static; :mod:`~helix_dbos.service.ui`)
``GET  /healthz``                            liveness (no authentication)              (health)
===========================================  ==================================================

The seeds' ``GET /workspace`` is not served: the DBOS runtime has no workspaces (seed 001).

The order in which the app includes the routers is the order of the OpenAPI document's paths.
"""

from helix_dbos.service.routes.agui import agui_router
from helix_dbos.service.routes.chat import chat_router
from helix_dbos.service.routes.context import RouteContext
from helix_dbos.service.routes.control import control_router
from helix_dbos.service.routes.forks import forks_router
from helix_dbos.service.routes.health import health_router
from helix_dbos.service.routes.hitl import hitl_router
from helix_dbos.service.routes.inspector import inspector_router
from helix_dbos.service.routes.queue import queue_router
from helix_dbos.service.routes.schedules import schedules_router
from helix_dbos.service.routes.sessions import sessions_router
from helix_dbos.service.routes.streams import streams_router
from helix_dbos.service.routes.ui_chat import ui_chat_router

__all__ = [
    "RouteContext",
    "agui_router",
    "chat_router",
    "control_router",
    "forks_router",
    "health_router",
    "hitl_router",
    "inspector_router",
    "queue_router",
    "schedules_router",
    "sessions_router",
    "streams_router",
    "ui_chat_router",
]
