"""Tool-argument validation (pi_actors.agent.validation): coercion and pi's exact error text."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pi_actors.agent.validation import ToolArgumentsError, validate_tool_arguments


@dataclass
class T:
    parameters: Any
    name: str = "tool"


def obj(props: dict, required: list[str] | None = None, **extra: Any) -> T:
    schema: dict[str, Any] = {"type": "object", "properties": props, **extra}
    if required is not None:
        schema["required"] = required
    return T(schema)


def errors_of(tool: T, args: Any) -> list[str]:
    with pytest.raises(ToolArgumentsError) as info:
        validate_tool_arguments(tool, args)
    return [f"{p}: {m}" for p, m in info.value.errors]


@pytest.mark.parametrize(
    "kind, given_value, expected",
    [
        ("number", "5", 5),
        ("number", "2.5", 2.5),
        ("number", " 7 ", 7),
        ("integer", "5", 5),
        ("integer", "5.0", 5),
        ("integer", 5.0, 5),
        ("boolean", "true", True),
        ("boolean", "false", False),
        ("boolean", 1, True),
        ("string", 1, "1"),
        ("string", 1.5, "1.5"),
        ("string", 2.0, "2"),
        ("string", True, "true"),
        ("string", None, ""),
        ("number", True, 1),
        ("null", "", None),
    ],
)
def test_scalars_are_coerced_as_ajv_does(kind, given_value, expected):
    out = validate_tool_arguments(obj({"x": {"type": kind}}), {"x": given_value})
    assert out == {"x": expected} and type(out["x"]) is type(expected)


def test_the_original_arguments_are_never_mutated_and_extras_are_kept():
    args = {"n": "5", "nested": {"flag": "true"}, "extra": [1, 2]}
    before = copy.deepcopy(args)
    tool = obj({"n": {"type": "number"}, "nested": {"type": "object", "properties": {"flag": {"type": "boolean"}}}})
    out = validate_tool_arguments(tool, args)
    assert args == before
    assert out == {"n": 5, "nested": {"flag": True}, "extra": [1, 2]}


def test_error_paths_and_messages_follow_pi():
    tool = obj(
        {
            "a": {"type": "number"},
            "b": {"type": "object", "properties": {"c": {"type": "string"}}, "required": ["c"]},
            "d": {"type": "array", "items": {"type": "integer"}},
        },
        required=["a", "b", "z"],
    )
    assert errors_of(tool, {"a": "x", "b": {}, "d": [1, "two"]}) == [
        "z: must have required property 'z'",
        "a: must be number",
        "b: must have required property 'c'",
        "d/1: must be integer",
    ]


def test_the_full_message_has_pis_shape():
    with pytest.raises(ToolArgumentsError) as info:
        validate_tool_arguments(T({"type": "object", "required": ["path"]}, name="read"), {"offset": "é"})
    assert str(info.value) == (
        'Validation failed for tool "read":\n'
        "  - path: must have required property 'path'\n"
        "\n"
        "Received arguments:\n"
        "{\n"
        '  "offset": "é"\n'
        "}"
    )


def test_enum_const_additional_properties_and_limits():
    tool = obj(
        {
            "mode": {"type": "string", "enum": ["a", "b"]},
            "k": {"const": 3},
            "n": {"type": "number", "minimum": 0, "maximum": 10},
            "s": {"type": "string", "minLength": 2, "maxLength": 3, "pattern": "^[a-z]+$"},
            "l": {"type": "array", "minItems": 1},
        },
        additionalProperties=False,
    )
    assert errors_of(tool, {"mode": "c", "k": 4, "n": 11, "s": "A", "l": [], "zzz": 1}) == [
        "root: must NOT have additional properties",
        "mode: must be equal to one of the allowed values",
        "k: must be equal to constant",
        "n: must be <= 10",
        "s: must NOT have fewer than 2 characters",
        's: must match pattern "^[a-z]+$"',
        "l: must NOT have fewer than 1 items",
    ]


def test_bool_is_not_a_number_and_numbers_are_not_strings_without_coercion_failures():
    tool = obj({"n": {"type": "integer"}, "o": {"type": "object"}})
    assert errors_of(tool, {"n": "1.5", "o": "text"}) == ["n: must be integer", "o: must be object"]
    # a boolean is coerced to 1/0 for numbers, as AJV does
    assert validate_tool_arguments(tool, {"n": False}) == {"n": 0}


def test_any_of_keeps_the_first_matching_branch_and_reports_a_summary():
    tool = obj({"v": {"anyOf": [{"type": "number"}, {"type": "array"}]}})
    assert validate_tool_arguments(tool, {"v": "3"}) == {"v": 3}
    assert errors_of(tool, {"v": {"k": 1}}) == ["v: must match a schema in anyOf"]


def test_type_lists_and_nullable_values():
    tool = obj({"v": {"type": ["string", "null"]}})
    assert validate_tool_arguments(tool, {"v": None}) == {"v": None}
    assert validate_tool_arguments(tool, {"v": 4}) == {"v": "4"}


def test_missing_schema_accepts_anything():
    assert validate_tool_arguments(T(None), {"a": 1}) == {"a": 1}
    assert validate_tool_arguments(T({}), {"a": 1}) == {"a": 1}


def test_root_type_error_reads_root():
    assert errors_of(T({"type": "object"}), ["not", "an", "object"]) == ["root: must be object"]


def test_json_pointer_escapes_in_paths():
    tool = T({"type": "object", "additionalProperties": {"type": "number"}})
    assert errors_of(tool, {"a/b": "x"}) == ["a~1b: must be number"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3),
    max_leaves=10,
)


@given(st.dictionaries(st.text(max_size=4), json_values, max_size=4))
def test_validation_never_mutates_and_either_returns_or_raises_the_pi_error(args):
    before = copy.deepcopy(args)
    tool = obj({"a": {"type": "number"}, "b": {"type": "string"}, "c": {"type": "array", "items": {"type": "boolean"}}})
    try:
        out = validate_tool_arguments(tool, args)
    except ToolArgumentsError as exc:
        assert str(exc).startswith('Validation failed for tool "tool":\n  - ')
        assert "\n\nReceived arguments:\n" in str(exc)
    else:
        assert set(out) == set(args)
    assert args == before
