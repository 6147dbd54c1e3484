"""The A2A routes of the service: ``/a2a/{agent}`` (JSON-RPC) and its agent card.

Mounted by ``create_app(executor, a2a=True)`` with the app's guarded route class, so they are
fail-closed like every other route: credentials are checked before the body is read, and a
request without them gets the service's 401. The agent card is behind the same check (it names
the agent's skills and where to send work); it declares the bearer scheme when the service uses
tokens. A path naming an agent the service does not serve is the service's 404
``state_agent_not_found``; everything else (a malformed body, an unknown method, a bad
parameter, an unknown task) is a JSON-RPC error from the SDK's dispatcher, never a 500.
"""

# No ``from __future__ import annotations``: FastAPI reads route signatures at runtime.
from a2a.server.context import ServerCallContext
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_1_0, TransportProtocol
from fastapi import Request
from fastapi.routing import APIRouter
from google.protobuf.json_format import MessageToDict
from starlette.responses import JSONResponse, Response

from helix_dbos._version import __version__
from helix_dbos.a2a.handler import SCOPE_STATE_KEY, TENANT_STATE_KEY, HelixA2ARequestHandler
from helix_dbos.errors import AgentNotFoundError
from helix_dbos.service.routes.context import RouteContext, caller_scope, caller_tenant

A2A_PREFIX = "/a2a"
"""Where the agents are mounted: ``/a2a/{agent}``."""


class _ScopedContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's context, plus the caller's scope: a message without a context opens a session of its own."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[SCOPE_STATE_KEY] = caller_scope(request)
        context.state[TENANT_STATE_KEY] = caller_tenant(request)
        return context


def agent_card(ctx: RouteContext, agent: str, base_url: str, *, bearer: bool) -> AgentCard:
    """The card of a served agent: one skill (the agent itself), JSON-RPC at ``base_url``, streaming."""
    config = ctx.executor.registry.require(agent)
    description = config.description or f"The helix-dbos agent {agent!r}."
    card = AgentCard(
        name=agent,
        description=description,
        version=__version__,
        supported_interfaces=[
            AgentInterface(
                url=base_url, protocol_binding=TransportProtocol.JSONRPC.value, protocol_version=PROTOCOL_VERSION_1_0
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[AgentSkill(id=agent, name=agent, description=description, tags=["helix-dbos"])],
    )
    if bearer:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer"))
        )
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    return card


def a2a_router(ctx: RouteContext, *, bearer: bool) -> APIRouter:
    """``GET /a2a/{agent}/.well-known/agent-card.json`` and ``POST /a2a/{agent}`` for every served agent."""
    router = APIRouter(prefix=A2A_PREFIX, route_class=ctx.route_class, dependencies=ctx.dependencies)
    dispatchers: dict[str, JsonRpcDispatcher] = {}
    builder = _ScopedContextBuilder()

    def base_url(request: Request, agent: str) -> str:
        root = str(request.base_url).rstrip("/") + request.scope.get("root_path", "")
        return f"{root}{A2A_PREFIX}/{agent}"

    def dispatcher(request: Request, agent: str) -> JsonRpcDispatcher:
        if ctx.executor.registry.get(agent) is None:
            raise AgentNotFoundError(agent, ctx.executor.registry.names())
        if agent not in dispatchers:
            card = agent_card(ctx, agent, base_url(request, agent), bearer=bearer)
            handler = HelixA2ARequestHandler(ctx.executor, agent, card, ctx.service.call)
            dispatchers[agent] = JsonRpcDispatcher(handler, context_builder=builder, enable_v0_3_compat=True)
        return dispatchers[agent]

    @router.get(
        "/{agent}" + AGENT_CARD_WELL_KNOWN_PATH,
        tags=["a2a"],
        description="The agent's A2A agent card (protocol 1.0, JSON-RPC binding).",
    )
    async def card(request: Request, agent: str) -> Response:
        if ctx.executor.registry.get(agent) is None:
            raise AgentNotFoundError(agent, ctx.executor.registry.names())
        shown = agent_card(ctx, agent, base_url(request, agent), bearer=bearer)
        return JSONResponse(MessageToDict(shown))

    @router.post(
        "/{agent}",
        tags=["a2a"],
        description="The agent's A2A JSON-RPC endpoint: `SendMessage`, `SendStreamingMessage`, `GetTask`, "
        "`ListTasks`, `CancelTask`, `SubscribeToTask` (and the 0.3 names `message/send`, `message/stream`, "
        "`tasks/get`, `tasks/cancel`, `tasks/resubscribe`). Errors are JSON-RPC errors.",
    )
    async def rpc(request: Request, agent: str) -> Response:
        return await dispatcher(request, agent).handle_requests(request)

    return router


__all__ = ["A2A_PREFIX", "a2a_router", "agent_card"]
