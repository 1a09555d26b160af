"""An actor's inherited link (a socketpair from the common owner) waits for its sibling's hello
as long as a sibling may take to start on a busy machine — not the 5 s a server gives a
stranger on the network. A provider that gave up after 5 s while its coordinator was still
importing failed the whole run ("provider: connection broke during the handshake")."""

from __future__ import annotations

import trio
import trio.testing

from pi_actors.actors._serve_link import serve_coordinator_link
from pi_actors.runtime import IncomingCall, open_peer
from pi_actors.runtime import protocol as P


async def _answer(call: IncomingCall) -> dict[str, str]:
    return {"answered": call.method}


async def test_an_actor_answers_a_coordinator_that_says_hello_long_after_the_network_deadline(autojump_clock):
    actor_end, coordinator_end = trio.testing.memory_stream_pair()
    slow_start = 6 * P.HANDSHAKE_TIMEOUT  # the coordinator's interpreter is still importing (virtual time)
    assert slow_start < P.SIBLING_HANDSHAKE_TIMEOUT
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: serve_coordinator_link(actor_end, role="provider", handler=_answer, standby=False))
        await trio.sleep(slow_start)
        async with open_peer(coordinator_end, side="client", role="coordinator", name="provider") as peer:
            assert await peer.call("stream") == {"answered": "stream"}
