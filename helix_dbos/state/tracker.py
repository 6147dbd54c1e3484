"""Draft/patch tracking of an agent's custom state (the seeds' ``ImmerStateTracker``).

A tool mutates a *draft* of the custom state; the tracker compares the result with the state it
was seeded from and describes the change at top-level-key granularity as *step writes*:

- ``append``  - the key held a list and the new list starts with the old one (a pure append);
- ``replace`` - anything else that changed, or a new key;
- ``delete``  - the key is gone.

Step writes are the canonical form: the durable runtime persists them, ``merge_step_writes``
combines the writes of tools that ran in parallel from the same base (appends compose whatever
the order, replaces are last-write-wins), and ``step_writes_to_rfc6902`` turns them into the RFC
6902 patches that ``state_patch`` stream chunks carry.

Python has no Immer; the draft is a deep copy (a validated model instance when the agent has a
``state_schema``) and the diff is taken from JSON-able snapshots, which keeps the writes
serialisable and deterministic.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic_core import to_jsonable_python


class AppendOp(BaseModel):
    """Items appended to the list at ``key``."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["append"] = "append"
    key: str
    items: list[Any]


class ReplaceOp(BaseModel):
    """``key`` now holds ``value``."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["replace"] = "replace"
    key: str
    value: Any


class DeleteOp(BaseModel):
    """``key`` was removed."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["delete"] = "delete"
    key: str


WriteOp = Annotated[AppendOp | ReplaceOp | DeleteOp, Field(discriminator="kind")]
"""One top-level change to the custom state."""


class StepWrites(BaseModel):
    """The changes one tool (or one step) made to the custom state."""

    model_config = ConfigDict(extra="forbid")
    ops: list[WriteOp] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        """True when nothing changed."""
        return not self.ops


StepWritesAdapter: TypeAdapter[StepWrites] = TypeAdapter(StepWrites)

Updater = Callable[[Any], Any]
"""A function that mutates a draft in place (or returns a replacement)."""


def to_json_state(value: object) -> dict[str, Any]:
    """Snapshot a state (model or mapping) as a JSON-able dict."""
    if isinstance(value, BaseModel):
        # No serializer warnings: a draft holding a wrong type is re-validated (and rejected) by
        # ``StateTracker.update``, which raises the informative ValidationError.
        dumped = value.model_dump(mode="json", warnings=False)
    else:
        dumped = to_jsonable_python(value)
    if not isinstance(dumped, dict):
        raise TypeError(f"custom state must be an object, got {type(dumped).__name__}")
    return dumped


def json_equal(a: object, b: object) -> bool:
    """Equality of JSON values that, unlike ``==``, tells ``0`` from ``False`` and ``1`` from ``1.0``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        assert isinstance(b, list)
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def diff_states(base: Mapping[str, Any], current: Mapping[str, Any], *, array_delta_mode: bool = True) -> StepWrites:
    """Describe how ``current`` differs from ``base`` as step writes (keys in a stable order)."""
    ops: list[AppendOp | ReplaceOp | DeleteOp] = []
    for key, value in current.items():
        if key not in base:
            ops.append(ReplaceOp(key=key, value=copy.deepcopy(value)))
            continue
        old = base[key]
        if json_equal(old, value):
            continue
        if (
            array_delta_mode
            and isinstance(old, list)
            and isinstance(value, list)
            and len(value) > len(old)
            and json_equal(value[: len(old)], old)
        ):
            ops.append(AppendOp(key=key, items=copy.deepcopy(value[len(old) :])))
        else:
            ops.append(ReplaceOp(key=key, value=copy.deepcopy(value)))
    ops.extend(DeleteOp(key=key) for key in base if key not in current)
    return StepWrites(ops=list(ops))


def apply_step_writes(state: Mapping[str, Any], writes: StepWrites) -> tuple[dict[str, Any], list[str]]:
    """Apply writes to a state snapshot, returning the new state and any merge warnings.

    An ``append`` to a key that no longer holds a list (another writer replaced it with something
    else) cannot compose; the items are dropped with a warning rather than failing the step.
    """
    result: dict[str, Any] = copy.deepcopy(dict(state))
    warnings: list[str] = []
    for op in writes.ops:
        if isinstance(op, AppendOp):
            existing = result.get(op.key, [])
            if not isinstance(existing, list):
                warnings.append(f"append to {op.key!r} dropped: the key no longer holds a list")
                continue
            result[op.key] = [*existing, *copy.deepcopy(op.items)]
        elif isinstance(op, ReplaceOp):
            result[op.key] = copy.deepcopy(op.value)
        else:
            result.pop(op.key, None)
    return result, warnings


def merge_step_writes(base: Mapping[str, Any], writes: Iterable[StepWrites]) -> tuple[dict[str, Any], list[str]]:
    """Merge the writes of tools that all started from ``base``, in the order given.

    This is the seeds' parallel-tool contract: every append survives, replaces are last-write-wins.
    """
    state: dict[str, Any] = copy.deepcopy(dict(base))
    warnings: list[str] = []
    for item in writes:
        state, more = apply_step_writes(state, item)
        warnings.extend(more)
    return state, warnings


def _pointer(key: str) -> str:
    return "/" + key.replace("~", "~0").replace("/", "~1")


def step_writes_to_rfc6902(writes: StepWrites) -> list[dict[str, Any]]:
    """RFC 6902 operations equivalent to ``writes`` (appends use the ``/-`` end-of-array path).

    ``replace`` writes become ``add`` operations: RFC 6902 ``add`` on an object member sets it
    whether or not it existed, so the patch applies to the base without knowing which keys it had.
    """
    patches: list[dict[str, Any]] = []
    for op in writes.ops:
        path = _pointer(op.key)
        if isinstance(op, AppendOp):
            patches.extend({"op": "add", "path": f"{path}/-", "value": item} for item in op.items)
        elif isinstance(op, ReplaceOp):
            patches.append({"op": "add", "path": path, "value": op.value})
        else:
            patches.append({"op": "remove", "path": path})
    return patches


class StateTracker:
    """Tracks mutations of the custom state made through drafts since the last reset.

    ``schema`` is the agent's ``state_schema``: when given, drafts are validated model instances
    (so ``draft.notes.append(...)`` reads naturally and a wrong type fails loudly), and the result
    is validated again before it is accepted.
    """

    def __init__(
        self,
        initial_state: Mapping[str, Any] | BaseModel,
        *,
        schema: type[BaseModel] | None = None,
        array_delta_mode: bool = True,
    ) -> None:
        self._schema = schema
        self._array_delta_mode = array_delta_mode
        self._state = to_json_state(initial_state)
        self._baseline = copy.deepcopy(self._state)

    def get_state(self) -> dict[str, Any]:
        """A copy of the current state as JSON-able data."""
        return copy.deepcopy(self._state)

    def get_typed_state(self) -> Any:
        """The current state as a ``schema`` instance (a dict copy when there is no schema)."""
        if self._schema is None:
            return self.get_state()
        # Validate a copy: pydantic keeps ``Any``-typed values by reference, so a draft built from
        # ``self._state`` itself would let a failed update leak its mutations into the state.
        return self._schema.model_validate(copy.deepcopy(self._state))

    def update(self, fn: Updater) -> None:
        """Run ``fn`` on a draft and keep the result; an exception leaves the state untouched.

        As in Immer, ``fn`` either mutates the draft or returns a replacement, not both: a value
        returned by a call that also mutated the draft (``d.pop("k")``) is an error, not a new state.
        """
        draft = self.get_typed_state()
        pristine = to_json_state(draft)
        replacement = fn(draft)
        if replacement is not None and replacement is not draft:
            if not json_equal(to_json_state(draft), pristine):
                raise ValueError("a state updater must either mutate the draft or return a replacement, not both")
            new_value = replacement
        else:
            new_value = draft
        if self._schema is not None:
            new_value = self._schema.model_validate(to_json_state(new_value))
        self._state = to_json_state(new_value)

    def get_step_writes(self) -> StepWrites:
        """Changes since construction or the last :meth:`reset_tracking`."""
        return diff_states(self._baseline, self._state, array_delta_mode=self._array_delta_mode)

    def get_patches(self) -> list[dict[str, Any]]:
        """RFC 6902 form of :meth:`get_step_writes`."""
        return step_writes_to_rfc6902(self.get_step_writes())

    def has_changes(self) -> bool:
        """True when the state differs from the baseline."""
        return not json_equal(self._state, self._baseline)

    def reset_tracking(self) -> None:
        """Make the current state the new baseline."""
        self._baseline = copy.deepcopy(self._state)


def create_state_tracker(
    initial_state: Mapping[str, Any] | BaseModel,
    *,
    schema: type[BaseModel] | None = None,
    array_delta_mode: bool = True,
) -> StateTracker:
    """Construct a :class:`StateTracker` (the seeds' ``createImmerStateTracker``)."""
    return StateTracker(initial_state, schema=schema, array_delta_mode=array_delta_mode)
