"""Scale-out status: ``GET /v1/queue``, the run queue's depth and each worker's load.

Runs enqueued on a :class:`~helix_dbos.runtime.queues.RunQueue` wait in DBOS's tables until a
worker dequeues them; this route is how an operator (or an autoscaler) sees the backlog and where
runs are running, from any server of the deployment.
"""

from __future__ import annotations

from dbos import DBOS
from fastapi import Request
from fastapi.routing import APIRouter
from pydantic import BaseModel

from helix_dbos.runtime.queues import QueueStatus, queue_status
from helix_dbos.service.errors import error_responses
from helix_dbos.service.routes.context import RouteContext, caller_tenant

__all__ = ["QueueView", "queue_router"]


class QueueView(BaseModel):
    """``GET /v1/queue``: ``queue`` is ``null`` when runs start in the process that receives them."""

    queued: bool
    queue: QueueStatus | None = None


def queue_router(ctx: RouteContext) -> APIRouter:
    """The queue status route (authenticated, like every ``/v1`` route)."""
    router = ctx.router()
    executor = ctx.executor

    def status(tenant: str) -> QueueView:
        if executor.queue is None:
            return QueueView(queued=False)
        return QueueView(queued=True, queue=queue_status(DBOS, executor.queue, tenant=tenant))

    @router.get("/queue", response_model=QueueView, tags=["health"], responses=error_responses())
    async def queue(request: Request) -> QueueView:
        """The caller's tenant's share of the run queue: its runs waiting (``enqueued``) and in flight, per worker."""
        return await ctx.service.call(status, caller_tenant(request))

    return router
