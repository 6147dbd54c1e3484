"""LiteLLM's transport factory is where :mod:`helix_dbos.llm.litellm.send_gate_transport` assumes it is.

A LiteLLM upgrade fails here first: check that every asynchronous HTTP client LiteLLM builds still
takes its transport from ``AsyncHTTPHandler.create_async_transport``, then update
:data:`CHECKED_LITELLM_VERSION`.
"""

from __future__ import annotations

import asyncio
import importlib.metadata

from helix_dbos.llm.litellm import import_litellm
from helix_dbos.llm.litellm.send_gate_transport import CHECKED_LITELLM_VERSION, install_send_gate


def test_the_installed_litellm_is_the_version_the_gate_was_checked_against() -> None:
    assert importlib.metadata.version("litellm") == CHECKED_LITELLM_VERSION


def test_the_clients_litellm_builds_get_gated_transports() -> None:
    litellm = import_litellm()  # installs the gate
    assert install_send_gate(litellm) is True  # idempotent
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler
    from litellm.llms.openai.openai import OpenAIChatCompletion

    async def transports() -> list[object]:
        sdk_client = OpenAIChatCompletion._get_async_http_client()  # what the openai SDK path wraps
        handler = AsyncHTTPHandler()  # LiteLLM's own handler (anthropic/, hosted_vllm/, ...)
        found = [sdk_client._transport, handler.client._transport]  # type: ignore[union-attr]
        await sdk_client.aclose()  # type: ignore[union-attr]
        await handler.close()
        return found

    for transport in asyncio.run(transports()):
        assert getattr(transport, "_helix_send_gate", False), type(transport)
