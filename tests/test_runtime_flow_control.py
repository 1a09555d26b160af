"""Call rules and backpressure across a real Peer (memory streams and socketpairs).

A slow consumer of one call holds its producer to one window of chunks ahead, while pings,
other calls and cancels on the same connection go on; a peer that breaks the call rules (a
duplicate call id, a gap in a stream's numbering) gets a final hello_error instead of
silently corrupting a call.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing
from support.wire import peer_pair

from pi_actors.runtime import ConnectionLost, IncomingCall, Peer, RemoteError, open_peer
from pi_actors.runtime import protocol as P

WINDOW = P.CHUNK_WINDOW


class Producer:
    """The serving side: counts the chunks each call got onto the wire."""

    def __init__(self) -> None:
        self.sent: dict[str, int] = {}
        self.finished = trio.Event()
        self.waiting_for_credit = trio.Event()

    async def handle(self, call: IncomingCall) -> object:
        if call.method == "echo":
            return call.args
        if call.method == "flood":
            name, n = call.args["name"], call.args["n"]
            self.sent[name] = 0
            for i in range(n):
                await call.send_chunk(i)
                self.sent[name] += 1
            return "done"
        if call.method == "cooperative_flood":
            # Streams until cancelled, then finishes with two more windows and a result.
            call.cooperative = True
            i = 0
            while not call.cancel_requested.is_set():
                await call.send_chunk(i)
                i += 1
            for _ in range(2 * WINDOW):
                await call.send_chunk(i)
                i += 1
            self.finished.set()
            return "stopped"
        raise RemoteError("not_found", call.method)


def socket_streams() -> tuple[trio.SocketStream, trio.SocketStream]:
    a, b = socket.socketpair()
    return (trio.SocketStream(trio.socket.from_stdlib_socket(a)), trio.SocketStream(trio.socket.from_stdlib_socket(b)))


@pytest.fixture(params=["memory", "socketpair"])
def stream_pair(request):
    if request.param == "memory":
        return trio.testing.memory_stream_pair()  # unbounded: only flow control can slow the producer
    return socket_streams()


@asynccontextmanager
async def connected(stream_pair, serving: Producer | Callable[[IncomingCall], Awaitable[object]]) -> AsyncIterator[Peer]:
    """A client Peer to a server Peer serving ``serving`` (a Producer, or a handler)."""
    client_stream, server_stream = stream_pair
    handler = serving.handle if isinstance(serving, Producer) else serving
    async with peer_pair(client_stream, server_stream, handler) as peer:
        assert peer._conn.negotiated_version == 2
        yield peer


async def test_a_slow_consumer_holds_its_producer_to_one_window_ahead(stream_pair):
    producer = Producer()
    async with connected(stream_pair, producer) as peer:
        async with peer.open_call("flood", {"name": "f", "n": 1000}) as call:
            received = []
            for target in (1, 5, 17, 40, 41, 200):
                while len(received) < target:
                    received.append(await anext(call))
                await trio.testing.wait_all_tasks_blocked()  # the producer went as far as it may
                assert len(received) <= producer.sent["f"] <= len(received) + WINDOW
            received += [item async for item in call]
            assert await call.result() == "done"
    assert received == list(range(1000))


async def test_while_one_calls_buffer_is_full_pings_other_calls_and_its_cancel_go_through(stream_pair):
    producer = Producer()
    async with connected(stream_pair, producer) as peer:
        async with peer.open_call("flood", {"name": "stuck", "n": 10**6}) as stuck:
            await anext(stuck)
            await trio.testing.wait_all_tasks_blocked()
            assert producer.sent["stuck"] == WINDOW  # nobody reads on: its buffer is full
            with trio.fail_after(10):
                await peer.ping()
                assert await peer.call("echo", "still here") == "still here"
                async with peer.open_call("flood", {"name": "other", "n": 3 * WINDOW}) as other:
                    assert [item async for item in other] == list(range(3 * WINDOW))
                    assert await other.result() == "done"
                await stuck.cancel()
                with pytest.raises(RemoteError) as info:
                    await stuck.result()  # the buffered chunks, then the result
            assert info.value.code == "cancelled"
            assert producer.sent["stuck"] < 3 * WINDOW


async def test_a_cooperative_handler_finishing_after_its_caller_gave_up_is_never_left_without_credit(stream_pair):
    producer = Producer()
    async with connected(stream_pair, producer) as peer:
        async with peer.open_call("cooperative_flood") as call:
            await anext(call)
            await trio.testing.wait_all_tasks_blocked()  # the handler waits for credit
        # Leaving the block sent the cancel; the handler sends two more windows nobody reads.
        with trio.fail_after(10):
            await producer.finished.wait()
            assert await peer.call("echo", 1) == 1
        await trio.testing.wait_all_tasks_blocked()
        assert not peer._outgoing  # the given-up call is forgotten once its result came


async def test_a_sender_cancelled_while_waiting_for_credit_leaves_no_gap_in_the_numbering():
    chunk_sent = trio.Event()

    async def handler(call: IncomingCall) -> object:
        for i in range(WINDOW):
            await call.send_chunk(i)
        with trio.move_on_after(0) as scope:  # noqa: ASYNC102
            scope.cancel()
            await call.send_chunk("never")  # waits for credit, and is cancelled there
        await call.send_chunk("after")
        chunk_sent.set()
        return "done"

    async with connected(trio.testing.memory_stream_pair(), handler) as peer:
        async with peer.open_call("m") as call:
            items = [item async for item in call]
            assert await call.result() == "done"
    assert items == [*range(WINDOW), "after"]


async def test_two_tasks_streaming_into_one_call_both_wait_for_credit_and_both_finish():
    async def handler(call: IncomingCall) -> object:
        async def send(tag: str) -> None:
            for i in range(2 * WINDOW):
                await call.send_chunk(f"{tag}{i}")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send, "a")
            nursery.start_soon(send, "b")
        return "done"

    async with connected(trio.testing.memory_stream_pair(), handler) as peer:
        async with peer.open_call("m") as call:
            await anext(call)
            await trio.testing.wait_all_tasks_blocked()  # both senders wait for credit
            with trio.fail_after(10):
                items = [item async for item in call]
                assert await call.result() == "done"
    assert len(items) == 4 * WINDOW - 1


# -- a peer that breaks the call rules --------------------------------------------------------------


async def raw_client(stream: trio.abc.Stream, version: int = 2) -> P.Connection:
    conn = P.Connection("client")
    await stream.send_all(conn.send(P.Hello(protocol=P.PROTOCOL_NAME, min_version=1, max_version=version, role="raw", name="raw")))
    while not isinstance(conn.next_event(), P.HelloOk):
        conn.receive_data(await stream.receive_some(65536))
    return conn


async def frames_until_closed(stream: trio.abc.Stream) -> list[P.Message]:
    decoder = P.FrameDecoder(P.DEFAULT_MAX_FRAME)
    out = []
    with trio.fail_after(10):
        while data := await stream.receive_some(65536):
            decoder.feed(data)
            while (payload := decoder.next_frame()) is not None:
                out.append(P.decode_message(payload))
    return out


async def test_a_duplicate_call_id_in_flight_ends_the_connection_instead_of_replacing_the_first_call():
    client_stream, server_stream = socket_streams()
    producer = Producer()
    async with trio.open_nursery() as nursery:

        async def serve() -> None:
            async with open_peer(server_stream, side="server", role="s", name="s", handler=producer.handle) as peer:
                await peer.closed_event.wait()

        nursery.start_soon(serve)
        conn = await raw_client(client_stream)
        flood = P.Call(id=1, method="flood", args={"name": "a", "n": 1})
        await client_stream.send_all(conn.send(P.Call(id=1, method="cooperative_flood")))
        await client_stream.send_all(P.encode_frame(P.encode_message(flood)))  # the same id again
        frames = await frames_until_closed(client_stream)
    final = frames[-1]
    assert isinstance(final, P.HelloError) and final.code == "invalid_request"
    assert "duplicate call id 1" in final.message
    assert not any(isinstance(f, P.Result) for f in frames)  # the second call never ran


@pytest.mark.parametrize("seqs", [[0, 2], [0, 0], [1]], ids=["gap", "repeat", "not-from-zero"])
async def test_a_stream_with_a_gap_in_its_numbering_fails_the_call_and_the_connection(seqs):
    client_stream, server_stream = socket_streams()
    async with trio.open_nursery() as nursery:

        async def bad_server() -> None:
            conn = P.Connection("server")
            while not isinstance(conn.next_event(), P.Hello):
                conn.receive_data(await server_stream.receive_some(65536))
            await server_stream.send_all(conn.send(P.HelloOk(version=2, role="s", name="bad")))
            while not isinstance(event := conn.next_event(), P.Call):
                conn.receive_data(await server_stream.receive_some(65536))
            await server_stream.send_all(b"".join(P.encode_frame(P.encode_message(P.Chunk(id=event.id, seq=s, data=s))) for s in seqs))
            frames = await frames_until_closed(server_stream)
            assert isinstance(frames[-1], P.HelloError) and "numbered" in frames[-1].message

        nursery.start_soon(bad_server)
        async with open_peer(client_stream, side="client", role="c", name="c") as peer:
            with trio.fail_after(10), pytest.raises(ConnectionLost) as info:
                async with peer.open_call("stream") as call:
                    async for _ in call:
                        pass
                    await call.result()
    assert "protocol error from bad" in info.value.message and "without gaps" in info.value.message
