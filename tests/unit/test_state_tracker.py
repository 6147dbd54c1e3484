"""StateTracker, step writes, their merge contract and their RFC 6902 form."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from helix_dbos.state.tracker import (
    AppendOp,
    DeleteOp,
    ReplaceOp,
    StateTracker,
    StepWrites,
    StepWritesAdapter,
    apply_step_writes,
    create_state_tracker,
    diff_states,
    merge_step_writes,
    step_writes_to_rfc6902,
    to_json_state,
)

# --------------------------------------------------------------------------- helpers


def canon(value: Any) -> Any:
    """A hashable form of a JSON value that keeps the JSON type: ``True``, ``1`` and ``1.0`` differ."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", value)
    if isinstance(value, str):
        return ("str", value)
    if value is None:
        return ("null",)
    if isinstance(value, list):
        return ("list", tuple(canon(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, canon(v)) for k, v in value.items())))
    raise TypeError(f"not a JSON value: {value!r}")


def assert_json_equal(actual: Any, expected: Any) -> None:
    assert canon(actual) == canon(expected), f"{actual!r} != {expected!r}"


def is_extension(old: Any, new: Any) -> bool:
    """True when ``new`` is ``old`` plus appended items (what the tracker records as an append)."""
    return (
        isinstance(old, list) and isinstance(new, list) and len(new) > len(old) and canon(new[: len(old)]) == canon(old)
    )


class Notes(BaseModel):
    notes: list[str] = []
    count: int = 0
    meta: dict[str, Any] = {}
    blob: Any = None


# --------------------------------------------------------------------------- unit: diff classification


def _writes(base: dict[str, Any], mutate: Any, **kwargs: Any) -> StepWrites:
    tracker = StateTracker(base, **kwargs)
    tracker.update(mutate)
    return tracker.get_step_writes()


def test_no_change_no_writes() -> None:
    tracker = StateTracker({"a": [1], "b": {"c": 1}})
    tracker.update(lambda d: None)
    writes = tracker.get_step_writes()
    assert writes.ops == []
    assert writes.is_empty
    assert not tracker.has_changes()
    assert tracker.get_patches() == []


def test_pure_append_is_an_append() -> None:
    writes = _writes({"notes": [1, 2]}, lambda d: d["notes"].extend([3, {"x": 4}]))
    assert writes.ops == [AppendOp(key="notes", items=[3, {"x": 4}])]
    assert not writes.is_empty


def test_append_to_an_empty_list_is_an_append() -> None:
    assert _writes({"notes": []}, lambda d: d["notes"].append("a")).ops == [AppendOp(key="notes", items=["a"])]


def test_append_without_array_delta_mode_is_a_replace() -> None:
    writes = _writes({"notes": [1]}, lambda d: d["notes"].append(2), array_delta_mode=False)
    assert writes.ops == [ReplaceOp(key="notes", value=[1, 2])]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        pytest.param(lambda d: d["notes"].insert(0, 0), [0, 1, 2], id="prepend"),
        pytest.param(lambda d: d["notes"].__delitem__(-1), [1], id="pop"),
        pytest.param(lambda d: d["notes"].clear(), [], id="clear"),
        pytest.param(lambda d: d["notes"].reverse(), [2, 1], id="reorder"),
        pytest.param(lambda d: d["notes"].__setitem__(0, 9), [9, 2], id="edit-element"),
        pytest.param(lambda d: d["notes"].__setitem__(0, True), [True, 2], id="retype-element"),
    ],
)
def test_non_append_list_changes_are_replaces(mutate: Any, expected: list[Any]) -> None:
    writes = _writes({"notes": [1, 2]}, mutate)
    assert len(writes.ops) == 1
    op = writes.ops[0]
    assert isinstance(op, ReplaceOp)
    assert op.key == "notes"
    assert_json_equal(op.value, expected)


def test_retyped_prefix_then_append_is_a_replace_not_an_append() -> None:
    # [1] -> [True, 2] is not "[1] plus [2]"; recording an append would lose the True.
    writes = _writes({"flags": [1]}, lambda d: d.__setitem__("flags", [True, 2]))
    assert len(writes.ops) == 1
    assert isinstance(writes.ops[0], ReplaceOp)
    assert_json_equal(writes.ops[0].value, [True, 2])


@pytest.mark.parametrize(
    ("old", "new"), [(0, False), (1, True), (False, 0), (1, 1.0), ({"a": 1}, {"a": True}), ([0], [False])]
)
def test_a_change_of_json_type_is_a_replace(old: Any, new: Any) -> None:
    tracker = StateTracker({"k": old})
    tracker.update(lambda d: d.__setitem__("k", new))
    assert tracker.has_changes()
    writes = tracker.get_step_writes()
    assert len(writes.ops) == 1
    assert isinstance(writes.ops[0], ReplaceOp)
    assert_json_equal(writes.ops[0].value, new)
    assert_json_equal(apply_step_writes({"k": old}, writes)[0], {"k": new})


def test_replace_scalar() -> None:
    assert _writes({"count": 1}, lambda d: d.__setitem__("count", 2)).ops == [ReplaceOp(key="count", value=2)]


def test_list_replaced_by_a_scalar_and_scalar_by_a_list() -> None:
    writes = _writes({"a": [1], "b": 1}, lambda d: d.update(a="x", b=[1, 2]))
    assert writes.ops == [ReplaceOp(key="a", value="x"), ReplaceOp(key="b", value=[1, 2])]


def test_new_key_is_a_replace_even_for_a_list() -> None:
    assert _writes({}, lambda d: d.__setitem__("notes", ["a"])).ops == [ReplaceOp(key="notes", value=["a"])]


def test_delete() -> None:
    writes = _writes({"a": 1, "b": 2}, lambda d: d.__delitem__("a"))
    assert writes.ops == [DeleteOp(key="a")]


def test_nested_changes_replace_the_top_level_key() -> None:
    base = {"cfg": {"list": [1], "x": 1}, "other": 0}
    writes = _writes(base, lambda d: d["cfg"]["list"].append(2))
    assert writes.ops == [ReplaceOp(key="cfg", value={"list": [1, 2], "x": 1})]
    writes = _writes(base, lambda d: d["cfg"].__setitem__("y", None))
    assert writes.ops == [ReplaceOp(key="cfg", value={"list": [1], "x": 1, "y": None})]


def test_ops_order_current_keys_then_deletes() -> None:
    def mutate(d: dict[str, Any]) -> None:
        del d["a"]
        d["c"].append(3)
        d["b"] = "B"
        d["new"] = 1

    writes = _writes({"a": 1, "b": 2, "c": [1]}, mutate)
    assert writes.ops == [
        ReplaceOp(key="b", value="B"),
        AppendOp(key="c", items=[3]),
        ReplaceOp(key="new", value=1),
        DeleteOp(key="a"),
    ]


def test_writes_do_not_alias_the_state() -> None:
    tracker = StateTracker({"a": []})
    tracker.update(lambda d: d["a"].append({"x": 1}))
    tracker.update(lambda d: d.__setitem__("b", {"y": [1]}))
    writes = tracker.get_step_writes()
    writes.ops[0].items[0]["x"] = 99  # type: ignore[union-attr]
    writes.ops[1].value["y"].append(2)  # type: ignore[union-attr]
    assert tracker.get_state() == {"a": [{"x": 1}], "b": {"y": [1]}}


def test_diff_states_directly() -> None:
    assert diff_states({"a": [1]}, {"a": [1, 2]}).ops == [AppendOp(key="a", items=[2])]
    assert diff_states({"a": [1]}, {"a": [1, 2]}, array_delta_mode=False).ops == [ReplaceOp(key="a", value=[1, 2])]


# --------------------------------------------------------------------------- unit: RFC 6902


@pytest.mark.parametrize(
    ("key", "pointer"),
    [
        ("plain", "/plain"),
        ("a/b", "/a~1b"),
        ("m~n", "/m~0n"),
        ("~1", "/~01"),
        ("~0", "/~00"),
        ("/~", "/~1~0"),
        ("", "/"),
        ("-", "/-"),
        ("ü日本", "/ü日本"),
    ],
)
def test_pointer_escaping(key: str, pointer: str) -> None:
    writes = StepWrites(ops=[ReplaceOp(key=key, value=1), AppendOp(key=key, items=[2, 3]), DeleteOp(key=key)])
    assert step_writes_to_rfc6902(writes) == [
        {"op": "add", "path": pointer, "value": 1},
        {"op": "add", "path": f"{pointer}/-", "value": 2},
        {"op": "add", "path": f"{pointer}/-", "value": 3},
        {"op": "remove", "path": pointer},
    ]


@pytest.mark.parametrize("key", ["a/b", "m~n", "~1", "", "-", "0", "ü"])
def test_escaped_patches_apply_to_the_right_key(key: str) -> None:
    base = {key: [1], "other": {"a/b": 0}}
    tracker = StateTracker(base)
    tracker.update(lambda d: d[key].append(2))
    tracker.update(lambda d: d.__setitem__(key + "!", "new"))
    patches = tracker.get_patches()
    assert patches == step_writes_to_rfc6902(tracker.get_step_writes())
    assert jsonpatch.apply_patch(base, patches) == tracker.get_state()
    assert tracker.get_state() == {key: [1, 2], "other": {"a/b": 0}, key + "!": "new"}


def test_replace_is_an_add_so_it_applies_whether_or_not_the_key_exists() -> None:
    patches = step_writes_to_rfc6902(StepWrites(ops=[ReplaceOp(key="k", value={"v": 1})]))
    assert patches == [{"op": "add", "path": "/k", "value": {"v": 1}}]
    assert jsonpatch.apply_patch({}, patches) == {"k": {"v": 1}}
    assert jsonpatch.apply_patch({"k": 0}, patches) == {"k": {"v": 1}}


def test_empty_append_produces_no_patches() -> None:
    assert step_writes_to_rfc6902(StepWrites(ops=[AppendOp(key="k", items=[])])) == []


# --------------------------------------------------------------------------- unit: update semantics


def test_failed_update_leaves_state_untouched() -> None:
    tracker = StateTracker({"notes": ["a"], "cfg": {"x": 1}})

    def bad(d: dict[str, Any]) -> None:
        d["notes"].append("b")
        d["cfg"]["x"] = 2
        d["new"] = 1
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        tracker.update(bad)
    assert tracker.get_state() == {"notes": ["a"], "cfg": {"x": 1}}
    assert not tracker.has_changes()
    assert tracker.get_step_writes().is_empty


def test_failed_update_with_schema_leaves_state_untouched_even_for_any_fields() -> None:
    initial = {"notes": [], "count": 0, "meta": {"k": [1]}, "blob": {"items": [1]}}
    tracker = StateTracker(initial, schema=Notes)

    def bad(d: Notes) -> None:
        d.blob["items"].append(2)
        d.meta["k"].append(2)
        d.notes.append("x")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        tracker.update(bad)
    assert tracker.get_state() == initial
    assert not tracker.has_changes()


def test_schema_draft_is_a_model_and_changes_are_tracked() -> None:
    tracker = StateTracker(Notes(), schema=Notes)

    def mutate(d: Notes) -> None:
        assert isinstance(d, Notes)
        d.notes.append("n")
        d.count = 3
        d.blob = {"any": True}

    tracker.update(mutate)
    assert tracker.get_typed_state() == Notes(notes=["n"], count=3, blob={"any": True})
    assert tracker.get_step_writes().ops == [
        AppendOp(key="notes", items=["n"]),
        ReplaceOp(key="count", value=3),
        ReplaceOp(key="blob", value={"any": True}),
    ]


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda d: setattr(d, "count", "many"), id="int-field-gets-str"),
        pytest.param(lambda d: d.notes.append(3), id="list-str-gets-int"),
        pytest.param(lambda d: setattr(d, "notes", "not a list"), id="list-field-gets-str"),
        pytest.param(lambda d: setattr(d, "meta", [1]), id="dict-field-gets-list"),
    ],
)
def test_schema_rejects_wrong_types_and_keeps_the_state(mutate: Any) -> None:
    tracker = StateTracker({"notes": ["a"], "count": 1}, schema=Notes)
    before = tracker.get_state()
    with pytest.raises(ValidationError):
        tracker.update(mutate)
    assert tracker.get_state() == before
    assert not tracker.has_changes()


def test_schema_rejects_a_wrong_replacement() -> None:
    tracker = StateTracker({"count": 1}, schema=Notes)
    with pytest.raises(ValidationError):
        tracker.update(lambda d: {"count": "many"})
    assert tracker.get_state() == {"count": 1}
    # A valid replacement from an untouched draft is accepted (and validated, filling defaults).
    tracker.update(lambda d: {"count": 2})
    assert tracker.get_state() == {"notes": [], "count": 2, "meta": {}, "blob": None}


def test_returning_a_replacement_replaces_the_state() -> None:
    tracker = StateTracker({"a": 1, "b": [1]})
    tracker.update(lambda d: {"b": [1, 2], "c": 3})
    assert tracker.get_state() == {"b": [1, 2], "c": 3}
    assert tracker.get_step_writes().ops == [
        AppendOp(key="b", items=[2]),
        ReplaceOp(key="c", value=3),
        DeleteOp(key="a"),
    ]


def test_returning_the_draft_itself_is_a_mutation() -> None:
    tracker = StateTracker({"a": 1})

    def mutate(d: dict[str, Any]) -> dict[str, Any]:
        d["a"] = 2
        return d

    tracker.update(mutate)
    assert tracker.get_state() == {"a": 2}


def test_mutating_and_returning_a_value_is_rejected_like_immer() -> None:
    # ``d.pop`` both mutates the draft and returns a value; that value is not a new state.
    tracker = StateTracker({"a": {"x": 1}, "b": 2})
    with pytest.raises(ValueError, match="not both"):
        tracker.update(lambda d: d.pop("a"))
    assert tracker.get_state() == {"a": {"x": 1}, "b": 2}


def test_non_object_replacement_is_rejected() -> None:
    tracker = StateTracker({"a": 1})
    with pytest.raises(TypeError, match="object"):
        tracker.update(lambda d: [1, 2])
    assert tracker.get_state() == {"a": 1}


def test_get_state_and_get_typed_state_are_copies() -> None:
    tracker = StateTracker({"notes": ["a"], "blob": {"x": [1]}}, schema=Notes)
    tracker.get_state()["notes"].append("b")
    typed = tracker.get_typed_state()
    typed.notes.append("c")
    typed.blob["x"].append(2)
    assert tracker.get_state()["notes"] == ["a"]
    assert tracker.get_state()["blob"] == {"x": [1]}
    assert not tracker.has_changes()


def test_reset_tracking() -> None:
    tracker = StateTracker({"notes": [1], "count": 0})
    tracker.update(lambda d: d["notes"].append(2))
    assert tracker.has_changes()
    tracker.reset_tracking()
    assert not tracker.has_changes()
    assert tracker.get_step_writes().is_empty
    assert tracker.get_state() == {"notes": [1, 2], "count": 0}
    tracker.update(lambda d: d["notes"].append(3))
    tracker.update(lambda d: d.__setitem__("count", 1))
    # Diffs are relative to the new baseline: only the item added since the reset.
    assert tracker.get_step_writes().ops == [
        AppendOp(key="notes", items=[3]),
        ReplaceOp(key="count", value=1),
    ]


def test_initial_state_from_a_model_and_is_copied() -> None:
    initial = {"notes": ["a"]}
    tracker = create_state_tracker(initial)
    initial["notes"].append("mutated outside")
    assert tracker.get_state() == {"notes": ["a"]}
    model_tracker = create_state_tracker(Notes(count=2), schema=Notes)
    assert model_tracker.get_state() == {"notes": [], "count": 2, "meta": {}, "blob": None}
    assert isinstance(model_tracker.get_typed_state(), Notes)


def test_to_json_state_rejects_non_objects() -> None:
    with pytest.raises(TypeError):
        to_json_state([1, 2])
    assert to_json_state({"t": (1, 2)}) == {"t": [1, 2]}


# --------------------------------------------------------------------------- unit: apply / merge


def test_apply_step_writes_does_not_mutate_its_input() -> None:
    base = {"a": [1], "b": {"c": 1}}
    snapshot = copy.deepcopy(base)
    state, warnings = apply_step_writes(
        base, StepWrites(ops=[AppendOp(key="a", items=[2]), ReplaceOp(key="b", value=0)])
    )
    assert state == {"a": [1, 2], "b": 0}
    assert warnings == []
    assert base == snapshot


def test_append_to_a_non_list_is_dropped_with_a_warning() -> None:
    state, warnings = apply_step_writes({"a": "text"}, StepWrites(ops=[AppendOp(key="a", items=[1])]))
    assert state == {"a": "text"}
    assert len(warnings) == 1
    assert "'a'" in warnings[0]


def test_append_to_a_missing_key_creates_the_list_and_delete_of_missing_is_a_noop() -> None:
    state, warnings = apply_step_writes({}, StepWrites(ops=[AppendOp(key="a", items=[1]), DeleteOp(key="gone")]))
    assert state == {"a": [1]}
    assert warnings == []


def test_merge_replace_then_append_and_append_then_replace() -> None:
    base = {"k": [0]}
    replace = StepWrites(ops=[ReplaceOp(key="k", value=["r"])])
    append = StepWrites(ops=[AppendOp(key="k", items=["x"])])
    assert merge_step_writes(base, [replace, append]) == ({"k": ["r", "x"]}, [])
    assert merge_step_writes(base, [append, replace]) == ({"k": ["r"]}, [])


def test_merge_collects_warnings_and_leaves_base_untouched() -> None:
    base = {"k": [0]}
    writes = [
        StepWrites(ops=[ReplaceOp(key="k", value=7)]),
        StepWrites(ops=[AppendOp(key="k", items=[1])]),
        StepWrites(ops=[AppendOp(key="k", items=[2])]),
    ]
    state, warnings = merge_step_writes(base, writes)
    assert state == {"k": 7}
    assert len(warnings) == 2
    assert base == {"k": [0]}


def test_merge_delete_and_replace_are_last_write_wins() -> None:
    base = {"k": 1}
    delete = StepWrites(ops=[DeleteOp(key="k")])
    replace = StepWrites(ops=[ReplaceOp(key="k", value=2)])
    assert merge_step_writes(base, [delete, replace])[0] == {"k": 2}
    assert merge_step_writes(base, [replace, delete])[0] == {}


def test_step_writes_json_round_trip() -> None:
    writes = StepWrites(
        ops=[AppendOp(key="a", items=[1, {"b": None}]), ReplaceOp(key="c/d", value=True), DeleteOp(key="~")],
        warnings=["w"],
    )
    data = writes.model_dump(mode="json")
    assert [op["kind"] for op in data["ops"]] == ["append", "replace", "delete"]
    assert StepWritesAdapter.validate_python(data) == writes
    assert StepWrites.model_validate_json(writes.model_dump_json()) == writes


def test_step_writes_reject_unknown_kinds_and_fields() -> None:
    with pytest.raises(ValidationError):
        StepWrites.model_validate({"ops": [{"kind": "move", "key": "a"}]})
    with pytest.raises(ValidationError):
        StepWrites.model_validate({"ops": [{"kind": "delete", "key": "a", "value": 1}]})


# --------------------------------------------------------------------------- hypothesis strategies

TRICKY_KEYS = ["", "/", "~", "~0", "~1", "a/b", "a~b", "/~", "-", "0", "ü", "日本", "😀", "a b", "value"]

keys = st.one_of(st.sampled_from(TRICKY_KEYS), st.text(max_size=4))

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, 2, 0.0, 1.0, 2.0]),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)

json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(keys, children, max_size=4),
    ),
    max_leaves=12,
)

json_objects = st.dictionaries(keys, json_values, max_size=6)

PROPERTY_SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def _retype(value: Any) -> Any:
    """Same value under ``==``, different JSON type (0 <-> False, 1 <-> True, 2 <-> 2.0); else unchanged."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, int):
        return float(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _retypable(value: Any) -> bool:
    return type(_retype(value)) is not type(value)


@st.composite
def mutation(draw: st.DrawFn, state: dict[str, Any]) -> tuple[Any, ...]:
    """A random mutation of ``state``, as data: ``(kind, key, *args)``; see :func:`apply_mutation`."""
    existing = sorted(state)
    kinds = ["set"]
    if existing:
        kinds += ["delete", "set_existing", "retype"]
    list_keys = [k for k in existing if isinstance(state[k], list)]
    nonempty_list_keys = [k for k in list_keys if state[k]]
    dict_keys = [k for k in existing if isinstance(state[k], dict)]
    nonempty_dict_keys = [k for k in dict_keys if state[k]]
    if list_keys:
        kinds += ["append", "append", "prepend"]
    if nonempty_list_keys:
        kinds += ["pop", "edit_item", "retype_item"]
    if dict_keys:
        kinds += ["nested_set"]
    if nonempty_dict_keys:
        kinds += ["nested_delete"]
    retypable_keys = [k for k in existing if _retypable(state[k])]
    retypable_items = [(k, i) for k in nonempty_list_keys for i, v in enumerate(state[k]) if _retypable(v)]
    if retypable_keys:
        kinds += ["retype_scalar"] * 3
    if retypable_items:
        kinds += ["retype_scalar_item"] * 2
    kind = draw(st.sampled_from(kinds))

    if kind == "retype_scalar":
        return ("retype", draw(st.sampled_from(retypable_keys)))
    if kind == "retype_scalar_item":
        key, index = draw(st.sampled_from(retypable_items))
        return ("retype_item", key, index, None)
    if kind == "set":
        return ("set", draw(keys), draw(json_values))
    if kind == "set_existing":
        return ("set", draw(st.sampled_from(existing)), draw(json_values))
    if kind in ("delete", "retype"):
        return (kind, draw(st.sampled_from(existing)))
    if kind == "append":
        return (kind, draw(st.sampled_from(list_keys)), draw(st.lists(json_values, min_size=1, max_size=3)))
    if kind == "prepend":
        return (kind, draw(st.sampled_from(list_keys)), draw(json_values))
    if kind in ("pop", "edit_item", "retype_item"):
        key = draw(st.sampled_from(nonempty_list_keys))
        index = draw(st.integers(0, len(state[key]) - 1))
        return (kind, key, index, draw(json_values))
    if kind == "nested_set":
        return (kind, draw(st.sampled_from(dict_keys)), draw(keys), draw(json_values))
    key = draw(st.sampled_from(nonempty_dict_keys))
    return (kind, key, draw(st.sampled_from(sorted(state[key]))))


def apply_mutation(d: dict[str, Any], m: tuple[Any, ...]) -> None:
    """Apply one :func:`mutation` in place; values are copied so no two states share objects."""
    kind, key, *args = m
    args = copy.deepcopy(args)
    if kind == "set":
        d[key] = args[0]
    elif kind == "delete":
        del d[key]
    elif kind == "retype":
        d[key] = _retype(d[key])
    elif kind == "append":
        d[key].extend(args[0])
    elif kind == "prepend":
        d[key].insert(0, args[0])
    elif kind == "pop":
        del d[key][args[0]]
    elif kind == "edit_item":
        d[key][args[0]] = args[1]
    elif kind == "retype_item":
        d[key][args[0]] = _retype(d[key][args[0]])
    elif kind == "nested_set":
        d[key][args[0]] = args[1]
    else:
        del d[key][args[0]]


# --------------------------------------------------------------------------- property 1: round trip


@PROPERTY_SETTINGS
@given(base=json_objects, data=st.data(), array_delta_mode=st.booleans(), batch=st.booleans())
def test_step_writes_reproduce_the_tracked_state(
    base: dict[str, Any], data: st.DataObject, array_delta_mode: bool, batch: bool
) -> None:
    tracker = StateTracker(base, array_delta_mode=array_delta_mode)
    shadow = copy.deepcopy(base)
    mutations = []
    for _ in range(data.draw(st.integers(0, 8), label="mutation count")):
        m = data.draw(mutation(shadow))
        apply_mutation(shadow, m)
        mutations.append(m)
    if batch:

        def apply_all(d: dict[str, Any]) -> None:
            for m in mutations:
                apply_mutation(d, m)

        tracker.update(apply_all)
    else:
        for m in mutations:
            tracker.update(lambda d, m=m: apply_mutation(d, m))

    tracked = tracker.get_state()
    assert_json_equal(tracked, shadow)
    writes = tracker.get_step_writes()

    # The canonical form reproduces the state...
    applied, warnings = apply_step_writes(base, writes)
    assert warnings == []
    assert_json_equal(applied, tracked)
    # ...so does its RFC 6902 form...
    patched = jsonpatch.apply_patch(base, step_writes_to_rfc6902(writes))
    assert_json_equal(patched, tracked)
    # ...and so do the writes after a JSON round trip (they are what gets persisted).
    persisted = StepWrites.model_validate_json(writes.model_dump_json())
    assert_json_equal(apply_step_writes(base, persisted)[0], tracked)

    # Writes are minimal at top-level granularity: one op per changed key, none for the rest.
    changed = {k for k in set(base) | set(tracked) if k not in base or k not in tracked}
    changed |= {k for k in set(base) & set(tracked) if canon(base[k]) != canon(tracked[k])}
    # (in a stable order: changed keys in state order, then deleted keys in base order).
    expected_order = [k for k in tracked if k in changed] + [k for k in base if k not in tracked]
    assert [op.key for op in writes.ops] == expected_order
    assert {op.key for op in writes.ops} == changed
    assert tracker.has_changes() == bool(changed)
    for op in writes.ops:
        if isinstance(op, AppendOp):
            assert array_delta_mode
            assert is_extension(base[op.key], tracked[op.key])
        elif isinstance(op, ReplaceOp) and array_delta_mode and op.key in base:
            assert not is_extension(base[op.key], tracked[op.key])

    tracker.reset_tracking()
    assert tracker.get_step_writes().is_empty
    assert not tracker.has_changes()


# --------------------------------------------------------------------------- property 2: appends compose


list_bases = st.fixed_dictionaries(
    {},
    optional={
        "notes": st.lists(json_values, max_size=3),
        "a/b": st.lists(json_values, max_size=3),
        "~": st.lists(json_values, max_size=3),
        "": st.lists(json_values, max_size=3),
        "ü": st.lists(json_values, max_size=3),
    },
).flatmap(
    lambda lists: st.dictionaries(keys.filter(lambda k: k not in lists), json_values, max_size=3).map(
        lambda rest: {**rest, **lists}
    )
)


@PROPERTY_SETTINGS
@given(base=list_bases, data=st.data())
def test_parallel_appends_all_survive_in_any_merge_order(base: dict[str, Any], data: st.DataObject) -> None:
    list_keys = sorted(k for k, v in base.items() if isinstance(v, list))
    n_trackers = data.draw(st.integers(1, 4), label="trackers")
    appended: list[dict[str, list[Any]]] = []
    all_writes: list[StepWrites] = []
    for _ in range(n_trackers):
        tracker = StateTracker(base)
        mine: dict[str, list[Any]] = {}
        if list_keys:
            for _ in range(data.draw(st.integers(0, 3), label="appends")):
                key = data.draw(st.sampled_from(list_keys), label="key")
                items = data.draw(st.lists(json_values, max_size=3), label="items")
                tracker.update(lambda d, key=key, items=items: d[key].extend(items))
                mine.setdefault(key, []).extend(items)
        writes = tracker.get_step_writes()
        assert all(isinstance(op, AppendOp) for op in writes.ops)
        assert {op.key for op in writes.ops} == {k for k, v in mine.items() if v}
        appended.append(mine)
        all_writes.append(writes)

    order = data.draw(st.permutations(range(n_trackers)), label="merge order")
    merged, warnings = merge_step_writes(base, [all_writes[i] for i in order])
    assert warnings == []
    assert set(merged) == set(base)
    for key, value in base.items():
        if key not in list_keys:
            assert_json_equal(merged[key], value)
            continue
        prefix, tail = merged[key][: len(value)], merged[key][len(value) :]
        assert_json_equal(prefix, value)
        expected: Counter[Any] = Counter()
        for mine in appended:
            expected.update(canon(item) for item in mine.get(key, []))
        assert Counter(canon(item) for item in tail) == expected
        # Each tracker's items stay together and in their own order (appends are blocks).
        blocks = [appended[i].get(key, []) for i in order]
        assert_json_equal(tail, [item for block in blocks for item in block])

    # The same writes through RFC 6902, applied one after another, give the same merge.
    patched = base
    for i in order:
        patched = jsonpatch.apply_patch(patched, step_writes_to_rfc6902(all_writes[i]))
    assert_json_equal(patched, merged)

    # And the base prefix and multiset of items do not depend on the order.
    reverse, _ = merge_step_writes(base, [all_writes[i] for i in reversed(order)])
    for key in list_keys:
        assert Counter(canon(x) for x in reverse[key]) == Counter(canon(x) for x in merged[key])
        assert_json_equal(reverse[key][: len(base[key])], base[key])


# --------------------------------------------------------------------------- property 3: replaces are LWW


@PROPERTY_SETTINGS
@given(base=json_objects, data=st.data())
def test_parallel_replaces_are_last_write_wins(base: dict[str, Any], data: st.DataObject) -> None:
    n_trackers = data.draw(st.integers(1, 4), label="trackers")
    candidate_keys = st.sampled_from(sorted(base)) | keys if base else keys
    intents: list[dict[str, Any]] = []
    all_writes: list[StepWrites] = []
    for _ in range(n_trackers):
        draws = data.draw(st.dictionaries(candidate_keys, json_values, max_size=4), label="replaces")
        # Only real replaces: skip no-op writes and extensions of a base list (those are appends).
        intent = {
            k: v
            for k, v in draws.items()
            if k not in base or (canon(base[k]) != canon(v) and not is_extension(base[k], v))
        }
        tracker = StateTracker(base)
        tracker.update(lambda d, intent=intent: d.update(copy.deepcopy(intent)))
        writes = tracker.get_step_writes()
        assert all(isinstance(op, ReplaceOp) for op in writes.ops)
        assert {op.key for op in writes.ops} == set(intent)
        intents.append(intent)
        all_writes.append(writes)

    order = data.draw(st.permutations(range(n_trackers)), label="merge order")
    merged, warnings = merge_step_writes(base, [all_writes[i] for i in order])
    assert warnings == []

    expected = copy.deepcopy(base)
    for i in order:  # the last writer in merge order wins
        expected.update(intents[i])
    assert_json_equal(merged, expected)
    for key in set(expected):
        writers = [i for i in order if key in intents[i]]
        if writers:
            assert_json_equal(merged[key], intents[writers[-1]][key])
        else:
            assert_json_equal(merged[key], base[key])

    patched = base
    for i in order:
        patched = jsonpatch.apply_patch(patched, step_writes_to_rfc6902(all_writes[i]))
    assert_json_equal(patched, merged)
