"""The ``a2a-sdk`` requirement: named at once when it is missing, before anything starts."""

from __future__ import annotations

import importlib

A2A_INSTALL_HINT = "pip install 'helix-dbos[a2a]'"
"""How to get the A2A SDK, named in the error raised when it is missing."""


def require_a2a_sdk() -> None:
    """Raise ``ModuleNotFoundError`` naming the ``[a2a]`` extra unless the A2A SDK can be imported.

    Checked where A2A is asked for (``create_app(a2a=True)``, ``helix-dbos serve --a2a``, a transport
    built), so a server never launches DBOS or recovers runs only to fail at its first A2A request.
    """
    for module in ("a2a.server.routes", "sse_starlette", "starlette"):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            name = exc.name or module
            raise ModuleNotFoundError(f"A2A needs {name!r} (not installed): {A2A_INSTALL_HINT}", name=name) from exc


__all__ = ["A2A_INSTALL_HINT", "require_a2a_sdk"]
