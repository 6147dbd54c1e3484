r"""The service's OpenAPI schema, made to say exactly what the server accepts and answers.

FastAPI derives the schema from the route signatures and pydantic models; four things the models
cannot say are added here, once, when the schema is first asked for:

1. **Discriminators are required in requests.** Every variant of ``Message`` (``role``) and of a
   tool submission (``kind``) gives its discriminator a default, so the derived schema makes it
   optional, while the server needs it to pick the variant: a message without ``role`` was
   "valid" per the schema and a 422 from the server. Requests say it with ``oneOf`` over variants
   whose ``const`` discriminator is required, which is the whole rule; the ``discriminator``
   keyword (an annotation) is left to responses, because schemathesis 4.32 cannot generate invalid
   cases for it inside arrays. Likewise an optional parameter is absent, never ``null`` (FastAPI's
   ``anyOf: [string, null]`` had clients send the text ``null``).
2. **Text holds no NUL.** Every string a client sends (values and object keys, the free-form
   ``state``, ``metadata`` and tool ``result`` included) gets ``pattern: ^[^\u0000]*$``, and free
   JSON is described by a ``JsonValue`` schema that says the same recursively; the server refuses
   such text with a 422 (see :mod:`helix_dbos.validation`). Components that responses share are
   copied as ``...Input`` for requests, so responses are not constrained by a request rule.
3. **The served agents** are given as ``examples`` of ``agent``.
4. **Links** from a started run (``POST /v1/runs``, ``POST /v1/chat``) to the routes of its session,
   so clients (and schemathesis's stateful tests) know where ``session_id`` goes next.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from helix_dbos.validation import TEXT_PATTERN

JSON_VALUE = "JsonValue"
_REF = "#/components/schemas/"
_METHODS = ("get", "post", "put", "patch", "delete")

_LINKED = [
    ("GetSession", "/v1/sessions/{session_id}", "get"),
    ("GetMessages", "/v1/sessions/{session_id}/messages", "get"),
    ("GetRuns", "/v1/sessions/{session_id}/runs", "get"),
    ("Interrupt", "/v1/sessions/{session_id}/interrupt", "post"),
    ("Abort", "/v1/sessions/{session_id}/abort", "post"),
    ("ChatInterrupt", "/v1/chat/{session_id}/interrupt", "post"),
    ("ChatAbort", "/v1/chat/{session_id}/abort", "post"),
]
"""Where a started run's ``session_id`` leads. Left out: the result and stream routes, which wait
for the run (not what a link-following client wants by default), and the routes whose body names
something else a link cannot supply (a tool call, a checkpoint, an agent), where a 404 would be
about that thing, not the session."""


def install_openapi(app: FastAPI, *, agent_names: Callable[[], Iterable[str]]) -> None:
    """Serve the refined schema (module docstring) as ``app.openapi()`` and ``/openapi.json``."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                openapi_version=app.openapi_version,
                description=app.description,
                routes=app.routes,
            )
            app.openapi_schema = refine_openapi(schema, agents=sorted(agent_names()))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def refine_openapi(schema: dict[str, Any], *, agents: Iterable[str] = ()) -> dict[str, Any]:
    """Apply the module docstring's refinements to a FastAPI schema (in place; also returned)."""
    components: dict[str, Any] = schema.setdefault("components", {}).setdefault("schemas", {})
    components[JSON_VALUE] = _json_value_schema()
    _RequestSide(schema, components).apply()
    names = list(agents)
    if names:
        for model in ("StartRunRequest", "ChatRequest"):
            prop = components.get(model, {}).get("properties", {}).get("agent")
            if prop is not None:
                prop["examples"] = names
    _add_links(schema)
    return schema


def _json_value_schema() -> dict[str, Any]:
    ref = {"$ref": _REF + JSON_VALUE}
    return {
        "description": "Any JSON value whose strings, object keys included, hold no NUL (\\u0000).",
        "anyOf": [
            {"type": "string", "pattern": TEXT_PATTERN},
            {"type": "number"},
            {"type": "boolean"},
            {"type": "null"},
            {"type": "array", "items": ref},
            {"type": "object", "additionalProperties": ref, "propertyNames": {"pattern": TEXT_PATTERN}},
        ],
    }


def _refs(node: Any) -> Iterable[str]:
    """Component names referenced anywhere under ``node``."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            ref = current.get("$ref")
            if isinstance(ref, str) and ref.startswith(_REF):
                yield ref[len(_REF) :]
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)


def _closure(components: dict[str, Any], roots: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen or name not in components:
            continue
        seen.add(name)
        todo.extend(_refs(components[name]))
    return seen


def _is_free_form(node: dict[str, Any]) -> bool:
    """A schema that allows any JSON value (``Any`` in pydantic): only annotations, no constraint."""
    return not (set(node) - {"title", "description", "default", "examples"})


class _RequestSide:
    """Rewrites every schema a request uses; see the module docstring, points 1 and 2."""

    def __init__(self, schema: dict[str, Any], components: dict[str, Any]) -> None:
        self.schema = schema
        self.components = components
        response_roots: list[str] = []
        for operation in _operations(schema):
            response_roots.extend(_refs(operation.get("responses", {})))
        self.shared = _closure(components, response_roots)
        self.names: dict[str, str] = {}

    def apply(self) -> None:
        for operation in _operations(self.schema):
            for parameter in operation.get("parameters", []):
                if "schema" in parameter:
                    parameter["schema"] = self.rewrite(_without_null(parameter["schema"]))
            for media in operation.get("requestBody", {}).get("content", {}).values():
                if "schema" in media:
                    media["schema"] = self.rewrite(media["schema"])

    def component(self, name: str) -> str:
        """The request-side name of component ``name``, made on first use."""
        if name == JSON_VALUE:
            return name
        if name not in self.names:
            target = f"{name}Input" if name in self.shared else name
            self.names[name] = target
            original = self.components[name]
            self.components[target] = self.rewrite(copy.deepcopy(original))
            if target != name:
                self.components[target]["title"] = target
        return self.names[name]

    def rewrite(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self.rewrite(item) for item in node]
        if not isinstance(node, dict):
            return node
        if _is_free_form(node):
            return {**node, "$ref": _REF + JSON_VALUE}
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF):
            return {**node, "$ref": _REF + self.component(ref[len(_REF) :])}
        out = {key: self._rewrite_keyword(key, value) for key, value in node.items()}
        types = out.get("type")
        if (types == "string" or (isinstance(types, list) and "string" in types)) and not (
            {"pattern", "enum", "const", "format"} & set(out)
        ):
            out["pattern"] = TEXT_PATTERN
        if out.get("type") == "object" and out.get("additionalProperties") is not False:
            if out.get("additionalProperties", True) is True:
                out["additionalProperties"] = {"$ref": _REF + JSON_VALUE}
            out.setdefault("propertyNames", {"pattern": TEXT_PATTERN})
        discriminator = out.pop("discriminator", None)
        if isinstance(discriminator, dict):
            self._require_discriminator(out, discriminator)
        return out

    def _rewrite_keyword(self, key: str, value: Any) -> Any:
        if key in ("properties", "$defs", "patternProperties"):
            return {name: self.rewrite(sub) for name, sub in value.items()}
        if key in ("discriminator", "examples", "example", "default", "enum", "const", "required", "title"):
            return value
        return self.rewrite(value)

    def _require_discriminator(self, node: dict[str, Any], discriminator: dict[str, Any]) -> None:
        prop = discriminator.get("propertyName")
        for variant in node.get("oneOf", node.get("anyOf", [])):
            ref = variant.get("$ref", "") if isinstance(variant, dict) else ""
            if prop and ref.startswith(_REF):
                target = self.components[ref[len(_REF) :]]
                required = target.setdefault("required", [])
                if prop not in required:
                    required.append(prop)


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A parameter's schema without its ``null`` branch: a parameter is absent or text, never JSON null.

    (FastAPI describes an optional ``str | None`` parameter as ``anyOf: [string, null]``, and a
    client following that sends the text ``null``.)
    """
    branches = schema.get("anyOf")
    if not isinstance(branches, list):
        return schema
    kept = [branch for branch in branches if branch != {"type": "null"}]
    if len(kept) == len(branches) or not kept:
        return schema
    rest = {key: value for key, value in schema.items() if key != "anyOf" and not (key == "default" and value is None)}
    return {**rest, **kept[0]} if len(kept) == 1 else {**rest, "anyOf": kept}


def _operations(schema: dict[str, Any]) -> Iterable[dict[str, Any]]:
    for item in schema.get("paths", {}).values():
        for method in _METHODS:
            if method in item:
                yield item[method]


def _add_links(schema: dict[str, Any]) -> None:
    paths = schema.get("paths", {})
    links: dict[str, Any] = {}
    for name, path, method in _LINKED:
        operation = paths.get(path, {}).get(method)
        if operation is not None and "operationId" in operation:
            links[name] = {
                "operationId": operation["operationId"],
                "parameters": {"session_id": "$response.body#/session_id"},
            }
    if not links:
        return
    for path in ("/v1/runs", "/v1/chat"):
        accepted = paths.get(path, {}).get("post", {}).get("responses", {}).get("202")
        if accepted is not None:
            accepted["links"] = dict(links)


def request_text_patterns(schema: dict[str, Any]) -> list[str]:
    """Every ``pattern`` a request may meet (for tests: each must refuse NUL)."""
    found: list[str] = []
    stack: list[Any] = [schema]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            pattern = current.get("pattern")
            if isinstance(pattern, str):
                found.append(pattern)
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
    return sorted(set(found))


def pattern_admits_nul(pattern: str) -> bool:
    """Whether an ECMA-262-style ``pattern`` (as Python reads it) accepts a string holding NUL."""
    return re.search(pattern, "a\x00b") is not None or re.search(pattern, "\x00") is not None


__all__ = ["JSON_VALUE", "install_openapi", "pattern_admits_nul", "refine_openapi", "request_text_patterns"]
