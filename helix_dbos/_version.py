"""The package version, read once from the installed distribution's metadata.

``pyproject.toml`` holds the only version literal. An installed package (``pip install``, editable or
not) reports it through :mod:`importlib.metadata`; a bare checkout on ``PYTHONPATH`` that was never
installed has no metadata, and says so with a ``0+unknown`` local version rather than a made-up one.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("helix-dbos")
except PackageNotFoundError:  # a source checkout that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
