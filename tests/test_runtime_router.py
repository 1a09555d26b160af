"""The typed method router: arguments validated before any handler runs, typed results and
chunks, cooperative cancellation, and the contract checked against the handlers — over a real
connection (memory stream and socketpair)."""

from __future__ import annotations

import socket

import pytest
import trio
import trio.testing

from pi_actors.runtime import (
    Empty,
    Interface,
    Method,
    RemoteError,
    Router,
    TypedCall,
    WireStruct,
    call_method,
    implements,
    open_method,
    open_peer,
)


class GreetArgs(WireStruct):
    name: str
    times: int = 1


class Greeting(WireStruct):
    text: str
    shouted_once: bool = False


class Word(WireStruct):
    word: str


GREET = Method("greet", args=GreetArgs, result=Greeting, errors={"too_many": "times above 3"})
SPELL = Method("spell", args=GreetArgs, result=Empty, chunk=Word)
WAIT = Method("wait", args=Empty, result=Greeting, cooperative=True)
GREETER = Interface("greeter", [GREET, SPELL, WAIT])


class Greeter:
    def __init__(self) -> None:
        self.calls = 0

    @implements(GREET)
    async def greet(self, args: GreetArgs, call: TypedCall[GreetArgs, None]) -> Greeting:
        self.calls += 1
        if args.times > 3:
            raise RemoteError("too_many", "at most 3")
        return Greeting(text=" ".join([f"hello {args.name}"] * args.times))

    @implements(SPELL)
    async def spell(self, args: GreetArgs, call: TypedCall[GreetArgs, Word]):
        for letter in args.name:
            yield Word(word=letter)

    @implements(WAIT)
    async def wait(self, args: Empty, call: TypedCall[Empty, None]) -> Greeting:
        await call.cancel_requested.wait()
        return Greeting(text="stopped politely", shouted_once=True)


def _socket_streams():
    a, b = socket.socketpair()
    wrap = lambda s: trio.SocketStream(trio.socket.from_stdlib_socket(s))
    return wrap(a), wrap(b)


@pytest.fixture(params=["memory", "socketpair"])
def stream_pair(request):
    if request.param == "memory":
        return trio.testing.memory_stream_pair()
    return _socket_streams()


async def _run(stream_pair, body, actor=None):
    actor = actor or Greeter()
    router = Router.serving(actor, GREETER)
    a, b = stream_pair
    async with trio.open_nursery() as nursery:

        async def serve():
            async with open_peer(b, side="server", role="greeter", name="client", handler=router) as peer:
                await peer.closed_event.wait()

        nursery.start_soon(serve)
        async with open_peer(a, side="client", role="test", name="greeter") as peer:
            await body(peer)
        nursery.cancel_scope.cancel()
    return actor


async def test_a_typed_call_returns_the_declared_result_struct(stream_pair):
    async def body(peer):
        reply = await call_method(peer, GREET, GreetArgs(name="ada", times=2))
        assert reply == Greeting(text="hello ada hello ada")
        # The wire is camelCase and omits defaults: a plain caller sees that shape.
        assert await peer.call("greet", {"name": "bo"}) == {"text": "hello bo"}

    await _run(stream_pair, body)


async def test_a_mistyped_argument_is_invalid_request_naming_the_field_and_no_handler_runs(stream_pair):
    async def body(peer):
        with pytest.raises(RemoteError) as info:
            await peer.call("greet", {"name": "ada", "times": "two"})
        assert info.value.code == "invalid_request"
        assert "$.times" in info.value.message and "greet" in info.value.message
        with pytest.raises(RemoteError) as info:
            await peer.call("greet", {})
        assert info.value.code == "invalid_request" and "name" in info.value.message

    actor = await _run(stream_pair, body)
    assert actor.calls == 0


async def test_unknown_keys_are_ignored_so_a_newer_caller_can_add_fields(stream_pair):
    async def body(peer):
        assert await peer.call("greet", {"name": "ada", "mood": "cheerful"}) == {"text": "hello ada"}

    await _run(stream_pair, body)


async def test_a_declared_refusal_reaches_the_caller_with_its_code(stream_pair):
    async def body(peer):
        with pytest.raises(RemoteError) as info:
            await call_method(peer, GREET, GreetArgs(name="ada", times=4))
        assert info.value.code == "too_many"

    await _run(stream_pair, body)


async def test_an_unknown_method_is_not_found(stream_pair):
    async def body(peer):
        with pytest.raises(RemoteError) as info:
            await peer.call("shout", {})
        assert info.value.code == "not_found" and "shout" in info.value.message

    await _run(stream_pair, body)


async def test_a_generator_handler_streams_typed_chunks_in_order(stream_pair):
    async def body(peer):
        async with open_method(peer, SPELL, GreetArgs(name="ada")) as call:
            words = [chunk.word async for chunk in call]
            assert await call.result() == Empty()
        assert words == ["a", "d", "a"]

    await _run(stream_pair, body)


async def test_a_cooperative_method_answers_a_cancel_with_its_own_result(stream_pair):
    async def body(peer):
        async with open_method(peer, WAIT) as call:
            await trio.testing.wait_all_tasks_blocked()
            await call.cancel()
            assert await call.result() == Greeting(text="stopped politely", shouted_once=True)

    await _run(stream_pair, body)


async def test_a_result_that_breaks_the_contract_is_invalid_response_for_the_caller(stream_pair):
    async def body(peer):
        with pytest.raises(RemoteError) as info:
            await call_method(peer, Method("greet", args=GreetArgs, result=Word), GreetArgs(name="x"))
        assert info.value.code == "invalid_response" and "`word`" in info.value.message

    await _run(stream_pair, body)


def test_a_router_refuses_an_actor_that_leaves_a_declared_method_without_handler():
    class Partial:
        @implements(GREET)
        async def greet(self, args, call):
            return Greeting(text="")

    with pytest.raises(ValueError, match="no handler for spell, wait"):
        Router.serving(Partial(), GREETER)


def test_a_router_refuses_a_handler_for_a_method_its_interfaces_do_not_declare():
    undeclared = Method("other", args=Empty, result=Empty)

    class Extra(Greeter):
        @implements(undeclared)
        async def other(self, args, call):
            return None

    with pytest.raises(ValueError, match="does not declare|do not declare"):
        Router.serving(Extra(), GREETER)
