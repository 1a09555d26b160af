"""``--mode rpc``'s output: the events of one burst reach stdout in one write.

A reply's start, deltas and end arrive together; written and flushed one line at a time,
each line is a system call that wakes the client reading the pipe (and with
``PYTHONUNBUFFERED`` set, as in many containers, ``sys.stdout.buffer`` does not buffer at
all). The session's events come from a real coordinator-side ``subscribe`` over a real
connection here; only the coordinator's state is scripted."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing
from support.wire import peer_pair

from pi_actors.cli.rpc import RpcSession
from pi_actors.runtime import IncomingCall

BURST = [
    {"type": "agent_start"},
    {"type": "turn_start"},
    {"type": "queue_update", "steering": [], "followUp": []},
    {"type": "queue_update", "steering": ["later"], "followUp": []},
    {"type": "agent_end", "messages": []},
]


class RawOut:
    """A raw, unbuffered output (what ``sys.stdout.buffer`` is under PYTHONUNBUFFERED): one
    system call per ``write``, which may take only part of the bytes."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: Any) -> int:
        taken = bytes(data[: max(1, len(data) // 2)]) if not self.writes else bytes(data)
        self.writes.append(taken)
        return len(taken)

    def flush(self) -> None:
        pass


async def test_a_burst_of_events_reaches_stdout_in_one_write_and_nothing_is_lost_when_a_write_is_short():
    client_stream, server_stream = trio.testing.memory_stream_pair()
    served = trio.Event()

    async def coordinator(call: IncomingCall) -> object:
        assert call.method == "subscribe"
        await call.send_chunk({"snapshot": {"seq": 0, "streamMessage": None}})
        await call.send_chunks([{"seq": i + 1, "event": e} for i, e in enumerate(BURST)])
        served.set()
        await trio.sleep_forever()

    out = RawOut()
    async with peer_pair(client_stream, server_stream, coordinator, role="coordinator", name="c") as peer:
        session = RpcSession(peer, out, None)  # type: ignore[arg-type]  # no command is sent
        async with trio.open_nursery() as pumping:
            pumping.start_soon(session.pump_events)
            with trio.fail_after(10):
                await served.wait()
                while session._seq_written < len(BURST):
                    await session._seq_grew.wait()
            pumping.cancel_scope.cancel()
    # The first write took half the burst, the second the rest: two system calls for five
    # lines (one each before), and the lines whole and in order.
    assert len(out.writes) == 2
    lines = b"".join(out.writes).decode().splitlines()
    assert [json.loads(line) for line in lines] == BURST
