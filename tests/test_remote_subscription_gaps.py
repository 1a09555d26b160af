"""A remote UI whose subscription loses an update notices the gap in ``seq`` and subscribes
again: a real session server, the real ``follow_session`` (what ``pi-actors attach`` and the
remote TUI run), and between them a proxy on a unix socket that drops one update."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import pytest
import trio
import trio.testing

from pi_actors.runtime import protocol as P
from pi_actors.server.remote_ui import follow_session
from pi_actors.testing import Reply


class LossyProxy:
    """Accepts clients on a unix socket and serves each through ``server.serve_stream``,
    forwarding frames both ways unchanged, except at the first subscription update for which
    ``drop(event)`` is true. With ``overflow=False`` it drops that update and renumbers the
    chunks after it, so the envelope stays valid and only the subscription's own ``seq``
    shows the loss; with ``overflow=True`` it ends the subscription there as a publisher
    does with a subscriber that fell behind (``overflow``) and swallows the rest of it."""

    def __init__(self, server: Any, drop: Any, *, overflow: bool = False) -> None:
        self.server = server
        self.drop = drop
        self.overflow = overflow
        self.dropped: dict | None = None

    async def serve(self, path: str, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        await sock.bind(path)
        sock.listen()
        await trio.serve_listeners(self.handle, [trio.SocketListener(sock)], task_status=task_status)

    async def handle(self, client: trio.SocketStream) -> None:
        ours, theirs = trio.socket.socketpair()
        upstream = trio.SocketStream(ours)
        subscriptions: set[int] = set()  # the client's subscribe call ids
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.server.serve_stream, trio.SocketStream(theirs))
            nursery.start_soon(self.pump, client, upstream, self.watch_calls(subscriptions))
            await self.pump(upstream, client, self.lose_one_update(subscriptions))
            nursery.cancel_scope.cancel()

    @staticmethod
    async def pump(source: trio.abc.Stream, sink: trio.abc.Stream, rewrite: Any) -> None:
        decoder = P.FrameDecoder(P.DEFAULT_MAX_FRAME)
        try:
            while data := await source.receive_some(65536):
                decoder.feed(data)
                out = b""
                while (payload := decoder.next_frame()) is not None:
                    out += rewrite(payload)
                await sink.send_all(out)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        await trio.aclose_forcefully(sink)

    @staticmethod
    def watch_calls(subscriptions: set[int]) -> Any:
        def rewrite(payload: bytes) -> bytes:
            msg = P.decode_message(payload)
            if isinstance(msg, P.Call) and msg.method == "subscribe":
                subscriptions.add(msg.id)
            return P.encode_frame(payload)

        return rewrite

    def lose_one_update(self, subscriptions: set[int]) -> Any:
        shift: dict[int, int] = {}
        ended: set[int] = set()

        def rewrite(payload: bytes) -> bytes:
            msg = P.decode_message(payload)
            if isinstance(msg, (P.Chunk, P.Result)) and msg.id in ended:
                if isinstance(msg, P.Result):
                    ended.discard(msg.id)
                return b""  # the client already got this call's (fake) result
            if not (isinstance(msg, P.Chunk) and msg.id in subscriptions):
                return P.encode_frame(payload)
            data = msg.data
            if self.dropped is None and isinstance(data, dict) and "event" in data and self.drop(data["event"]):
                self.dropped = data
                if self.overflow:
                    ended.add(msg.id)
                    error = P.ErrorInfo(code="overflow", message="subscriber fell behind; resubscribe")
                    return P.encode_frame(P.encode_message(P.Result(id=msg.id, ok=False, error=error)))
                shift[msg.id] = 1
                return b""
            if msg.id in shift:
                msg = P.Chunk(id=msg.id, seq=msg.seq - shift[msg.id], data=data)
            return P.encode_frame(P.encode_message(msg))

        return rewrite


class View:
    """What a UI shows: the transcript, rebuilt from snapshots and events."""

    def __init__(self) -> None:
        self.messages: list[dict] = []
        self.streaming = False
        self.snapshots = 0
        self.ended = False  # an agent_end was shown
        self.statuses: list[str] = []
        self.session: Any = None
        self.changed = trio.Event()

    def attached(self, session_id: str, attachment_id: str) -> None:
        pass

    def bind(self, session: Any) -> None:
        self.session = session
        self._poke()

    def snapshot(self, snap: dict) -> None:
        self.snapshots += 1
        self.messages = list(snap["messages"])
        self.streaming = snap["isStreaming"]
        self._poke()

    def event(self, event: dict) -> None:
        kind = event["type"]
        if kind == "agent_start":
            self.streaming = True
        elif kind == "message_end":
            self.messages.append(event["message"])
        elif kind == "agent_end":
            self.streaming = False
            self.ended = True
        self._poke()

    def status(self, text: str) -> None:
        self.statuses.append(text)
        self._poke()

    def _poke(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def until(self, condition: Any) -> None:
        while not condition():
            await self.changed.wait()


def transcript(messages: list[dict]) -> list[tuple[str, str]]:
    return [(m["role"], "".join(b.get("text", "") for b in m["content"]) if isinstance(m["content"], list) else m["content"]) for m in messages]


@pytest.fixture
def short_dir():
    path = tempfile.mkdtemp(prefix="gap")  # unix socket paths must stay short
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("overflow", [False, True], ids=["lost-update", "overflow"])
async def test_a_lost_subscription_update_costs_the_ui_a_redraw_not_a_wrong_transcript(server, scripted, short_dir, overflow):
    scripted.script += [Reply(text="the answer")]
    # Lose the update that ends the user's message: a UI that applies updates blindly would
    # show the answer without the question, for good.
    proxy = LossyProxy(server, lambda event: event.get("type") == "message_end" and event["message"]["role"] == "user", overflow=overflow)
    path = f"{short_dir}/s.sock"
    view = View()
    async with trio.open_nursery() as nursery:
        await nursery.start(proxy.serve, path)
        nursery.start_soon(
            lambda: follow_session(f"unix:{path}", token=None, session_id=None, create={}, view=view, bind=view.bind, retry_first=False)
        )
        with trio.fail_after(60):
            await view.until(lambda: view.session is not None and view.snapshots == 1)
            await view.session.call("prompt", {"text": "the question"})
            # Settled: the run's end was shown, or a fresh snapshot holds the whole exchange.
            # (Not "isStreaming is false": a snapshot taken between agent_end and the end of
            # the prompt call still says true.)
            await view.until(lambda: view.ended or len(view.messages) >= 2)
            truth = (await view.session.call("get_messages"))["messages"]
        nursery.cancel_scope.cancel()
    assert proxy.dropped is not None and proxy.dropped["event"]["type"] == "message_end"
    assert transcript(truth) == [("user", "the question"), ("assistant", "the answer")]
    assert transcript(view.messages) == transcript(truth)
    assert view.snapshots == 2  # one redraw from a fresh snapshot
    assert view.statuses == []  # no reconnect, nothing else the user would notice
