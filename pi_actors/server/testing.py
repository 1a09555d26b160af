"""Test and benchmark helpers for the server: hostile inputs and a raw byte-level exchange.

``bad_inputs(n)`` uses hypothesis to generate up to ``n`` byte strings that are not a valid
opening of a connection: random bytes, frames of random CBOR items, frames of well-formed
envelopes that are not ``hello`` (a call, a result, …), frames with oversize headers.
``raw_exchange(stream, data)`` sends ``data``, half-closes, and returns the frames received
until the server closed.
"""

from __future__ import annotations

from typing import Any

import trio

from ..runtime import protocol as P

__all__ = ["bad_inputs", "raw_exchange"]


def _strategy() -> Any:
    import cbor2
    from hypothesis import strategies as st

    json_like = st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.text(max_size=20) | st.binary(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=12,
    )

    def frame(payload: bytes) -> bytes:
        return len(payload).to_bytes(4, "big") + payload

    not_hello_type = st.sampled_from(["call", "chunk", "result", "cancel", "hello_ok", "hello_error", "nope", ""])
    envelope = st.builds(lambda t, extra: {"type": t, **extra}, not_hello_type, st.dictionaries(st.text(max_size=8), json_like, max_size=4))
    broken_hello = st.builds(
        lambda extra: {"type": "hello", **extra},
        st.fixed_dictionaries({}, optional={"protocol": st.text(max_size=10), "min_version": json_like, "max_version": json_like, "role": json_like}),
    )
    return st.one_of(
        st.binary(min_size=1, max_size=64),
        json_like.map(lambda v: frame(cbor2.dumps(v))),
        envelope.map(lambda v: frame(cbor2.dumps(v))),
        broken_hello.map(lambda v: frame(cbor2.dumps(v))),
        st.integers(P.DEFAULT_MAX_FRAME + 1, 2**32 - 1).map(lambda n: n.to_bytes(4, "big") + b"\xa0"),
        st.binary(min_size=1, max_size=32).map(lambda b: frame(b"\xd9\xd9\xf7" + b)),  # a tag
    )


def bad_inputs(n: int, *, seed: int = 0) -> list[bytes]:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hseed

    out: list[bytes] = []

    @hseed(seed)
    @settings(max_examples=n, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_strategy())
    def collect(data: bytes) -> None:
        out.append(data)

    collect()
    return out


async def raw_exchange(stream: trio.abc.Stream, data: bytes, timeout: float = 15) -> list[Any]:
    """Send ``data``, half-close, read until the peer closes; the decoded frames received
    (a trailing undecodable remainder is returned as bytes)."""
    try:
        await stream.send_all(data)
        if hasattr(stream, "send_eof"):
            try:
                await stream.send_eof()
            except (trio.BrokenResourceError, trio.ClosedResourceError, NotImplementedError):
                pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    received = b""
    with trio.fail_after(timeout):
        while True:
            try:
                more = await stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                more = b""
            if not more:
                break
            received += more
    out: list[Any] = []
    while len(received) >= 4:
        n = int.from_bytes(received[:4], "big")
        if len(received) < 4 + n:
            break
        out.append(P.decode_message(received[4 : 4 + n]))
        received = received[4 + n :]
    if received:
        out.append(received)
    return out
