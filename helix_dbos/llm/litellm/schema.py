"""Strict-mode JSON schemas for tools and structured outputs, and the undoing of their nullability.

OpenAI's strict mode (structured outputs, ``"strict": true`` tools) accepts only a subset of JSON
Schema: every object closed with ``additionalProperties: false``, every property required, no
``default``, no keywords beside ``$ref``. :func:`to_strict_json_schema` rewrites an ordinary
schema into that form; optional fields become nullable so that they can still be left out in
meaning. :func:`drop_optional_nulls` undoes that on the way back: a ``null`` the model sent only
because strict mode made the field required is removed, so the tool's own default applies.

Pure functions over plain dicts; the input is never modified.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, cast

__all__ = ["drop_optional_nulls", "to_strict_json_schema"]


def _allows_null(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return True
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_allows_null(variant) for variant in schema.get("anyOf", ()) if isinstance(variant, dict)) or (
        None in schema.get("enum", [0])
    )


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if _allows_null(schema):
        return schema
    kind = schema.get("type")
    if isinstance(kind, str) and "$ref" not in schema:
        result = {**schema, "type": [kind, "null"]}
        if "enum" in result:
            result["enum"] = [*result["enum"], None]
        return result
    if isinstance(kind, list):
        return {**schema, "type": [*kind, "null"]}
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def _resolve_ref(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"unsupported $ref {ref!r}: only local '#/...' references can be made strict")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    if not isinstance(node, dict):
        raise ValueError(f"$ref {ref!r} does not resolve to a schema object")
    return node


def _strict_object(node: dict[str, Any], root: dict[str, Any]) -> None:
    """Close an object schema in place: every property required, optional ones made nullable."""
    properties = node.get("properties")
    if isinstance(properties, dict):
        required = set(node.get("required", ()))
        node["properties"] = {
            name: _strictify(sub if name in required else _nullable(sub), root) for name, sub in properties.items()
        }
        node["required"] = list(properties)
    if node.get("type") == "object" or isinstance(properties, dict):
        # An explicit additionalProperties (a free-form dict) is kept: strict providers reject it,
        # and the seed's advice is to fix such a schema rather than silently change its meaning.
        node.setdefault("additionalProperties", False)


def _strict_children(node: dict[str, Any], root: dict[str, Any]) -> None:
    """Make the sub-schemas that are not properties strict in place: definitions, items, variants."""
    for key in ("$defs", "definitions"):
        if isinstance(node.get(key), dict):
            node[key] = {name: _strictify(sub, root) for name, sub in node[key].items()}
    if isinstance(node.get("items"), dict):
        node["items"] = _strictify(node["items"], root)
    for key in ("anyOf", "allOf", "oneOf"):
        if isinstance(node.get(key), list):
            node[key] = [_strictify(variant, root) for variant in node[key]]


def _strictify(schema: Any, root: dict[str, Any]) -> Any:
    if not isinstance(schema, dict):
        return schema
    node = dict(schema)
    node.pop("default", None)  # OpenAI strict mode rejects "default"
    if "$ref" in node and len(node) > 1:
        # Strict mode forbids keywords beside $ref ({"$ref": ..., "description": ...}): inline it.
        resolved = _resolve_ref(root, node.pop("$ref"))
        node = {**resolved, **node}
    _strict_children(node, root)
    _strict_object(node, root)
    if isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1:
        node = {**node.pop("allOf")[0], **node}
    return node


def to_strict_json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Return the strict-mode form of a JSON schema (OpenAI structured outputs / strict tools).

    Every object gets ``additionalProperties: false`` (unless it states its own) and lists all its
    properties as required; properties that were optional become nullable; ``default`` keywords
    are removed and ``$ref`` with sibling keywords is inlined. ``$defs`` are kept. The input is not
    modified.
    """
    root = copy.deepcopy(dict(schema))
    return cast(dict[str, Any], _strictify(root, root))


def drop_optional_nulls(value: Any, schema: Any, root: dict[str, Any]) -> Any:
    """Undo strict-mode nullability: drop ``null`` for fields whose original schema forbids it.

    ``schema`` is the tool's original (not strict) schema for ``value``; ``root`` the whole schema,
    for ``$ref`` lookups. Values the schema does not describe are returned unchanged.
    """
    if not isinstance(schema, dict):
        return value
    if "$ref" in schema:
        try:
            schema = {
                **_resolve_ref(root, schema["$ref"]),
                **{k: v for k, v in schema.items() if k != "$ref"},
            }
        except (KeyError, ValueError):
            return value
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        properties, required = schema["properties"], set(schema.get("required", ()))
        cleaned: dict[str, Any] = {}
        for key, item in value.items():
            sub = properties.get(key)
            if item is None and sub is not None and key not in required and not _allows_null(sub):
                continue
            cleaned[key] = drop_optional_nulls(item, sub, root) if sub is not None else item
        return cleaned
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [drop_optional_nulls(item, schema["items"], root) for item in value]
    variants = [v for v in schema.get("anyOf", ()) if isinstance(v, dict) and v.get("type") != "null"]
    if value is not None and len(variants) == 1:
        return drop_optional_nulls(value, variants[0], root)
    return value
