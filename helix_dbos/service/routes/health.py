"""Health and meta: ``GET /healthz``, the one route outside ``/v1`` and outside authentication."""

from fastapi.routing import APIRouter

from helix_dbos.service.schemas import HealthView

__all__ = ["health_router"]


def health_router() -> APIRouter:
    """The liveness route; a load balancer probes it without credentials."""
    router = APIRouter()

    @router.get("/healthz", response_model=HealthView, tags=["health"])
    async def healthz() -> HealthView:
        """Liveness: the process serves HTTP (no authentication, no database round trip)."""
        return HealthView()

    return router
