"""Supervision of the local placement: real actor processes, killed or stopped at real moments.

The UI side is held in-process (``open_local_runtime``), so a test can act in the middle of a
run; the CLI-level chaos matrix is in ``test_chaos.py``. The parts without processes (restart
intensity, liveness checks on a memory link, the frame limit) are tested directly.
"""

from __future__ import annotations

import json
import os
import signal
from types import SimpleNamespace

import pytest
import trio
import trio.lowlevel
import trio.testing
from conftest import actor_config
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_actors.actors.local import open_local_runtime
from pi_actors.protocol.events import AgentEventRebuilder
from pi_actors.runtime import (
    ActorDied,
    MessageTooLarge,
    RemoteError,
    RestartIntensity,
    RestartPolicy,
    TooManyRestarts,
    open_peer,
    watch_heartbeat,
)
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall

#: Fast liveness checks for tests (the defaults are 1 s / 5 s).
FAST = RestartPolicy(heartbeat_interval=0.1, heartbeat_timeout=1.5, max_restarts=20)


async def _run(coordinator, text: str, on_event=None) -> list[dict]:
    """One prompt; every event rebuilt. ``on_event(event)`` may act mid-run."""
    events: list[dict] = []
    rebuild = AgentEventRebuilder()
    async with coordinator.open_call("prompt", {"text": text}) as call:
        async for data in call:
            event = rebuild.apply(data)
            events.append(event)
            if on_event is not None:
                await on_event(event)
        await call.result()
    return events


def _final(events: list[dict]) -> dict:
    return [e for e in events if e["type"] == "message_end" and e["message"]["role"] == "assistant"][-1]["message"]


def _streaming(event: dict) -> bool:
    return event["type"] == "message_update" and event["message"]["role"] == "assistant"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP])
async def test_a_dead_or_stopped_provider_fails_the_request_in_flight_and_the_next_prompt_works(scripted, tmp_path, sig):
    scripted.script += [Reply(text="never finishes", hang_after_start=True), Reply(text="fine again")]
    processes: dict = {}
    with trio.fail_after(60):
        async with open_local_runtime(actor_config(scripted, tmp_path), processes=processes, policy=FAST) as coordinator:
            first = processes["provider"]

            async def kill(event: dict) -> None:
                if _streaming(event) and first.returncode is None and not first.exited.is_set():
                    os.kill(first.pid, sig)

            events = await _run(coordinator, "talk", kill)
            final = _final(events)
            assert final["stopReason"] == "error"
            how = "was killed by SIGKILL" if sig == signal.SIGKILL else "did not answer a liveness check"
            assert final["errorMessage"].startswith(f"the provider process {how}")
            assert final["errorMessage"].endswith("the outcome of the request is unknown")
            assert len(scripted.requests) == 1  # failed, not replayed
            events = await _run(coordinator, "again")
            assert _final(events)["content"][0]["text"] == "fine again"
            assert processes["provider"] is not first


async def test_a_killed_tool_pool_fails_the_tool_call_in_flight_and_later_tool_calls_work(scripted, tmp_path):
    fifo = tmp_path / "gate"
    os.mkfifo(fifo)
    scripted.script += [
        Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": f"echo started; cat {fifo}"})]),
        Reply(text="the pool died"),
        Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo works"})]),
        Reply(text="done"),
    ]
    processes: dict = {}
    with trio.fail_after(60):
        async with open_local_runtime(actor_config(scripted, tmp_path), processes=processes, policy=FAST) as coordinator:
            pool = processes["tool-pool"]

            async def kill(event: dict) -> None:
                if event["type"] == "tool_execution_update" and event["partialResult"].get("content") and pool.returncode is None:
                    pool.kill()

            events = await _run(coordinator, "block", kill)
            end = next(e for e in events if e["type"] == "tool_execution_end")
            assert end["isError"]
            assert end["result"]["content"][0]["text"] == (
                "the tool pool process was killed by SIGKILL; the outcome of the tool call is unknown"
            )
            assert _final(events)["content"][0]["text"] == "the pool died"
            events = await _run(coordinator, "again")
            end = next(e for e in events if e["type"] == "tool_execution_end")
            assert not end["isError"] and end["result"]["content"][0]["text"].strip() == "works"


async def test_a_killed_coordinator_is_restarted_with_the_session_reloaded_from_its_file(scripted, tmp_path):
    config = actor_config(scripted, tmp_path, session={"noSession": False, "sessionDir": str(tmp_path / "sessions"), "agentDir": str(tmp_path)})
    scripted.script += [Reply(text="first answer"), Reply(text="hangs", hang_after_start=True), Reply(text="after the restart")]
    processes: dict = {}
    with trio.fail_after(60):
        async with open_local_runtime(config, processes=processes, policy=FAST, restart_coordinator=True) as coordinator:
            await _run(coordinator, "one")
            path = (await coordinator.call("session"))["path"]
            first = processes["coordinator"]

            async def kill(event: dict) -> None:
                if _streaming(event) and first.returncode is None:
                    first.kill()

            with pytest.raises(ActorDied) as info:
                await _run(coordinator, "two", kill)
            assert info.value.message.startswith("the coordinator process was killed by SIGKILL; the outcome of the prompt is unknown")
            events = await _run(coordinator, "three")
            assert _final(events)["content"][0]["text"] == "after the restart"
            assert (await coordinator.call("session"))["path"] == path
            # The reloaded context: the first exchange, the acknowledged "two", then "three".
            sent = [m["content"][0]["text"] for m in scripted.requests[-1]["body"]["messages"] if m["role"] == "user"]
            assert sent == ["one", "two", "three"]
    lines = [json.loads(line) for line in open(path)]
    texts = [m["message"]["content"] for m in lines if m.get("type") == "message" and m["message"]["role"] == "user"]
    assert [t if isinstance(t, str) else t[0]["text"] for t in texts] == ["one", "two", "three"]


class _Exits:
    """What the supervisor's report reads of a watched actor process: its name, ``down``
    event, reason and exit status (set here in the order a busy machine may reap them)."""

    def __init__(self, name: str, status: int, reason: str) -> None:
        self.name = name
        self.down = trio.Event()
        self.reason = reason
        self.process = SimpleNamespace(returncode=status)


async def _report(actors, downs, gap: float = 0.0) -> str:
    from pi_actors.actors.local import _first_down

    results: list[str] = []
    async with trio.open_nursery() as nursery:

        async def report() -> None:
            results.append(await _first_down(actors))

        nursery.start_soon(report)
        await trio.testing.wait_all_tasks_blocked()
        for actor in downs:
            actor.down.set()
            if gap:
                await trio.sleep(gap)
    return results[0]


async def test_a_killed_coordinator_is_reported_as_killed_even_when_its_stores_exit_is_reaped_in_the_same_moment():
    # The store exits by itself (status 0) once the killed coordinator's link ends. A CI run
    # reaped both in one moment and told the user "lost its session store (exited with
    # status 0)" about a coordinator killed by SIGKILL (trio wakes the two watchers in either
    # order, so twenty tries catch the wrong one).
    for _ in range(20):
        coordinator = _Exits("coordinator", -9, "was killed by SIGKILL")
        store = _Exits("session-store", 0, "exited with status 0")
        assert await _report([coordinator, store], [store, coordinator]) == "was killed by SIGKILL"


async def test_a_stores_clean_exit_seen_before_its_killed_coordinator_reports_the_coordinator(autojump_clock):
    coordinator = _Exits("coordinator", -9, "was killed by SIGKILL")
    store = _Exits("session-store", 0, "exited with status 0")
    assert await _report([coordinator, store], [store, coordinator], gap=0.5) == "was killed by SIGKILL"


async def test_a_store_that_dies_on_its_own_is_reported_as_the_sessions_loss(autojump_clock):
    coordinator = _Exits("coordinator", 0, "exited with status 0")
    store = _Exits("session-store", -9, "was killed by SIGKILL")
    assert await _report([coordinator, store], [store]) == "lost its session store (was killed by SIGKILL)"
    # A clean exit while the coordinator stays up is the store's loss too, once the grace is over.
    coordinator = _Exits("coordinator", 0, "exited with status 0")
    store = _Exits("session-store", 0, "exited with status 0")
    assert await _report([coordinator, store], [store]) == "lost its session store (exited with status 0)"


async def test_too_many_restarts_fail_the_session_with_one_clear_error(scripted, tmp_path):
    policy = RestartPolicy(heartbeat_interval=0.1, heartbeat_timeout=1.5, max_restarts=2, window=600)
    processes: dict = {}
    with trio.fail_after(60):
        async with open_local_runtime(actor_config(scripted, tmp_path), processes=processes, policy=policy) as coordinator:
            for n in range(1, 3):
                processes["provider"].kill()
                await coordinator.wait_note("provider restarted", n)
            processes["provider"].kill()
            await coordinator.closed_event.wait()
            assert coordinator.failure == (
                "session failed: the provider process was killed by SIGKILL, and the provider failed again"
                " after 2 restarts within 600 s; giving up"
            )
            with pytest.raises(RemoteError) as info:
                await coordinator.call("get_state")
            assert info.value.code == "session_failed"


def test_restart_intensity_allows_max_restarts_per_window_with_growing_back_off():
    intensity = RestartIntensity(RestartPolicy(max_restarts=3, window=10, backoff_first=0.25, backoff_max=0.4))
    assert [intensity.next_delay("x", now=t) for t in (0, 1, 2)] == [0.0, 0.25, 0.4]
    with pytest.raises(TooManyRestarts, match="x failed again after 3 restarts within 10 s"):
        intensity.next_delay("x", now=3)
    # Once the first restart leaves the window there is room for one more.
    assert intensity.next_delay("x", now=10.5) == 0.4


def test_supervision_settings_are_read_from_settings_json_and_bad_values_are_refused_by_key():
    from pi_actors.cli import ConfigError, parse_settings
    from pi_actors.protocol.config import set_fields

    policy = RestartPolicy(**set_fields(parse_settings({"supervision": {"maxRestarts": 2, "heartbeatTimeout": 0.5}}).supervision))
    assert (policy.max_restarts, policy.heartbeat_timeout) == (2, 0.5)
    assert (policy.window, policy.heartbeat_interval) == (RestartPolicy().window, RestartPolicy().heartbeat_interval)
    with pytest.raises(ConfigError, match=r"supervision.restartWindow: Expected `float \| null`, got `str`"):
        parse_settings({"supervision": {"restartWindow": "soon"}})
    with pytest.raises(ConfigError, match=r"supervision.heartbeatInterval: Expected `float` > 0"):
        parse_settings({"supervision": {"heartbeatInterval": -1}})


async def _linked_peers(nursery, handler=None):
    a, b = trio.testing.memory_stream_pair()
    server_ready = trio.Event()
    holder: dict = {}

    async def serve() -> None:
        async with open_peer(b, side="server", role="actor", name="server", handler=handler) as peer:
            holder["server"] = peer
            server_ready.set()
            await trio.sleep_forever()

    nursery.start_soon(serve)
    return a, server_ready, holder


async def test_a_peer_answers_liveness_checks_while_its_handler_is_busy_for_minutes(autojump_clock):
    async def slow(call):
        await trio.sleep(600)  # a slow model, not a wedged process
        return "late"

    async with trio.open_nursery() as nursery:
        a, ready, _ = await _linked_peers(nursery, slow)
        async with open_peer(a, side="client", role="ui", name="client") as client:
            await ready.wait()
            async with trio.open_nursery() as inner:
                inner.start_soon(client.call, "work")
                with trio.move_on_after(300):
                    reason = await watch_heartbeat(client, interval=1, timeout=5)
                    pytest.fail(f"a busy peer was judged silent: {reason}")
                inner.cancel_scope.cancel()
        nursery.cancel_scope.cancel()


async def test_a_peer_whose_loop_does_not_answer_is_reported_silent(autojump_clock):
    # The other end answers the hello, then never reads again: like a SIGSTOPped process.
    from pi_actors.runtime import protocol as P

    a, b = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:

        async def answer_hello_then_freeze() -> None:
            conn = P.Connection("server")
            while conn.next_event() is P.NEED_DATA:
                conn.receive_data(await b.receive_some(65536))
            await b.send_all(conn.send(P.HelloOk(version=conn.negotiated_version, role="actor", name="frozen")))
            await trio.sleep_forever()

        nursery.start_soon(answer_hello_then_freeze)
        async with open_peer(a, side="client", role="ui", name="client") as client:
            with trio.fail_after(60):
                reason = await watch_heartbeat(client, interval=1, timeout=5)
            assert reason is not None and "did not answer a liveness check for 5 s" in reason
        nursery.cancel_scope.cancel()


async def test_a_message_larger_than_a_frame_is_refused_with_one_clear_error():
    async with trio.open_nursery() as nursery:
        a, ready, _ = await _linked_peers(nursery, lambda call: trio.lowlevel.checkpoint())  # noqa: ASYNC105  # the handler returns the awaitable
        async with open_peer(a, side="client", role="ui", name="client", max_frame=1024) as client:
            with pytest.raises(MessageTooLarge) as info:
                await client.call("prompt", {"text": "x" * 5000})
            assert info.value.code == "too_large"
            assert info.value.message.startswith("the 'prompt' call is 5,0")
            assert "more than the limit of one message (1,024 bytes" in info.value.message
            await client.call("prompt", {"text": "small"})  # the connection is still usable
        nursery.cancel_scope.cancel()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.binary(max_size=300) | st.sampled_from([b"[" * 5000, b"{}\n", b'{"fd": true}\n', b"\n"]), max_size=6))
def test_the_control_channel_reads_hostile_bytes_as_messages_or_one_value_error(chunks):
    import socket

    from pi_actors.runtime import FdChannel

    async def main() -> None:
        ours, theirs = socket.socketpair()
        try:
            for chunk in chunks:
                theirs.sendall(chunk)
            theirs.close()
            channel = FdChannel(trio.socket.from_stdlib_socket(ours))
            while True:
                try:
                    message, sock = await channel.receive()
                except (EOFError, ValueError):
                    return
                assert isinstance(message, dict) and sock is None
        finally:
            ours.close()

    trio.run(main)


async def test_the_control_channel_carries_a_working_socket():
    import socket

    from pi_actors.runtime import FdChannel

    a, b = socket.socketpair()
    left, right = socket.socketpair()
    sender, receiver = FdChannel(trio.socket.from_stdlib_socket(a)), FdChannel(trio.socket.from_stdlib_socket(b))
    await sender.send({"session": "/x"})
    await sender.send({"link": "provider"}, left)
    left.close()
    assert await receiver.receive() == ({"session": "/x"}, None)
    message, sock = await receiver.receive()
    assert message == {"link": "provider"}
    sock.sendall(b"ping")
    assert right.recv(4) == b"ping"
    for s in (sock, right, a, b):
        s.close()
