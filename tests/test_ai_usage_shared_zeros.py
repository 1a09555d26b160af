"""A reply's usage as the transcript keeps it: zero costs share one float object, and the
usage still reads, encodes and writes exactly as it arrived (hypothesis, hostile numbers)."""

from __future__ import annotations

import json
import math

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from pi_actors.ai import types as T

_costs = st.one_of(st.just(0.0), st.just(-0.0), st.just(0), st.integers(-(2**53), 2**53), st.floats(allow_nan=False))
_usage = st.fixed_dictionaries({
    "input": st.integers(0, 2**40), "output": st.integers(0, 2**40), "cacheRead": st.integers(0, 2**40),
    "cacheWrite": st.integers(0, 2**40), "totalTokens": st.integers(0, 2**41),
    "cost": st.fixed_dictionaries({k: _costs for k in ("input", "output", "cacheRead", "cacheWrite", "total")}),
})  # fmt: skip


@given(usage=_usage)
def test_a_usage_decoded_from_the_wire_encodes_back_to_the_same_bytes(usage):
    decoded = msgspec.convert(usage, T.Usage)
    # What the provider sent, as msgspec types it (an int cost is a float field's value) ...
    tokens = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")
    expected = {**{k: usage[k] for k in tokens}, "cost": {k: float(usage["cost"][k]) for k in tokens[:4] + ("total",)}}
    assert T.to_plain(decoded) == expected
    for key, value in expected["cost"].items():
        kept = T.to_plain(decoded)["cost"][key]
        assert math.copysign(1.0, kept) == math.copysign(1.0, value)  # -0.0 stays -0.0
    # ... and the bytes on the wire and in the session file are those of the plain form.
    assert msgspec.msgpack.encode(decoded) == msgspec.msgpack.encode(expected)
    assert json.dumps(T.to_plain(decoded)) == json.dumps(expected)


def test_zero_costs_of_many_replies_are_one_object():
    # Decoded from bytes, as replies arrive: each number a new object before it is kept.
    wire = [msgspec.msgpack.encode({"cost": {"input": 0.0, "output": 0.0, "total": 1e-6 * i}}) for i in range(3)]
    usages = [msgspec.msgpack.decode(data, type=T.Usage) for data in wire]
    zeros = {id(u.cost.input) for u in usages} | {id(u.cost.output) for u in usages} | {id(u.cost.cache_read) for u in usages}
    assert len(zeros) == 1
