"""parse_streaming_json: pi's table (pi's packages/ai, docs/architecture.md §7) and hostile input."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_actors.ai import parse_streaming_json, parse_tool_arguments


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": "hel', {"a": "hel"}),
        ('{"a": ', {}),
        ('{"a', {}),
        ('{"a": 12', {"a": 12}),
        ('{"a": tr', {"a": True}),
        ('{"a": [1, 2', {"a": [1, 2]}),
        ("garbage", {}),
        ("null", None),
        ('{"a": "x\\', {"a": "x"}),
        (None, {}),
        ("", {}),
        ("  \n\t", {}),
        ('{"a": {"b": [1, {"c": "d', {"a": {"b": [1, {"c": "d"}]}}),
        ('{"a":1}}', {}),
    ],
)
def test_pi_examples(text, expected):
    assert parse_streaming_json(text) == expected


def test_tool_arguments_are_always_an_object():
    assert parse_tool_arguments("null") == {}
    assert parse_tool_arguments("[1, 2") == {}
    assert parse_tool_arguments('{"x": 1') == {"x": 1}


def test_deep_nesting_does_not_raise():
    assert isinstance(parse_streaming_json("[" * 100_000), (dict, list))
    assert isinstance(parse_tool_arguments('{"a":' * 50_000), dict)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_never_raises_on_arbitrary_text(text):
    parse_streaming_json(text)
    assert isinstance(parse_tool_arguments(text), dict)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_never_raises_on_arbitrary_bytes_decoded_loosely(data):
    parse_streaming_json(data.decode("utf-8", "surrogateescape"))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5), st.data())
def test_every_prefix_of_an_object_parses_to_an_object_and_the_whole_to_itself(obj, data):
    text = json.dumps(obj)
    assert parse_streaming_json(text) == obj
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    assert isinstance(parse_streaming_json(text[:cut]), dict)
